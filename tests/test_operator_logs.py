"""Logs for operators (issue 27, item 9): one line per decision naming the owner, the set, the
scopes, the client, the requesting party and the outcome with its rules; one per resource set
registered, updated or deleted (UMA 1.0's and Keycloak's APIs); `[logging] format = "json"`: one
object per line. Never a token or a claim value, in either format."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import Flask
from flask.testing import FlaskClient

from umaserver import create_app
from umaserver.config import load_config
from umaserver.events import JsonFormatter
from umaserver.services.decision_log import requesting_party
from umaserver.storage.records import Claim

from .conftest import (
    ROOT,
    FakeClock,
    Party,
    Store,
    make_client_party,
    make_party,
    start_server,
    stop_server,
    write_config,
)
from .flows import (
    EMPLOYEE,
    PHOTO_TYPE,
    PHOTOS_FOR_DOCTORS_AND_COLLEAGUES,
    FlaskApi,
    Flow,
    live_flow,
)
from .test_keycloak_realm import RULES as REALM_RULES
from .test_keycloak_realm import Realm, jwt_claims
from .test_uma2_grant import Uma2, doctor

PORTER = {"type": EMPLOYEE, "value": {"role": ["porter"], "staff_id": "s-secret-17"}}
DOCTOR = {"type": EMPLOYEE, "value": {"role": ["doctor"], "staff_id": "s-secret-17"}}
PHOTOS = {"name": "Photos", "scopes": ["view", "print"], "type": PHOTO_TYPE}


@pytest.fixture
def rules_text() -> str:
    return REALM_RULES  # alice's photos for doctors, and her Shared set open to view


@pytest.fixture
def config_path(tmp_path: Path, rules_text: str) -> Path:
    (tmp_path / "policies.toml").write_text(rules_text, encoding="utf-8")
    # Keycloak's realm face too, its claim tokens read as employee claims.
    extra = f'[keycloak]\nrealm = "demo"\nclaim_token_type = "{EMPLOYEE}"\n'
    return write_config(tmp_path, extra=extra)


@pytest.fixture
def log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """The records of the server's loggers, at INFO and above (`log.records`)."""
    with caplog.at_level(logging.INFO, logger="umaserver"):
        yield caplog


def events_of(records: list[logging.LogRecord], event: str) -> list[dict[str, Any]]:
    return [record.fields for record in records if getattr(record, "event", None) == event]  # type: ignore[attr-defined]


def as_json(records: list[logging.LogRecord]) -> list[dict[str, Any]]:
    formatter = JsonFormatter()
    return [json.loads(formatter.format(record)) for record in records]


def test_a_decision_names_who_asked_for_what_and_which_rule_decided(
    http: FlaskClient, store: Store, rs: Party, log: pytest.LogCaptureFixture
) -> None:
    bob = make_party(store, "bob", "uma_authorization", push_types=(EMPLOYEE,))
    flow = Flow(FlaskApi(http), rs, bob, PHOTOS)
    refused = flow.ticket("print")
    assert flow.ask(refused, [PORTER]).status == 403
    ticket = flow.ticket("view")
    granted = flow.ask(ticket, [DOCTOR])
    assert granted.status in (200, 201), granted.text
    rpt = granted.json["rpt"]

    deny, grant = events_of(log.records, "decision")
    common = {"owner": "alice", "resource_set": flow.rs_id, "client": bob.client_id}
    assert grant == {
        "decision": "grant",
        **common,
        "scopes": "view",
        "party": "bob",
        "rules": "doctors-view",
        "requests": 1,
    }
    assert deny == {**grant, "decision": "deny", "scopes": "print", "rules": "-"}
    (text,) = [r.getMessage() for r in log.records if r.getMessage().startswith("decision=grant ")]
    assert text == (
        f"decision=grant owner=alice resource_set={flow.rs_id} scopes=view"
        f" client={bob.client_id} party=bob rules=doctors-view requests=1"
    )
    # Neither format carries a token or a claim value.
    written = "\n".join(
        [r.getMessage() for r in log.records] + [json.dumps(o) for o in as_json(log.records)]
    )
    for secret in (rpt, ticket, refused, bob.token, rs.token, "s-secret-17", "porter"):
        assert secret not in written


def test_a_client_acting_for_itself_is_named_as_such_on_the_uma2_grant(
    http: FlaskClient, store: Store, rs: Party, log: pytest.LogCaptureFixture
) -> None:
    uma = Uma2(http, store, rs)
    status, body = uma.token(ticket=uma.ticket("view"), **doctor())
    assert status == 200, body
    (grant,) = events_of(log.records, "decision")
    assert grant == {
        "decision": "grant",
        "grant": "uma-ticket",
        "owner": "alice",
        "resource_set": uma.rs_id,
        "scopes": "view",
        "client": uma.client_id,
        "party": f"client:{uma.client_id}",
        "rules": "doctors-view",
        "requests": 1,
    }
    written = "\n".join(json.dumps(line) for line in as_json(log.records))
    assert body["access_token"] not in written and "doctor" not in written.replace(
        "doctors-view", ""
    )


def test_keycloaks_ticketless_grant_is_logged_alike(
    http: FlaskClient, store: Store, rs: Party, log: pytest.LogCaptureFixture
) -> None:
    realm = Realm(http, store, rs)
    doctor_token = jwt_claims({"role": ["doctor"], "staff_id": "s-secret-17"})
    asked = f"{realm.photos}#view"
    assert realm.ask(asked, response_mode="decision", **doctor_token)[0] == 200
    assert realm.ask(f"{realm.photos}#print", response_mode="decision")[0] == 403
    grant, deny = events_of(log.records, "decision")
    assert grant == {
        "decision": "grant",
        "grant": "uma-ticket-keycloak",
        "owner": "alice",
        "resource_set": realm.photos,
        "scopes": "view",
        "client": realm.app_id,
        "party": "bob",
        "rules": "doctors-view",
    }
    assert deny == {**grant, "decision": "deny", "scopes": "print", "rules": "-"}
    written = "\n".join(json.dumps(line) for line in as_json(log.records))
    assert doctor_token["claim_token"] not in written and "s-secret-17" not in written
    assert realm.bob.token not in written


def test_a_party_known_by_a_verified_claim_is_named_subject_at_issuer() -> None:
    def claim(subject: str | None, issuer: str) -> Claim:
        return Claim(
            type="t", name="email", value="v", issuer=issuer, client_id="c", gathered_at=0,
            subject=subject,
        )  # fmt: skip

    plain, verified = claim(None, "c"), claim("248289761001", "https://op.example")
    assert (
        requesting_party("client:c", None, [plain, verified]) == "248289761001@https://op.example"
    )
    assert requesting_party("sub-1", "bob", [verified]) == "bob"
    assert requesting_party("client:c", None, [plain]) == "client:c"


def test_resource_sets_registered_updated_and_deleted_are_logged(
    http: FlaskClient, rs: Party, log: pytest.LogCaptureFixture
) -> None:
    created = http.post("/rs/resource_set", json=PHOTOS, headers=rs.auth)
    rs_id = created.json["_id"]
    path = f"/rs/resource_set/{rs_id}"
    assert http.put(path, json={**PHOTOS, "scopes": ["view"]}, headers=rs.auth).status_code == 200
    assert http.delete(path, headers=rs.auth).status_code == 204
    assert http.delete(path, headers=rs.auth).status_code == 404  # nothing deleted: no line
    whose = {"resource_set": rs_id, "owner": "alice", "client": rs.client_id}
    assert events_of(log.records, "resource_set") == [
        {"action": "registered", **whose},
        {"action": "updated", **whose},
        {"action": "deleted", **whose},
    ]
    assert next(r.getMessage() for r in log.records if r.name == "umaserver.resources") == (
        f"action=registered resource_set={rs_id} owner=alice client={rs.client_id}"
    )


def test_keycloaks_resource_api_is_logged_alike(
    tmp_path: Path, clock: FakeClock, log: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    config = load_config(write_config(tmp_path, extra='[keycloak]\nrealm = "demo"\n'))
    app: Flask = create_app(config, clock)
    http = app.test_client()
    from .conftest import open_store

    store = open_store(config.database)
    try:
        alice = make_party(store, "alice", "uma_protection")
        server = make_client_party(store, alice.client_id, "uma_protection")
    finally:
        store.close()
    collection = "/realms/demo/authz/protection/resource_set"
    body = {"name": "Album", "owner": "alice", "resource_scopes": ["view"]}
    created = http.post(collection, json=body, headers=server.auth)
    assert created.status_code == 201, created.text
    rs_id = created.json["_id"]
    updated = http.put(f"{collection}/{rs_id}", json=body, headers=server.auth)
    assert updated.status_code == 204
    assert http.delete(f"{collection}/{rs_id}", headers=server.auth).status_code == 204
    whose = {"resource_set": rs_id, "owner": "alice", "client": alice.client_id}
    assert events_of(log.records, "resource_set") == [
        {"action": action, **whose} for action in ("registered", "updated", "deleted")
    ]


def test_the_json_formatter_writes_one_object_per_line() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("umaserver.test_json")
    logger.addHandler(handler)
    try:
        logger.warning('a line\nwith a break and "quotes"')
    finally:
        logger.removeHandler(handler)
    (line,) = stream.getvalue().splitlines()
    found = json.loads(line)
    assert set(found) == {"time", "level", "logger", "message"}
    assert found["level"] == "WARNING" and found["logger"] == "umaserver.test_json"
    assert found["message"] == 'a line\nwith a break and "quotes"'
    assert found["time"].endswith("+00:00")


@pytest.mark.live
def test_serve_writes_json_lines_when_asked(tmp_path: Path) -> None:
    server = start_server(
        tmp_path,
        extra_config='[logging]\nformat = "json"\n',
        rules_text=PHOTOS_FOR_DOCTORS_AND_COLLEAGUES,
    )
    try:
        flow = live_flow(server, PHOTOS, push_types=(EMPLOYEE,))
        ticket = flow.ticket()
        granted = flow.ask(ticket, [DOCTOR])
        assert granted.status in (200, 201), granted.text
        assert flow.delete_set().status == 204
    finally:
        stop_server(server)
    output = server.output()
    # The log on stderr; on stdout, serve's own JSON object says where it listens.
    objects = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    objects = [o for o in objects if "listening" not in o]
    assert objects and all({"time", "level", "logger", "message"} <= set(o) for o in objects)
    (decision,) = [o for o in objects if o.get("event") == "decision"]
    assert decision["logger"] == "umaserver.decisions" and decision["level"] == "INFO"
    assert decision["decision"] == "grant" and decision["rules"] == "doctors-view"
    assert decision["party"] == f"client:{flow.app.client_id}"
    changes = [o["action"] for o in objects if o.get("event") == "resource_set"]
    assert changes == ["registered", "deleted"]
    # Every line the server wrote about requests is an object (not the "listening" line).
    assert not any(" INFO " in line for line in output.splitlines())
    for secret in (ticket, granted.json["rpt"], flow.app.token, flow.rs.token, "s-secret-17"):
        assert secret not in output


def test_a_fresh_process_configured_for_json_writes_json() -> None:
    code = (
        "from umaserver.serving import configure_logging\n"
        "from umaserver import events\n"
        "configure_logging('json')\n"
        "events.resource_set_changed('deleted', owner='alice', resource_set='r1', client='c1')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    (line,) = done.stderr.splitlines()
    found = json.loads(line)
    assert found["event"] == "resource_set" and found["action"] == "deleted"
    assert found["message"] == "action=deleted resource_set=r1 owner=alice client=c1"


def test_serve_believes_x_forwarded_for_from_a_trusted_proxy(tmp_path: Path) -> None:
    # Under `serve` (waitress) the app must see X-Forwarded-For to take the address after
    # [server] trusted_proxies: /metrics allows only the address the proxy names.
    server = start_server(
        tmp_path,
        extra_config=(
            '[server]\ntrusted_proxies = ["127.0.0.1/32"]\n'
            '[metrics]\nenabled = true\nallow = ["203.0.113.7/32"]\n'
        ),
    )
    try:
        metrics = server.url + "/metrics"
        assert requests.get(metrics, timeout=10).status_code == 403  # the proxy itself
        named = requests.get(metrics, headers={"X-Forwarded-For": "203.0.113.7"}, timeout=10)
        assert named.status_code == 200, named.text
        other = requests.get(metrics, headers={"X-Forwarded-For": "198.51.100.1"}, timeout=10)
        assert other.status_code == 403
    finally:
        stop_server(server)
