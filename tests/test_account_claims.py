"""Account claims (services/account_claims.py): what this server vouches for about the person an
AAT was issued to, and how rules use them through the 1.0 authorization request: they count without
being pushed, a condition on them that does not hold denies (never need_claims), no client can push
them (the CLI, /register and the claims themselves refuse), and a rule's `clients` limits the acting
client."""

from __future__ import annotations

import time
from typing import Any

import pytest
from flask.testing import FlaskClient

from umaserver.claims.model import ACCOUNT_CLAIM_TYPE
from umaserver.policy.rule_file import parse_rule_table
from umaserver.services.account_claims import account_claims, account_values
from umaserver.services.owner_rules import add_owner_rule, new_rule_id

from .conftest import (
    Party,
    Store,
    make_client,
    make_client_party,
    make_initial_access_token,
    make_party,
    make_person,
)
from .flows import EMPLOYEE, FlaskApi, Flow, Uma2Flow, claim_token
from .test_uma2_grant import make_uma2_client

ISSUER = "http://uma.test"  # the tests' config's issuer
ACCOUNT = f'types = ["{ACCOUNT_CLAIM_TYPE}"]'


@pytest.fixture
def rules_text() -> str:
    return f"""
[[rules]]
id = "editors-view"
owner = "alice"
scopes = ["view"]
[[rules.conditions]]
claim = "roles"
contains_any = ["editor", "admin"]
{ACCOUNT}
issuers = ["{ISSUER}"]

[[rules]]
id = "bob-prints"
owner = "alice"
scopes = ["print"]
[[rules.conditions]]
claim = "username"
equals = "bob"
{ACCOUNT}

[[rules]]
id = "colleagues-share"
owner = "alice"
scopes = ["share"]
[[rules.conditions]]
claim = "email"
suffix = "@example.com"
{ACCOUNT}

[[rules]]
id = "research-doctors-annotate"
owner = "alice"
scopes = ["annotate"]
[[rules.conditions]]
claim = "groups"
contains_any = ["research"]
{ACCOUNT}
[[rules.conditions]]
claim = "role"
contains = "doctor"
types = ["{EMPLOYEE}"]
"""


PEOPLE: dict[str, dict[str, Any]] = {
    "bob": {"roles": "editor", "email": "bob@example.com", "groups": ["research", "staff"]},
    "carol": {"roles": ["viewer"], "email": "carol@example.com", "email_verified": False},
    "dave": {"groups": "staff"},
}


def person(store: Store, username: str) -> Party:
    """`username` (made with the attributes of PEOPLE) with an AAT at a client of their own that
    may push employee claims."""
    make_person(store, username, None, PEOPLE[username])
    return make_party(store, username, "uma_authorization", push_types=(EMPLOYEE,))


@pytest.fixture
def flow(http: FlaskClient, store: Store, rs: Party) -> Flow:
    return Flow(
        FlaskApi(http),
        rs,
        person(store, "bob"),
        {"name": "Photos", "scopes": ["view", "print", "share", "annotate"]},
    )


def outcome(flow: Flow, party: Party, scope: str, claims: Any = None) -> str:
    reply = flow.ask(flow.ticket(scope), claims, party=party)
    if reply.status == 201:
        return "grant"
    assert reply.status == 403, reply.text
    if "need_claims" in reply.json:
        return f"need_claims {[entry['name'] for entry in reply.json['need_claims']]}"
    assert reply.json["error"] == "not_authorized_permission", reply.json
    return "deny"


def test_the_account_claims_of_a_person(store: Store) -> None:
    bob = make_person(store, "bob", None, {**PEOPLE["bob"], "colour": "blue"})
    assert account_values(bob) == {
        "username": "bob",
        "email": "bob@example.com",
        "roles": ["editor"],  # a single value is a list of one
        "groups": ["research", "staff"],
    }
    claims = account_claims(store, bob.sub, ISSUER, client_id="c", now=7)
    assert {(c.type, c.issuer, c.subject, c.client_id, c.gathered_at) for c in claims} == {
        (ACCOUNT_CLAIM_TYPE, ISSUER, bob.sub, "c", 7)
    }
    # An address marked unverified is not vouched for; no roles or groups: none said.
    carol = make_person(store, "carol", None, PEOPLE["carol"])
    assert account_values(carol) == {"username": "carol", "roles": ["viewer"]}
    plain = make_person(store, "erin", None, {"roles": [], "groups": [1, ""]})
    assert account_values(plain) == {"username": "erin"}
    assert account_claims(store, "no-such-sub", ISSUER) == []


def test_rules_on_account_claims_decide_without_anything_pushed(flow: Flow, store: Store) -> None:
    bob, carol, dave = flow.app, person(store, "carol"), person(store, "dave")
    # roles contains_any: bob's single role counts as a list of one.
    assert outcome(flow, bob, "view") == "grant"
    # No client can supply account claims, so a condition on them that fails is final: deny.
    assert outcome(flow, carol, "view") == "deny"
    assert outcome(flow, dave, "view") == "deny"
    assert outcome(flow, bob, "print") == "grant"
    assert outcome(flow, carol, "print") == "deny"
    # A verified e-mail only: carol's is marked unverified.
    assert outcome(flow, bob, "share") == "grant"
    assert outcome(flow, carol, "share") == "deny"


def test_need_claims_asks_only_for_what_a_client_can_push(flow: Flow, store: Store) -> None:
    # bob is in the research group: only the employee role is missing, and asked for.
    assert outcome(flow, flow.app, "annotate") == "need_claims ['role']"
    doctor = [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}]
    assert outcome(flow, flow.app, "annotate", doctor) == "grant"
    # dave is not: nothing he pushes helps.
    assert outcome(flow, person(store, "dave"), "annotate") == "deny"


def test_a_client_cannot_push_account_claims(flow: Flow, store: Store) -> None:
    # Pushed under a type of the client's own, a claim named "username" is the client's word.
    carol = person(store, "carol")
    assert outcome(flow, carol, "print", [{"type": EMPLOYEE, "value": {"username": "bob"}}]) == (
        "deny"
    )
    # A client stored with the type (made before it was refused, say) still cannot push it.
    client_id, _ = make_client(store, "old", (ACCOUNT_CLAIM_TYPE,))
    old = make_party(store, "carol", "uma_authorization", client_id=client_id)
    pushed = [{"type": ACCOUNT_CLAIM_TYPE, "value": {"username": "bob"}}]
    reply = flow.ask(flow.ticket("print"), pushed, party=old)
    assert reply.status == 400, reply.text
    assert reply.json["error"] == "invalid_request"
    assert "no client pushes claims of that type" in reply.json["error_description"]


def test_a_client_acting_for_itself_has_no_account(flow: Flow, store: Store) -> None:
    itself = make_client_party(store, flow.app.client_id, "uma_authorization")
    assert outcome(flow, itself, "view") == "deny"


def test_registration_refuses_the_account_claims_type(http: FlaskClient, store: Store) -> None:
    token = make_initial_access_token(store, (ACCOUNT_CLAIM_TYPE,))
    reply = http.post(
        "/register",
        json={"grant_types": ["client_credentials"], "uma_push_claim_types": [ACCOUNT_CLAIM_TYPE]},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert reply.status_code == 400, reply.text
    assert reply.json is not None and reply.json["error"] == "invalid_client_metadata"
    assert "no client pushes claims of that type" in reply.json["error_description"]


def test_a_claim_token_of_the_account_claims_type_is_refused(
    http: FlaskClient, store: Store, rs: Party
) -> None:
    client_id, secret = make_uma2_client(store, "old", push_types=(ACCOUNT_CLAIM_TYPE,))
    uma = Uma2Flow(FlaskApi(http), rs, Party(client_id, secret, "", ""))
    rs_id = uma.register({"name": "Photos", "resource_scopes": ["view"]})
    reply = uma.token(
        uma.ticket((rs_id, ["view"])),
        claim_token=claim_token({"username": "bob"}),
        claim_token_format=ACCOUNT_CLAIM_TYPE,
    )
    assert reply.status == 400, reply.text
    assert "no client pushes claims of that type" in reply.json["error_description"]


def test_a_rule_for_some_clients_only(flow: Flow, store: Store) -> None:
    bob = flow.app
    other = make_party(store, "bob", "uma_authorization")  # bob at another client
    table = {
        "id": new_rule_id(),
        "owner": "alice",
        "scopes": ["edit"],
        "clients": [bob.client_id],
        "conditions": [{"claim": "username", "equals": "bob", "types": [ACCOUNT_CLAIM_TYPE]}],
    }
    add_owner_rule(store, "alice", parse_rule_table(table), int(time.time()))
    rs_id = flow.register({"name": "Notes", "scopes": ["edit"]})
    assert flow.ask(flow.ticket("edit", rs_id=rs_id), party=bob).status == 201
    refused = flow.ask(flow.ticket("edit", rs_id=rs_id), party=other)
    assert refused.status == 403 and refused.json["error"] == "not_authorized_permission"
