"""Several server processes on one PostgreSQL database, over real HTTP: four `python -m umaserver
serve` on free ports share one database (and one config, as a site behind a load balancer would).
Sixteen simultaneous authorization requests with one ticket, spread over them, give exactly one
grant; eight writers spread over them lose no resource set a process acknowledged; a process killed
with SIGKILL in the middle of the load loses nothing it acknowledged, and the others keep serving.
A person's sign-in (its form's CSRF token, the session, sign-out, the failures that lock an account)
holds on every process alike."""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from .conftest import ROOT, SECRET, LiveServer, free_port
from .flows import DOCTORS_MAY_VIEW, EMPLOYEE, Flow, HttpApi, live_flow, wait_until
from .postgres_fixture import PostgresCluster

pytestmark = pytest.mark.live

PROCESSES = 4
X_RAYS = {"name": "X-rays", "scopes": ["view", "annotate"]}
DOCTOR = [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}]


@dataclass
class Site:
    """The processes (their URLs, in order), their shared config, and the flow set up on them."""

    urls: list[str]
    processes: list[subprocess.Popen[str]]
    config_path: Path
    logs: list[Path]

    def output(self) -> str:
        return "\n".join(log.read_text(encoding="utf-8", errors="replace") for log in self.logs)


def serve(config_path: Path, port: int, log_path: Path) -> subprocess.Popen[str]:
    with log_path.open("w", encoding="utf-8") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "umaserver",
                "--config",
                str(config_path),
                "serve",
                "--port",
                str(port),
                "--threads",
                "8",
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )


@pytest.fixture
def site(tmp_path: Path, postgres_cluster: PostgresCluster) -> Iterator[Site]:
    database = postgres_cluster.new_database()
    ports = [free_port() for _ in range(PROCESSES)]
    (tmp_path / "policies.toml").write_text(DOCTORS_MAY_VIEW, encoding="utf-8")
    config_path = tmp_path / "config.toml"
    config_path.write_text(
        # One issuer for all, as behind a load balancer; here the first process's address.
        f'issuer = "http://127.0.0.1:{ports[0]}"\n'
        f'database = "{database}"\n'
        'policies = "policies.toml"\n'
        f'secret_key = "{SECRET}"\n'
        "[postgresql]\npool_min = 1\npool_max = 8\n",
        encoding="utf-8",
    )
    logs = [tmp_path / f"server{index}.log" for index in range(PROCESSES)]
    processes = [serve(config_path, port, log) for port, log in zip(ports, logs, strict=True)]
    site = Site([f"http://127.0.0.1:{port}" for port in ports], processes, config_path, logs)
    try:

        def healthy() -> bool:
            for process in processes:
                if process.poll() is not None:
                    raise RuntimeError(f"a server exited: {site.output()}")
            try:
                return all(
                    requests.get(url + "/healthz", timeout=1).status_code == 200
                    for url in site.urls
                )
            except (requests.ConnectionError, requests.Timeout):  # not up yet, or still busy
                return False

        wait_until(healthy, timeout=60, message="the servers did not start")
        yield site
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        postgres_cluster.drop(database)


@pytest.fixture
def flow(site: Site) -> Flow:
    """alice's X-rays, registered through the first process; a client that pushes employee
    claims, with its AAT."""
    first = LiveServer(site.urls[0], site.config_path, site.processes[0], site.logs[0])
    return live_flow(first, X_RAYS, push_types=(EMPLOYEE,))


def test_one_ticket_asked_with_sixteen_times_over_four_processes_is_granted_once(
    site: Site, flow: Flow
) -> None:
    ticket = flow.ticket("view")
    start = threading.Barrier(16)
    answers: list[tuple[int, str]] = []
    lock = threading.Lock()
    path = flow.endpoints["authorization_request_endpoint"]

    def ask(index: int) -> None:
        api = HttpApi(site.urls[index % PROCESSES])
        start.wait()
        reply = api.post(
            path,
            json={"rpt": "none-yet", "ticket": ticket, "claims": DOCTOR},
            headers=flow.app.auth,
        )
        with lock:
            answers.append((reply.status, reply.json.get("error", "granted")))

    threads = [threading.Thread(target=ask, args=(index,)) for index in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [(201, "granted")] + [(400, "invalid_ticket")] * 15
    # Each process answered some of them, on its own connections.
    assert "decision=grant" in site.output()


def register_many(
    site: Site, flow: Flow, writers: int, each: int, urls_of: list[list[str]]
) -> tuple[set[str], int]:
    """`writers` threads each register `each` sets, writer w through the URLs of urls_of[w] in
    turn (moving on when a process does not answer); the ids acknowledged with 201, and how many
    requests got no answer."""
    path = flow.endpoints["resource_set_registration_endpoint"] + "/resource_set"
    acknowledged: set[str] = set()
    unanswered = 0
    lock = threading.Lock()
    start = threading.Barrier(writers)

    def write(writer: int) -> None:
        nonlocal unanswered
        urls = itertools.cycle(urls_of[writer])
        start.wait()
        for number in range(each):
            body = {"name": f"set {writer}-{number}", "scopes": ["view"]}
            try:
                reply = requests.post(
                    next(urls) + path, json=body, headers=flow.rs.auth, timeout=30
                )
            except requests.RequestException:  # refused, or cut by the kill mid-answer
                with lock:
                    unanswered += 1
                continue
            if reply.status_code == 201:
                with lock:
                    acknowledged.add(reply.json()["_id"])

    threads = [threading.Thread(target=write, args=(writer,)) for writer in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return acknowledged, unanswered


def listed(url: str, flow: Flow) -> set[str]:
    path = flow.endpoints["resource_set_registration_endpoint"] + "/resource_set"
    reply = requests.get(url + path, headers=flow.rs.auth, timeout=30)
    assert reply.status_code == 200, reply.text
    return set(reply.json())


def test_eight_writers_over_four_processes_lose_nothing_acknowledged(
    site: Site, flow: Flow
) -> None:
    urls_of = [[site.urls[writer % PROCESSES]] for writer in range(8)]
    acknowledged, unanswered = register_many(site, flow, writers=8, each=25, urls_of=urls_of)
    assert (len(acknowledged), unanswered) == (8 * 25, 0)
    for url in site.urls:  # every process sees every set
        assert listed(url, flow) == acknowledged | {flow.rs_id}


def test_a_process_killed_mid_load_loses_nothing_acknowledged(site: Site, flow: Flow) -> None:
    victim = site.processes[PROCESSES - 1]
    # Each writer goes round every process, the victim among them.
    urls_of = [
        site.urls[writer % PROCESSES :] + site.urls[: writer % PROCESSES] for writer in range(8)
    ]
    killed = threading.Event()

    def kill_when_busy() -> None:
        def busy() -> bool:  # a quarter of the sets are in
            return len(listed(site.urls[0], flow)) > 80

        wait_until(busy, timeout=60, interval=0.2, message="the load did not start")
        victim.send_signal(signal.SIGKILL)
        killed.set()

    killer = threading.Thread(target=kill_when_busy)
    killer.start()
    acknowledged, unanswered = register_many(site, flow, writers=8, each=40, urls_of=urls_of)
    killer.join()
    assert killed.is_set() and victim.wait(timeout=10) == -signal.SIGKILL
    assert unanswered > 0  # the victim stopped answering in the middle
    survivors = site.urls[: PROCESSES - 1]
    for url in survivors:
        stored = listed(url, flow)
        assert acknowledged <= stored, f"lost {len(acknowledged - stored)} acknowledged sets"
        assert requests.get(url + "/healthz", timeout=5).status_code == 200
    # ... and they keep serving writes and the authorization request.
    again, unanswered = register_many(
        site, flow, writers=3, each=5, urls_of=[[url] for url in survivors]
    )
    assert (len(again), unanswered) == (15, 0)
    ticket = flow.ticket("view")
    reply = HttpApi(survivors[1]).post(
        flow.endpoints["authorization_request_endpoint"],
        json={"rpt": "none-yet", "ticket": ticket, "claims": DOCTOR},
        headers=flow.app.auth,
    )
    assert reply.status == 201, reply.text


SIGNIN_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def _csrf(http: requests.Session, url: str) -> str:
    found = SIGNIN_TOKEN.search(http.get(url, timeout=10).text)
    assert found is not None
    return found.group(1)


def _sign_in(http: requests.Session, form_url: str, post_url: str, password: str) -> int:
    form = {"username": "carol", "password": password, "csrf_token": _csrf(http, form_url)}
    reply = http.post(post_url + "/signin", data=form, allow_redirects=False, timeout=30)
    return reply.status_code


def test_sessions_csrf_and_lockouts_hold_on_every_process(site: Site) -> None:
    """Nothing a person's sign-in needs lives in one process: a form from one process is taken by
    another, the session it makes is known to all and ended for all by one sign-out, and failures
    spread over the processes add up to one lockout."""
    first = LiveServer(site.urls[0], site.config_path, site.processes[0], site.logs[0])
    first.command("user", "create", "carol", "--password-stdin", input="carol's password\n")
    a, b, c, d = site.urls

    person = requests.Session()
    assert _sign_in(person, a + "/signin", b, "carol's password") == 303
    for url in (c, d, a):
        page = person.get(url + "/account", allow_redirects=False, timeout=10)
        assert page.status_code == 200 and "carol" in page.text
    signed_out = person.post(
        d + "/signout",
        data={"csrf_token": _csrf(person, c + "/account")},
        allow_redirects=False,
        timeout=10,
    )
    assert signed_out.status_code == 303
    for url in site.urls:
        assert person.get(url + "/account", allow_redirects=False, timeout=10).status_code == 303

    guesser = requests.Session()
    answers = [
        _sign_in(
            guesser, site.urls[n % PROCESSES] + "/signin", site.urls[(n + 1) % PROCESSES], "no"
        )
        for n in range(5)  # max_failures of config.example.toml, from one address
    ]
    assert answers == [200, 200, 200, 200, 429]
    for url in site.urls:  # locked out everywhere, the right password not even checked
        assert _sign_in(guesser, url + "/signin", url, "carol's password") == 429


def test_the_readmes_gunicorn_recipe_serves_beside_the_other_processes(
    site: Site, flow: Flow, tmp_path: Path
) -> None:
    """The README's command, `UMASERVER_CONFIG=FILE gunicorn --workers N --threads 8 ... app:app`,
    serves the same database as the `serve` processes: a ticket registered through one of them is
    granted through gunicorn's workers, and the RPT is introspected through another."""
    port = free_port()
    log_path = tmp_path / "gunicorn.log"
    with log_path.open("w", encoding="utf-8") as log:
        gunicorn = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "--workers",
                "2",
                "--threads",
                "8",
                "--bind",
                f"127.0.0.1:{port}",
                "app:app",
            ],
            cwd=ROOT,
            env={**os.environ, "UMASERVER_CONFIG": str(site.config_path)},
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:

        def healthy() -> bool:
            assert gunicorn.poll() is None, log_path.read_text(encoding="utf-8")
            try:
                return requests.get(url + "/healthz", timeout=1).status_code == 200
            except (requests.ConnectionError, requests.Timeout):  # not up yet, or still busy
                return False

        wait_until(healthy, timeout=60, message="gunicorn did not start")
        ticket = flow.ticket("view")
        granted = HttpApi(url).post(
            flow.endpoints["authorization_request_endpoint"],
            json={"rpt": flow.new_rpt(), "ticket": ticket, "claims": DOCTOR},
            headers=flow.app.auth,
        )
        assert granted.status == 201, granted.text
        seen = flow.introspect(granted.json["rpt"])
        assert seen["active"] is True
        assert [p["scopes"] for p in seen["permissions"]] == [["view"]]
    finally:
        gunicorn.terminate()
        gunicorn.wait(timeout=30)
