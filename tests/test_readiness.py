"""Liveness and readiness (issue 27, item 7): `/healthz` says only that the process answers;
`/readyz`, checked afresh on every request, says whether it should be sent requests: the database
answers a read and a write (on SQLite its file and folder keep a write bit: as root a 0444 file is
written through), the rule file is still there, and each OpenID Connect issuer's keys have been
attempted once. Not ready: 503 in the one error shape with the reasons beside it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from umaserver import create_app
from umaserver.config import load_config

from .conftest import ON_POSTGRESQL, FakeClock, write_config
from .flows import wait_until


def ready(http: FlaskClient) -> dict[str, object]:
    answer = http.get("/readyz")
    assert answer.status_code == 200, answer.text
    body: dict[str, object] = answer.get_json()
    assert body["status"] == "ready"
    return body


def unready(http: FlaskClient) -> list[str]:
    answer = http.get("/readyz")
    assert answer.status_code == 503, answer.text
    assert answer.headers["Retry-After"]
    assert answer.headers["Cache-Control"] == "no-store"
    body = answer.get_json()
    assert body["error"] == "temporarily_unavailable"
    assert body["error_description"] == "Not ready: " + "; ".join(body["reasons"]) + "."
    reasons: list[str] = body["reasons"]
    return reasons


def test_ready_says_what_it_checked(http: FlaskClient) -> None:
    assert ready(http)["checks"] == {"database": "ok", "rule_file": "ok"}
    assert http.get("/healthz").get_json() == {"status": "ok"}


@pytest.mark.skipif(ON_POSTGRESQL, reason="the file modes of an SQLite database")
def test_a_read_only_database_is_unready_until_it_recovers(
    http: FlaskClient, config_path: Path
) -> None:
    database = config_path.parent / "uma.db"
    ready(http)
    folder_mode, file_mode = database.parent.stat().st_mode, database.stat().st_mode
    try:
        database.chmod(0o444)
        database.parent.chmod(0o444)
        [reason] = unready(http)
        assert reason.startswith("the database cannot be read and written: ")
        # Liveness: the process answers, whatever its database.
        assert http.get("/healthz").status_code == 200
    finally:
        database.parent.chmod(folder_mode)
        database.chmod(file_mode)
    ready(http)


def test_a_removed_rule_file_is_unready(http: FlaskClient, config_path: Path) -> None:
    rules = config_path.parent / "policies.toml"
    ready(http)
    text = rules.read_text(encoding="utf-8")
    rules.unlink()
    assert unready(http) == [f"the rule file {rules} is gone: no rules from it are in force"]
    rules.write_text(text, encoding="utf-8")
    # Ready again once the watcher has read it back (it looks once a second).
    wait_until(lambda: http.get("/readyz").status_code == 200, timeout=5)
    ready(http)


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A loopback port that accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


def test_an_issuer_whose_first_fetch_has_not_ended_is_unready_then_listed(
    tmp_path: Path, silent_listener: int
) -> None:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    issuer = "https://op.example"
    config = load_config(
        write_config(
            tmp_path,
            extra=f"""
[claims]
jwks_fetch_timeout = 1

[[oidc_issuers]]
issuer = "{issuer}"
audiences = ["photo-app"]
jwks_uri = "http://127.0.0.1:{silent_listener}/jwks.json"
""",
        )
    )
    http = create_app(config, clock=FakeClock()).test_client()
    assert unready(http) == [f"the keys of {issuer} have not been fetched once yet"]

    # The first fetch ends (it times out): listed, and ready, since the provider may be away long.
    def ready_now() -> dict[str, object] | None:
        answer = http.get("/readyz")
        return answer.get_json() if answer.status_code == 200 else None

    body = wait_until(ready_now, timeout=10)
    assert body["checks"] == {
        "database": "ok",
        "rule_file": "ok",
        "oidc_issuers": {issuer: "fetch failed"},
    }
