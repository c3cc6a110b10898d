"""Bearer validation (RFC 6750) shared by the protected endpoints, and the token endpoint."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from werkzeug.datastructures import MultiDict

from umaserver import create_app
from umaserver.config import Config, load_config

from .conftest import (
    PARTY_TOKEN_LIFETIME,
    FakeClock,
    Party,
    Store,
    dump_database,
    make_client,
    make_party,
    open_store,
    revoke_token,
    write_config,
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
        clock.advance(PARTY_TOKEN_LIFETIME + 60)  # made by the real clock, a moment after
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
        # The client is authenticated before its scope is looked at (RFC 6749 5.2).
        ({"grant_type": "client_credentials", "scope": "admin"}, "wrong", 401, "invalid_client"),
        ({"grant_type": "client_credentials", "scope": "admin"}, None, 401, "invalid_client"),
        ({"grant_type": "client_credentials"}, "wrong", 401, "invalid_client"),
        ({"grant_type": "client_credentials", "scope": 'a"b'}, "wrong", 401, "invalid_client"),
        (
            {"grant_type": "client_credentials", "scope": "uma_protection openid"},
            "wrong",
            401,
            "invalid_client",
        ),
        (
            {"grant_type": "authorization_code", "code": "uma_ac_x", "scope": "admin"},
            "wrong",
            401,
            "invalid_client",
        ),
        (
            {"grant_type": "refresh_token", "refresh_token": "uma_rt_x", "scope": 'a"b'},
            "wrong",
            401,
            "invalid_client",
        ),
        # ... and then still refused when it is bad, whatever the grant.
        ({"grant_type": "client_credentials", "scope": 'a"b'}, "right", 400, "invalid_scope"),
        (
            {"grant_type": "client_credentials", "scope": "uma_protection openid"},
            "right",
            400,
            "invalid_scope",
        ),
        (
            {"grant_type": "refresh_token", "refresh_token": "uma_rt_x", "scope": "admin"},
            "right",
            400,
            "invalid_scope",
        ),
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
    assert_json_error(response, status, error)  # with an error_description, every one
    if status == 401:
        assert response.headers["WWW-Authenticate"] == 'Basic realm="http://uma.test"'


GOOD = {"grant_type": "client_credentials", "scope": "uma_protection"}


def basic(text: bytes) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(text).decode()}


@pytest.mark.parametrize(
    ("shape", "status", "error", "fragment"),
    [
        # RFC 6749 2.3: one client authentication per request, right or wrong.
        ("basic and body, same client", 400, "invalid_request", "one way only"),
        ("basic and body, wrong secret in the body", 400, "invalid_request", "one way only"),
        ("basic wrong and body right", 400, "invalid_request", "one way only"),
        ("basic and body, another client", 400, "invalid_request", "one way only"),
        ("basic and another client_id in the body", 400, "invalid_request", "one way only"),
        ("basic and its own client_id in the body", 200, "", ""),
        # RFC 6749 3.1: no parameter twice.
        ("scope twice", 400, "invalid_request", "'scope' is given more than once"),
        ("grant_type twice", 400, "invalid_request", "'grant_type' is given more than once"),
        ("grant_type in the query and the body", 400, "invalid_request", "'grant_type'"),
        ("client_secret twice", 400, "invalid_request", "'client_secret' is given more"),
        # A malformed Basic header is 400; a well-formed wrong one 401.
        ("basic not base64", 400, "invalid_request", "Basic <base64"),
        ("basic not UTF-8", 400, "invalid_request", "UTF-8"),
        ("basic without a colon", 400, "invalid_request", "Basic <base64"),
        ("basic with a bad percent-encoding", 400, "invalid_request", "Basic <base64"),
        ("basic empty", 400, "invalid_request", "Basic <base64"),
        ("basic of an unknown client", 401, "invalid_client", "credentials are wrong"),
        ("basic with an empty secret", 401, "invalid_client", "credentials are wrong"),
        ("another scheme", 401, "invalid_client", "HTTP Basic or in the body"),
        # Scopes of RFC 6749 3.3 syntax only.
        ('scope with "', 400, "invalid_scope", "scope:"),
        ("scope with \\", 400, "invalid_scope", "scope:"),
        ("scope with non-ASCII", 400, "invalid_scope", "scope:"),
        ("scope with NUL", 400, "invalid_scope", "scope:"),
        ("scope with a tab", 400, "invalid_scope", "scope:"),
        ("scope unknown and long", 400, "invalid_scope", "scope: 'aaaa"),
        ("grant_type not UTF-8 safe", 400, "unsupported_grant_type", "grant_type:"),
        ("scopes separated by two spaces", 200, "", ""),
    ],
)
def test_token_request_shapes(
    http: FlaskClient,
    store: Store,
    registered: tuple[str, str],
    shape: str,
    status: int,
    error: str,
    fragment: str,
) -> None:
    client_id, secret = registered
    other_id, other_secret = make_client(store, "another app")
    own = basic(f"{client_id}:{secret}".encode())
    body: Any = dict(GOOD)
    headers: dict[str, str] = {}
    path = "/token"
    if shape == "basic and body, same client":
        headers, body = own, {**GOOD, "client_id": client_id, "client_secret": secret}
    elif shape == "basic and body, wrong secret in the body":
        headers, body = own, {**GOOD, "client_id": client_id, "client_secret": "nope"}
    elif shape == "basic wrong and body right":
        headers = basic(f"{client_id}:nope".encode())
        body = {**GOOD, "client_id": client_id, "client_secret": secret}
    elif shape == "basic and body, another client":
        headers, body = own, {**GOOD, "client_id": other_id, "client_secret": other_secret}
    elif shape == "basic and another client_id in the body":
        headers, body = own, {**GOOD, "client_id": other_id}
    elif shape == "basic and its own client_id in the body":
        headers, body = own, {**GOOD, "client_id": client_id}
    elif shape == "scope twice":
        headers, body = own, MultiDict([*GOOD.items(), ("scope", "uma_authorization")])
    elif shape == "grant_type twice":
        headers, body = own, MultiDict([*GOOD.items(), ("grant_type", "client_credentials")])
    elif shape == "grant_type in the query and the body":
        headers, path = own, "/token?grant_type=client_credentials"
    elif shape == "client_secret twice":
        credentials = [("client_id", client_id), ("client_secret", secret)]
        body = MultiDict([*GOOD.items(), *credentials, ("client_secret", "nope")])
    elif shape == "basic not base64":
        headers = {"Authorization": "Basic not*base64!"}
    elif shape == "basic not UTF-8":
        headers = basic(b"\xff\xfe:\xc3\x28")
    elif shape == "basic without a colon":
        headers = basic(client_id.encode())
    elif shape == "basic with a bad percent-encoding":
        headers = basic(f"{client_id}:%ff%fe".encode())
    elif shape == "basic empty":
        headers = {"Authorization": "Basic "}
    elif shape == "basic of an unknown client":
        headers = basic(b"nobody:secret")
    elif shape == "basic with an empty secret":
        headers = basic(f"{client_id}:".encode())
    elif shape == "another scheme":
        headers = {"Authorization": "Bearer abc"}
    elif shape.startswith("scope with"):
        headers = own
        odd = {'"': '"', "\\": "\\", "non-ASCII": "é", "NUL": "\x00", "a tab": "\t"}
        body = {**GOOD, "scope": "uma_protection uma" + odd[shape.removeprefix("scope with ")]}
    elif shape == "scope unknown and long":
        headers, body = own, {**GOOD, "scope": "a" * 100_000}
    elif shape == "grant_type not UTF-8 safe":
        headers, body = own, {**GOOD, "grant_type": 'x\x00"é' * 1000}
    elif shape == "scopes separated by two spaces":
        headers, body = own, {**GOOD, "scope": " uma_protection  uma_authorization "}
    response = http.post(path, data=body, headers=headers)
    if status == 200:
        assert response.status_code == 200, response.json
        return
    assert_json_error(response, status, error)
    description = response.json["error_description"]
    assert fragment in description
    assert len(description) < 200
    if status == 401:
        assert response.headers["WWW-Authenticate"] == 'Basic realm="http://uma.test"'


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


@pytest.mark.parametrize(
    ("issuer", "base_url", "status"),
    [
        # Behind a proxy that terminates TLS: the app sees plain http on a public name.
        ("https://uma.example", "http://uma.example", 200),
        ("https://uma.example", "http://10.0.0.7:8080", 200),
        # An http issuer on a public name: OAuth over plain http is refused, in words.
        ("http://uma.test", "http://uma.test", 400),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080", 200),
    ],
)
def test_the_token_endpoint_judges_transport_by_the_public_url(
    tmp_path: Path, issuer: str, base_url: str, status: int
) -> None:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    app = create_app(load_config(write_config(tmp_path, issuer=issuer)))
    store = open_store(load_config(tmp_path / "config.toml").database)
    try:
        client_id, secret = make_client(store, "behind a proxy")
    finally:
        store.close()
    response = app.test_client().post(
        "/token",
        data={"grant_type": "client_credentials", "scope": "uma_protection"},
        auth=(client_id, secret),
        base_url=base_url,
    )
    assert response.status_code == status, response.json
    if status == 400:
        assert response.json["error"] == "invalid_request"
        assert "https" in response.json["error_description"]
