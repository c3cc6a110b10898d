"""Asking the owner with python-keycloak 7.1.1, unmodified, against a live server with `[keycloak]
realm` (issue 25, item 3): bob's token asks for alice's photos through
`KeycloakOpenID.uma_permissions(..., submit_request="true")`, as it would ask Keycloak; the answer is
Keycloak's 403 access_denied `request_submitted`; alice approves on /policy/requests (signed in
over HTTP, with the page's CSRF token), and bob's next ask is granted."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from keycloak import KeycloakOpenID, KeycloakOpenIDConnection, KeycloakUMA
from keycloak.exceptions import KeycloakPostError

from .conftest import LiveServer, start_server, stop_server

pytestmark = pytest.mark.live

REALM = "demo"
TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    live = start_server(tmp_path, extra_config=f'\n[keycloak]\nrealm = "{REALM}"\n')
    yield live
    stop_server(live)


def issue(server: LiveServer, client_id: str, user: str, scope: str) -> str:
    issued = server.command(
        "token", "issue", "--client", client_id, "--user", user, "--scope", scope
    )
    token: str = issued["access_token"]
    return token


def csrf(session: requests.Session, url: str) -> tuple[str, str]:
    page = session.get(url, timeout=5)
    assert page.status_code == 200, page.text
    found = TOKEN.search(page.text)
    assert found is not None
    return page.text, found.group(1)


def test_bob_asks_alice_through_python_keycloak_and_is_granted_once_she_approves(
    server: LiveServer,
) -> None:
    rs = server.command("client", "create", "--name", "Photo RS")
    app = server.command("client", "create", "--name", "Bob's app")
    server.command("user", "create", "alice", "--password-stdin", input="alice's password\n")
    server.command("user", "create", "bob")
    pat = issue(server, rs["client_id"], "alice", "uma_protection")
    bobs = issue(server, app["client_id"], "bob", "uma_authorization")
    as_alice = KeycloakUMA(
        KeycloakOpenIDConnection(
            server_url=server.url,
            realm_name=REALM,
            client_id=rs["client_id"],
            client_secret_key=rs["client_secret"],
            token={"access_token": pat, "expires_in": 3600},
        )
    )
    as_alice.resource_set_create({"name": "Photos", "resource_scopes": ["view", "print"]})
    # The resource server's client: the audience of bob's asks.
    keycloak = KeycloakOpenID(
        server_url=server.url,
        realm_name=REALM,
        client_id=rs["client_id"],
        client_secret_key=rs["client_secret"],
    )

    with pytest.raises(KeycloakPostError) as refused:
        keycloak.uma_permissions(bobs, "Photos#print")
    assert refused.value.response_code == 403
    with pytest.raises(KeycloakPostError) as submitted:
        keycloak.uma_permissions(bobs, "Photos#print", submit_request="true")
    assert submitted.value.response_code == 403
    assert b"request_submitted" in submitted.value.response_body

    alice = requests.Session()
    _, token = csrf(alice, server.url + "/signin")
    signed_in = alice.post(
        server.url + "/signin",
        data={"username": "alice", "password": "alice's password", "csrf_token": token},
        allow_redirects=False,
        timeout=5,
    )
    assert signed_in.status_code == 303, signed_in.text
    page, token = csrf(alice, server.url + "/policy/requests")
    assert "Bob&#39;s app" in page or "Bob's app" in page
    [request_id] = re.findall(r'action="/policy/requests/([^"#]+)#', page)
    answered = alice.post(
        f"{server.url}/policy/requests/{request_id}",
        data={"action": "approve", "scopes": "print", "csrf_token": token},
        allow_redirects=False,
        timeout=5,
    )
    assert answered.status_code == 303, answered.text

    [granted] = keycloak.uma_permissions(bobs, "Photos#print")
    assert (granted["rsname"], granted["scopes"]) == ("Photos", ["print"])
