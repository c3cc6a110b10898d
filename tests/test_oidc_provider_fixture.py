"""The OpenID provider of tests/oidc_provider_fixture.py (oidc-provider 8.x under Node.js) answers as
a real one: discovery, an RS256 key, and the authorization code flow with PKCE, driven by `requests`
without a browser (GET the authorization endpoint, follow to the login form, POST it, follow the
redirects back to the redirect URI, exchange the code, ask the UserInfo endpoint)."""

from __future__ import annotations

import base64
import json
import secrets
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from joserfc import jwt
from joserfc.jwk import KeySet
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

from tests.browser import chromium_driver, click_and_wait
from tests.oidc_provider_fixture import (  # noqa: F401 (the fixtures oidc_provider, start_oidc_provider)
    DEFAULT_REDIRECT_URI,
    OidcProvider,
    follow_redirects,
    html_forms,
    oidc_provider_fixture,
    pkce_pair,
    sign_in,
    start_oidc_provider_fixture,
)

pytestmark = pytest.mark.live  # starts a real process: the provider under Node.js


def discovered(provider: OidcProvider) -> dict[str, Any]:
    answer = requests.get(provider.discovery, timeout=10)
    assert answer.status_code == 200
    document: dict[str, Any] = answer.json()
    return document


def authorization_url(
    provider: OidcProvider,
    redirect_uri: str,
    *,
    state: str,
    nonce: str,
    challenge: str | None,
    scope: str = "openid email profile",
) -> str:
    params = {
        "client_id": provider.client_id,
        "response_type": "code",
        "scope": scope,
        "redirect_uri": redirect_uri,
        "state": state,
        "nonce": nonce,
    }
    if challenge is not None:
        params |= {"code_challenge": challenge, "code_challenge_method": "S256"}
    endpoint: str = discovered(provider)["authorization_endpoint"]
    return endpoint + "?" + urlencode(params)


def unverified_payload(token: str) -> dict[str, Any]:
    part = token.split(".")[1]
    payload: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return payload


def redirected_params(location: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(urlsplit(location).query).items()}


def authorization_code(
    provider: OidcProvider,
    login: str,
    scope: str = "openid email profile",
    redirect_uri: str = DEFAULT_REDIRECT_URI,
) -> tuple[str, str, str]:
    """Signs in as the account `login`: the code, the PKCE code_verifier and the nonce sent."""
    verifier, challenge = pkce_pair()
    state, nonce = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    account = provider.account(login)
    with requests.Session() as session:
        back = sign_in(
            session,
            authorization_url(
                provider, redirect_uri, state=state, nonce=nonce, challenge=challenge, scope=scope
            ),
            account.login,
            account.password,
            redirect_uri,
        )
    params = redirected_params(back)
    assert back.startswith(redirect_uri + "?")
    assert params["state"] == state
    assert params["iss"] == provider.issuer  # RFC 9207: the provider names itself
    return params["code"], verifier, nonce


def redeem(
    provider: OidcProvider,
    code: str,
    verifier: str,
    redirect_uri: str = DEFAULT_REDIRECT_URI,
    method: str = "client_secret_basic",
) -> requests.Response:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "code_verifier": verifier,
    }
    if method == "client_secret_post":
        form |= {"client_id": provider.client_id, "client_secret": provider.client_secret}
        auth = None
    else:
        auth = (provider.client_id, provider.client_secret)
    return requests.post(discovered(provider)["token_endpoint"], data=form, auth=auth, timeout=10)


def code_flow(
    provider: OidcProvider, login: str, scope: str = "openid email profile"
) -> tuple[dict[str, Any], str]:
    """The whole flow for the account `login`: the token answer and the nonce sent."""
    code, verifier, nonce = authorization_code(provider, login, scope)
    answer = redeem(provider, code, verifier)
    assert answer.status_code == 200, answer.text
    tokens: dict[str, Any] = answer.json()
    return tokens, nonce


def test_discovery_names_the_issuer_and_an_rs256_key(oidc_provider: OidcProvider) -> None:
    document = discovered(oidc_provider)
    assert document["issuer"] == oidc_provider.issuer
    assert oidc_provider.issuer.startswith("http://127.0.0.1:")
    assert document["code_challenge_methods_supported"] == ["S256"]
    assert document["response_types_supported"] == ["code"]
    assert {"openid", "email", "profile"} <= set(document["scopes_supported"])
    assert "RS256" in document["id_token_signing_alg_values_supported"]
    assert document["userinfo_endpoint"].startswith(oidc_provider.issuer)
    jwks = requests.get(document["jwks_uri"], timeout=10).json()
    [key] = jwks["keys"]
    assert (key["kty"], key["alg"], key["use"]) == ("RSA", "RS256", "sig")
    assert "d" not in key  # the public half only


def test_the_code_flow_with_pkce_gives_a_signed_id_token_and_userinfo(
    oidc_provider: OidcProvider,
) -> None:
    tokens, nonce = code_flow(oidc_provider, "alice")
    alice = oidc_provider.account("alice")
    assert tokens["token_type"].lower() == "bearer"

    header = json.loads(base64.urlsafe_b64decode(tokens["id_token"].split(".")[0] + "=="))
    assert header["alg"] == "RS256"
    payload = unverified_payload(tokens["id_token"])
    assert payload["nonce"] == nonce
    assert payload["sub"] == alice.sub
    assert payload["iss"] == oidc_provider.issuer
    assert payload["aud"] == oidc_provider.client_id
    assert payload["email"] == "alice@example.org"  # scope claims in the ID token as well
    # And the signature holds with the published key.
    jwks = requests.get(discovered(oidc_provider)["jwks_uri"], timeout=10).json()
    verified = jwt.decode(tokens["id_token"], KeySet.import_key_set(jwks), algorithms=["RS256"])
    assert verified.claims["sub"] == alice.sub

    userinfo = requests.get(
        discovered(oidc_provider)["userinfo_endpoint"],
        headers={"Authorization": f"Bearer {tokens['access_token']}"},
        timeout=10,
    )
    assert userinfo.status_code == 200, userinfo.text
    claims = userinfo.json()
    assert claims["sub"] == alice.sub
    assert claims["email"] == "alice@example.org"
    assert claims["email_verified"] is True
    assert claims["name"] == "Alice Liddell"
    assert "role" not in claims  # not asked for: the scope "employee" carries it


def test_a_custom_scope_gives_the_custom_claim(oidc_provider: OidcProvider) -> None:
    tokens, _ = code_flow(oidc_provider, "bob", scope="openid email employee")
    payload = unverified_payload(tokens["id_token"])
    assert payload["sub"] == oidc_provider.account("bob").sub
    assert payload["email"] == "bob@example.org"
    assert payload["email_verified"] is False
    assert payload["role"] == "nurse"
    assert "name" not in payload  # no profile scope


def test_the_login_form_and_a_wrong_password(oidc_provider: OidcProvider) -> None:
    """How the form looks, for the browser tests: ids and names `login`, `password`, `submit`."""
    _, challenge = pkce_pair()
    with requests.Session() as session:
        first = session.get(
            authorization_url(
                oidc_provider, DEFAULT_REDIRECT_URI, state="s", nonce="n", challenge=challenge
            ),
            allow_redirects=False,
            timeout=10,
        )
        page = follow_redirects(session, first, DEFAULT_REDIRECT_URI)
        assert isinstance(page, requests.Response)
        assert urlsplit(page.url).path.startswith("/interaction/")
        [form] = html_forms(page.text)
        assert form.form_id == "login-form"
        assert form.method == "post"
        assert form.action == urlsplit(page.url).path + "/login"
        assert form.fields["login"]["id"] == "login"
        assert (form.fields["password"]["id"], form.fields["password"]["type"]) == (
            "password",
            "password",
        )
        assert (form.fields["submit"]["tag"], form.fields["submit"]["type"]) == ("button", "submit")
        assert form.fields["submit"]["id"] == "submit"

        wrong = session.post(
            page.url + "/login",
            data={"login": "alice", "password": "not-her-password"},
            allow_redirects=False,
            timeout=10,
        )
        assert wrong.status_code == 401
        assert 'id="error"' in wrong.text
        assert [form.form_id for form in html_forms(wrong.text)] == ["login-form"]


def test_pkce_is_required(oidc_provider: OidcProvider) -> None:
    url = authorization_url(
        oidc_provider, DEFAULT_REDIRECT_URI, state="s", nonce="n", challenge=None
    )
    answer = requests.get(url, allow_redirects=False, timeout=10)
    assert answer.is_redirect
    location = answer.headers["Location"]
    assert location.startswith(DEFAULT_REDIRECT_URI)
    params = redirected_params(location)
    assert params["error"] == "invalid_request"
    assert "PKCE" in params["error_description"]


def test_a_redirect_uri_added_later(
    start_oidc_provider: Callable[..., OidcProvider],
) -> None:
    """A provider of its own; a redirect URI known only after it started."""
    provider = start_oidc_provider()
    later = "http://127.0.0.1:7/rqp_claims/callback"
    before = requests.get(
        authorization_url(provider, later, state="s", nonce="n", challenge=pkce_pair()[1]),
        allow_redirects=False,
        timeout=10,
    )
    assert before.status_code == 400  # not sent to an unknown redirect URI
    assert "redirect_uri" in before.text

    provider.add_redirect_uri(later)
    assert provider.redirect_uris == [DEFAULT_REDIRECT_URI, later]
    code, verifier, _ = authorization_code(provider, "alice", redirect_uri=later)
    assert redeem(provider, code, verifier, later).status_code == 200


def test_a_client_authenticates_as_registered(
    oidc_provider: OidcProvider, start_oidc_provider: Callable[..., OidcProvider]
) -> None:
    """oidc-provider itself would take either; provider.mjs holds each client to its own."""
    code, verifier, nonce = authorization_code(oidc_provider, "alice")  # client_secret_basic
    posted = redeem(oidc_provider, code, verifier, method="client_secret_post")
    assert posted.status_code == 401
    assert posted.json()["error"] == "invalid_client"
    answer = redeem(oidc_provider, code, verifier)  # the code is still good
    assert answer.status_code == 200, answer.text
    assert unverified_payload(answer.json()["id_token"])["nonce"] == nonce

    poster = start_oidc_provider(token_endpoint_auth_method="client_secret_post")
    code, verifier, nonce = authorization_code(poster, "bob")
    basic = redeem(poster, code, verifier)
    assert basic.status_code == 401
    assert "client_secret_post" in basic.json()["error_description"]
    answer = redeem(poster, code, verifier, method="client_secret_post")
    assert answer.status_code == 200, answer.text
    assert unverified_payload(answer.json()["id_token"])["sub"] == poster.account("bob").sub


class _Callback(BaseHTTPRequestHandler):
    """The redirect URI a browser is sent back to: keeps the query, answers a short page."""

    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.paths.append(self.path)
        body = b"<!doctype html><title>back</title><p id='back'>back at the client</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_headless_chromium_signs_in_with_the_login_form(
    oidc_provider: OidcProvider, tmp_path: Path
) -> None:
    """A real browser on plain http: the cookies of the provider hold between the authorization
    request, the login form and the way back (nothing to click but the form's button)."""
    with ThreadingHTTPServer(("127.0.0.1", 0), _Callback) as callback:
        threading.Thread(target=callback.serve_forever, daemon=True).start()
        redirect_uri = f"http://127.0.0.1:{callback.server_address[1]}/rqp_claims/callback"
        oidc_provider.add_redirect_uri(redirect_uri)
        _, challenge = pkce_pair()
        browser = chromium_driver(tmp_path / "profile")
        try:
            browser.get(
                authorization_url(
                    oidc_provider, redirect_uri, state="st", nonce="nn", challenge=challenge
                )
            )
            browser.find_element(By.ID, "login").send_keys("bob")
            browser.find_element(By.ID, "password").send_keys(oidc_provider.account("bob").password)
            click_and_wait(browser, browser.find_element(By.ID, "submit"))
            WebDriverWait(browser, 20).until(
                expected_conditions.presence_of_element_located((By.ID, "back"))
            )
            assert browser.current_url.startswith(redirect_uri + "?")
        finally:
            browser.quit()
            callback.shutdown()
    [back] = [path for path in _Callback.paths if path.startswith("/rqp_claims/callback?")]
    params = redirected_params(back)
    assert params["state"] == "st"
    assert params["code"]
