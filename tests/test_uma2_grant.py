"""UMA 2.0's grant at the token endpoint (UMA 2.0 Grant for OAuth 2.0 Authorization, section 3.3),
over HTTP through the Flask test client: every outcome and error, ticket rotation, RPT upgrade, PCT
reuse, and each claim token format a client pushes on its own word (the verified formats:
test_uma2_claim_tokens.py)."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from flask.testing import FlaskClient

from umaserver import secrets_at_rest
from umaserver.services import clients

from .conftest import Party, Store, dump_database, make_web_client, stored_ticket
from .flows import EMPLOYEE, OIDC, PHOTO_TYPE, PHOTOS_FOR_DOCTORS_AND_COLLEAGUES

UMA_TICKET = "urn:ietf:params:oauth:grant-type:uma-ticket"
ID_TOKEN = "http://openid.net/specs/openid-connect-core-1_0.html#IDToken"


# alice's doctors may view her photos, colleagues print them; anyone may view her Shared set.
RULES = (
    PHOTOS_FOR_DOCTORS_AND_COLLEAGUES
    + """
[[rules]]
id = "shared-open"
owner = "alice"
scopes = ["view"]
[rules.resource_sets]
names = ["Shared"]
"""
)


@pytest.fixture
def rules_text() -> str:
    return RULES


def make_uma2_client(
    store: Store,
    name: str = "Viewer",
    push_types: tuple[str, ...] = (EMPLOYEE, OIDC),
    grant_types: tuple[str, ...] = ("client_credentials", UMA_TICKET),
    public: bool = False,
) -> tuple[str, str]:
    settings = clients.ClientSettings(
        name=name,
        grant_types=grant_types,
        response_types=(),
        token_endpoint_auth_method="none" if public else "client_secret_basic",
        push_claim_types=push_types,
    )
    assert clients.settings_problem(settings) is None
    issued = clients.create_client(store, int(time.time()), settings)
    return issued.client.client_id, issued.secret or ""


def custom_token(claims: dict[str, Any]) -> str:
    """A custom claim type's claim token: base64url of the JSON object, unpadded."""
    return base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")


class Uma2:
    """alice's photo server (with her PAT) and its Photos set; a 2.0 client with its secret."""

    def __init__(self, http: FlaskClient, store: Store, rs: Party) -> None:
        self.http = http
        self.store = store
        self.rs = rs
        self.client_id, self.secret = make_uma2_client(store)
        self.rs_id = self.register({"name": "Photos", "resource_scopes": ["view", "print"]})

    def register(self, description: dict[str, Any]) -> str:
        description = {"type": PHOTO_TYPE, **description}
        reply = self.http.post("/rs/resource_set", json=description, headers=self.rs.auth)
        assert reply.status_code == 201, reply.json
        rs_id: str = reply.json["_id"]
        return rs_id

    def ticket(self, *scopes: str, rs_id: str | None = None) -> str:
        reply = self.http.post(
            "/permission",
            json=[
                {"resource_id": rs_id or self.rs_id, "resource_scopes": list(scopes or ["view"])}
            ],
            headers=self.rs.auth,
        )
        assert reply.status_code == 201, reply.json
        ticket: str = reply.json["ticket"]
        return ticket

    def token(
        self, client: tuple[str, str] | None = None, **parameters: str
    ) -> tuple[int, dict[str, Any]]:
        client_id, secret = client or (self.client_id, self.secret)
        reply = self.http.post(
            "/token",
            data={"grant_type": UMA_TICKET, **parameters},
            headers={"Authorization": basic(client_id, secret)},
        )
        assert reply.headers["Cache-Control"] == "no-store"
        body: dict[str, Any] = reply.json
        return reply.status_code, body

    def introspect(self, rpt: str) -> dict[str, Any]:
        reply = self.http.post("/introspect", data={"token": rpt}, headers=self.rs.auth)
        assert reply.status_code == 200
        answer: dict[str, Any] = reply.json
        return answer


def basic(client_id: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


def doctor(role: str = "doctor") -> dict[str, str]:
    return {"claim_token": custom_token({"role": [role]}), "claim_token_format": EMPLOYEE}


@pytest.fixture
def uma(http: FlaskClient, store: Store, rs: Party) -> Uma2:
    return Uma2(http, store, rs)


# -- a grant -------------------------------------------------------------------------------------


def test_a_claim_token_grants_an_rpt_the_resource_server_introspects(uma: Uma2) -> None:
    status, body = uma.token(ticket=uma.ticket("view"), **doctor())
    assert status == 200, body
    assert set(body) == {"access_token", "token_type", "expires_in", "upgraded", "pct"}
    assert body["token_type"] == "Bearer" and body["upgraded"] is False
    assert 3590 <= body["expires_in"] <= 3600
    answer = uma.introspect(body["access_token"])
    assert answer["active"] is True and answer["client_id"] == uma.client_id
    [permission] = answer["permissions"]
    assert permission["resource_id"] == permission["resource_set_id"] == uma.rs_id
    assert permission["resource_scopes"] == permission["scopes"] == ["view"]
    assert isinstance(permission["exp"], int) and isinstance(permission["iat"], int)


def test_need_info_rotates_the_ticket_and_names_what_is_missing(uma: Uma2, store: Store) -> None:
    first = uma.ticket("view")
    status, body = uma.token(ticket=first)
    assert status == 403
    assert body["error"] == "need_info" and body["ticket"] != first
    assert body["required_claims"] == [
        {
            "name": "role",
            "friendly_name": "Your role at the hospital",
            "claim_token_format": [EMPLOYEE],
        }
    ]
    assert "redirect_user" not in body  # this client has no claims redirect URI
    # The old ticket stopped working at once; the new one goes on.
    status, refused = uma.token(ticket=first, **doctor())
    assert status == 400 and refused["error"] == "invalid_grant"
    found = stored_ticket(store, body["ticket"])
    assert found is not None and found.requests == 1
    status, granted = uma.token(ticket=body["ticket"], **doctor())
    assert status == 200, granted


def test_claims_move_with_the_rotated_ticket(uma: Uma2) -> None:
    ticket = uma.ticket("view", "print")
    # The role is recorded, the email still missing: need_info, and the role stays.
    status, body = uma.token(ticket=ticket, **doctor())
    assert status == 403 and [c["name"] for c in body["required_claims"]] == ["email"]
    status, body = uma.token(
        ticket=body["ticket"],
        claim_token=custom_token({"email": "bob@example.com"}),
        claim_token_format=OIDC,
    )
    assert status == 200, body


def test_a_claim_that_can_never_hold_is_request_denied_and_ends_the_ticket(uma: Uma2) -> None:
    ticket = uma.ticket("view")
    status, body = uma.token(ticket=ticket, **doctor("nurse"))
    assert status == 403 and body["error"] == "request_denied" and body["error_description"]
    assert set(body) == {"error", "error_description"}
    status, body = uma.token(ticket=ticket, **doctor())
    assert status == 400 and body["error"] == "invalid_grant"


def test_the_tenth_request_without_a_grant_ends_the_ticket(uma: Uma2) -> None:
    ticket = uma.ticket("view")
    for _ in range(9):
        status, body = uma.token(ticket=ticket)
        assert status == 403 and body["error"] == "need_info"
        ticket = body["ticket"]
    status, body = uma.token(ticket=ticket)
    assert status == 403 and body["error"] == "request_denied"


# -- RPT upgrade ---------------------------------------------------------------------------------


def test_an_rpt_sent_is_upgraded_and_answered_again(uma: Uma2) -> None:
    _, first = uma.token(ticket=uma.ticket("view"), **doctor())
    other = uma.register({"name": "Holidays", "resource_scopes": ["view"]})
    status, body = uma.token(
        ticket=uma.ticket("view", rs_id=other), rpt=first["access_token"], **doctor()
    )
    assert status == 200, body
    assert body["access_token"] == first["access_token"] and body["upgraded"] is True
    sets = {p["resource_id"] for p in uma.introspect(body["access_token"])["permissions"]}
    assert sets == {uma.rs_id, other}


def test_another_clients_rpt_is_invalid_grant(uma: Uma2, store: Store) -> None:
    _, theirs = uma.token(ticket=uma.ticket("view"), **doctor())
    mine = make_uma2_client(store, "Other")
    status, body = uma.token(
        mine, ticket=uma.ticket("view"), rpt=theirs["access_token"], **doctor()
    )
    assert status == 400 and body["error"] == "invalid_grant"


# -- PCT -----------------------------------------------------------------------------------------


def test_a_pct_carries_the_claims_to_a_later_ticket_of_the_same_client(
    uma: Uma2, store: Store
) -> None:
    _, first = uma.token(ticket=uma.ticket("view"), **doctor())
    pct = first["pct"]
    assert pct.startswith("uma_pct_")
    status, body = uma.token(ticket=uma.ticket("view"), pct=pct)
    assert status == 200, body
    assert "pct" in body and body["pct"] != pct  # a new one, carrying the same claims
    # Another client cannot use it.
    other = make_uma2_client(store, "Other")
    status, body = uma.token(other, ticket=uma.ticket("view"), pct=pct)
    assert status == 400 and body["error"] == "invalid_grant"


def test_a_revoked_pct_is_invalid_grant(uma: Uma2) -> None:
    _, first = uma.token(ticket=uma.ticket("view"), **doctor())
    revoked = uma.http.post(
        "/revoke",
        data={"token": first["pct"]},
        headers={"Authorization": basic(uma.client_id, uma.secret)},
    )
    assert revoked.status_code == 200
    status, body = uma.token(ticket=uma.ticket("view"), pct=first["pct"])
    assert status == 400 and body["error"] == "invalid_grant"


def test_no_pct_without_claims(uma: Uma2) -> None:
    # The Shared set opens to anyone: a grant on no claims at all carries no PCT.
    shared = uma.register({"name": "Shared", "resource_scopes": ["view"]})
    status, body = uma.token(ticket=uma.ticket("view", rs_id=shared))
    assert status == 200, body
    assert "pct" not in body


def test_a_pct_is_stored_only_as_its_digest(uma: Uma2, config: Any) -> None:
    _, body = uma.token(ticket=uma.ticket("view"), **doctor())
    dumped = dump_database(config.database)
    assert body["pct"] not in dumped and body["access_token"] not in dumped
    assert secrets_at_rest.digest(body["pct"]) in dumped


# -- scope ---------------------------------------------------------------------------------------


def test_scope_adds_resource_scopes_to_the_tickets_sets(uma: Uma2, store: Store) -> None:
    ticket = uma.ticket("view")
    status, body = uma.token(ticket=ticket, scope="print")
    assert status == 403 and body["error"] == "need_info"
    found = stored_ticket(store, body["ticket"])
    assert found is not None and found.scopes == ("view", "print")  # kept on the rotated ticket
    assert sorted(c["name"] for c in body["required_claims"]) == ["email", "role"]


def test_a_scope_no_set_of_the_ticket_registers_is_invalid_scope(uma: Uma2) -> None:
    status, body = uma.token(ticket=uma.ticket("view"), scope="print delete")
    assert (
        status == 400 and body["error"] == "invalid_scope" and "delete" in body["error_description"]
    )


# -- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parameters", "status", "error", "fragment"),
    [
        ({}, 400, "invalid_request", "ticket"),
        ({"ticket": "uma_pt_unknown"}, 400, "invalid_grant", ""),
        (
            {"claim_token": custom_token({"role": ["doctor"]})},
            400,
            "invalid_request",
            "come together",
        ),
        ({"claim_token_format": EMPLOYEE}, 400, "invalid_request", "come together"),
        (
            {"claim_token": "%%%", "claim_token_format": EMPLOYEE},
            400,
            "invalid_request",
            "base64url",
        ),
        (
            {
                "claim_token": custom_token({"role": "x"})[:-3] + "AAA",
                "claim_token_format": EMPLOYEE,
            },
            400,
            "invalid_request",
            "",
        ),
        (
            {
                "claim_token": base64.urlsafe_b64encode(b"[1, 2]").decode(),
                "claim_token_format": EMPLOYEE,
            },
            400,
            "invalid_request",
            "JSON object",
        ),
        (
            {"claim_token": custom_token({"a": 1}), "claim_token_format": "urn:not:pushable"},
            400,
            "invalid_request",
            "may not push",
        ),
        (
            {"claim_token": "x", "claim_token_format": "claim-client-redirect-1.0"},
            400,
            "invalid_request",
            "claims_interaction_endpoint",
        ),
        ({"pct": "uma_pct_unknown"}, 400, "invalid_grant", "PCT"),
        ({"rpt": "uma_rpt_unknown"}, 400, "invalid_grant", "RPT"),
    ],
)
def test_grant_errors(
    uma: Uma2, parameters: dict[str, str], status: int, error: str, fragment: str
) -> None:
    if parameters.get("ticket") is None and any(
        k in parameters for k in ("claim_token", "claim_token_format", "pct", "rpt")
    ):
        parameters = {"ticket": uma.ticket("view"), **parameters}
    got, body = uma.token(**parameters)
    assert (got, body["error"]) == (status, error), body
    assert fragment in body["error_description"]


def test_an_expired_ticket_is_invalid_grant(uma: Uma2, clock: Any) -> None:
    ticket = uma.ticket("view")
    clock.advance(3600)
    status, body = uma.token(ticket=ticket, **doctor())
    assert status == 400 and body["error"] == "invalid_grant"


def test_the_client_authenticates_first_and_must_be_registered_for_the_grant(
    uma: Uma2, store: Store
) -> None:
    ticket = uma.ticket("view")
    status, body = uma.token((uma.client_id, "wrong"), ticket=ticket, scope="not a scope")
    assert (status, body["error"]) == (401, "invalid_client")
    without = make_uma2_client(store, "No grant", grant_types=("client_credentials",))
    status, body = uma.token(without, ticket=ticket)
    assert (status, body["error"]) == (400, "unauthorized_client")
    public = make_web_client(store, "Public", ["http://127.0.0.1:9000/cb"], public=True)
    reply = uma.http.post(
        "/token", data={"grant_type": UMA_TICKET, "ticket": ticket, "client_id": public[0]}
    )
    assert reply.status_code == 401 and reply.json["error"] == "invalid_client"


def test_a_ticket_another_client_began_is_invalid_grant(uma: Uma2, store: Store) -> None:
    ticket = uma.ticket("view")
    _, body = uma.token(ticket=ticket)
    other = make_uma2_client(store, "Other")
    status, refused = uma.token(other, ticket=body["ticket"], **doctor())
    assert (status, refused["error"]) == (400, "invalid_grant")


def test_the_uma2_configuration_document(http: FlaskClient) -> None:
    reply = http.get("/.well-known/uma2-configuration")
    assert reply.status_code == 200 and reply.headers["Cache-Control"] == "public, max-age=3600"
    document = reply.json
    assert document["issuer"] == "http://uma.test"
    assert UMA_TICKET in document["grant_types_supported"]
    assert document["resource_registration_endpoint"] == "http://uma.test/rs/resource_set"
    assert document["permission_endpoint"] == "http://uma.test/permission"
    assert document["token_endpoint"] == "http://uma.test/token"
    assert document["response_modes_supported"] == ["query"]
    assert document["uma_profiles_supported"] == []
    assert document["claims_interaction_endpoint"] == "http://uma.test/claims_interaction"
    # Every endpoint it advertises answers (without credentials: refused, never 404).
    for name, url in document.items():
        if name.endswith("_endpoint"):
            path = url.removeprefix(document["issuer"])
            answers = {http.get(path).status_code, http.post(path).status_code}
            assert 404 not in answers and answers & {400, 401}, (name, answers)
    # The 1.0 document keeps its own lists: the new grant is not a PAT or AAT grant.
    old = http.get("/.well-known/uma-configuration").json
    assert UMA_TICKET not in old["pat_grant_types_supported"] + old["aat_grant_types_supported"]


def test_need_info_never_names_a_rule_nor_a_value(uma: Uma2) -> None:
    _, body = uma.token(ticket=uma.ticket("view", "print"))
    text = json.dumps(body)
    assert body["error"] == "need_info"
    for secret in ("doctors-view", "colleagues-print", "doctor", "@example.com"):
        assert secret not in text


def test_a_ticket_of_several_sets_is_granted_whole_or_denied_whole(uma: Uma2) -> None:
    other = uma.register({"name": "Holidays", "resource_scopes": ["view", "print"]})
    both = [
        {"resource_id": uma.rs_id, "resource_scopes": ["view"]},
        {"resource_id": other, "resource_scopes": ["print"]},
    ]

    def ticket() -> str:
        reply = uma.http.post("/permission", json=both, headers=uma.rs.auth)
        assert reply.status_code == 201
        found: str = reply.json["ticket"]
        return found

    status, body = uma.token(ticket=ticket(), **doctor())
    assert status == 403 and [c["name"] for c in body["required_claims"]] == ["email"]
    status, body = uma.token(
        ticket=body["ticket"],
        claim_token=custom_token({"email": "bob@example.com"}),
        claim_token_format=OIDC,
    )
    assert status == 200, body
    assert {p["resource_id"] for p in uma.introspect(body["access_token"])["permissions"]} == {
        uma.rs_id,
        other,
    }
    # One pair that can never be granted denies the whole ticket.
    status, body = uma.token(
        ticket=ticket(),
        claim_token=custom_token({"email": "bob@elsewhere.test", "role": ["doctor"]}),
        claim_token_format=OIDC,
    )
    assert (status, body["error"]) == (403, "request_denied")


def test_a_ticket_whose_later_set_is_deleted_is_invalid_grant(uma: Uma2) -> None:
    other = uma.register({"name": "Holidays", "resource_scopes": ["view"]})
    pairs = [
        {"resource_id": uma.rs_id, "resource_scopes": ["view"]},
        {"resource_id": other, "resource_scopes": ["view"]},
    ]
    reply = uma.http.post("/permission", json=pairs, headers=uma.rs.auth)
    assert reply.status_code == 201
    assert uma.http.delete(f"/rs/resource_set/{other}", headers=uma.rs.auth).status_code == 204
    status, body = uma.token(ticket=reply.json["ticket"], **doctor())
    # Never a grant of the pair that is left: the ticket asked for both.
    assert (status, body["error"]) == (400, "invalid_grant")
