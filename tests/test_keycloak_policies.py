"""Keycloak's user-managed policy API on the realm face (api/keycloak_policies.py), through the
Flask test client with the requests python-keycloak 7.1.1's `KeycloakUMA.policy_*` methods send
(create: POST .../uma-policy/{resource_id} with the policy; query: GET .../uma-policy with
resource, name, scope, first, max; update: PUT .../uma-policy/{id} with the policy as read back;
delete: DELETE .../uma-policy/{id}). The decisions such policies make are asked through the 1.0
authorization request with AATs of people (account claims), and the owner's page shows them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from umaserver import create_app
from umaserver.config import load_config
from umaserver.secrets_at_rest import hash_password

from .conftest import (
    FakeClock,
    Party,
    Store,
    make_client_party,
    make_party,
    make_person,
    write_config,
)
from .flows import FlaskApi, Flow
from .pages_helpers import sign_in

REALM = "demo"
POLICIES = f"/realms/{REALM}/authz/protection/uma-policy"
PEOPLE: dict[str, dict[str, Any]] = {
    "bob": {"roles": ["editor"], "groups": ["research"]},
    "carol": {"roles": "viewer", "groups": ["research"]},
    "dave": {},
}


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    return write_config(tmp_path, extra=f'[keycloak]\nrealm = "{REALM}"\n')


@pytest.fixture
def rs(store: Store) -> Party:
    """alice's resource server with her PAT; alice can sign in."""
    make_person(store, "alice", hash_password("alice's password"))
    return make_party(store, "alice", "uma_protection")


@pytest.fixture
def people(store: Store) -> dict[str, Party]:
    """bob, carol and dave, each with an AAT at a client of their own."""
    parties = {}
    for name, attributes in PEOPLE.items():
        make_person(store, name, None, attributes)
        parties[name] = make_party(store, name, "uma_authorization")
    return parties


@pytest.fixture
def flow(http: FlaskClient, rs: Party, people: dict[str, Party]) -> Flow:
    return Flow(FlaskApi(http), rs, people["bob"], {"name": "Photos", "scopes": ["view", "edit"]})


def create(http: FlaskClient, rs: Party, rs_id: str, policy: dict[str, Any]) -> Any:
    return http.post(f"{POLICIES}/{rs_id}", json=policy, headers=rs.auth)


def created(http: FlaskClient, rs: Party, rs_id: str, policy: dict[str, Any]) -> dict[str, Any]:
    reply = create(http, rs, rs_id, policy)
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json
    return body


def decisions(flow: Flow, people: dict[str, Party], scope: str = "view") -> dict[str, bool]:
    """Whom the owner's rules grant `scope` on the set, by a 1.0 authorization request each."""
    granted = {}
    for name, party in people.items():
        reply = flow.ask(flow.ticket(scope), party=party)
        assert reply.status in (201, 403), reply.text
        if reply.status == 403:  # account claims are never asked for: a plain refusal
            assert reply.json["error"] == "not_authorized_permission", reply.json
        granted[name] = reply.status == 201
    return granted


def test_a_policy_of_roles_is_created_and_decides(
    http: FlaskClient, flow: Flow, rs: Party, people: dict[str, Party]
) -> None:
    assert decisions(flow, people) == {"bob": False, "carol": False, "dave": False}
    policy = created(
        http,
        rs,
        flow.rs_id,
        {"name": "Editors", "description": "Editors may view", "scopes": ["view"], "roles": ["editor", "admin"]},
    )  # fmt: skip
    assert policy == {
        "id": policy["id"],
        "name": "Editors",
        "description": "Editors may view",
        "type": "uma",
        "logic": "POSITIVE",
        "decisionStrategy": "UNANIMOUS",
        "owner": "alice",
        "scopes": ["view"],
        "users": [],
        "roles": ["editor", "admin"],
        "groups": [],
        "clients": [],
    }
    assert policy["id"].startswith("o-")
    assert decisions(flow, people) == {"bob": True, "carol": False, "dave": False}
    assert decisions(flow, people, "edit") == {"bob": False, "carol": False, "dave": False}


@pytest.mark.parametrize(
    ("policy", "view", "edit"),
    [
        ({"users": ["carol", "dave"]}, {"bob": False, "carol": True, "dave": True}, None),
        ({"groups": ["research"]}, {"bob": True, "carol": True, "dave": False}, None),
        # A single role of the account counts as a list of one.
        ({"roles": ["viewer"]}, {"bob": False, "carol": True, "dave": False}, None),
        # Every member must hold, as every condition of a rule.
        ({"groups": ["research"], "roles": ["editor"]}, {"bob": True, "carol": False, "dave": False}, None),
        # Empty scopes: every scope of the set.
        ({"users": ["bob"], "scopes": []}, {"bob": True, "carol": False, "dave": False}, {"bob": True, "carol": False, "dave": False}),
    ],
)  # fmt: skip
def test_users_roles_groups_and_scopes(
    http: FlaskClient,
    flow: Flow,
    rs: Party,
    people: dict[str, Party],
    policy: dict[str, Any],
    view: dict[str, bool],
    edit: dict[str, bool] | None,
) -> None:
    made = created(http, rs, flow.rs_id, {"name": "p", "scopes": ["view"], **policy})
    if edit is not None:
        assert made["scopes"] == ["view", "edit"]
    assert decisions(flow, people) == view
    assert decisions(flow, people, "edit") == (edit or dict.fromkeys(people, False))


def test_clients_limit_the_acting_client(
    http: FlaskClient, store: Store, flow: Flow, rs: Party, people: dict[str, Party]
) -> None:
    bob, carol = people["bob"], people["carol"]
    created(http, rs, flow.rs_id, {"name": "bob's app", "clients": [bob.client_id]})
    # Anyone through bob's client; nobody through another.
    carol_at_bobs_app = make_party(store, "carol", "uma_authorization", client_id=bob.client_id)
    assert decisions(flow, {"bob": bob, "carol": carol, "carol@bob's": carol_at_bobs_app}) == {
        "bob": True,
        "carol": False,
        "carol@bob's": True,
    }
    created(http, rs, flow.rs_id, {"name": "only dave", "users": ["dave"], "clients": [bob.client_id]})  # fmt: skip
    dave_at_bobs_app = make_party(store, "dave", "uma_authorization", client_id=bob.client_id)
    # The second policy holds for dave at bob's app only (the first for anyone there).
    assert decisions(flow, {"dave": people["dave"], "dave@bob's": dave_at_bobs_app}) == {
        "dave": False,
        "dave@bob's": True,
    }


def test_query_update_delete_as_python_keycloak_sends_them(
    http: FlaskClient, flow: Flow, rs: Party, people: dict[str, Party]
) -> None:
    other = flow.register({"name": "Notes", "scopes": ["view", "edit"]})
    one = created(http, rs, flow.rs_id, {"name": "Editors of photos", "roles": ["editor"]})
    two = created(http, rs, other, {"name": "Research notes", "scopes": ["edit"], "groups": ["research"]})  # fmt: skip
    three = created(http, rs, other, {"name": "Carol's notes", "scopes": ["view"], "users": ["carol"]})  # fmt: skip

    def ids(**query: Any) -> list[str]:
        reply = http.get(POLICIES, query_string=query, headers=rs.auth)
        assert reply.status_code == 200, reply.text
        return [policy["id"] for policy in reply.json]

    assert ids() == [one["id"], two["id"], three["id"]]  # oldest first
    assert ids(resource=other) == [two["id"], three["id"]]
    assert ids(name="NOTES") == [two["id"], three["id"]]  # case-insensitive, part of the name
    assert ids(scope="view") == [one["id"], three["id"]]
    assert ids(first=1, max=1) == [two["id"]]
    assert ids(max=-1) == ids()
    assert ids(name="nothing like it") == []
    assert http.get(f"{POLICIES}/{two['id']}", headers=rs.auth).json == two

    # Update with the policy as read back, changed: 200, empty body.
    read = http.get(POLICIES, query_string={"name": "Editors"}, headers=rs.auth).json[0]
    read["roles"] = ["viewer"]
    read["description"] = "now viewers"
    updated = http.put(f"{POLICIES}/{read['id']}", json=read, headers=rs.auth)
    assert updated.status_code == 200 and updated.data == b"", updated.text
    assert http.get(f"{POLICIES}/{one['id']}", headers=rs.auth).json == read
    assert decisions(flow, people) == {"bob": False, "carol": True, "dave": False}

    deleted = http.delete(f"{POLICIES}/{one['id']}", headers=rs.auth)
    assert deleted.status_code == 204 and deleted.data == b""
    assert decisions(flow, people) == {"bob": False, "carol": False, "dave": False}
    assert ids() == [two["id"], three["id"]]
    for again in (http.delete, http.get):
        assert again(f"{POLICIES}/{one['id']}", headers=rs.auth).status_code == 404


@pytest.mark.parametrize(
    ("policy", "status", "said"),
    [
        ({"name": "p", "roles": ["r"], "condition": "$evaluation.grant()"}, 400, "'condition' is not supported: a script"),
        ({"name": "p", "roles": ["r"], "policies": ["x"]}, 400, "'policies' is not supported"),
        ({"name": "p", "roles": ["r"], "logic": "NEGATIVE"}, 400, "logic: only 'POSITIVE'"),
        ({"name": "p", "roles": ["r"], "decisionStrategy": "AFFIRMATIVE"}, 400, "decisionStrategy: only 'UNANIMOUS'"),
        ({"name": "p"}, 400, "must name users, roles, groups or clients"),
        ({"name": "p", "users": [], "roles": []}, 400, "must name users, roles, groups or clients"),
        ({"roles": ["r"]}, 400, "name: required"),
        ({"name": "p", "roles": "r"}, 400, "roles: must be an array of non-empty strings"),
        ({"name": "p", "roles": ["r"], "scopes": ["print"]}, 400, "'print' is not a scope of the resource"),
        ({"name": "p", "roles": ["r"], "id": "o-mine"}, 400, "id: a new policy is given its id"),
    ],
)  # fmt: skip
def test_what_a_rule_cannot_express_is_refused(
    http: FlaskClient, flow: Flow, rs: Party, policy: dict[str, Any], status: int, said: str
) -> None:
    reply = create(http, rs, flow.rs_id, policy)
    assert reply.status_code == status, reply.text
    assert reply.json["error"] in ("invalid_request", "invalid_scope")
    assert said in reply.json["error_description"]
    assert http.get(POLICIES, headers=rs.auth).json == []


def test_an_update_keeps_its_id_and_owner(http: FlaskClient, flow: Flow, rs: Party) -> None:
    policy = created(http, rs, flow.rs_id, {"name": "p", "roles": ["r"]})
    path = f"{POLICIES}/{policy['id']}"
    for changed, said in ((policy | {"id": "o-other"}, "id: must be"), (policy | {"owner": "bob"}, "owner:")):  # fmt: skip
        reply = http.put(path, json=changed, headers=rs.auth)
        assert reply.status_code == 400 and said in reply.json["error_description"]
    assert http.get(path, headers=rs.auth).json == policy


def test_only_the_owners_pat_at_the_sets_resource_server(
    http: FlaskClient, store: Store, flow: Flow, rs: Party, people: dict[str, Party]
) -> None:
    policy = created(http, rs, flow.rs_id, {"name": "p", "roles": ["r"]})
    elsewhere = make_party(store, "alice", "uma_protection")  # alice at another resource server
    bobs = make_party(store, "bob", "uma_protection", client_id=rs.client_id)
    for pat in (elsewhere, bobs):
        assert create(http, pat, flow.rs_id, {"name": "q", "roles": ["r"]}).status_code == 404
        assert http.get(POLICIES, headers=pat.auth).json == []
        for method in (http.get, http.delete):
            assert method(f"{POLICIES}/{policy['id']}", headers=pat.auth).status_code == 404
        assert http.put(f"{POLICIES}/{policy['id']}", json=policy, headers=pat.auth).status_code == 404  # fmt: skip
    # A client acting for itself has no rules of its own.
    itself = make_client_party(store, rs.client_id, "uma_protection")
    refused = http.get(POLICIES, headers=itself.auth)
    assert refused.status_code == 403 and refused.json["error"] == "access_denied"
    # An AAT is not a PAT; no token at all is 401.
    assert http.get(POLICIES, headers=people["bob"].auth).status_code == 403
    assert http.get(POLICIES).status_code == 401
    # Another realm's name is no path here.
    assert http.get("/realms/other/authz/protection/uma-policy", headers=rs.auth).status_code == 404
    assert http.patch(POLICIES, headers=rs.auth).status_code == 405


def test_the_owners_page_shows_the_policy(http: FlaskClient, flow: Flow, rs: Party) -> None:
    created(http, rs, flow.rs_id, {"name": "Research group", "description": "My colleagues", "groups": ["research"]})  # fmt: skip
    assert sign_in(http, "alice", "alice's password").status_code == 303
    page = http.get(f"/policy/resource_set/{flow.rs_id}")
    assert page.status_code == 200
    text = page.text
    assert '<strong class="rule-name">Research group</strong>' in text
    assert "My colleagues" in text
    assert "contains at least one of &#39;research&#39;" in text


def test_with_owner_rules_off_the_api_answers_403(
    config_path: Path, clock: FakeClock, store: Store, rs: Party
) -> None:
    text = config_path.read_text(encoding="utf-8").replace('policies = "policies.toml"\n', "")
    config_path.write_text(text + '[policies]\nfile = "policies.toml"\nowner_rules = false\n')
    off = create_app(load_config(config_path), clock=clock).test_client()
    reply = off.get(POLICIES, headers=rs.auth)
    assert reply.status_code == 403 and reply.json["error"] == "access_denied"
    assert "turned off" in reply.json["error_description"]
    assert off.post(f"{POLICIES}/x", json={}, headers=rs.auth).status_code == 403


def test_without_a_realm_there_is_no_policy_api(tmp_path: Path, clock: FakeClock) -> None:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    plain: Flask = create_app(load_config(write_config(tmp_path)), clock=clock)
    assert plain.test_client().get(POLICIES).status_code == 404


def test_a_policy_past_the_rule_limits_is_refused(http: FlaskClient, flow: Flow, rs: Party) -> None:
    # `[limits] rule_value_bytes` (1,024): the services that store owners' rules check it.
    reply = create(
        http, rs, flow.rs_id, {"name": "Bob", "description": "d" * 1025, "users": ["bob"]}
    )
    assert reply.status_code == 400, reply.text
    assert reply.json == {
        "error": "invalid_request",
        "error_description": "This description is 1,025 bytes long; at most 1,024 are kept:"
        " shorten it.",
    }
    assert http.get(POLICIES, headers=rs.auth).json == []
    policy = created(http, rs, flow.rs_id, {"name": "Bob", "users": ["bob"]})
    wide = {**policy, "roles": [f"role-{n:04}" for n in range(100)]}
    reply = http.put(f"{POLICIES}/{policy['id']}", json=wide, headers=rs.auth)
    assert reply.status_code == 400, reply.text
    assert reply.json["error_description"].startswith("This value is 1,300 bytes long")
    assert http.get(f"{POLICIES}/{policy['id']}", headers=rs.auth).json == policy
