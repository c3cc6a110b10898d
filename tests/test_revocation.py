"""Token revocation (RFC 7009) at /revoke, through HTTP: a client revokes its own access and refresh
tokens; anyone else's, or an unknown token, answers 200 and nothing happens."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from flask.testing import FlaskClient
from werkzeug.datastructures import MultiDict

from umaserver.api import rpt as rpt_api

from .conftest import FakeClock, Store, revoke_token
from .test_grants import Web, assert_error, verifier


@pytest.fixture
def web(http: FlaskClient, store: Store, clock: FakeClock) -> Web:
    return Web(http, store, clock)


def revoke(web: Web, data: Any, client: tuple[str, str] | None = None) -> Any:
    client_id, secret = client or web.app
    if secret:
        return web.http.post("/revoke", data=data, auth=(client_id, secret))
    return web.http.post("/revoke", data={**data, "client_id": client_id})


@pytest.mark.parametrize("hint", [None, "access_token", "refresh_token"])
def test_revoking_an_access_token_leaves_its_refresh_token(web: Web, hint: str | None) -> None:
    tokens = web.tokens()
    data = {"token": tokens["access_token"], **({"token_type_hint": hint} if hint else {})}
    response = revoke(web, data)
    assert response.status_code == 200 and response.json == {}
    assert response.headers["Cache-Control"] == "no-store"
    assert not web.works(tokens["access_token"])
    refreshed = web.refresh(tokens["refresh_token"])
    assert refreshed.status_code == 200, refreshed.json


@pytest.mark.parametrize("hint", [None, "access_token", "refresh_token"])
def test_revoking_a_refresh_token_revokes_its_grant(web: Web, hint: str | None) -> None:
    tokens = web.tokens()
    data = {"token": tokens["refresh_token"], **({"token_type_hint": hint} if hint else {})}
    assert revoke(web, data).status_code == 200
    assert_error(web.refresh(tokens["refresh_token"]), 400, "invalid_grant")
    assert not web.works(tokens["access_token"])
    assert web.works(web.tokens()["access_token"])  # another grant lives on


def test_revoking_an_aat_ends_its_rpt(web: Web, http: FlaskClient) -> None:
    aat = web.tokens("uma_authorization")["access_token"]
    rpt = http.post("/rpt", headers={"Authorization": f"Bearer {aat}"}).json["rpt"]
    assert revoke(web, {"token": aat}).status_code == 200
    pat = web.tokens()["access_token"]
    answer = http.post(
        "/introspect", data={"token": rpt}, headers={"Authorization": f"Bearer {pat}"}
    )
    assert answer.json == {"active": False}


def test_a_client_credentials_token_can_be_revoked(web: Web) -> None:
    own = web.token({"grant_type": "client_credentials", "scope": "uma_protection"}).json
    assert revoke(web, {"token": own["access_token"]}).status_code == 200
    assert not web.works(own["access_token"])


@pytest.mark.parametrize("kind", ["access_token", "refresh_token"])
def test_another_clients_token_is_not_revoked(web: Web, kind: str) -> None:
    tokens = web.tokens()
    response = revoke(web, {"token": tokens[kind]}, web.other)
    assert response.status_code == 200 and response.json == {}
    assert web.works(tokens["access_token"])
    assert web.refresh(tokens["refresh_token"]).status_code == 200


@pytest.mark.parametrize("token", ["uma_at_unknown", "x" * 10_000, "é"])
def test_an_unknown_token_answers_200(web: Web, token: str) -> None:
    response = revoke(web, {"token": token})
    assert response.status_code == 200 and response.json == {}


def test_revoking_twice_answers_200_both_times(web: Web) -> None:
    tokens = web.tokens()
    assert revoke(web, {"token": tokens["refresh_token"]}).status_code == 200
    assert revoke(web, {"token": tokens["refresh_token"]}).status_code == 200


def test_a_public_client_revokes_its_refresh_token_with_its_client_id(web: Web) -> None:
    secret = verifier()
    code = web.code(web.spa, challenge=create_s256_code_challenge(secret))
    tokens = web.exchange(code, web.spa, code_verifier=secret).json
    assert revoke(web, {"token": tokens["refresh_token"]}, web.spa).status_code == 200
    assert_error(web.refresh(tokens["refresh_token"], web.spa), 400, "invalid_grant")


@pytest.mark.parametrize(
    ("case", "status", "error", "fragment"),
    [
        ("no token", 400, "invalid_request", "token"),
        ("empty token", 400, "invalid_request", "token"),
        ("unknown hint", 400, "unsupported_token_type", "token_type_hint"),
        ("token twice", 400, "invalid_request", "more than once"),
        ("no client authentication", 401, "invalid_client", ""),
        ("wrong secret", 401, "invalid_client", ""),
        ("confidential client by client_id alone", 401, "invalid_client", ""),
        ("basic and body", 400, "invalid_request", "one way only"),
        ("basic malformed", 400, "invalid_request", "Basic <base64"),
    ],
)
def test_bad_revocation_requests(
    web: Web, http: FlaskClient, case: str, status: int, error: str, fragment: str
) -> None:
    tokens = web.tokens()
    data: Any = {"token": tokens["access_token"]}
    client_id, secret = web.app
    headers = {
        "Authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    }
    if case == "no token":
        del data["token"]
    elif case == "empty token":
        data["token"] = ""
    elif case == "unknown hint":
        data["token_type_hint"] = "id_token"
    elif case == "token twice":
        data = MultiDict([*data.items(), ("token", tokens["refresh_token"])])
    elif case == "no client authentication":
        headers = {}
    elif case == "wrong secret":
        headers = {
            "Authorization": "Basic " + base64.b64encode(f"{client_id}:no".encode()).decode()
        }
    elif case == "confidential client by client_id alone":
        headers, data["client_id"] = {}, client_id
    elif case == "basic and body":
        data.update(client_id=client_id, client_secret=secret)
    elif case == "basic malformed":
        headers = {"Authorization": "Basic not*base64"}
    response = http.post("/revoke", data=data, headers=headers)
    assert_error(response, status, error, fragment)
    if status == 401:
        assert response.headers["WWW-Authenticate"] == 'Basic realm="http://uma.test"'
    assert web.works(tokens["access_token"])  # nothing revoked


def test_revoke_answers_only_post(http: FlaskClient) -> None:
    assert http.get("/revoke").status_code == 405


def test_an_aat_revoked_while_its_rpt_request_runs_gets_no_rpt(
    web: Web, http: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The revocation commits after the request authenticated its AAT and before it holds it:
    # the request answers 401 and leaves no RPT behind the revoked AAT.
    aat = web.tokens("uma_authorization")["access_token"]
    authenticated = rpt_api.authenticate

    def revoked_meanwhile(scope: str) -> Any:
        held = authenticated(scope)
        assert revoke_token(web.store, aat)
        return held

    monkeypatch.setattr(rpt_api, "authenticate", revoked_meanwhile)
    answer = http.post("/rpt", headers={"Authorization": f"Bearer {aat}"})
    assert_error(answer, 401, "invalid_token")
    assert 'error="invalid_token"' in answer.headers["WWW-Authenticate"]
    monkeypatch.undo()
    assert_error(
        http.post("/rpt", headers={"Authorization": f"Bearer {aat}"}), 401, "invalid_token"
    )
