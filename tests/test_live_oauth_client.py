"""A real third-party client against a live server: Authlib's `OAuth2Session` asks for a code with
PKCE S256, a person signs in and consents (a `requests.Session` fetching the pages and submitting
their forms with the CSRF token from the HTML), the client exchanges the code, refreshes, and uses
the PAT at the resource set registration endpoint."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session

from .conftest import LiveServer, start_server, stop_server

pytestmark = pytest.mark.live

REDIRECT = "http://127.0.0.1:9/callback"  # nothing listens: the client reads the Location
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("oauth-client"))
    live.command("user", "create", "alice", "--password-stdin", input="alice's password\n")
    yield live
    stop_server(live)


def csrf_of(page: requests.Response) -> str:
    found = CSRF.search(page.text)
    assert found is not None, page.text
    return found.group(1)


def person_consents(server: LiveServer, authorize_url: str) -> str:
    """The browser's part, by hand: sign in, allow; the redirect to the client, unfollowed."""
    browser = requests.Session()
    first = browser.get(authorize_url, allow_redirects=False, timeout=10)
    assert first.status_code == 303
    signin_url = first.headers["Location"]
    assert urlsplit(signin_url).path == "/signin"
    form = browser.get(signin_url, timeout=10)
    next_path = parse_qs(urlsplit(signin_url).query)["next"][0]
    signed_in = browser.post(
        server.url + "/signin",
        data={
            "username": "alice",
            "password": "alice's password",
            "csrf_token": csrf_of(form),
            "next": next_path,
        },
        allow_redirects=False,
        timeout=10,
    )
    assert signed_in.status_code == 303 and signed_in.headers["Location"] == authorize_url
    consent = browser.get(authorize_url, timeout=10)
    assert consent.status_code == 200 and "register and manage resource sets" in consent.text
    allowed = browser.post(
        authorize_url,
        data={"csrf_token": csrf_of(consent), "decision": "allow"},
        allow_redirects=False,
        timeout=10,
    )
    assert allowed.status_code == 302, allowed.text
    location = allowed.headers["Location"]
    assert location.startswith(REDIRECT + "?")
    return str(location)


@pytest.mark.parametrize("public", [False, True], ids=["confidential", "public"])
def test_authlib_oauth2_session_gets_uses_and_refreshes_a_pat(
    server: LiveServer, public: bool
) -> None:
    made = server.command(
        "client",
        "create",
        "--name",
        f"Authlib {'public' if public else 'confidential'} app",
        "--redirect-uri",
        REDIRECT,
        *(["--public"] if public else []),
    )
    metadata = requests.get(server.url + "/.well-known/oauth-authorization-server", timeout=10)
    endpoints = metadata.json()
    client = OAuth2Session(
        client_id=made["client_id"],
        client_secret=None if public else made["client_secret"],
        token_endpoint_auth_method="none" if public else "client_secret_basic",
        scope="uma_protection",
        redirect_uri=REDIRECT,
        code_challenge_method="S256",
    )
    verifier = generate_token(48)
    url, state = client.create_authorization_url(
        endpoints["authorization_endpoint"], code_verifier=verifier
    )
    back = person_consents(server, url)
    assert parse_qs(urlsplit(back).query)["state"] == [state]
    token = client.fetch_token(
        endpoints["token_endpoint"], authorization_response=back, code_verifier=verifier
    )
    assert token["scope"] == "uma_protection" and token["refresh_token"]
    created = client.post(
        server.url + "/rs/resource_set", json={"name": "Photos", "scopes": ["view"]}, timeout=10
    )
    assert created.status_code == 201, created.text
    old_access = token["access_token"]
    refreshed = client.refresh_token(endpoints["token_endpoint"])
    assert refreshed["access_token"] != old_access
    assert refreshed["refresh_token"] != token["refresh_token"]
    listed = client.get(server.url + "/rs/resource_set", timeout=10)
    assert listed.status_code == 200 and listed.json() == [created.json()["_id"]]
    log = server.output()
    assert "consent given" in log and "code issued" in log
    assert old_access not in log and refreshed["refresh_token"] not in log
