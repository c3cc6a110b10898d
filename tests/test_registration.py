"""Dynamic client registration (RFC 7591) at /register and the client configuration endpoint
(RFC 7592) at /register/<client_id>, through HTTP: good registrations, the bad inputs' table,
initial access tokens and the claim types they allow, read/update/delete, and the token endpoint
honouring what was registered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from .conftest import (
    FakeClock,
    Store,
    dump_database,
    make_initial_access_token,
    stored_client,
    write_config,
)

CC = {"grant_types": ["client_credentials"]}
CODE = {"redirect_uris": ["https://app.test/cb"]}


@pytest.fixture
def initial(store: Store) -> dict[str, str]:
    """The Authorization header with an initial access token that allows no push types."""
    return {"Authorization": f"Bearer {make_initial_access_token(store)}"}


def register(http: FlaskClient, body: Any, headers: dict[str, str]) -> Any:
    return http.post("/register", json=body, headers=headers)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def token_status(http: FlaskClient, client_id: str, secret: str | None, scope: str) -> Any:
    data = {"grant_type": "client_credentials", "scope": scope}
    if secret is None:
        return http.post("/token", data={**data, "client_id": client_id})
    return http.post("/token", data=data, auth=(client_id, secret))


# -- good registrations ----------------------------------------------------------------------------


def test_a_confidential_client_registers_and_uses_client_credentials(
    http: FlaskClient, store: Store, initial: dict[str, str], config_path: Path
) -> None:
    reply = register(
        http,
        {
            "client_name": "Photo printer ✓",
            **CC,
            "scope": "uma_protection",
            "client_uri": "https://printer.test/",
            "logo_uri": "https://printer.test/logo.png",
            "software_id": "ignored",
        },
        initial,
    )
    assert reply.status_code == 201
    assert reply.headers["Cache-Control"] == "no-store"
    body = reply.get_json()
    client_id = body["client_id"]
    assert body == {
        "client_id": client_id,
        "client_name": "Photo printer ✓",
        "redirect_uris": [],
        "grant_types": ["client_credentials"],
        "response_types": [],
        "token_endpoint_auth_method": "client_secret_basic",
        "scope": "uma_protection",
        "logo_uri": "https://printer.test/logo.png",
        "client_uri": "https://printer.test/",
        "uma_push_claim_types": [],
        "client_id_issued_at": body["client_id_issued_at"],
        "registration_access_token": body["registration_access_token"],
        "client_secret": body["client_secret"],
        "client_secret_expires_at": 0,
        "registration_client_uri": f"http://uma.test/register/{client_id}",
    }
    stored = stored_client(store, client_id)
    assert stored is not None and "software_id" not in stored.metadata
    dump = dump_database(config_path.parent / "uma.db")
    assert body["client_secret"] not in dump and body["registration_access_token"] not in dump
    assert token_status(http, client_id, body["client_secret"], "uma_protection").status_code == 200
    refused = token_status(http, client_id, body["client_secret"], "uma_authorization")
    assert refused.status_code == 400 and refused.get_json()["error"] == "invalid_scope"


def test_a_public_client_gets_no_secret_and_cannot_use_client_credentials(
    http: FlaskClient, initial: dict[str, str]
) -> None:
    reply = register(http, {**CODE, "token_endpoint_auth_method": "none"}, initial)
    assert reply.status_code == 201
    body = reply.get_json()
    assert "client_secret" not in body and "client_secret_expires_at" not in body
    assert body["grant_types"] == ["authorization_code"] and body["response_types"] == ["code"]
    for secret in (None, "guess"):
        refused = token_status(http, body["client_id"], secret, "uma_protection")
        assert refused.status_code == 401 and refused.get_json()["error"] == "invalid_client"


def test_a_confidential_code_client_may_not_use_client_credentials(
    http: FlaskClient, initial: dict[str, str]
) -> None:
    body = register(http, CODE, initial).get_json()
    refused = token_status(http, body["client_id"], body["client_secret"], "uma_protection")
    assert refused.status_code == 400 and refused.get_json()["error"] == "unauthorized_client"


@pytest.mark.parametrize(
    ("allowed", "asked"),
    [
        (("custom",), ["custom"]),
        (("claim-client-assertion-saml-1.0", "custom"), ["claim-client-assertion-saml-1.0"]),
        (("claim-client-claims-oidc-1.0",), ["claim-client-claims-oidc-1.0"] * 2),
        (("custom",), []),
    ],
)
def test_push_types_within_the_initial_access_token(
    http: FlaskClient, store: Store, allowed: tuple[str, ...], asked: list[str]
) -> None:
    token = make_initial_access_token(store, allowed)
    reply = register(http, {**CC, "uma_push_claim_types": asked}, bearer(token))
    assert reply.status_code == 201
    assert reply.get_json()["uma_push_claim_types"] == list(dict.fromkeys(asked))
    stored = stored_client(store, reply.get_json()["client_id"])
    assert stored is not None and stored.push_claim_types == tuple(dict.fromkeys(asked))


def test_legacy_scope_uris_are_stored_as_the_names(
    http: FlaskClient, initial: dict[str, str]
) -> None:
    scope = "http://docs.kantarainitiative.org/uma/scopes/authz.json uma_protection"
    reply = register(http, {**CC, "scope": scope}, initial)
    assert reply.get_json()["scope"] == "uma_protection uma_authorization"


def test_open_registration_needs_no_token_and_gives_no_push_types(tmp_path: Path) -> None:
    from umaserver import create_app
    from umaserver.config import load_config

    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    config = load_config(write_config(tmp_path, extra="[registration]\nopen = true\n"))
    http = create_app(config, clock=FakeClock()).test_client()
    assert register(http, CC, {}).status_code == 201
    refused = register(http, {**CC, "uma_push_claim_types": ["custom"]}, {})
    assert refused.status_code == 400
    assert refused.get_json()["error"] == "invalid_client_metadata"


# -- bad inputs ------------------------------------------------------------------------------------

LONG = "https://app.test/" + "a" * 2000


@pytest.mark.parametrize(
    ("body", "error", "words"),
    [
        ({**CC, "client_name": 3}, "invalid_client_metadata", "client_name: Not a valid string."),
        ({**CC, "client_name": "x" * 201}, "invalid_client_metadata", "client_name:"),
        ({**CC, "client_name": "a\nb"}, "invalid_client_metadata", "control characters"),
        ({"grant_types": "client_credentials"}, "invalid_client_metadata", "grant_types:"),
        ({"grant_types": ["implicit"]}, "invalid_client_metadata", "grant_types[0]:"),
        ({**CODE, "response_types": ["token"]}, "invalid_client_metadata", "response_types"),
        ({**CC, "token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata", ""),
        ({**CC, "scope": "openid"}, "invalid_client_metadata", "scope:"),
        ({**CC, "scope": ["uma_protection"]}, "invalid_client_metadata", "scope:"),
        ({**CC, "logo_uri": "javascript:alert(1)"}, "invalid_client_metadata", "logo_uri:"),
        ({**CC, "client_uri": None}, "invalid_client_metadata", "client_uri:"),
        ({**CC, "uma_push_claim_types": "custom"}, "invalid_client_metadata", "uma_push_"),
        ({"redirect_uris": "https://app.test/cb"}, "invalid_redirect_uri", "redirect_uris:"),
        ({"redirect_uris": ["http://app.test/cb"]}, "invalid_redirect_uri", "must be https"),
        ({"redirect_uris": ["https://app.test/cb#f"]}, "invalid_redirect_uri", "fragment"),
        ({"redirect_uris": ["https://*.app.test/cb"]}, "invalid_redirect_uri", "wildcard"),
        ({"redirect_uris": ["/cb"]}, "invalid_redirect_uri", "absolute"),
        ({"redirect_uris": ["app.test/cb"]}, "invalid_redirect_uri", "absolute"),
        ({"redirect_uris": ["custom:/cb"]}, "invalid_redirect_uri", "absolute"),
        ({"redirect_uris": ["https://u:p@app.test/cb"]}, "invalid_redirect_uri", "user info"),
        ({"redirect_uris": [LONG]}, "invalid_redirect_uri", "2000"),
        ({"redirect_uris": ["https://app.test/é"]}, "invalid_redirect_uri", "ASCII"),
        ({"redirect_uris": ["https://[::1/cb"]}, "invalid_redirect_uri", "not a valid URI"),
        ({"redirect_uris": ["https://a.test/"] * 33}, "invalid_redirect_uri", "redirect_uris:"),
        ({}, "invalid_redirect_uri", "needs at least one redirect URI"),
        (
            {**CODE, **{"grant_types": ["authorization_code"], "response_types": []}},
            "invalid_client_metadata",
            "disagree",
        ),
        ({**CC, "response_types": ["code"]}, "invalid_client_metadata", "disagree"),
        ({**CC, "grant_types": []}, "invalid_client_metadata", "at least one grant type"),
        ({**CC, "grant_types": ["refresh_token"]}, "invalid_client_metadata", "refresh_token"),
        (
            {**CC, "token_endpoint_auth_method": "none"},
            "invalid_client_metadata",
            "public client",
        ),
        ({**CC, "uma_push_claim_types": ["custom"]}, "invalid_client_metadata", "not allowed"),
        (
            {**CC, "uma_push_claim_types": ["claim-client-assertion-saml-1.0"]},
            "invalid_client_metadata",
            "not allowed",
        ),
        ({**CC, "uma_push_claim_types": ["x" * 257]}, "invalid_client_metadata", "uma_push"),
    ],
)
def test_bad_metadata_is_refused_and_nothing_stored(
    http: FlaskClient,
    initial: dict[str, str],
    store: Store,
    body: dict[str, Any],
    error: str,
    words: str,
) -> None:
    reply = register(http, body, initial)
    assert reply.status_code == 400, reply.get_json()
    assert reply.get_json()["error"] == error
    assert words in reply.get_json()["error_description"]
    assert store.list_clients() == []


@pytest.mark.parametrize(
    ("data", "content_type", "words"),
    [
        (
            '{"grant_types": ["client_credentials"], "grant_types": []}',
            "application/json",
            "more than once",
        ),
        ('["client_credentials"]', "application/json", "JSON object"),
        ("grant_types=client_credentials", "application/x-www-form-urlencoded", "JSON object"),
        ("{", "application/json", "not valid JSON"),
    ],
)
def test_a_body_that_is_not_one_json_object_is_refused(
    http: FlaskClient, initial: dict[str, str], data: str, content_type: str, words: str
) -> None:
    reply = http.post("/register", data=data, content_type=content_type, headers=initial)
    assert reply.status_code == 400
    assert reply.get_json()["error"] == "invalid_client_metadata"
    assert words in reply.get_json()["error_description"]


def test_an_oversized_body_is_413(http: FlaskClient, initial: dict[str, str]) -> None:
    reply = register(http, {**CC, "client_name": "x" * 2_000_000}, initial)
    assert reply.status_code == 413 and reply.get_json()["error"] == "invalid_request"


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Basic abc"}, 401),
        ({"Authorization": "Bearer uma_iat_unknown"}, 401),
        ({"Authorization": "Bearer not a token"}, 400),
    ],
)
def test_registration_needs_a_live_initial_access_token(
    http: FlaskClient, store: Store, headers: dict[str, str], status: int
) -> None:
    reply = register(http, CC, headers)
    assert reply.status_code == status
    assert reply.headers["WWW-Authenticate"].startswith('Bearer realm="http://uma.test"')
    assert reply.get_json()["error"] == ("invalid_token" if status == 401 else "invalid_request")
    assert store.list_clients() == []


def test_an_expired_initial_access_token_is_refused(
    http: FlaskClient, store: Store, clock: FakeClock
) -> None:
    # Minted at the app clock's moment: the real clock may have passed a second since it started.
    token = make_initial_access_token(store, lifetime=60, now=clock.now())
    clock.advance(59)
    assert register(http, CC, bearer(token)).status_code == 201
    clock.advance(1)
    reply = register(http, CC, bearer(token))
    assert reply.status_code == 401 and reply.get_json()["error"] == "invalid_token"


# -- RFC 7592: read, update, delete ----------------------------------------------------------------


@pytest.fixture
def registered(http: FlaskClient, store: Store) -> dict[str, Any]:
    token = make_initial_access_token(store, ("custom", "other"))
    body = {**CC, "client_name": "rs", "uma_push_claim_types": ["custom", "other"]}
    reply = register(http, body, bearer(token))
    assert reply.status_code == 201
    answer: dict[str, Any] = reply.get_json()
    return answer


def test_read_with_the_registration_token(http: FlaskClient, registered: dict[str, Any]) -> None:
    path = f"/register/{registered['client_id']}"
    reply = http.get(path, headers=bearer(registered["registration_access_token"]))
    assert reply.status_code == 200
    assert reply.headers["Cache-Control"] == "no-store"
    body = reply.get_json()
    renewed = body.pop("registration_access_token")
    assert renewed.startswith("uma_rat_") and renewed != registered["registration_access_token"]
    expected = {
        k: v
        for k, v in registered.items()
        if k not in ("client_secret", "registration_access_token")
    }
    assert body == expected


@pytest.mark.parametrize("renewed_by", ["GET", "PUT"])
def test_reading_or_updating_renews_the_registration_token_and_the_old_one_stops_working(
    http: FlaskClient,
    store: Store,
    config_path: Path,
    registered: dict[str, Any],
    renewed_by: str,
) -> None:
    # RFC 7592 3: the server may issue a new registration access token on a read or an update;
    # the client must then discard the old one. Here it always does: only digests are kept.
    path = f"/register/{registered['client_id']}"
    old = registered["registration_access_token"]
    update = {"client_id": registered["client_id"], **CC, "client_name": "renamed"}
    reply = http.open(path, method=renewed_by, json=update, headers=bearer(old))
    assert reply.status_code == 200, reply.get_json()
    new = reply.get_json()["registration_access_token"]
    assert new.startswith("uma_rat_") and new != old
    for method in ("GET", "PUT", "DELETE"):
        refused = http.open(path, method=method, json=update, headers=bearer(old))
        assert refused.status_code == 401 and refused.get_json()["error"] == "invalid_token"
    assert stored_client(store, registered["client_id"]) is not None
    assert new not in dump_database(config_path.parent / "uma.db")  # stored as a digest
    # The new one works, once: each read answers the next.
    newer = http.get(path, headers=bearer(new)).get_json()["registration_access_token"]
    assert http.get(path, headers=bearer(new)).status_code == 401
    assert http.delete(path, headers=bearer(newer)).status_code == 204


def test_of_two_requests_with_one_registration_token_one_renews_it(
    http: FlaskClient, store: Store, registered: dict[str, Any]
) -> None:
    from umaserver.services import clients

    old = registered["registration_access_token"]
    # Both found the client by the token before either renewed it.
    first = clients.find_by_registration_token(store, registered["client_id"], old)
    second = clients.find_by_registration_token(store, registered["client_id"], old)
    assert first is not None and second is not None
    new = clients.renew_registration_token(store, first)
    assert new is not None
    assert clients.renew_registration_token(store, second) is None
    assert clients.update_registration(store, second, clients.settings_of(second)) is None
    path = f"/register/{registered['client_id']}"
    assert http.get(path, headers=bearer(new)).status_code == 200


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
@pytest.mark.parametrize("which", ["missing", "wrong", "another's", "unknown client"])
def test_a_wrong_registration_token_is_401_and_changes_nothing(
    http: FlaskClient,
    store: Store,
    registered: dict[str, Any],
    initial: dict[str, str],
    method: str,
    which: str,
) -> None:
    other = register(http, CC, initial).get_json()
    client_id = registered["client_id"]
    headers = {
        "missing": {},
        "wrong": bearer("uma_rat_wrong"),
        "another's": bearer(other["registration_access_token"]),
        "unknown client": bearer(registered["registration_access_token"]),
    }[which]
    if which == "unknown client":
        client_id = "nobody"
    body = {"client_id": client_id, **CC}
    reply = http.open(f"/register/{client_id}", method=method, json=body, headers=headers)
    assert reply.status_code == 401
    assert reply.get_json()["error"] == "invalid_token"
    assert reply.headers["WWW-Authenticate"].startswith("Bearer ")
    assert stored_client(store, registered["client_id"]) is not None


def test_a_client_made_by_the_cli_has_no_configuration_endpoint(
    http: FlaskClient, store: Store
) -> None:
    from .conftest import make_client

    client_id, secret = make_client(store, "cli-made")
    assert http.get(f"/register/{client_id}", headers=bearer(secret)).status_code == 401


def test_update_replaces_the_metadata(http: FlaskClient, registered: dict[str, Any]) -> None:
    path = f"/register/{registered['client_id']}"
    auth = bearer(registered["registration_access_token"])
    update = {
        "client_id": registered["client_id"],
        "client_secret": registered["client_secret"],
        "client_name": "renamed",
        "redirect_uris": ["http://localhost:8080/cb"],
        "grant_types": ["authorization_code", "refresh_token", "client_credentials"],
        "uma_push_claim_types": ["other"],
        "scope": "uma_authorization",
    }
    reply = http.put(path, json=update, headers=auth)
    assert reply.status_code == 200, reply.get_json()
    body = reply.get_json()
    assert body["client_name"] == "renamed"
    assert body["redirect_uris"] == ["http://localhost:8080/cb"]
    assert body["response_types"] == ["code"]
    assert body["uma_push_claim_types"] == ["other"]
    auth = bearer(body.pop("registration_access_token"))
    read = http.get(path, headers=auth).get_json()
    auth = bearer(read.pop("registration_access_token"))
    assert read == body
    # Dropped push types do not come back.
    again = http.put(path, json={**update, "uma_push_claim_types": ["custom"]}, headers=auth)
    assert again.status_code == 400 and "not allowed" in again.get_json()["error_description"]
    # A refused update keeps the token presented.
    assert http.get(path, headers=auth).status_code == 200
    # The secret still works, for the scope now registered.
    status = token_status(
        http, registered["client_id"], registered["client_secret"], "uma_authorization"
    )
    assert status.status_code == 200


@pytest.mark.parametrize(
    ("change", "error", "words"),
    [
        ({"client_id": None}, "invalid_client_metadata", "client_id"),
        ({"client_id": "other"}, "invalid_client_metadata", "client_id"),
        ({"client_secret": "wrong"}, "invalid_client_metadata", "client_secret"),
        ({"token_endpoint_auth_method": "none"}, "invalid_client_metadata", "public"),
        ({"uma_push_claim_types": ["new"]}, "invalid_client_metadata", "not allowed"),
        ({"redirect_uris": ["http://app.test/cb"]}, "invalid_redirect_uri", "https"),
        ({"grant_types": ["authorization_code"]}, "invalid_redirect_uri", "redirect URI"),
    ],
)
def test_bad_updates_are_refused(
    http: FlaskClient,
    registered: dict[str, Any],
    change: dict[str, Any],
    error: str,
    words: str,
) -> None:
    path = f"/register/{registered['client_id']}"
    auth = bearer(registered["registration_access_token"])
    body = {k: v for k, v in {"client_id": registered["client_id"], **CC, **change}.items() if v}
    reply = http.put(path, json=body, headers=auth)
    assert reply.status_code == 400
    assert reply.get_json()["error"] == error
    assert words in reply.get_json()["error_description"]
    assert http.get(path, headers=auth).get_json()["uma_push_claim_types"] == ["custom", "other"]


def test_delete_removes_the_client_and_its_tokens(
    http: FlaskClient, store: Store, registered: dict[str, Any]
) -> None:
    client_id, secret = registered["client_id"], registered["client_secret"]
    access = token_status(http, client_id, secret, "uma_protection").get_json()["access_token"]
    path = f"/register/{client_id}"
    auth = bearer(registered["registration_access_token"])
    reply = http.delete(path, headers=auth)
    assert reply.status_code == 204 and reply.get_data() == b""
    assert stored_client(store, client_id) is None
    assert http.get(path, headers=auth).status_code == 401
    assert token_status(http, client_id, secret, "uma_protection").status_code == 401
    assert http.get("/rs/resource_set", headers=bearer(access)).status_code == 401


def test_other_methods_are_405(http: FlaskClient, registered: dict[str, Any]) -> None:
    reply = http.patch(f"/register/{registered['client_id']}")
    assert reply.status_code == 405
    assert set(reply.headers["Allow"].split(", ")) >= {"GET", "PUT", "DELETE"}
    assert http.get("/register").status_code == 405


# -- UMA 2.0: the uma-ticket grant and claims redirect URIs --------------------------------------

UMA_TICKET = "urn:ietf:params:oauth:grant-type:uma-ticket"


def test_a_client_lists_the_uma_ticket_grant_and_its_claims_redirect_uris(
    http: FlaskClient, initial: dict[str, str], store: Store
) -> None:
    body = {
        "grant_types": [UMA_TICKET],
        "response_types": [],
        "claims_redirect_uris": ["https://viewer.test/claims", "http://127.0.0.1:9000/claims"],
    }
    reply = register(http, body, initial)
    assert reply.status_code == 201, reply.get_json()
    answer = reply.get_json()
    assert answer["grant_types"] == [UMA_TICKET]
    assert answer["claims_redirect_uris"] == body["claims_redirect_uris"]
    read = http.get(
        f"/register/{answer['client_id']}", headers=bearer(answer["registration_access_token"])
    ).get_json()
    assert read["claims_redirect_uris"] == body["claims_redirect_uris"]


def test_rfc_7591s_default_grant_stays_authorization_code_alone(
    http: FlaskClient, initial: dict[str, str]
) -> None:
    answer = register(http, CODE, initial).get_json()
    assert answer["grant_types"] == ["authorization_code"]


@pytest.mark.parametrize(
    ("body", "error", "fragment"),
    [
        (
            {
                "grant_types": [UMA_TICKET],
                "response_types": [],
                "token_endpoint_auth_method": "none",
            },
            "invalid_client_metadata",
            "public client",
        ),
        (
            {
                "grant_types": [UMA_TICKET],
                "response_types": [],
                "claims_redirect_uris": ["http://viewer.test/c"],
            },
            "invalid_redirect_uri",
            "claims_redirect_uris",
        ),
        (
            {
                "grant_types": [UMA_TICKET],
                "response_types": [],
                "claims_redirect_uris": ["https://x.test/#f"],
            },
            "invalid_redirect_uri",
            "claims_redirect_uris",
        ),
        (
            {
                "grant_types": [UMA_TICKET],
                "response_types": [],
                "claims_redirect_uris": "https://x.test/",
            },
            "invalid_redirect_uri",
            "claims_redirect_uris",
        ),
    ],
)
def test_uma_ticket_metadata_errors(
    http: FlaskClient, initial: dict[str, str], body: dict[str, Any], error: str, fragment: str
) -> None:
    reply = register(http, body, initial)
    assert reply.status_code == 400 and reply.get_json()["error"] == error, reply.get_json()
    assert fragment in reply.get_json()["error_description"]
