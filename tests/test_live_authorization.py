"""The whole flow with a real server and real HTTP: RS registers a set and a permission, the client
gets an RPT, asks without claims (need_claims), pushes the asked claims (201), the RS introspects."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from .conftest import LiveServer
from .flows import (
    DOCTORS_AND_ANNOTATORS,
    DOCTORS_MAY_VIEW,
    EMPLOYEE,
    Flow,
    Reply,
    live_flow,
    wait_until,
)

pytestmark = pytest.mark.live

X_RAYS = {"name": "X-rays", "scopes": ["view", "annotate"]}
DOCTOR = [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}]


@pytest.fixture
def rules_text() -> str:
    return DOCTORS_MAY_VIEW


@pytest.fixture
def flow(live_server: LiveServer) -> Flow:
    """alice's X-rays on a live server; a client that may push employee claims, with its AAT."""
    return live_flow(live_server, X_RAYS, push_types=(EMPLOYEE,))


def test_the_whole_flow(live_server: LiveServer, flow: Flow) -> None:
    rpt = flow.new_rpt()
    ticket = flow.ticket("view")

    first = flow.ask(ticket, rpt=rpt)
    assert first.status == 403
    assert list(first.json) == ["need_claims"]
    assert first.json["need_claims"] == [
        {"type": EMPLOYEE, "name": "role", "value": "Your role at the hospital"}
    ]

    granted = flow.ask(ticket, DOCTOR, rpt=rpt)
    assert granted.status == 201
    assert granted.headers["Content-Type"] == "application/json;charset=UTF-8"
    assert granted.json == {"rpt": rpt}

    seen = flow.introspect(rpt)
    assert seen["active"] is True
    assert [(p["resource_set_id"], p["scopes"]) for p in seen["permissions"]] == [
        (flow.rs_id, ["view"])
    ]

    # The same ticket again is refused; a wrong claim value finishes a fresh one.
    assert flow.ask(ticket, DOCTOR, rpt=rpt).json["error"] == "invalid_ticket"
    other = flow.ticket("view")
    wrong = flow.ask(other, [{"type": EMPLOYEE, "value": {"role": ["porter"]}}], rpt=rpt)
    assert wrong.status == 403 and wrong.json["error"] == "not_authorized_permission"
    assert flow.ask(other, DOCTOR, rpt=rpt).json["error"] == "invalid_ticket"

    # Each decision is in the server's log, without tokens or claim values.
    log = live_server.output()
    for outcome in ("need_claims", "grant", "deny"):
        assert f"decision={outcome} " in log
    for secret in (rpt, ticket, other, flow.app.token, "porter"):
        assert secret not in log


def replace_file(path: Path, text: str) -> None:
    """As an editor should: a new file renamed over the old one."""
    staged = path.with_suffix(".new")
    staged.write_text(text, encoding="utf-8")
    os.replace(staged, path)


def test_a_changed_rule_file_applies_within_two_seconds_and_a_broken_one_is_ignored(
    live_server: LiveServer, flow: Flow
) -> None:
    rules_file = live_server.config_path.parent / "policies.toml"

    def annotate() -> Reply:
        return flow.ask(flow.ticket("annotate"), DOCTOR)

    assert annotate().json["error"] == "not_authorized_permission"
    replace_file(rules_file, DOCTORS_AND_ANNOTATORS)
    wait_until(
        lambda: annotate().status == 201,
        timeout=2.0,
        message="the changed rule file was not noticed in 2 s",
    )

    replace_file(rules_file, '[[rules]]\nid = "broken"\nscopes = "annotate"\n')

    def broken_file_reported() -> bool:
        # The file is looked at on a request that needs the rules: ask until the server says it
        # read the broken file, and until then (and after) the rules from before stay in force.
        assert annotate().status == 201
        return "is broken; keeping the rules loaded before" in live_server.output()

    wait_until(broken_file_reported, timeout=10, message="the broken rule file was not reported")
    assert annotate().status == 201  # the rules from before stay in force
    log = live_server.output()
    assert "reloaded: 2 rules" in log
    assert "is broken; keeping the rules loaded before" in log
    assert "rules[0]: missing 'owner'" in log


def test_sixteen_simultaneous_requests_with_one_ticket_yield_one_grant(flow: Flow) -> None:
    ticket = flow.ticket("view")
    start = threading.Barrier(16)
    answers: list[tuple[int, str]] = []
    lock = threading.Lock()

    def ask() -> None:
        start.wait()
        response = flow.ask(ticket, DOCTOR)
        with lock:
            answers.append((response.status, response.json.get("error", "granted")))

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [(201, "granted")] + [(400, "invalid_ticket")] * 15
