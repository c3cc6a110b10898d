"""The configuration document and the one error shape."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest
from flask import Flask
from flask.testing import FlaskClient

from .conftest import Party, Store, make_client, make_party
from .flows import FlaskApi

# The spec's members (the document advertises only what answers).
SPEC_PROPERTIES = {
    "version",
    "issuer",
    "pat_profiles_supported",
    "aat_profiles_supported",
    "rpt_profiles_supported",
    "pat_grant_types_supported",
    "aat_grant_types_supported",
    "claim_profiles_supported",
    "token_endpoint",
    "user_endpoint",
    "dynamic_client_endpoint",
    "resource_set_registration_endpoint",
    "introspection_endpoint",
    "permission_registration_endpoint",
    "rpt_endpoint",
    "authorization_request_endpoint",
}


def test_configuration_document(http: FlaskClient) -> None:
    response = http.get("/.well-known/uma-configuration")
    assert response.status_code == 200
    document = response.json
    assert set(document) >= SPEC_PROPERTIES
    assert document["version"] == "1.0"
    assert document["issuer"] == "http://uma.test"
    for name, value in document.items():
        if name.endswith("_endpoint"):
            assert urlsplit(value).scheme == "http" and value.startswith("http://uma.test/"), name
    assert document["resource_set_registration_endpoint"] == "http://uma.test/rs"
    # What really works at /token (a code comes from /authorize; tests mint theirs directly).
    grant_types = ["client_credentials", "authorization_code", "refresh_token"]
    assert document["pat_grant_types_supported"] == grant_types
    assert document["aat_grant_types_supported"] == grant_types
    assert document["pat_profiles_supported"] == ["bearer"]
    # The RPT's profile also by the URI UMA 1.0 clients look for.
    assert document["rpt_profiles_supported"] == [
        "bearer",
        "https://docs.kantarainitiative.org/uma/profiles/uma-token-bearer-1.0",
    ]


# Where an endpoint's operations are below its advertised URL (the spec's "{rsreguri}/resource_set").
BELOW = {"resource_set_registration_endpoint": "/resource_set"}


def test_every_advertised_endpoint_answers(http: FlaskClient) -> None:
    document = http.get("/.well-known/uma-configuration").json
    advertised = {name: url for name, url in document.items() if name.endswith("_endpoint")}
    assert set(advertised) >= {name for name in SPEC_PROPERTIES if name.endswith("_endpoint")}
    api = FlaskApi(http)
    for name, url in advertised.items():
        assert isinstance(url, str) and url.startswith(document["issuer"] + "/"), name
        path = urlsplit(url).path + BELOW.get(name, "")
        # Without credentials: refused (400 or 401) by at least one method, and 404 by none.
        answers = {method: api.request(method, path).status for method in ("GET", "POST")}
        assert 404 not in answers.values(), f"{name} ({path}) is advertised but answers {answers}"
        assert {400, 401} & set(answers.values()), f"{name} ({path}) answers {answers}"


def test_oauth_authorization_server_metadata(http: FlaskClient) -> None:
    """RFC 8414, for OAuth clients: what answers, and nothing that does not yet."""
    response = http.get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "public, max-age=3600"
    assert response.json == {
        "issuer": "http://uma.test",
        "authorization_endpoint": "http://uma.test/authorize",
        "token_endpoint": "http://uma.test/token",
        "registration_endpoint": "http://uma.test/register",
        "revocation_endpoint": "http://uma.test/revoke",
        "grant_types_supported": [
            "client_credentials",
            "authorization_code",
            "refresh_token",
            "urn:ietf:params:oauth:grant-type:uma-ticket",
        ],
        "response_types_supported": ["code"],
        "token_endpoint_auth_methods_supported": [
            "client_secret_basic",
            "client_secret_post",
            "none",
        ],
        "revocation_endpoint_auth_methods_supported": [
            "client_secret_basic",
            "client_secret_post",
            "none",
        ],
        "scopes_supported": ["uma_protection", "uma_authorization"],
        "code_challenge_methods_supported": ["S256"],
    }
    # The issuer and token endpoint agree with the UMA configuration document.
    uma = http.get("/.well-known/uma-configuration").json
    assert response.json["issuer"] == uma["issuer"]
    assert response.json["token_endpoint"] == uma["token_endpoint"]


def test_every_endpoint_in_the_metadata_answers(http: FlaskClient) -> None:
    document = http.get("/.well-known/oauth-authorization-server").json
    for name, url in document.items():
        if not name.endswith("_endpoint"):
            continue
        answers = {
            method: http.open(urlsplit(url).path, method=method).status_code
            for method in ("GET", "POST")
        }
        assert 404 not in answers.values(), f"{name} answers {answers}"
        assert {400, 401} & set(answers.values()), f"{name} answers {answers}"


def test_the_registration_endpoint_advertised_is_the_one_that_works(http: FlaskClient) -> None:
    base = http.get("/.well-known/uma-configuration").json["resource_set_registration_endpoint"]
    assert http.get(urlsplit(base).path + "/resource_set").status_code == 401


@pytest.mark.parametrize(
    "accept",
    [
        None,
        "*/*",
        "application/json",
        "application/json, text/html",  # a tie: JSON
        "text/html;q=0.5, application/json",
        "application/json;q=0.9, text/html;q=0.9",
    ],
)
def test_unknown_path_is_json_404(http: FlaskClient, accept: str | None) -> None:
    response = http.get("/nothing/here", headers={"Accept": accept} if accept else {})
    assert response.status_code == 404
    assert response.json["error"] == "not_found"
    assert response.headers["Cache-Control"] == "no-store"


@pytest.mark.parametrize(
    "accept",
    [
        # Chromium's and Firefox's Accept for a page.
        "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8",
        "text/html",
        "application/json;q=0.5, text/html",
    ],
)
def test_a_browser_gets_the_404_page_for_an_unknown_path(http: FlaskClient, accept: str) -> None:
    response = http.get("/nothing/here", headers={"Accept": accept})
    assert response.status_code == 404 and response.mimetype == "text/html"
    assert "There is no such page on this server." in response.text
    assert "default-src 'none'" in response.headers["Content-Security-Policy"]
    assert response.headers["X-Frame-Options"] == "DENY"
    # An API path keeps its JSON errors whatever the Accept: a wrong method, a missing token.
    api = http.get("/permission", headers={"Accept": accept})
    assert api.status_code == 405 and api.json["error"] == "unsupported_method_type"
    assert http.get("/rs/resource_set", headers={"Accept": accept}).json["error"]


def test_unexpected_exception_is_server_error_without_traceback(app: Flask) -> None:
    @app.get("/boom")
    def boom() -> str:
        raise RuntimeError("secret internals")

    app.config["TESTING"] = False
    app.config["PROPAGATE_EXCEPTIONS"] = False
    response = app.test_client().get("/boom")
    assert response.status_code == 500
    assert response.json == {
        "error": "server_error",
        "error_description": "The server met an unexpected condition.",
    }
    assert "secret internals" not in response.get_data(as_text=True)


def test_the_saml_profile_is_listed_only_with_an_identity_provider(http: FlaskClient) -> None:
    # No [[saml_idps]] here: an assertion could not be verified, so the profile is not offered.
    # The redirect profile always is: local users sign in here.
    profiles = http.get("/.well-known/uma-configuration").json["claim_profiles_supported"]
    assert profiles == ["claim-client-claims-oidc-1.0", "claim-client-redirect-1.0"]


# -- what every answer carries, and how much of the input an error quotes ------------------------

BIG = "x" * 500_000
CONTROLS = "a\nb\x1b[31mc\x00d"


def _party_and_set(http: FlaskClient, store: Store) -> tuple[Party, Party, str]:
    rs = make_party(store, "alice", "uma_protection")
    app = make_party(store, "bob", "uma_authorization")
    created = http.post(
        "/rs/resource_set", json={"name": "Photos", "scopes": ["view"]}, headers=rs.auth
    )
    assert created.status_code == 201, created.json
    return rs, app, created.json["_id"]


@pytest.mark.parametrize(
    ("shape", "echoed"),
    [
        ("a member repeated", BIG[:100_000]),
        ("a member repeated, with control characters", CONTROLS),
        ("a number too large", "1" * 100_000 + "e999"),
        ("a scope not on the set", "s" * 2000),
        ("a scope not on the set, with control characters", CONTROLS),
        ("a claim type the client may not push", "t" * 2000),
        ("a claim type with control characters", CONTROLS),
    ],
)
def test_an_error_quotes_at_most_64_characters_of_input_escaped(
    http: FlaskClient, store: Store, shape: str, echoed: str
) -> None:
    rs, app, rs_id = _party_and_set(http, store)
    if shape.startswith("a member repeated"):
        name = json.dumps(echoed)
        response = http.post(
            "/rs/resource_set",
            data=f'{{"name": "a", "scopes": ["v"], {name}: 1, {name}: 2}}',
            content_type="application/json",
            headers=rs.auth,
        )
    elif shape == "a number too large":
        response = http.post(
            "/rs/resource_set",
            data=f'{{"name": "a", "scopes": ["v"], "x": {echoed}}}',
            content_type="application/json",
            headers=rs.auth,
        )
    elif shape.startswith("a scope"):
        response = http.post(
            "/permission", json={"resource_set_id": rs_id, "scopes": [echoed]}, headers=rs.auth
        )
    else:
        ticket = http.post(
            "/permission", json={"resource_set_id": rs_id, "scopes": ["view"]}, headers=rs.auth
        ).json["ticket"]
        response = http.post(
            "/rpt_authorization",
            json={"rpt": "r", "ticket": ticket, "claims": [{"type": echoed, "value": {}}]},
            headers=app.auth,
        )
    assert response.status_code == 400, response.json
    description = response.json["error_description"]
    assert len(description) < 200, description
    assert not any(ord(char) < 0x20 for char in description), description
    if len(echoed) > 64:
        assert repr(echoed[:64] + "\u2026") in description
    else:
        assert repr(echoed) in description


def test_every_json_answer_says_nosniff(app: Flask, http: FlaskClient, store: Store) -> None:
    @app.get("/boom")
    def boom() -> str:
        raise RuntimeError("internals")

    rs, _, _ = _party_and_set(http, store)
    client_id, secret = make_client(store, "an app")
    app.config["TESTING"] = False
    app.config["PROPAGATE_EXCEPTIONS"] = False
    token = {"grant_type": "client_credentials", "scope": "uma_protection"}
    answers = {
        "configuration": http.get("/.well-known/uma-configuration"),
        "list": http.get("/rs/resource_set", headers=rs.auth),
        "401": http.get("/rs/resource_set"),
        "404": http.get("/nothing/here"),
        "400": http.post("/permission", json={}, headers=rs.auth),
        "500": http.get("/boom"),
        "token": http.post("/token", data=token, auth=(client_id, secret)),
        "token error": http.post("/token", data=token, auth=(client_id, "wrong")),
    }
    for name, response in answers.items():
        assert response.is_json, name
        assert response.headers["X-Content-Type-Options"] == "nosniff", name
