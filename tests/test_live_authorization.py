"""The whole flow with a real server and real HTTP: RS registers a set and a permission, the client
gets an RPT, asks without claims (need_claims), pushes the asked claims (201), the RS introspects."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from .conftest import LiveServer

EMPLOYEE = "urn:example:employee"


RULES = f"""
[[rules]]
id = "doctors"
owner = "alice"
scopes = ["view"]
[[rules.conditions]]
claim = "role"
contains = "doctor"
types = ["{EMPLOYEE}"]
hint = "Your role at the hospital"
"""


@pytest.fixture
def rules_text() -> str:
    return RULES


class Parties:
    def __init__(self, server: LiveServer) -> None:
        self.server = server
        configuration = requests.get(
            server.url + "/.well-known/uma-configuration", timeout=5
        ).json()
        self.endpoints = configuration
        rs = server.command("client", "create", "--name", "Photo RS")
        app = server.command("client", "create", "--name", "Viewer", "--push-claims", EMPLOYEE)
        server.command("user", "create", "alice")
        server.command("user", "create", "bob")
        self.pat = {
            "Authorization": "Bearer "
            + server.command(
                "token",
                "issue",
                "--client",
                rs["client_id"],
                "--user",
                "alice",
                "--scope",
                "uma_protection",
            )["access_token"]
        }
        # The client gets its AAT from the token endpoint, acting for itself.
        aat = requests.post(
            configuration["token_endpoint"],
            data={"grant_type": "client_credentials", "scope": "uma_authorization"},
            auth=(app["client_id"], app["client_secret"]),
            timeout=5,
        ).json()["access_token"]
        self.aat = {"Authorization": f"Bearer {aat}"}
        created = requests.post(
            configuration["resource_set_registration_endpoint"] + "/resource_set",
            json={"name": "X-rays", "scopes": ["view", "annotate"]},
            headers=self.pat,
            timeout=5,
        )
        self.rs_id = created.json()["_id"]

    def ticket(self) -> str:
        response = requests.post(
            self.endpoints["permission_registration_endpoint"],
            json={"resource_set_id": self.rs_id, "scopes": ["view"]},
            headers=self.pat,
            timeout=5,
        )
        assert response.status_code == 201
        ticket: str = response.json()["ticket"]
        return ticket

    def ask(self, rpt: str, ticket: str, claims: list[dict[str, Any]] | None = None) -> Any:
        body: dict[str, Any] = {"rpt": rpt, "ticket": ticket}
        if claims is not None:
            body["claims"] = claims
        return requests.post(
            self.endpoints["authorization_request_endpoint"],
            json=body,
            headers=self.aat,
            timeout=30,
        )


DOCTOR = [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}]


def test_the_whole_flow(live_server: LiveServer) -> None:
    parties = Parties(live_server)
    rpt = requests.post(parties.endpoints["rpt_endpoint"], headers=parties.aat, timeout=5).json()[
        "rpt"
    ]
    ticket = parties.ticket()

    first = parties.ask(rpt, ticket)
    assert first.status_code == 403
    assert first.json()["error"] == "need_claims"
    assert first.json()["need_claims"] == [
        {"type": EMPLOYEE, "name": "role", "value": "Your role at the hospital"}
    ]

    granted = parties.ask(rpt, ticket, DOCTOR)
    assert granted.status_code == 201
    assert granted.headers["Content-Type"] == "application/json;charset=UTF-8"
    assert granted.json() == {"rpt": rpt}

    seen = requests.post(
        parties.endpoints["introspection_endpoint"],
        data={"token": rpt},
        headers=parties.pat,
        timeout=5,
    ).json()
    assert seen["active"] is True
    assert [(p["resource_set_id"], p["scopes"]) for p in seen["permissions"]] == [
        (parties.rs_id, ["view"])
    ]

    # The same ticket again is refused; a wrong claim value finishes a fresh one.
    assert parties.ask(rpt, ticket, DOCTOR).json()["error"] == "invalid_ticket"
    other = parties.ticket()
    wrong = parties.ask(rpt, other, [{"type": EMPLOYEE, "value": {"role": ["porter"]}}])
    assert wrong.status_code == 403 and wrong.json()["error"] == "not_authorized_permission"
    assert parties.ask(rpt, other, DOCTOR).json()["error"] == "invalid_ticket"

    # Each decision is in the server's log, without tokens or claim values.
    log = live_server.output()
    for outcome in ("need_claims", "grant", "deny"):
        assert f"decision={outcome} " in log
    for secret in (rpt, ticket, other, parties.aat["Authorization"][7:], "porter"):
        assert secret not in log


def replace_file(path: Path, text: str) -> None:
    """As an editor should: a new file renamed over the old one."""
    staged = path.with_suffix(".new")
    staged.write_text(text, encoding="utf-8")
    os.replace(staged, path)


def test_a_changed_rule_file_applies_within_two_seconds_and_a_broken_one_is_ignored(
    live_server: LiveServer,
) -> None:
    parties = Parties(live_server)
    rules_file = live_server.config_path.parent / "policies.toml"

    def annotate() -> Any:
        ticket = requests.post(
            parties.endpoints["permission_registration_endpoint"],
            json={"resource_set_id": parties.rs_id, "scopes": ["annotate"]},
            headers=parties.pat,
            timeout=5,
        ).json()["ticket"]
        return parties.ask("none", ticket, DOCTOR)

    assert annotate().json()["error"] == "not_authorized_permission"
    replace_file(
        rules_file,
        RULES + '\n[[rules]]\nid = "annotators"\nowner = "alice"\nscopes = ["annotate"]\n',
    )
    changed = time.monotonic()
    while annotate().status_code != 201:
        assert time.monotonic() - changed < 2.0, "the changed rule file was not noticed in 2 s"
        time.sleep(0.05)

    replace_file(rules_file, '[[rules]]\nid = "broken"\nscopes = "annotate"\n')
    time.sleep(1.5)  # past the next check
    assert annotate().status_code == 201  # the rules from before stay in force
    log = live_server.output()
    assert "reloaded: 2 rules" in log
    assert "is broken; keeping the rules loaded before" in log
    assert "rules[0]: missing 'owner'" in log


def test_sixteen_simultaneous_requests_with_one_ticket_yield_one_grant(
    live_server: LiveServer,
) -> None:
    parties = Parties(live_server)
    ticket = parties.ticket()
    start = threading.Barrier(16)
    answers: list[tuple[int, str]] = []
    lock = threading.Lock()

    def ask() -> None:
        start.wait()
        response = parties.ask("none", ticket, DOCTOR)
        with lock:
            answers.append((response.status_code, response.json().get("error", "granted")))

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [(201, "granted")] + [(400, "invalid_ticket")] * 15
