"""Bearer validation (RFC 6750) shared by the protected endpoints, and the token endpoint."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from umaserver.config import Config

from .conftest import (
    PARTY_TOKEN_LIFETIME,
    FakeClock,
    Party,
    Store,
    dump_database,
    make_client,
    make_party,
    revoke_token,
)

REALM = 'Bearer realm="http://uma.test"'


def assert_json_error(response: Any, status: int, error: str) -> None:
    assert response.status_code == status
    assert response.mimetype == "application/json"
    assert response.headers["Cache-Control"] == "no-store"
    assert response.json["error"] == error
    assert response.json["error_description"]


@pytest.mark.parametrize(
    ("header", "status", "error", "www_authenticate"),
    [
        (None, 401, "invalid_token", REALM),
        ("Basic dXNlcjpwYXNz", 401, "invalid_token", REALM),
        ("Bearer", 400, "invalid_request", REALM + ', error="invalid_request"'),
        ("Bearer ", 400, "invalid_request", REALM + ', error="invalid_request"'),
        ("Bearer two words", 400, "invalid_request", REALM + ', error="invalid_request"'),
        ('Bearer to"ken', 400, "invalid_request", REALM + ', error="invalid_request"'),
        ("Bearer uma_at_unknown", 401, "invalid_token", REALM + ', error="invalid_token"'),
    ],
)
def test_bearer_header_table(
    http: FlaskClient, header: str | None, status: int, error: str, www_authenticate: str
) -> None:
    headers = {"Authorization": header} if header is not None else {}
    response = http.get("/rs/resource_set", headers=headers)
    assert_json_error(response, status, error)
    assert response.headers["WWW-Authenticate"] == www_authenticate


def test_no_credentials_carries_no_error_code_in_the_challenge(http: FlaskClient) -> None:
    response = http.get("/rs/resource_set")
    assert "error" not in response.headers["WWW-Authenticate"]


@pytest.mark.parametrize("state", ["expired", "revoked"])
def test_expired_and_revoked_tokens_are_invalid(
    http: FlaskClient, store: Store, rs: Party, clock: FakeClock, state: str
) -> None:
    if state == "revoked":
        assert revoke_token(store, rs.token)
    else:
        clock.advance(PARTY_TOKEN_LIFETIME)
    response = http.get("/rs/resource_set", headers=rs.auth)
    assert_json_error(response, 401, "invalid_token")


def test_wrong_scope_is_insufficient_scope(http: FlaskClient, store: Store) -> None:
    aat = make_party(store, "carol", "uma_authorization")
    response = http.get("/rs/resource_set", headers=aat.auth)
    assert_json_error(response, 403, "insufficient_scope")
    assert response.headers["WWW-Authenticate"] == (
        REALM + ', error="insufficient_scope", scope="uma_protection"'
    )


# -- POST /token ------------------------------------------------------------------------------


@pytest.fixture
def registered(store: Store) -> tuple[str, str]:
    return make_client(store, "an app")


@pytest.mark.parametrize(
    ("scope", "granted"),
    [
        ("uma_protection", "uma_protection"),
        ("uma_authorization", "uma_authorization"),
        ("http://docs.kantarainitiative.org/uma/scopes/prot.json", "uma_protection"),
        ("http://docs.kantarainitiative.org/uma/scopes/authz.json", "uma_authorization"),
    ],
)
@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
def test_client_credentials_issues_tokens(
    http: FlaskClient, registered: tuple[str, str], scope: str, granted: str, method: str
) -> None:
    client_id, secret = registered
    data = {"grant_type": "client_credentials", "scope": scope}
    if method == "client_secret_basic":
        response = http.post("/token", data=data, auth=(client_id, secret))
    else:
        response = http.post(
            "/token", data={**data, "client_id": client_id, "client_secret": secret}
        )
    assert response.status_code == 200, response.json
    body = response.json
    assert body["token_type"] == "Bearer"
    assert body["scope"] == granted
    assert body["expires_in"] == 3600
    assert body["access_token"].startswith("uma_at_")
    assert response.headers["Cache-Control"] == "no-store"
    # The issued token works where its scope is needed.
    used = http.get("/rs/resource_set", headers={"Authorization": f"Bearer {body['access_token']}"})
    assert used.status_code == (200 if granted == "uma_protection" else 403)


@pytest.mark.parametrize(
    ("data", "auth", "status", "error"),
    [
        (
            {"grant_type": "client_credentials", "scope": "uma_protection"},
            "wrong",
            401,
            "invalid_client",
        ),
        (
            {"grant_type": "client_credentials", "scope": "uma_protection"},
            None,
            401,
            "invalid_client",
        ),
        ({"grant_type": "client_credentials"}, "right", 400, "invalid_scope"),
        ({"grant_type": "client_credentials", "scope": "admin"}, "right", 400, "invalid_scope"),
        (
            {"grant_type": "password", "scope": "uma_protection"},
            "right",
            400,
            "unsupported_grant_type",
        ),
        ({"scope": "uma_protection"}, "right", 400, "unsupported_grant_type"),
    ],
)
def test_token_endpoint_errors(
    http: FlaskClient,
    registered: tuple[str, str],
    data: dict[str, str],
    auth: str | None,
    status: int,
    error: str,
) -> None:
    client_id, secret = registered
    credentials = None if auth is None else (client_id, secret if auth == "right" else "nope")
    response = http.post("/token", data=data, auth=credentials)
    assert response.status_code == status
    assert response.json["error"] == error


def test_secrets_and_tokens_are_stored_as_digests(
    http: FlaskClient, config: Config, registered: tuple[str, str]
) -> None:
    client_id, secret = registered
    token = http.post(
        "/token",
        data={"grant_type": "client_credentials", "scope": "uma_protection"},
        auth=(client_id, secret),
    ).json["access_token"]
    dump = dump_database(config.database)
    assert secret not in dump and token not in dump
