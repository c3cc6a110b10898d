"""UMA 2.0's claims interaction endpoint in a real browser (headless Chromium, tests/browser.py)
against a live server: the test is the client, serving its claims redirect URI on loopback. Its
token request (the uma-ticket grant) gets `need_info` with `redirect_user`; it sends the person
(302) to `/claims_interaction` with its client_id, the ticket, its claims redirect URI and a state;
the person signs in and shares (or cancels) and comes back with `authorization_state=
claims_submitted` and a new ticket (or `error=access_denied`) and the same state; the client's
next token request with the new ticket is granted (or refused). The person then finds the PCT on
/account and withdraws it. Every page visited leaves a screenshot. The same through the Flask test
client: test_claims_interaction.py."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

from .browser import Screenshots
from .conftest import LiveServer, start_server, stop_server
from .test_browser_rqp_claims import RULES, STATE, ClientApp, _back_at_client, _client_app
from .test_browser_signin import fill_in, submit

pytestmark = pytest.mark.live

UMA_TICKET = "urn:ietf:params:oauth:grant-type:uma-ticket"


@pytest.fixture(scope="module")
def client_app() -> Iterator[ClientApp]:
    app = _client_app()
    yield app
    app.server.shutdown()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # alice's sets may be viewed by nurses, as the person's attributes here say (RULES: the
    # redirect profile's claims, gathered by signing in).
    live = start_server(tmp_path_factory.mktemp("browser-claims-interaction"), rules_text=RULES)
    people = (("alice", "owner"), ("bob", "nurse"), ("carol", "visitor"), ("dave", "nurse"))
    for name, role in people:
        live.command(
            "user",
            "create",
            name,
            "--password-stdin",
            "--claim",
            f"role={role}",
            input=f"{name}'s password\n",
        )
    yield live
    stop_server(live)


@pytest.fixture
def shots(browser: WebDriver, request: pytest.FixtureRequest) -> Screenshots:
    return Screenshots(browser, request.node.name)


@dataclass
class Viewer:
    """alice's photo server (her PAT) and its set, and the Viewer client, a confidential client
    (the uma-ticket grant by default) with the client app's claims redirect URI."""

    server: LiveServer
    client_id: str
    secret: str
    pat: str
    rs_id: str

    def ticket(self) -> str:
        reply = requests.post(
            self.server.url + "/permission",
            json={"resource_id": self.rs_id, "resource_scopes": ["view"]},
            headers={"Authorization": f"Bearer {self.pat}"},
            timeout=10,
        )
        assert reply.status_code == 201, reply.text
        ticket: str = reply.json()["ticket"]
        return ticket

    def token(self, **parameters: str) -> tuple[int, dict[str, Any]]:
        reply = requests.post(
            self.server.url + "/token",
            data={"grant_type": UMA_TICKET, **parameters},
            auth=(self.client_id, self.secret),
            timeout=10,
        )
        body: dict[str, Any] = reply.json()
        return reply.status_code, body

    def introspect(self, token: str) -> dict[str, Any]:
        reply = requests.post(
            self.server.url + "/introspect",
            data={"token": token},
            headers={"Authorization": f"Bearer {self.pat}"},
            timeout=10,
        )
        assert reply.status_code == 200, reply.text
        answer: dict[str, Any] = reply.json()
        return answer


def _viewer(server: LiveServer, client_app: ClientApp) -> Viewer:
    rs = server.command("client", "create", "--name", "Photo RS")
    viewer = server.command(
        "client", "create", "--name", "Viewer", "--claims-redirect-uri", client_app.redirect_uri
    )
    pat = server.command(
        "token", "issue", "--client", rs["client_id"], "--user", "alice", "--scope",
        "uma_protection",
    )["access_token"]  # fmt: skip
    reply = requests.post(
        server.url + "/rs/resource_set",
        json={"name": "Holiday photos", "resource_scopes": ["view"]},
        headers={"Authorization": f"Bearer {pat}"},
        timeout=10,
    )
    assert reply.status_code == 201, reply.text
    return Viewer(server, viewer["client_id"], viewer["client_secret"], pat, reply.json()["_id"])


def _send_person(browser: WebDriver, client_app: ClientApp, viewer: Viewer) -> str:
    """The client asks, gets need_info with redirect_user, and sends the browser to the claims
    interaction endpoint through its own 302. The ticket it sent the person with."""
    status, body = viewer.token(ticket=viewer.ticket())
    assert status == 403 and body["error"] == "need_info", body
    assert body["redirect_user"] is True and "required_claims" not in body, body
    document = requests.get(viewer.server.url + "/.well-known/uma2-configuration", timeout=10)
    link = (
        document.json()["claims_interaction_endpoint"]
        + "?"
        + urlencode(
            {
                "client_id": viewer.client_id,
                "ticket": body["ticket"],
                "claims_redirect_uri": client_app.redirect_uri,
                "state": STATE,
            }
        )
    )
    browser.get(client_app.base + "/go?" + urlencode({"to": link}))
    WebDriverWait(browser, 20).until(lambda b: "/claims_interaction?" in b.current_url)
    ticket: str = body["ticket"]
    return ticket


def _sign_in(browser: WebDriver, shots: Screenshots, username: str) -> None:
    shots.take("1-claims-interaction")
    assert "Holiday photos" in browser.find_element(By.ID, "resource-set-name").text
    assert "Sign in to share it." in browser.find_element(By.TAG_NAME, "main").text
    submit(browser, "#signin-local")
    shots.take("2-signin")
    fill_in(browser, username, f"{username}'s password")
    WebDriverWait(browser, 20).until(lambda b: "/claims_interaction?" in b.current_url)
    shots.take("3-share")
    assert "Viewer" in browser.find_element(By.ID, "client-name").text
    assert "Holiday photos" in browser.find_element(By.ID, "resource-set-name").text
    assert username in browser.find_element(By.ID, "signed-in").text
    assert "Sign in to share" not in browser.find_element(By.TAG_NAME, "main").text
    kept = browser.find_element(By.ID, "kept-for-the-client")
    assert "What you share stays with Viewer" in kept.text
    account = kept.find_element(By.TAG_NAME, "a").get_attribute("href")
    assert account == browser.current_url.split("/claims_interaction")[0] + "/account"


def _shared(browser: WebDriver, shots: Screenshots, client_app: ClientApp) -> str:
    """Share, and back at the client: the new ticket."""
    submit(browser, "#share")
    answer = _back_at_client(browser, client_app)
    shots.take("4-back-at-client")
    assert set(answer) == {"app", "authorization_state", "ticket", "state"}, answer
    assert answer["app"] == "viewer" and answer["state"] == STATE
    assert answer["authorization_state"] == "claims_submitted"
    return answer["ticket"]


def test_a_nurse_signs_in_shares_and_the_next_token_request_is_granted(
    browser: WebDriver, shots: Screenshots, server: LiveServer, client_app: ClientApp
) -> None:
    viewer = _viewer(server, client_app)
    ticket = _send_person(browser, client_app, viewer)
    _sign_in(browser, shots, "bob")
    new_ticket = _shared(browser, shots, client_app)
    assert new_ticket != ticket
    status, body = viewer.token(ticket=ticket)  # the old ticket stopped working
    assert (status, body["error"]) == (400, "invalid_grant"), body
    status, body = viewer.token(ticket=new_ticket)
    assert status == 200, body
    assert body["pct"].startswith("uma_pct_")
    [permission] = viewer.introspect(body["access_token"])["permissions"]
    assert (permission["resource_id"], permission["resource_scopes"]) == (viewer.rs_id, ["view"])


def test_cancel_comes_back_with_access_denied(
    browser: WebDriver, shots: Screenshots, server: LiveServer, client_app: ClientApp
) -> None:
    viewer = _viewer(server, client_app)
    ticket = _send_person(browser, client_app, viewer)
    _sign_in(browser, shots, "bob")
    submit(browser, "#cancel")
    assert _back_at_client(browser, client_app) == {
        "app": "viewer",
        "error": "access_denied",
        "state": STATE,
    }
    shots.take("4-back-at-client")
    # The ticket is left as it was: still need_info (the client may send the person again).
    status, body = viewer.token(ticket=ticket)
    assert status == 403 and body["error"] == "need_info", body


def test_a_person_whose_claims_do_not_hold_is_refused_at_the_next_request(
    browser: WebDriver, shots: Screenshots, server: LiveServer, client_app: ClientApp
) -> None:
    viewer = _viewer(server, client_app)
    _send_person(browser, client_app, viewer)
    _sign_in(browser, shots, "carol")  # a visitor
    new_ticket = _shared(browser, shots, client_app)
    status, body = viewer.token(ticket=new_ticket)
    assert (status, body["error"]) == (403, "request_denied"), body


def test_the_person_finds_the_pct_on_the_account_page_and_withdraws_it(
    browser: WebDriver, shots: Screenshots, server: LiveServer, client_app: ClientApp
) -> None:
    viewer = _viewer(server, client_app)
    _send_person(browser, client_app, viewer)
    _sign_in(browser, shots, "dave")
    status, body = viewer.token(ticket=_shared(browser, shots, client_app))
    assert status == 200, body
    pct = body["pct"]

    browser.get(server.url + "/account")
    shots.take("5-account")
    [row] = browser.find_elements(By.CSS_SELECTOR, "#kept tbody tr")
    cells = [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
    assert cells[0] == "Viewer" and "role" in cells[1], cells
    submit(browser, "#kept button[type=submit]")
    shots.take("6-account-withdrawn")
    assert browser.current_url.endswith("/account")
    assert not browser.find_elements(By.ID, "kept")
    assert (
        "No application keeps anything you shared."
        in browser.find_element(By.TAG_NAME, "main").text
    )
    status, body = viewer.token(ticket=viewer.ticket(), pct=pct)
    assert (status, body["error"]) == (400, "invalid_grant"), body
