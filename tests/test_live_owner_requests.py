"""Asking the owner with python-keycloak 7.1.1, unmodified, against a live server with `[keycloak]
realm` (issue 25, item 3): bob's token asks for alice's photos through
`KeycloakOpenID.uma_permissions(..., submit_request="true")`, as it would ask Keycloak; the answer is
Keycloak's 403 access_denied `request_submitted`; alice approves on /policy/requests (signed in
over HTTP, with the page's CSRF token), and bob's next ask is granted."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from keycloak import KeycloakOpenID, KeycloakOpenIDConnection, KeycloakUMA
from keycloak.exceptions import KeycloakPostError

from .conftest import LiveServer, start_server, stop_server

pytestmark = pytest.mark.live

REALM = "demo"
UMA_TICKET = "urn:ietf:params:oauth:grant-type:uma-ticket"
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


def test_alice_approves_while_bobs_client_polls_from_four_threads(server: LiveServer) -> None:
    """The approval narrows the ticket each poll rotates: it and the polls queue on the ticket,
    never wait for each other (on PostgreSQL, row locks), and no poll is answered an error."""
    rs = server.command("client", "create", "--name", "Photo RS")
    app = server.command("client", "create", "--name", "Bob's app")
    server.command("user", "create", "alice", "--password-stdin", input="alice's password\n")
    server.command("user", "create", "bob")
    pat = issue(server, rs["client_id"], "alice", "uma_protection")
    bobs = issue(server, app["client_id"], "bob", "uma_authorization")
    registered = requests.post(
        server.url + "/rs/resource_set",
        json={"name": "Photos", "resource_scopes": ["view", "print"]},
        headers={"Authorization": f"Bearer {pat}"},
        timeout=5,
    )
    assert registered.status_code == 201, registered.text
    token_url = f"{server.url}/realms/{REALM}/protocol/openid-connect/token"
    bearer = {"Authorization": f"Bearer {bobs}"}

    def new_ticket() -> str:
        reply = requests.post(
            server.url + "/permission",
            json={"resource_id": registered.json()["_id"], "resource_scopes": ["print"]},
            headers={"Authorization": f"Bearer {pat}"},
            timeout=5,
        )
        ticket: str = reply.json()["ticket"]
        return ticket

    tickets = []
    for _ in range(4):  # four requests waiting, each polled by a thread of its own
        reply = requests.post(
            token_url,
            data={"grant_type": UMA_TICKET, "ticket": new_ticket(), "submit_request": "true"},
            headers=bearer,
            timeout=5,
        )
        assert reply.json()["error"] == "request_submitted", reply.text
        tickets.append(reply.json()["ticket"])
    answers: list[tuple[int, str]] = []
    done = threading.Event()

    def poll(ticket: str) -> None:
        while not done.is_set():
            reply = requests.post(
                token_url, data={"grant_type": UMA_TICKET, "ticket": ticket}, headers=bearer,
                timeout=10,
            )  # fmt: skip
            body = reply.json()
            answers.append((reply.status_code, body.get("error", "granted")))
            if reply.status_code != 403 or body.get("error") != "request_submitted":
                return
            ticket = body["ticket"]

    threads = [threading.Thread(target=poll, args=(ticket,)) for ticket in tickets]
    for thread in threads:
        thread.start()
    alice = requests.Session()
    _, token = csrf(alice, server.url + "/signin")
    alice.post(
        server.url + "/signin",
        data={"username": "alice", "password": "alice's password", "csrf_token": token},
        timeout=5,
    )
    page, token = csrf(alice, server.url + "/policy/requests")
    request_ids = re.findall(r'action="/policy/requests/([^"#]+)#', page)
    assert len(request_ids) == 4
    for request_id in request_ids:
        answered = alice.post(
            f"{server.url}/policy/requests/{request_id}",
            data={"action": "approve", "csrf_token": token},
            allow_redirects=False,
            timeout=10,
        )
        assert answered.status_code == 303, answered.text
    for thread in threads:
        thread.join(timeout=30)
    done.set()
    assert {error for _, error in answers} <= {"request_submitted", "granted"}, answers
    assert [error for _, error in answers].count("granted") == 4
