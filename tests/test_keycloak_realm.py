"""Keycloak's realm face (`[keycloak] realm`): its discovery documents, its token endpoint's forms
(the client's own token, a person's token as the uma-ticket grant's credential, `audience` and
`permission` with the response modes), introspection, revocation and the permission endpoint, all
over the same store as the standard paths. python-keycloak itself runs in
tests/test_keycloak_clients.py."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from umaserver.services import owner_requests

from .conftest import (
    Party,
    Store,
    make_party,
    stored_rpt,
    stored_ticket,
    stored_user,
    write_config,
)
from .flows import EMPLOYEE, PHOTO_TYPE, PHOTOS_FOR_DOCTORS_AND_COLLEAGUES
from .test_uma2_grant import UMA_TICKET, basic, make_uma2_client

REALM = "/realms/demo"
OIDC = f"{REALM}/protocol/openid-connect"
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


@pytest.fixture
def config_path(tmp_path: Path, rules_text: str) -> Path:
    (tmp_path / "policies.toml").write_text(rules_text, encoding="utf-8")
    # Claim tokens of Keycloak's JWT format count as the hospital's employee claims.
    extra = f'[keycloak]\nrealm = "demo"\nclaim_token_type = "{EMPLOYEE}"\n'
    return write_config(tmp_path, extra=extra)


def jwt_claims(claims: dict[str, Any]) -> dict[str, str]:
    token = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return {"claim_token": token, "claim_token_format": "urn:ietf:params:oauth:token-type:jwt"}


class Realm:
    """alice's photo server (a PAT of hers) with Photos and Shared; an app that pushes employee
    claims, bob's token at that app."""

    def __init__(self, http: FlaskClient, store: Store, rs: Party) -> None:
        self.http, self.store, self.rs = http, store, rs
        self.photos = self.register("Photos", ["view", "print"])
        self.shared = self.register("Shared", ["view", "print"])
        self.app_id, self.app_secret = make_uma2_client(store, "Keycloak app", (EMPLOYEE,))
        self.bob = make_party(store, "bob", "uma_authorization", client_id=self.app_id)

    def register(self, name: str, scopes: list[str]) -> str:
        description = {"name": name, "type": PHOTO_TYPE, "resource_scopes": scopes}
        reply = self.http.post("/rs/resource_set", json=description, headers=self.rs.auth)
        assert reply.status_code == 201, reply.json
        rs_id: str = reply.json["_id"]
        return rs_id

    def token(self, data: dict[str, Any], bearer: str | None = None) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        reply = self.http.post(f"{OIDC}/token", data=data, headers=headers)
        return reply.status_code, reply.json

    def ask(self, *permission: str, bearer: str | None = None, **more: str) -> tuple[int, Any]:
        data = {
            "grant_type": UMA_TICKET,
            "audience": self.rs.client_id,
            "permission": list(permission),
            **more,
        }
        return self.token(data, bearer or self.bob.token)


@pytest.fixture
def realm(http: FlaskClient, store: Store, rs: Party) -> Realm:
    return Realm(http, store, rs)


# -- discovery -------------------------------------------------------------------------------------


def test_the_realms_documents_name_the_realms_issuer_and_paths(http: FlaskClient) -> None:
    uma2 = http.get(f"{REALM}/.well-known/uma2-configuration").json
    issuer = "http://uma.test/realms/demo"
    assert uma2["issuer"] == issuer
    for name, path in [
        ("token_endpoint", "/protocol/openid-connect/token"),
        ("authorization_endpoint", "/protocol/openid-connect/auth"),
        ("introspection_endpoint", "/protocol/openid-connect/token/introspect"),
        ("revocation_endpoint", "/protocol/openid-connect/revoke"),
        ("jwks_uri", "/protocol/openid-connect/certs"),
        ("resource_registration_endpoint", "/authz/protection/resource_set"),
        ("permission_endpoint", "/authz/protection/permission"),
        ("policy_endpoint", "/authz/protection/uma-policy"),
    ]:
        assert uma2[name] == issuer + path
    assert UMA_TICKET in uma2["grant_types_supported"]
    openid = http.get(f"{REALM}/.well-known/openid-configuration").json
    assert openid["issuer"] == issuer and openid["token_endpoint"] == uma2["token_endpoint"]
    # The members OpenID Connect Discovery requires; no userinfo: this is no OpenID provider.
    assert openid["subject_types_supported"] == ["public"]
    assert openid["id_token_signing_alg_values_supported"] and openid["response_types_supported"]
    assert "userinfo_endpoint" not in openid and "end_session_endpoint" not in openid
    # The standard documents are as they were.
    assert http.get("/.well-known/uma2-configuration").json["issuer"] == "http://uma.test"
    assert http.get("/realms/other/.well-known/uma2-configuration").status_code == 404
    assert http.get(f"{OIDC}/userinfo").status_code == 404
    # The realm's keys are /jwks's: none while RPTs are opaque.
    assert http.get(f"{OIDC}/certs").json == http.get("/jwks").json == {"keys": []}


def test_without_keycloak_the_realm_paths_do_not_exist(tmp_path: Path) -> None:
    from umaserver import create_app
    from umaserver.config import load_config

    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    plain = create_app(load_config(write_config(tmp_path))).test_client()
    assert plain.get(f"{REALM}/.well-known/uma2-configuration").status_code == 404
    assert plain.post(f"{OIDC}/token", data={"grant_type": "client_credentials"}).status_code == 404
    assert "realms" not in plain.get("/.well-known/uma2-configuration").get_data(as_text=True)


# -- the client's own token ------------------------------------------------------------------------


def keycloak_client_credentials(client_id: str, secret: str, **more: str) -> dict[str, str]:
    """As python-keycloak's KeycloakOpenID.token sends it for client_credentials."""
    return {
        "username": "",
        "password": "",
        "client_id": client_id,
        "grant_type": "client_credentials",
        "code": "",
        "redirect_uri": "",
        "scope": "openid",
        "client_secret": secret,
        **more,
    }


def test_the_clients_own_token_is_a_pat_for_the_protection_api(realm: Realm) -> None:
    status, body = realm.token(keycloak_client_credentials(realm.app_id, realm.app_secret))
    assert status == 200, body
    assert body["scope"] == "uma_protection" and body["token_type"] == "Bearer"
    # It works at the realm's protection API: a set the app registers for itself, a ticket.
    auth = {"Authorization": f"Bearer {body['access_token']}"}
    created = realm.http.post(
        "/rs/resource_set", json={"name": "Own", "resource_scopes": ["read"]}, headers=auth
    )
    assert created.status_code == 201
    ticket = realm.http.post(
        f"{REALM}/authz/protection/permission",
        json=[{"resource_id": created.json["_id"], "resource_scopes": ["read"]}],
        headers=auth,
    )
    assert ticket.status_code == 201 and ticket.json["ticket"]


@pytest.mark.parametrize(
    ("more", "error"),
    [
        ({"password": "hunter2"}, "password: only the client's own token is issued here"),
        ({"username": "bob"}, "username: only the client's own token is issued here"),
        ({"client_secret": "wrong"}, "invalid_client"),
    ],
)
def test_the_client_token_refuses_what_it_cannot_do(
    realm: Realm, more: dict[str, str], error: str
) -> None:
    status, body = realm.token(
        {**keycloak_client_credentials(realm.app_id, realm.app_secret), **more}
    )
    assert status in (400, 401)
    assert error in f"{body['error']}: {body['error_description']}"


# -- the uma-ticket grant with a person's token ----------------------------------------------------


def test_a_person_brings_a_ticket_with_their_own_token(realm: Realm) -> None:
    ticket = realm.http.post(
        "/permission",
        json={"resource_id": realm.photos, "resource_scopes": ["view"]},
        headers=realm.rs.auth,
    ).json["ticket"]
    data = {"grant_type": UMA_TICKET, "ticket": ticket}
    status, body = realm.token(data, realm.bob.token)
    assert status == 403 and body["error"] == "need_info"
    status, body = realm.token(
        {**data, "ticket": body["ticket"], **jwt_claims({"role": ["doctor"]})}, realm.bob.token
    )
    assert status == 200, body
    rpt = stored_rpt(realm.store, body["access_token"])
    assert rpt is not None and rpt.client_id == realm.app_id
    bob = stored_user(realm.store, "bob")
    assert bob is not None and rpt.requesting_party == bob.sub


def test_a_token_without_a_person_or_dead_is_401(realm: Realm, store: Store) -> None:
    own = realm.token(keycloak_client_credentials(realm.app_id, realm.app_secret))[1]
    for bearer in (own["access_token"], "no-such-token"):
        status, body = realm.ask(f"{realm.photos}#view", bearer=bearer)
        assert (status, body["error"]) == (401, "invalid_token")


def test_the_standard_token_endpoint_keeps_the_standard_grant(realm: Realm) -> None:
    reply = realm.http.post(
        "/token",
        data={"grant_type": UMA_TICKET, "audience": realm.rs.client_id, "permission": "x"},
        headers={"Authorization": basic(realm.app_id, realm.app_secret)},
    )
    assert reply.status_code == 400 and "ticket" in reply.json["error_description"]


# -- audience and permission -----------------------------------------------------------------------


def test_decision_mode_answers_the_overall_decision(realm: Realm) -> None:
    status, body = realm.ask(f"{realm.shared}#view", response_mode="decision")
    assert (status, body) == (200, {"result": True})
    # print on Shared is no one's: the whole is not granted.
    status, body = realm.ask(f"{realm.shared}#view,print", response_mode="decision")
    assert (status, body["error"]) == (403, "access_denied")
    # A doctor's word, as Keycloak's JWT claim token.
    status, body = realm.ask(f"{realm.photos}#view", response_mode="decision", **jwt_claims({}))
    assert status == 403
    doctor = jwt_claims({"role": ["doctor"]})
    assert realm.ask(f"{realm.photos}#view", response_mode="decision", **doctor)[0] == 200


def test_permissions_mode_lists_what_is_granted_by_name_or_id(realm: Realm) -> None:
    status, body = realm.ask(
        "Shared#view,print", f"{realm.photos}#view", response_mode="permissions"
    )
    assert status == 200
    assert body == [{"rsid": realm.shared, "rsname": "Shared", "scopes": ["view"]}]
    # '#S': every set of the audience that registers S.
    status, body = realm.ask(
        "#view", response_mode="permissions", **jwt_claims({"role": ["doctor"]})
    )
    assert status == 200
    assert {item["rsname"] for item in body} == {"Photos", "Shared"}
    # A set alone: every scope it registers, as far as granted.
    assert realm.ask("Shared", response_mode="permissions")[1][0]["scopes"] == ["view"]
    status, body = realm.ask("Photos#print", response_mode="permissions")
    assert (status, body["error"]) == (403, "access_denied")


def test_without_a_response_mode_an_rpt_holds_what_is_granted(realm: Realm) -> None:
    status, body = realm.ask("Shared#view")
    assert status == 200 and body["token_type"] == "Bearer" and body["upgraded"] is False
    introspected = realm.http.post(
        "/introspect", data={"token": body["access_token"]}, headers=realm.rs.auth
    ).json
    assert [p["resource_id"] for p in introspected["permissions"]] == [realm.shared]


@pytest.mark.parametrize(
    ("permission", "status", "error"),
    [
        ("Nothing#view", 400, "invalid_resource"),
        ("Photos#delete", 400, "invalid_scope"),
        ("#delete", 400, "invalid_scope"),
        ("#", 400, "invalid_request"),
    ],
)
def test_permission_errors(realm: Realm, permission: str, status: int, error: str) -> None:
    got_status, body = realm.ask(permission, response_mode="decision")
    assert (got_status, body["error"]) == (status, error)


def test_a_name_two_sets_share_is_invalid_resource(realm: Realm) -> None:
    realm.register("Shared", ["view"])
    status, body = realm.ask("Shared#view")
    assert (status, body["error"]) == (400, "invalid_resource")
    assert "several" in body["error_description"]


def test_submit_request_asks_the_owner_and_the_approval_grants(realm: Realm) -> None:
    submitted = (403, {"error": "access_denied", "error_description": "request_submitted"})
    assert realm.ask("Photos#print", submit_request="true") == submitted
    alice = stored_user(realm.store, "alice")
    assert alice is not None
    now = int(time.time())
    [asked] = realm.store.requests_of(alice.sub, "pending", now, 10)
    assert (asked.party_name, asked.client_name, asked.scopes) == (
        "bob",
        "Keycloak app",
        ("print",),
    )
    assert asked.ticket_digest == ""  # Keycloak's form has no ticket: the client asks again
    assert realm.ask("Photos#print", submit_request="true") == submitted  # the same request
    assert len(realm.store.requests_of(alice.sub, "pending", now, 10)) == 1
    owner_requests.approve(realm.store, alice.sub, asked.id, [], None, now, limit=9)
    assert realm.ask("Photos#print", response_mode="decision") == (200, {"result": True})


def test_submit_request_without_a_person_changes_nothing(realm: Realm) -> None:
    reply = realm.http.post(
        f"{OIDC}/token",
        data={
            "grant_type": UMA_TICKET,
            "audience": realm.rs.client_id,
            "permission": ["Photos#print"],
            "submit_request": "true",
        },
        headers={"Authorization": basic(realm.app_id, realm.app_secret)},
    )
    assert reply.status_code == 403
    assert reply.json == {"error": "access_denied", "error_description": "not_authorized"}


def test_the_client_may_ask_with_its_own_credentials(realm: Realm) -> None:
    reply = realm.http.post(
        f"{OIDC}/token",
        data={
            "grant_type": UMA_TICKET,
            "audience": realm.rs.client_id,
            "permission": ["Shared#view"],
            "response_mode": "decision",
        },
        headers={"Authorization": basic(realm.app_id, realm.app_secret)},
    )
    assert reply.status_code == 200 and reply.json == {"result": True}


# -- introspection, revocation, authorization ------------------------------------------------------


def test_realm_introspection_authenticates_the_client_by_its_secret(
    realm: Realm, store: Store
) -> None:
    rpt = realm.ask("Shared#view")[1]["access_token"]
    without_secret = {"client_id": realm.rs.client_id, "token": rpt}
    reply = realm.http.post(f"{OIDC}/token/introspect", data=without_secret)
    assert reply.status_code == 401 and reply.json["error"] == "invalid_client"
    carols = make_party(store, "carol", "uma_protection")  # a client that registered nothing
    other = realm.http.post(
        f"{OIDC}/token/introspect",
        data={"client_id": carols.client_id, "client_secret": carols.client_secret, "token": rpt},
    ).json
    assert other["active"] is True and other["permissions"] == []
    answer = realm.http.post(
        f"{OIDC}/token/introspect",
        data={
            "client_id": realm.rs.client_id,
            "client_secret": realm.rs.client_secret,
            "token": rpt,
            "token_type_hint": "requesting_party_token",
        },
        headers={"Authorization": f"Bearer {realm.bob.token}"},  # tolerated, not used
    ).json
    assert answer["active"] is True
    assert [p["resource_id"] for p in answer["permissions"]] == [realm.shared]


def test_realm_revocation_and_authorization_are_the_standard_ones(realm: Realm) -> None:
    own = realm.token(keycloak_client_credentials(realm.app_id, realm.app_secret))[1]
    reply = realm.http.post(
        f"{OIDC}/revoke",
        data={"token": own["access_token"]},
        headers={"Authorization": basic(realm.app_id, realm.app_secret)},
    )
    assert reply.status_code == 200
    auth = {"Authorization": f"Bearer {own['access_token']}"}
    assert realm.http.get("/rs/resource_set", headers=auth).status_code == 401
    reply = realm.http.get(f"{OIDC}/auth?client_id=x&response_type=code")
    assert reply.status_code == 302
    assert reply.headers["Location"] == "http://uma.test/authorize?client_id=x&response_type=code"


def test_a_jwt_claim_token_needs_the_push_type_like_any_claim(realm: Realm, store: Store) -> None:
    plain_id, _ = make_uma2_client(store, "No pushing", ())
    carol = make_party(store, "carol", "uma_authorization", client_id=plain_id)
    doctor = jwt_claims({"role": ["doctor"]})
    status, body = realm.ask("Photos#view", bearer=carol.token, response_mode="decision", **doctor)
    assert (status, body["error"]) == (400, "invalid_request")
    assert EMPLOYEE in body["error_description"]
    # Not a JSON object: named.
    bad = {**doctor, "claim_token": "bm90IGpzb24"}
    status, body = realm.ask("Photos#view", response_mode="decision", **bad)
    assert (status, body["error"]) == (400, "invalid_request")
    assert "base64url of a JSON object" in body["error_description"]


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"audience": "no-such-client", "permission": "Shared#view"}, "audience"),
        ({"audience": "", "permission": "Shared#view"}, "ticket"),
        ({"response_mode": "everything", "permission": "Shared#view"}, "response_mode"),
        ({"audience": ["a", "b"], "permission": "Shared#view"}, "more than once"),
        ({"permission": "Shared#view", "client_secret": "x"}, "not both"),
        ({"permission": "Shared#view", "rpt": "not-an-rpt"}, "RPT"),
    ],
)
def test_bad_keycloak_requests_are_named(realm: Realm, data: dict[str, Any], error: str) -> None:
    base = {"grant_type": UMA_TICKET, "audience": realm.rs.client_id}
    status, body = realm.token({**base, **data}, realm.bob.token)
    assert status == 400 and error in body["error_description"], body


def test_the_resource_servers_own_token_asks_for_any_owners_sets_one_owner_a_ticket(
    realm: Realm, store: Store
) -> None:
    own = realm.token(keycloak_client_credentials(realm.rs.client_id, realm.rs.client_secret))[1]
    auth = {"Authorization": f"Bearer {own['access_token']}"}
    bobs_pat = make_party(store, "bob", "uma_protection", client_id=realm.rs.client_id)
    bobs = realm.http.post(
        "/rs/resource_set",
        json={"name": "Bob's", "resource_scopes": ["view"]},
        headers=bobs_pat.auth,
    ).json["_id"]

    def ask(path: str, sets: list[str], headers: dict[str, str]) -> Any:
        body = [{"resource_id": rs_id, "resource_scopes": ["view"]} for rs_id in sets]
        return realm.http.post(path, json=body, headers=headers)

    permission = f"{REALM}/authz/protection/permission"
    reply = ask(permission, [realm.photos, realm.shared], auth)
    assert reply.status_code == 201
    ticket = stored_ticket(store, reply.json["ticket"])
    alice = stored_user(store, "alice")
    assert ticket is not None and alice is not None and ticket.owner == alice.sub
    reply = ask(permission, [realm.photos, bobs], auth)
    assert reply.status_code == 400 and "one owner" in reply.json["error_description"]
    # A person's PAT, and the standard endpoint, keep to that owner's sets.
    assert ask(permission, [realm.photos], bobs_pat.auth).json["error"] == "invalid_resource_id"
    assert ask("/permission", [realm.photos], auth).json["error"] == "invalid_resource_id"
