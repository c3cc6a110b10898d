"""Tickets, RPTs, the authorization request with pushed claims, and introspection, over HTTP."""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from umaserver import create_app
from umaserver.config import Config, Limits
from umaserver.policy import store as policy_store
from umaserver.policy.rules import RuleSet
from umaserver.runtime import runtime
from umaserver.services import maintenance

from .conftest import (
    FakeClock,
    Party,
    Store,
    gathered_claims,
    make_client_party,
    make_party,
    revoke_token,
    stored_permissions,
    stored_rpt,
    stored_ticket,
)
from .flows import (
    EMPLOYEE,
    OIDC,
    PHOTO_TYPE,
    PHOTOS_FOR_DOCTORS_AND_COLLEAGUES,
    FlaskApi,
    Flow,
    Reply,
    wait_until,
)


@pytest.fixture
def rules_text() -> str:
    return PHOTOS_FOR_DOCTORS_AND_COLLEAGUES


@pytest.fixture
def world(http: FlaskClient, store: Store, rs: Party) -> Flow:
    """alice's photo server (with her PAT) and her Photos set; bob's client (with his AAT)."""
    app = make_party(store, "bob", "uma_authorization", push_types=(EMPLOYEE, OIDC))
    photos = {"name": "Photos", "scopes": ["view", "print"], "type": PHOTO_TYPE}
    return Flow(FlaskApi(http), rs, app, photos)


def doctor(role: str = "doctor") -> dict[str, Any]:
    return {"type": EMPLOYEE, "value": {"role": [role], "staff_id": "s-17"}}


def email(address: str = "bob@example.com") -> dict[str, Any]:
    return {"type": OIDC, "value": {"email": address, "name": "Bob"}}


def assert_error(response: Reply, status: int, error: str) -> dict[str, Any]:
    """An error in the one shape; or, for "need_claims", the spec's answer (no `error`)."""
    assert response.status == status, response.text
    assert response.headers["Cache-Control"] == "no-store"
    body: dict[str, Any] = response.json
    if error == "need_claims":
        assert list(body) == ["need_claims"] and body["need_claims"], body
        return body
    assert body["error"] == error, body
    assert body["error_description"]
    return body


# -- permission registration -----------------------------------------------------------------


def test_permission_registration_gives_a_ticket(world: Flow) -> None:
    response = world.api.post(
        "/permission",
        json={"resource_set_id": world.rs_id, "scopes": ["view"]},
        headers=world.rs.auth,
    )
    assert response.status == 201
    assert set(response.json) == {"ticket"}
    assert response.json["ticket"].startswith("uma_pt_")


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"resource_set_id": "unknown", "scopes": ["view"]}, 400, "invalid_resource_set_id"),
        ({"resource_set_id": "{photos}", "scopes": ["delete"]}, 400, "invalid_scope"),
        ({"resource_set_id": "{photos}", "scopes": ["view", "edit"]}, 400, "invalid_scope"),
        ({"resource_set_id": "{photos}", "scopes": []}, 400, "invalid_request"),
        ({"resource_set_id": "{photos}"}, 400, "invalid_request"),
        ({"scopes": ["view"]}, 400, "invalid_request"),
        ({"resource_set_id": 5, "scopes": ["view"]}, 400, "invalid_request"),
        ({"resource_set_id": "{photos}", "scopes": "view"}, 400, "invalid_request"),
        ([], 400, "invalid_request"),
    ],
)
def test_permission_registration_errors(world: Flow, body: Any, status: int, error: str) -> None:
    if isinstance(body, dict):
        body = {
            k: (v.format(photos=world.rs_id) if isinstance(v, str) else v) for k, v in body.items()
        }
    response = world.api.post("/permission", json=body, headers=world.rs.auth)
    assert_error(response, status, error)


def test_permission_for_another_owners_or_rs_set_is_invalid_resource_set_id(
    world: Flow, store: Store
) -> None:
    for other in (
        make_party(store, "carol", "uma_protection", client_id=world.rs.client_id),
        make_party(store, "alice", "uma_protection"),
    ):
        response = world.api.post(
            "/permission",
            json={"resource_set_id": world.rs_id, "scopes": ["view"]},
            headers=other.auth,
        )
        assert_error(response, 400, "invalid_resource_set_id")


@pytest.mark.parametrize(
    ("path", "scope"),
    [
        ("/permission", "uma_authorization"),
        ("/rpt", "uma_protection"),
        ("/rpt_authorization", "uma_protection"),
        ("/introspect", "uma_authorization"),
    ],
)
def test_each_endpoint_needs_its_token(world: Flow, store: Store, path: str, scope: str) -> None:
    assert_error(world.api.post(path, json={}), 401, "invalid_token")
    wrong = make_party(store, "dave", scope)
    assert_error(world.api.post(path, json={}, headers=wrong.auth), 403, "insufficient_scope")


# -- the RPT endpoint ------------------------------------------------------------------------


def test_the_rpt_endpoint_answers_200(world: Flow) -> None:
    # pyuma's UMA 1.0 client accepts nothing else; the token endpoint answers 200 too.
    response = world.api.post("/rpt", headers=world.app.auth)
    assert response.status == 200, response.text
    assert set(response.json) == {"rpt"}
    assert response.headers["Cache-Control"] == "no-store"


def test_a_new_rpt_revokes_the_previous_one(world: Flow) -> None:
    first = world.new_rpt()
    assert first.startswith("uma_rpt_")
    assert world.introspect(first)["active"] is True
    second = world.new_rpt()
    assert world.introspect(first) == {"active": False}
    assert world.introspect(second)["active"] is True
    assert world.introspect(second)["permissions"] == []


@pytest.mark.parametrize(
    ("body", "content_type", "named"),
    [
        ('{"ticket": "uma_pt_x"}', "application/json", "ticket"),
        ('{"rpt": "{rpt}", "ticket": "uma_pt_x"}', "application/json", "ticket"),
        ('{"ticket": "uma_pt_x", "claim_tokens": []}', None, "ticket or claim_tokens"),
        ('{"claim_tokens": [{"format": "json", "token": "e30"}]}', "text/plain", "claim_tokens"),
        ("ticket=uma_pt_x", "application/x-www-form-urlencoded", "ticket"),
    ],
)
def test_a_uma_1_0_1_authorization_request_at_the_rpt_endpoint_is_refused(
    world: Flow, body: str, content_type: str | None, named: str
) -> None:
    # UMA 1.0.1 sends its authorization request to the RPT endpoint; here that would revoke the
    # client's RPT and its permissions for a new empty one.
    rpt = world.new_rpt()
    headers = dict(world.app.auth)
    if content_type is not None:
        headers["Content-Type"] = content_type
    response = world.api.http.post(
        "/rpt", data=body.replace("{rpt}", rpt).encode(), headers=headers
    )
    assert response.status_code == 400, response.text
    assert response.json["error"] == "invalid_request"
    description = response.json["error_description"]
    assert f"takes no {named}:" in description
    assert "http://uma.test/rpt_authorization" in description
    assert world.introspect(rpt)["active"] is True


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"", None),
        (b"{}", None),
        (b"{}", "application/json"),
        (b'{"rpt": "uma_rpt_old"}', "application/json"),
        (b"not json, ticket", "text/plain"),
        (b'["ticket"]', "application/json"),
        (b"", "application/x-www-form-urlencoded"),
    ],
)
def test_any_other_body_at_the_rpt_endpoint_gets_a_new_rpt_as_before(
    world: Flow, body: bytes, content_type: str | None
) -> None:
    first = world.new_rpt()
    headers = dict(world.app.auth)
    if content_type is not None:
        headers["Content-Type"] = content_type
    response = world.api.http.post("/rpt", data=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json["rpt"] != first
    assert world.introspect(first) == {"active": False}


def test_revoking_the_aat_revokes_its_rpts(world: Flow, store: Store) -> None:
    rpt = world.new_rpt()
    assert revoke_token(store, world.app.token)
    assert world.introspect(rpt) == {"active": False}


# -- the authorization request ---------------------------------------------------------------


def test_no_claims_gives_need_claims_without_revealing_values(world: Flow) -> None:
    body = assert_error(world.ask(world.ticket()), 403, "need_claims")
    assert body["need_claims"] == [
        {"type": EMPLOYEE, "name": "role", "value": "Your role at the hospital"}
    ]
    assert "doctor" not in json.dumps(body)


def test_the_right_claims_grant_and_the_rs_sees_the_permission(world: Flow) -> None:
    rpt = world.new_rpt()
    response = world.ask(world.ticket(), [doctor()], rpt=rpt)
    assert response.status == 201
    assert response.headers["Content-Type"] == "application/json;charset=UTF-8"
    assert response.json == {"rpt": rpt}
    answer = world.introspect(rpt)
    assert answer["active"] is True and answer["client_id"] == world.app.client_id
    assert isinstance(answer["exp"], int) and isinstance(answer["iat"], int)
    assert "scope" not in answer
    (permission,) = answer["permissions"]
    assert permission["resource_set_id"] == world.rs_id
    assert permission["scopes"] == ["view"]
    assert permission["exp"] <= answer["exp"]


def test_claims_accumulate_across_requests_with_one_ticket(world: Flow) -> None:
    ticket = world.ticket("view", "print")
    body = assert_error(world.ask(ticket, [doctor()]), 403, "need_claims")
    assert body["need_claims"] == [{"type": OIDC, "name": "email", "value": "a value for 'email'"}]
    response = world.ask(ticket, [email()])
    assert response.status == 201
    permission = world.introspect(response.json["rpt"])["permissions"][0]
    assert sorted(permission["scopes"]) == ["print", "view"]


def test_need_claims_for_several_scopes_names_what_each_needs(world: Flow) -> None:
    # view needs the employee role (doctors-view), print an email (colleagues-print): both are
    # asked for at once, neither required value shown.
    ticket = world.ticket("view", "print")
    body = assert_error(world.ask(ticket), 403, "need_claims")
    assert body["need_claims"] == [
        {"type": EMPLOYEE, "name": "role", "value": "Your role at the hospital"},
        {"type": OIDC, "name": "email", "value": "a value for 'email'"},
    ]
    assert "doctor" not in json.dumps(body) and "example.com" not in json.dumps(body)
    # Sending both is enough.
    response = world.ask(ticket, [doctor(), email()])
    assert response.status == 201, response.text


def test_custom_and_oidc_claims_in_one_request(world: Flow) -> None:
    response = world.ask(world.ticket("view", "print"), [doctor(), email()])
    assert response.status == 201


def test_a_wrong_value_refuses_and_finishes_the_ticket(world: Flow) -> None:
    ticket = world.ticket()
    assert_error(world.ask(ticket, [doctor("janitor")]), 403, "not_authorized_permission")
    assert_error(world.ask(ticket, [doctor()]), 400, "invalid_ticket")


def test_a_granted_ticket_cannot_be_used_twice(world: Flow) -> None:
    ticket = world.ticket()
    assert world.ask(ticket, [doctor()]).status == 201
    assert_error(world.ask(ticket, [doctor()]), 400, "invalid_ticket")


def test_a_repush_on_one_ticket_replaces_the_value(world: Flow) -> None:
    ticket = world.ticket("view", "print")
    assert_error(world.ask(ticket, [email("bob@example.com")]), 403, "need_claims")
    # The passing address, pushed again with a failing value, no longer counts.
    denied = world.ask(ticket, [email("bob@elsewhere.org"), doctor()])
    assert_error(denied, 403, "not_authorized_permission")


def test_in_one_request_the_later_claim_of_a_type_and_name_wins(world: Flow) -> None:
    ticket = world.ticket("view", "print")
    claims = [email("bob@elsewhere.org"), doctor(), email("bob@example.com")]
    assert world.ask(ticket, claims).status == 201


def test_gathered_claims_keep_their_provenance(world: Flow, store: Store, clock: FakeClock) -> None:
    ticket = world.ticket("view", "print")
    clock.advance(7)
    assert_error(world.ask(ticket, [email()]), 403, "need_claims")
    gathered = gathered_claims(store, ticket, "bob")
    assert {(c.type, c.name, c.value) for c in gathered} == {
        (OIDC, "email", "bob@example.com"),
        (OIDC, "name", "Bob"),
    }
    for claim in gathered:
        # Plain pushed claims: the pushing client vouches for them.
        assert claim.issuer == world.app.client_id and claim.client_id == world.app.client_id
        assert claim.gathered_at == clock.now()  # the app's clock, when it was pushed


def test_the_redirect_claim_object_is_refused(world: Flow) -> None:
    claims = [{"type": "claim-client-redirect-1.0", "value": {"scope": "x"}}, doctor()]
    answer = world.ask(world.ticket(), claims)
    assert_error(answer, 400, "invalid_request")
    assert "redirect the requesting party" in answer.json["error_description"]


def test_a_ticket_has_at_most_ten_requests(world: Flow) -> None:
    ticket = world.ticket()
    for _ in range(9):
        assert_error(world.ask(ticket), 403, "need_claims")
    assert_error(world.ask(ticket), 403, "not_authorized_permission")
    assert_error(world.ask(ticket, [doctor()]), 400, "invalid_ticket")


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"ticket": "t"}, "rpt:"),
        ({"rpt": "r"}, "ticket:"),
        ({"rpt": 1, "ticket": "t"}, "rpt:"),
        ({"rpt": "r", "ticket": "t", "claims": {"type": "x"}}, "claims:"),
        (
            {"rpt": "r", "ticket": "t", "claims": ["x"]},
            "claims[0]: must be an object with 'type' and 'value'.",
        ),
        (
            {"rpt": "r", "ticket": "t", "claims": [{"type": EMPLOYEE, "value": {}}, [1]]},
            "claims[1]: must be an object with 'type' and 'value'.",
        ),
        ({"rpt": "r", "ticket": "t", "claims": [None]}, "claims[0]:"),
        ({"rpt": "r", "ticket": "t", "claims": [{"type": EMPLOYEE}]}, "claims[0].value:"),
        (
            {"rpt": "r", "ticket": "t", "claims": [{"type": EMPLOYEE, "value": "doctor"}]},
            "claims[0].value:",
        ),
        ({"rpt": "r", "ticket": "t", "claims": [{"type": 7, "value": {}}]}, "claims[0].type:"),
        ({"rpt": "r", "ticket": "t", "claims": [{"value": {}}]}, "claims[0].type:"),
    ],
)
def test_malformed_authorization_requests(world: Flow, body: dict[str, Any], fragment: str) -> None:
    response = world.api.post("/rpt_authorization", json=body, headers=world.app.auth)
    description = assert_error(response, 400, "invalid_request")["error_description"]
    assert fragment in description
    assert "_schema" not in description  # a library's internal name is not ours to show


def _post_raw(world: Flow, body: str, content_type: str | None) -> Any:
    # The Flask test client adds no Content-Type of its own to raw data.
    headers = dict(world.app.auth)
    if content_type is not None:
        headers["Content-Type"] = content_type
    return world.api.http.post(  # type: ignore[attr-defined]  # a FlaskApi
        "/rpt_authorization", data=body.encode(), headers=headers
    )


@pytest.mark.parametrize(
    ("body", "content_type", "status", "fragment"),
    [
        ("{claims}", None, 201, ""),
        ("{claims}", "application/json", 201, ""),
        ("{claims}", "application/json; charset=utf-8", 201, ""),
        ("{claims}", "text/plain", 400, "Content-Type: application/json"),
        ("{claims}", "application/x-www-form-urlencoded", 400, "Content-Type: application/json"),
        ("{claims}", "", 400, "Content-Type: application/json"),
        ("[1]", None, 400, "Content-Type: application/json"),
        ("rpt=r&ticket=t", None, 400, "not valid JSON"),
        ("", None, 400, "not valid JSON"),
    ],
)
def test_a_body_without_content_type_is_read_as_json(
    world: Flow, body: str, content_type: str | None, status: int, fragment: str
) -> None:
    request = {"rpt": "none-yet", "ticket": world.ticket(), "claims": [doctor()]}
    response = _post_raw(world, body.replace("{claims}", json.dumps(request)), content_type)
    assert response.status_code == status, response.get_data(as_text=True)
    if status == 201:
        assert response.json["rpt"].startswith("uma_rpt_")
    else:
        assert fragment in response.json["error_description"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"rpt": "r\ud800", "ticket": "{ticket}"}, "rpt: a lone UTF-16 surrogate"),
        ({"rpt": "r", "ticket": "{ticket}\udc00"}, "ticket: a lone UTF-16 surrogate"),
        (
            {
                "rpt": "r",
                "ticket": "{ticket}",
                "claims": [{"type": EMPLOYEE, "value": {"r\ud800": 1}}],
            },
            "a member name in claims[0].value holds a lone UTF-16 surrogate",
        ),
        (
            {
                "rpt": "r",
                "ticket": "{ticket}",
                "claims": [{"type": EMPLOYEE + "\ud800", "value": {}}],
            },
            "claims[0].type: a lone UTF-16 surrogate",
        ),
        (
            {
                "rpt": "r",
                "ticket": "{ticket}",
                "claims": [{"type": EMPLOYEE, "value": {"role": ["\udfff"]}}],
            },
            "claims[0].value.role[0]: a lone UTF-16 surrogate",
        ),
    ],
)
def test_a_lone_surrogate_is_refused_naming_the_field(
    world: Flow, body: dict[str, Any], fragment: str
) -> None:
    ticket = world.ticket()
    text = json.dumps(body).replace("{ticket}", ticket)  # json.dumps writes "\ud800" as such
    response = _post_raw(world, text, "application/json")
    assert response.status_code == 400, response.get_data(as_text=True)
    assert response.json["error"] == "invalid_request"
    assert fragment in response.json["error_description"]
    # Nothing was recorded: the ticket is still open and grants with good claims.
    assert world.ask(ticket, [doctor()]).status == 201


@pytest.mark.parametrize("field", ["resource_set_id", "scopes"])
def test_a_lone_surrogate_in_a_permission_request_is_refused(world: Flow, field: str) -> None:
    body: dict[str, Any] = {"resource_set_id": world.rs_id, "scopes": ["view"]}
    body[field] = world.rs_id + "\ud800" if field == "resource_set_id" else ["view\ud800"]
    response = world.api.post("/permission", json=body, headers=world.rs.auth)
    assert fragment_of(assert_error(response, 400, "invalid_request")).startswith(
        f"The body is not valid JSON: {field}"
    )


def fragment_of(body: dict[str, Any]) -> str:
    description: str = body["error_description"]
    return description


SMALL = Limits(claims_per_object=3, claim_objects_per_request=2, claims_per_ticket=5)


def _members(count: int, prefix: str = "k") -> dict[str, Any]:
    return {"type": EMPLOYEE, "value": {f"{prefix}{i}": i for i in range(count)}}


@pytest.mark.parametrize(
    ("limits", "before", "claims", "fragment"),
    [
        (SMALL, [], [doctor(), email(), doctor()], "claim_objects_per_request = 2"),
        (SMALL, [], [doctor(), _members(4)], "claims[1]: 4 members"),
        (SMALL, [], [email(), _members(4)], "claims_per_object = 3"),
        (
            replace(SMALL, claim_value_bytes=40),
            [],
            [{"type": EMPLOYEE, "value": {"role": ["doctor"], "cv": "x" * 40}}],
            "claim_value_bytes = 40",
        ),
        (
            replace(SMALL, claim_value_bytes=40),
            [],
            [{"type": EMPLOYEE, "value": {"role": ["doctor"], "n": [1] * 20}}],
            "the claim 'n' is 60 bytes",
        ),
        (SMALL, [_members(3, "a")], [_members(3, "b")], "would hold 6 claims"),
        (SMALL, [_members(3, "a"), _members(2, "b")], [_members(1, "c")], "claims_per_ticket = 5"),
        # At the defaults: the 0.8 MB object of 75,000 members, and 33 claim objects.
        (Limits(), [], [_members(75_000)], "claims_per_object = 500"),
        (Limits(), [], [email()] * 33, "claim_objects_per_request = 32"),
    ],
)
def test_claims_past_a_limit_are_refused_and_nothing_is_recorded(
    world: Flow,
    store: Store,
    config: Config,
    clock: FakeClock,
    limits: Limits,
    before: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    fragment: str,
) -> None:
    bounded = create_app(replace(config, limits=replace(limits, max_body_bytes=4 << 20)), clock)
    world.api = FlaskApi(bounded.test_client())
    ticket = world.ticket()
    for earlier in before:
        assert_error(world.ask(ticket, [earlier]), 403, "need_claims")
    held = gathered_claims(store, ticket, "bob")
    error = assert_error(world.ask(ticket, claims), 400, "invalid_request")
    assert fragment in error["error_description"]
    assert "[limits]" in error["error_description"]
    assert gathered_claims(store, ticket, "bob") == held  # nothing recorded
    if before:  # claims the ticket holds, pushed again, do not count twice
        assert_error(world.ask(ticket, before[:1]), 403, "need_claims")
    else:  # the ticket is as it was: good claims grant
        assert world.ask(ticket, [doctor()]).status == 201


def test_a_type_the_client_may_not_push_is_named(world: Flow) -> None:
    ticket = world.ticket()
    claims = [doctor(), {"type": "urn:example:other", "value": {"role": ["doctor"]}}]
    error = assert_error(world.ask(ticket, claims), 400, "invalid_request")
    assert "urn:example:other" in error["error_description"]
    # Nothing was recorded against the ticket, which is still usable.
    assert world.ask(ticket, []).status == 403
    assert world.ask(ticket, [doctor()]).status == 201


NOT_PUSHABLE = [doctor(), {"type": "urn:example:other", "value": {"role": ["doctor"]}}]


# A request refused with invalid_request counts toward the ticket's 10 requests as need_claims does,
# and nothing else of it is recorded; the tenth, whatever its answer, finishes the ticket.
@pytest.mark.parametrize("need_claims_first", [0, 4, 9])
def test_requests_refused_with_invalid_request_count_toward_the_ten(
    world: Flow, store: Store, need_claims_first: int
) -> None:
    ticket = world.ticket()
    for _ in range(need_claims_first):
        assert_error(world.ask(ticket), 403, "need_claims")
    for n in range(need_claims_first + 1, 11):
        assert_error(world.ask(ticket, NOT_PUSHABLE), 400, "invalid_request")
        counted = stored_ticket(store, ticket)
        assert counted is not None
        assert (counted.requests, counted.state) == (n, "finished" if n == 10 else "open")
    assert gathered_claims(store, ticket, "bob") == []
    assert_error(world.ask(ticket, [doctor()]), 400, "invalid_ticket")


@pytest.mark.parametrize("state", ["unknown", "expired", "set deleted"])
def test_ticket_errors(world: Flow, clock: FakeClock, config: Config, state: str) -> None:
    ticket = "uma_pt_never-issued"
    if state != "unknown":
        ticket = world.ticket()
    if state == "expired":
        clock.advance(config.lifetimes.ticket)
        assert_error(world.ask(ticket, [doctor()]), 400, "expired_ticket")
        return
    if state == "set deleted":
        world.delete_set()
    assert_error(world.ask(ticket, [doctor()]), 400, "invalid_ticket")


def test_ticket_is_checked_before_claims(world: Flow) -> None:
    bad_claims = [{"type": "urn:example:other", "value": {}}]
    assert_error(world.ask("uma_pt_unknown", bad_claims), 400, "invalid_ticket")


def test_a_set_no_rule_covers_is_not_accessible(world: Flow) -> None:
    other = world.register({"name": "Diary", "scopes": ["view"]})
    assert_error(world.ask(world.ticket(rs_id=other), [doctor()]), 403, "not_authorized_permission")


def test_claims_are_bound_to_the_requesting_party(world: Flow, store: Store) -> None:
    ticket = world.ticket("view", "print")
    assert_error(world.ask(ticket, [doctor()]), 403, "need_claims")
    # Another requesting party of the same client, with the same ticket, starts from nothing.
    carol = make_party(store, "carol", "uma_authorization", client_id=world.app.client_id)
    body = assert_error(world.ask(ticket, [email()], party=carol), 403, "need_claims")
    assert [entry["name"] for entry in body["need_claims"]] == ["role"]


# -- RPTs and permissions --------------------------------------------------------------------


def test_permission_goes_to_the_rpt_sent_and_repeat_grants_merge(world: Flow) -> None:
    rpt = world.new_rpt()
    assert world.ask(world.ticket("view"), [doctor()], rpt=rpt).json == {"rpt": rpt}
    assert world.ask(world.ticket("print"), [email()], rpt=rpt).json == {"rpt": rpt}
    (permission,) = world.introspect(rpt)["permissions"]
    assert sorted(permission["scopes"]) == ["print", "view"]


@pytest.mark.parametrize("sent", ["another AAT's", "revoked", "unknown"])
def test_an_rpt_not_live_and_of_this_aat_gets_the_aats_live_rpt_back(
    world: Flow, store: Store, sent: str
) -> None:
    mine = world.new_rpt()
    assert world.ask(world.ticket("view"), [doctor()], rpt=mine).json == {"rpt": mine}
    if sent == "another AAT's":
        carol = make_party(store, "carol", "uma_authorization", push_types=(EMPLOYEE,))
        other = world.new_rpt(carol)
    elif sent == "revoked":
        other = mine
        mine = world.new_rpt()  # which revokes the AAT's older RPT
    else:
        other = "uma_rpt_never-issued"
    answer = world.ask(world.ticket("print"), [email()], rpt=other)
    assert answer.status == 201
    # The AAT's live RPT, which the client may be using, gets the permission and stays live.
    assert answer.json == {"rpt": mine}
    permission = world.introspect(mine)["permissions"][0]
    assert set(permission["scopes"]) >= {"print"}
    if sent == "another AAT's":
        assert world.introspect(other)["permissions"] == []  # carol's RPT is untouched


def test_without_a_live_rpt_a_new_one_is_made(world: Flow) -> None:
    answer = world.ask(world.ticket("view"), [doctor()], rpt="none-yet")
    assert answer.status == 201
    rpt = answer.json["rpt"]
    assert rpt.startswith("uma_rpt_")
    assert [p["scopes"] for p in world.introspect(rpt)["permissions"]] == [["view"]]


def test_an_rpt_whose_secret_key_is_gone_is_replaced_without_its_permissions(
    world: Flow, config: Config, clock: FakeClock
) -> None:
    mine = world.new_rpt()
    world.ask(world.ticket("view"), [doctor()], rpt=mine)
    # After a change of secret_key the stored seed no longer makes the stored token: the RPT
    # ended with its key, and what it held is not carried into the new one (issue 27).
    rekeyed = create_app(
        replace(config, secret_keys=(config.secret_key + "-changed",)), clock=clock
    )
    world.api = FlaskApi(rekeyed.test_client())
    assert world.introspect(mine) == {"active": False}
    answer = world.ask(world.ticket("print"), [email()], rpt="none")
    fresh = answer.json["rpt"]
    assert fresh != mine
    (permission,) = world.introspect(fresh)["permissions"]
    assert permission["scopes"] == ["print"]
    assert world.introspect(mine) == {"active": False}


def test_rpts_and_tickets_a_day_past_expiry_are_forgotten(
    world: Flow, store: Store, clock: FakeClock, config: Config
) -> None:
    old_rpt = world.new_rpt()
    world.ask(world.ticket(), [doctor()], rpt=old_rpt)
    assert stored_permissions(store, old_rpt) != []
    old_ticket = world.ticket()
    lifetimes = config.lifetimes
    clock.advance(max(lifetimes.rpt, lifetimes.ticket) + 24 * 3600 + 1)
    recent_ticket = world.ticket()
    clock.advance(lifetimes.ticket + 60)
    world.new_rpt()
    world.ticket()
    assert stored_rpt(store, old_rpt) is not None  # requests never prune: the job does
    maintenance.prune(store, clock.now())
    assert stored_rpt(store, old_rpt) is None
    assert stored_permissions(store, old_rpt) == []
    assert_error(world.ask(old_ticket, [doctor()]), 400, "invalid_ticket")
    assert_error(world.ask(recent_ticket, [doctor()]), 400, "expired_ticket")


def test_deleting_a_set_ends_its_permissions(world: Flow) -> None:
    rpt = world.new_rpt()
    world.ask(world.ticket(), [doctor()], rpt=rpt)
    world.delete_set()
    assert world.introspect(rpt)["permissions"] == []


def update_set(world: Flow, scopes: list[str]) -> None:
    reply = world.api.request(
        "PUT",
        world.endpoints["resource_set_registration_endpoint"] + "/resource_set/" + world.rs_id,
        json={"name": "Photos", "scopes": scopes, "type": PHOTO_TYPE},
        headers=world.rs.auth,
    )
    assert reply.status == 200, reply.text


# An update that removes scopes takes them out of open tickets (finishing one left with none) and
# out of permissions on the set (deleting one left with none); other sets' are untouched.
@pytest.mark.parametrize(
    ("new_scopes", "ticket_scopes", "permission_scopes"),
    [
        (["view", "print", "edit"], ("view", "print"), ["print", "view"]),
        (["print", "view"], ("view", "print"), ["print", "view"]),
        (["view"], ("view",), ["view"]),
        (["print", "edit"], ("print",), ["print"]),
        (["edit"], None, None),
    ],
)
def test_an_update_that_removes_scopes_narrows_open_tickets_and_permissions(
    world: Flow,
    store: Store,
    new_scopes: list[str],
    ticket_scopes: tuple[str, ...] | None,
    permission_scopes: list[str] | None,
) -> None:
    rpt = world.new_rpt()
    assert world.ask(world.ticket("view", "print"), [doctor(), email()], rpt=rpt).status == 201
    open_ticket = world.ticket("view", "print")
    assert_error(world.ask(open_ticket), 403, "need_claims")
    other_set = world.register({"name": "Other", "scopes": ["view", "print"], "type": PHOTO_TYPE})
    other = world.ticket("view", "print", rs_id=other_set)
    assert world.ask(other, [doctor(), email()], rpt=rpt).status == 201
    other_ticket = world.ticket("view", "print", rs_id=other_set)

    update_set(world, new_scopes)

    permissions = {p["resource_set_id"]: p["scopes"] for p in world.introspect(rpt)["permissions"]}
    assert sorted(permissions.get(world.rs_id, [])) == sorted(permission_scopes or [])
    assert world.rs_id in permissions or permission_scopes is None
    assert sorted(permissions[other_set]) == ["print", "view"]
    ticket, untouched = stored_ticket(store, open_ticket), stored_ticket(store, other_ticket)
    assert ticket is not None and untouched is not None
    assert untouched.scopes == ("view", "print")
    if ticket_scopes is None:
        assert ticket.state == "finished"
        assert_error(world.ask(open_ticket, [doctor(), email()]), 400, "invalid_ticket")
    else:
        assert (ticket.state, ticket.scopes) == ("open", ticket_scopes)


def test_a_ticket_narrowed_by_an_update_is_granted_for_what_is_left(world: Flow) -> None:
    ticket = world.ticket("view", "print")
    assert_error(world.ask(ticket, [doctor()]), 403, "need_claims")  # print needs an email
    update_set(world, ["view"])
    response = world.ask(ticket)  # the doctor's claims gathered before still count
    assert response.status == 201, response.text
    assert world.introspect(response.json["rpt"])["permissions"][0]["scopes"] == ["view"]


# -- introspection ---------------------------------------------------------------------------


def test_introspection_shows_only_the_pats_owners_permissions(world: Flow, store: Store) -> None:
    rpt = world.new_rpt()
    world.ask(world.ticket(), [doctor()], rpt=rpt)
    other_rs = make_party(store, "alice", "uma_protection")
    answer = world.introspect(rpt, party=other_rs)
    assert answer["active"] is True and answer["permissions"] == []


def test_introspection_of_pats_and_aats_only_for_their_own_client(world: Flow) -> None:
    own = world.introspect(world.rs.token)
    assert own["active"] is True and own["scope"] == "uma_protection"
    assert own["client_id"] == world.rs.client_id
    assert world.introspect(world.app.token) == {"active": False}
    assert world.introspect("uma_at_nonsense") == {"active": False}


def test_introspecting_a_persons_pat_or_aat_names_them(world: Flow, store: Store) -> None:
    # RFC 7662 2.2: `sub` (the person's opaque sub, never the username) and `username`.
    alice = store.get_user_by_username("alice")
    assert alice is not None and alice.sub != "alice"
    aat = make_party(store, "alice", "uma_authorization", client_id=world.rs.client_id)
    for token, scope in ((world.rs.token, "uma_protection"), (aat.token, "uma_authorization")):
        answer = world.introspect(token)
        assert answer == {
            "active": True,
            "scope": scope,
            "client_id": world.rs.client_id,
            "exp": answer["exp"],
            "iat": answer["iat"],
            "token_type": "Bearer",
            "sub": alice.sub,
            "username": "alice",
        }


def test_introspecting_a_clients_own_token_names_no_one(world: Flow, store: Store) -> None:
    # client_credentials: the client acts for itself; there is no person to name.
    own = make_client_party(store, world.rs.client_id, "uma_protection")
    answer = world.introspect(own.token)
    assert answer["active"] is True and answer["client_id"] == world.rs.client_id
    assert "sub" not in answer and "username" not in answer


@pytest.mark.parametrize(
    ("data", "fragment"),
    [({}, "token"), ({"token": ""}, "token"), ({"token": ["a", "b"]}, "token")],
)
def test_introspection_errors(world: Flow, data: dict[str, Any], fragment: str) -> None:
    response = world.api.post("/introspect", data=data, headers=world.rs.auth)
    assert fragment in assert_error(response, 400, "invalid_request")["error_description"]


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_introspection_is_post_only(world: Flow, method: str) -> None:
    response = world.api.request(method, "/introspect", headers=world.rs.auth)
    assert_error(response, 405, "unsupported_method_type")
    assert "POST" in response.headers["Allow"]


def test_decisions_are_logged_without_claim_values_or_tokens(
    world: Flow, caplog: pytest.LogCaptureFixture
) -> None:
    ticket = world.ticket()
    with caplog.at_level(logging.INFO, logger="umaserver"):
        world.ask(ticket, [doctor()])
    (record,) = [r for r in caplog.records if r.name == "umaserver.decisions"]
    text = record.getMessage()
    assert "decision=grant" in text and "doctors-view" in text and world.rs_id in text
    for secret in ('doctor"', "s-17", ticket, world.app.token):
        assert secret not in text


# -- the rule file is parsed off the request path ---------------------------------------------


def test_a_request_is_answered_while_a_huge_rule_file_is_parsed(
    world: Flow, app: Flask, config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsing, parsed = threading.Event(), threading.Event()
    release = threading.Event()
    real_load_rules = policy_store.load_rules

    def slow_load_rules(path: Path) -> RuleSet:  # a 40,000-rule file takes seconds
        parsing.set()
        release.wait(30)
        try:
            return real_load_rules(path)
        finally:
            parsed.set()

    monkeypatch.setattr(policy_store, "load_rules", slow_load_rules)
    huge = PHOTOS_FOR_DOCTORS_AND_COLLEAGUES + "".join(
        f'[[rules]]\nid = "extra-{n}"\nowner = "carol"\nscopes = ["view"]\n' for n in range(2000)
    )
    config.policies.write_text(huge, encoding="utf-8")
    assert parsing.wait(10), "the rule file was not looked at again"
    try:
        started = time.monotonic()
        response = world.ask(world.ticket(), [doctor()])  # the rules in force decide
        assert response.status == 201, response.text
        assert time.monotonic() - started < 5
        assert not parsed.is_set()
    finally:
        release.set()
    with app.app_context():
        policies = runtime().policies
    wait_until(
        lambda: len(policies.rules.rules) == 2002, message="the new rules were not swapped in"
    )


# -- a ticket of several sets (made by UMA 2.0's permission endpoint) at the 1.0 request ---------


def two_set_ticket(world: Flow, scopes: tuple[list[str], list[str]]) -> tuple[str, str, str]:
    """A ticket for alice's Photos and a second photo set of hers, with these scopes each."""
    second = world.register({"name": "Holidays", "scopes": ["view", "print"], "type": PHOTO_TYPE})
    reply = world.api.post(
        world.endpoints["permission_registration_endpoint"],
        json=[
            {"resource_id": world.rs_id, "resource_scopes": scopes[0]},
            {"resource_id": second, "resource_scopes": scopes[1]},
        ],
        headers=world.rs.auth,
    )
    assert reply.status == 201, reply.text
    return reply.json["ticket"], world.rs_id, second


def test_one_grant_adds_a_permission_for_every_set_of_the_ticket(world: Flow) -> None:
    ticket, first, second = two_set_ticket(world, (["view"], ["view", "print"]))
    granted = world.ask(ticket, [doctor(), email()])
    assert granted.status == 201, granted.text
    answer = world.introspect(granted.json["rpt"])
    assert {(p["resource_set_id"], tuple(p["scopes"])) for p in answer["permissions"]} == {
        (first, ("view",)),
        (second, ("view", "print")),
    }


def test_a_ticket_of_several_sets_asks_for_what_each_still_needs(world: Flow) -> None:
    ticket, _, _ = two_set_ticket(world, (["view"], ["print"]))
    # One set needs the doctor's role, the other the colleague's email: both are asked for.
    body = assert_error(world.ask(ticket), 403, "need_claims")
    assert sorted(needed["name"] for needed in body["need_claims"]) == ["email", "role"]
    # With one of the two, the other is still asked for: no partial grant.
    body = assert_error(world.ask(ticket, [doctor()]), 403, "need_claims")
    assert [needed["name"] for needed in body["need_claims"]] == ["email"]
    assert world.ask(ticket, [email()]).status == 201


def test_a_ticket_of_several_sets_is_refused_when_one_can_never_be_granted(world: Flow) -> None:
    ticket, _, _ = two_set_ticket(world, (["view"], ["print"]))
    assert_error(
        world.ask(ticket, [doctor(), email("bob@elsewhere.test")]), 403, "not_authorized_permission"
    )
    assert_error(world.ask(ticket, [doctor(), email()]), 400, "invalid_ticket")
