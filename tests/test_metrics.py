"""`/metrics` (issue 27, item 8): Prometheus's text format, read back with prometheus_client's own
parser; counts that move with real requests; who may read it (after trusted proxies); off by
default; and, under gunicorn with two workers, one scrape that adds up both processes' counts."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from umaserver import create_app, secrets_at_rest
from umaserver.config import ConfigError, load_config
from umaserver.fetching import running

from .conftest import (
    ROOT,
    FakeClock,
    Party,
    Store,
    free_port,
    make_client,
    make_party,
    make_person,
    write_config,
)
from .flows import (
    EMPLOYEE,
    PHOTO_TYPE,
    PHOTOS_FOR_DOCTORS_AND_COLLEAGUES,
    FlaskApi,
    Flow,
    wait_until,
)
from .pages_helpers import sign_in

ON = "[metrics]\nenabled = true\n"


@pytest.fixture
def rules_text() -> str:
    return PHOTOS_FOR_DOCTORS_AND_COLLEAGUES


@pytest.fixture
def config_path(tmp_path: Path, rules_text: str) -> Path:
    (tmp_path / "policies.toml").write_text(rules_text, encoding="utf-8")
    return write_config(tmp_path, extra=ON)


def scrape(
    http: FlaskClient, **environ: str
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by name and labels."""
    response = http.get("/metrics", environ_base=environ)
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return samples(response.text)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def requests_of(found: dict[Any, float], endpoint: str, status: str) -> float:
    return found.get(
        ("umaserver_http_requests_total", (("endpoint", endpoint), ("status", status))), 0
    )


def test_a_scrape_counts_requests_decisions_and_what_was_issued(
    http: FlaskClient, store: Store, rs: Party
) -> None:
    client = make_party(store, "bob", "uma_authorization", push_types=(EMPLOYEE,))
    photos = {"name": "Photos", "scopes": ["view"], "type": PHOTO_TYPE}
    flow = Flow(FlaskApi(http), rs, client, photos)
    porter = {"type": EMPLOYEE, "value": {"role": ["porter"]}}
    assert flow.ask(flow.ticket(), [porter]).status == 403
    doctor = {"type": EMPLOYEE, "value": {"role": ["doctor"], "staff_id": "s-17"}}
    granted = flow.ask(flow.ticket(), [doctor])
    assert granted.status in (200, 201), granted.text
    assert http.get("/no/such/path/12345").status_code == 404
    assert flow.delete_set().status == 204
    assert scrape(http)[("umaserver_storage_errors_total", ())] == 0

    found = scrape(http)
    assert requests_of(found, "/rs/resource_set", "201") == 1
    assert requests_of(found, "/rs/resource_set/<rs_id>", "204") == 1
    assert requests_of(found, "/permission", "201") == 2
    assert requests_of(found, "/metrics", "200") == 1  # the scrape before
    # A path no route matched is counted under one label, never its own.
    assert requests_of(found, "unmatched", "404") == 1
    assert not any("12345" in str(labels) for _, labels in found)
    assert found[("umaserver_decisions_total", (("outcome", "grant"),))] == 1
    assert found[("umaserver_decisions_total", (("outcome", "deny"),))] == 1
    assert found[("umaserver_tickets_issued_total", ())] == 2
    assert found[("umaserver_rpts_issued_total", ())] == 1
    assert found[("umaserver_resource_set_changes_total", (("action", "registered"),))] == 1
    assert found[("umaserver_resource_set_changes_total", (("action", "deleted"),))] == 1
    duration = ("umaserver_http_request_duration_seconds_count", (("endpoint", "/permission"),))
    assert found[duration] == 2
    assert found[("umaserver_fetch_queue_length", ())] == 0


def test_tokens_and_failed_signins_are_counted(http: FlaskClient, store: Store) -> None:
    client_id, secret = make_client(store, "a robot")
    for _ in range(2):
        issued = http.post(
            "/token",
            data={"grant_type": "client_credentials", "scope": "uma_authorization"},
            auth=(client_id, secret),
        )
        assert issued.status_code == 200, issued.text
    make_person(store, "carol", secrets_at_rest.hash_password("correct horse"))
    for _ in range(5):  # max_failures: the fifth locks the address
        sign_in(http, "carol", "wrong")
    found = scrape(http)
    assert found[("umaserver_tokens_issued_total", ())] == 2
    assert found[("umaserver_signin_failures_total", ())] == 5
    assert found[("umaserver_signin_lockouts_total", ())] == 1


def test_the_fetch_queue_length_is_read_at_each_scrape(
    app: Flask, http: FlaskClient, store: Store, clock: FakeClock
) -> None:
    running.fetch_job(app).stop()  # nothing takes the rows off the queue meanwhile
    store.queue_uri("https://icons.example/a.png", "image", "row-a", clock.now())
    store.queue_uri("https://icons.example/b.png", "image", "row-b", clock.now() + 60)
    assert scrape(http)[("umaserver_fetch_queue_length", ())] == 1
    clock.advance(60)
    assert scrape(http)[("umaserver_fetch_queue_length", ())] == 2


def test_only_allowed_addresses_read_it(http: FlaskClient) -> None:
    assert http.get("/metrics").status_code == 200  # the test client's 127.0.0.1
    refused = http.get("/metrics", environ_base={"REMOTE_ADDR": "203.0.113.9"})
    assert refused.status_code == 403
    assert refused.json == {
        "error": "access_denied",
        "error_description": "This address may not read the metrics.",
    }
    assert http.get("/metrics", environ_base={"REMOTE_ADDR": "::1"}).status_code == 200
    # Without trusted proxies, X-Forwarded-For is anyone's writing: the connection's address counts.
    forged = http.get(
        "/metrics",
        environ_base={"REMOTE_ADDR": "203.0.113.9"},
        headers={"X-Forwarded-For": "127.0.0.1"},
    )
    assert forged.status_code == 403


def test_a_local_proxy_does_not_open_it_to_everyone(tmp_path: Path, clock: FakeClock) -> None:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    extra = ON + 'allow = ["10.0.0.0/8"]\n[server]\ntrusted_proxies = ["127.0.0.1"]\n'
    http = create_app(load_config(write_config(tmp_path, extra=extra)), clock).test_client()
    # The proxy on this machine passes on a request from outside: the outside address counts.
    outside = http.get("/metrics", headers={"X-Forwarded-For": "203.0.113.9"})
    assert outside.status_code == 403
    inside = http.get("/metrics", headers={"X-Forwarded-For": "10.1.2.3"})
    assert inside.status_code == 200
    # The proxy's own address is no longer on the list.
    assert http.get("/metrics").status_code == 403
    direct = http.get("/metrics", environ_base={"REMOTE_ADDR": "10.9.9.9"})
    assert direct.status_code == 200


def test_it_is_off_by_default(tmp_path: Path, clock: FakeClock) -> None:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    http = create_app(load_config(write_config(tmp_path)), clock).test_client()
    response = http.get("/metrics")
    assert response.status_code == 404
    assert response.json["error"] == "not_found"


def test_each_app_counts_its_own_requests(http: FlaskClient, config_path: Path) -> None:
    other = create_app(load_config(config_path)).test_client()
    for _ in range(3):
        other.get("/healthz")
    http.get("/healthz")
    assert requests_of(scrape(http), "/healthz", "200") == 1
    assert requests_of(scrape(other), "/healthz", "200") == 3


@pytest.mark.parametrize(
    ("table", "errors"),
    [
        (
            '[metrics]\nenabled = "yes"\nallow = ["10.0.0.0/33"]\nmultiprocess_dir = ""\nport = 1\n',
            [
                "metrics.allow: '10.0.0.0/33' is not an IP address or network",
                "metrics.multiprocess_dir: must not be empty",
                "metrics.enabled: must be true or false, not a string",
                "metrics.port: unknown key",
            ],
        ),
        (
            '[logging]\nformat = "xml"\n',
            ["logging.format: must be one of text, json"],
        ),
    ],
)
def test_the_tables_are_checked(tmp_path: Path, table: str, errors: list[str]) -> None:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_config(write_config(tmp_path, extra=table))
    assert [line.partition(": ")[2] for line in raised.value.errors] == errors


def test_the_examples_commented_tables_read_as_documented(tmp_path: Path) -> None:
    text = (ROOT / "config.example.toml").read_text(encoding="utf-8")
    lines = text.splitlines()
    start = lines.index("# [metrics]")
    block = "\n".join(line.removeprefix("# ") for line in lines[start : start + 4])
    start = lines.index("# [logging]")
    block += "\n" + "\n".join(line.removeprefix("# ") for line in lines[start : start + 2])
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    config = load_config(write_config(tmp_path, extra=block + "\n"))
    assert config.metrics.enabled is True
    assert config.metrics.allow == ("127.0.0.1/32", "::1/128")
    assert config.metrics.multiprocess_dir == tmp_path / "metrics"
    assert config.logging.format == "json"
    default = load_config(write_config(tmp_path))
    assert default.metrics.enabled is False and default.logging.format == "text"


# -- several processes: gunicorn's workers ---------------------------------------------------------

GUNICORN = ROOT / ".venv" / "bin" / "gunicorn"

# A process of a previous run left its counts in the folder; it has ended.
STALE = """
import sys
from prometheus_client import Counter
Counter("umaserver_http_requests", "", ("endpoint", "status")).labels("/stale", "200").inc()
"""


@pytest.mark.live
@pytest.mark.skipif(not GUNICORN.exists(), reason="gunicorn is not installed in the venv")
def test_two_gunicorn_workers_are_counted_in_one_scrape(tmp_path: Path) -> None:
    folder = tmp_path / "metrics"
    folder.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder)}
    subprocess.run([sys.executable, "-c", STALE], env=env, check=True, timeout=60)
    assert list(folder.glob("counter_*.db"))
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    port = free_port()
    config = write_config(
        tmp_path, f"http://127.0.0.1:{port}", ON + 'multiprocess_dir = "metrics"\n'
    )
    env = {key: value for key, value in os.environ.items() if key != "PROMETHEUS_MULTIPROC_DIR"} | {
        "UMASERVER_CONFIG": str(config)
    }
    server = subprocess.Popen(
        [str(GUNICORN), "-w", "2", "-b", f"127.0.0.1:{port}", "--timeout", "60", "app:app"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: _get(port, "/healthz")[0] == 200, timeout=60)
        # A sync worker serves one connection at a time: hold one with half a request, and the
        # other worker answers the rest; then finish it, and the held worker answers it.
        held = socket.create_connection(("127.0.0.1", port))
        held.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        for _ in range(4):
            assert _get(port, "/healthz")[0] == 200
        held.sendall(b"Connection: close\r\n\r\n")
        assert b" 200 " in held.recv(4096)
        held.close()
        status, text = _get(port, "/metrics")
        assert status == 200
        found = samples(text)
        # The wait above was answered once, then 4 and the held one: 6, by two processes (one
        # worker alone answered at most 5).
        assert requests_of(found, "/healthz", "200") == 6
        assert not any("/stale" in str(labels) for _, labels in found)
        workers = {path.stem.rpartition("_")[2] for path in folder.glob("counter_*.db")}
        assert len(workers) == 2, workers
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
            connection.sendall(
                f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
            )
            data = b""
            while chunk := connection.recv(65536):
                data += chunk
    except OSError:
        return 0, ""
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()


@pytest.mark.sqlite_only
def test_requests_the_database_cannot_serve_are_counted(tmp_path: Path, clock: FakeClock) -> None:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    (tmp_path / "no-folder").write_text("a file where the database's folder should be")
    config = load_config(write_config(tmp_path, extra=ON))
    config = replace(config, database=tmp_path / "no-folder" / "uma.db")  # cannot be opened
    http = create_app(config, clock).test_client()
    for _ in range(2):
        answer = http.get("/rs/resource_set", headers={"Authorization": "Bearer x"})
        assert answer.status_code == 503
    found = scrape(http)  # the counts are still read; the queue's length is left out
    assert found[("umaserver_storage_errors_total", ())] == 2
    assert requests_of(found, "/rs/resource_set", "503") == 2
    assert not any(name == "umaserver_fetch_queue_length" for name, _ in found)


BUILD = """
import sys
from umaserver import create_app
from umaserver.config import load_config
create_app(load_config(sys.argv[1]))
print("prometheus_client" in sys.modules)
"""


@pytest.mark.live
@pytest.mark.parametrize(("extra", "loaded"), [("", "False"), (ON, "True")])
def test_prometheus_client_is_imported_only_when_metrics_are_on(
    tmp_path: Path, extra: str, loaded: str
) -> None:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    config = write_config(tmp_path, extra=extra)
    done = subprocess.run(
        [sys.executable, "-c", BUILD, str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.split() == [loaded], done.stderr


def test_the_folder_is_emptied_unless_a_running_sibling_wrote_to_it(tmp_path: Path) -> None:
    from umaserver.metrics import empty_folder

    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **QUIET)
    dead = ended.stdout.strip()
    (tmp_path / f"counter_{dead}.db").write_bytes(b"old")
    (tmp_path / "notes.txt").write_text("not prometheus_client's")
    empty_folder(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.txt"]
    # A worker that started first (this test's parent process stands for it) keeps its counts,
    # and so does a previous run's file listed with it: the next start removes it.
    (tmp_path / f"counter_{dead}.db").write_bytes(b"old")
    (tmp_path / f"histogram_{os.getppid()}.db").write_bytes(b"a sibling's")
    empty_folder(tmp_path)
    assert len(list(tmp_path.glob("*.db"))) == 2


def test_multiprocess_mode_refuses_to_start_half_on(tmp_path: Path, clock: FakeClock) -> None:
    # Here prometheus_client was imported without PROMETHEUS_MULTIPROC_DIR: its values would stay
    # in this process, and a scrape would add up nothing of the others'.
    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    extra = ON + 'multiprocess_dir = "metrics"\n'
    with pytest.raises(ConfigError) as raised:
        create_app(load_config(write_config(tmp_path, extra=extra)), clock)
    assert "prometheus_client was imported before the app was built" in str(raised.value.errors)


QUIET: dict[str, Any] = {"capture_output": True, "text": True, "timeout": 60, "check": True}
