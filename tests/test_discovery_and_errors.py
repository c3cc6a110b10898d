"""The configuration document and the one error shape."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Flask
from flask.testing import FlaskClient

from .flows import FlaskApi

# The spec's members, less the endpoints not built yet (user_endpoint, dynamic_client_endpoint):
# the document advertises only what answers, and the sign-in issue puts those two back.
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
    assert document["pat_grant_types_supported"] == ["client_credentials"]
    assert document["pat_profiles_supported"] == ["bearer"]


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


def test_the_registration_endpoint_advertised_is_the_one_that_works(http: FlaskClient) -> None:
    base = http.get("/.well-known/uma-configuration").json["resource_set_registration_endpoint"]
    assert http.get(urlsplit(base).path + "/resource_set").status_code == 401


def test_unknown_path_is_json_404(http: FlaskClient) -> None:
    response = http.get("/nothing/here")
    assert response.status_code == 404
    assert response.json["error"] == "not_found"
    assert response.headers["Cache-Control"] == "no-store"


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
    profiles = http.get("/.well-known/uma-configuration").json["claim_profiles_supported"]
    assert profiles == ["claim-client-claims-oidc-1.0"]
