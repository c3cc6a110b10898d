"""The redirect claims profile in a real browser (headless Chromium, tests/browser.py) against a
live server: the test is the client, serving its redirect URI on loopback. It gets
`redirect_required`, sends the person (302) to `/rqp_claims`, the person signs in and chooses, and
comes back to the client's page with `access` and the same state; the client's next authorization
request with the ticket is granted (or not). Every page visited leaves a screenshot."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

from .browser import Screenshots
from .conftest import LiveServer, start_server, stop_server
from .flows import Flow, HttpApi, Party
from .test_browser_signin import fill_in, submit

pytestmark = pytest.mark.live

REDIRECT = "claim-client-redirect-1.0"
RULES = f"""
[[rules]]
id = "nurses"
owner = "alice"
scopes = ["view"]
[[rules.conditions]]
claim = "role"
equals = "nurse"
types = ["{REDIRECT}"]
"""
STATE = "state-Ü/ok?&="


@dataclass
class ClientApp:
    """The requesting party's client as a web app on loopback: `/go?to=<url>` sends the browser
    there (302, as step 2 of the profile does), `/back` is its redirect URI, which shows a page and
    remembers the query it was called with."""

    server: ThreadingHTTPServer
    returns: list[dict[str, str]] = field(default_factory=list)

    @property
    def base(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def redirect_uri(self) -> str:
        return self.base + "/back?app=viewer"


def _client_app() -> ClientApp:
    app: ClientApp

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = dict(parse_qsl(parts.query))
            if parts.path == "/go":
                self.send_response(302)
                self.send_header("Location", query["to"])
                self.end_headers()
                return
            app.returns.append(query)
            body = f"<!doctype html><title>Viewer</title><h1 id='back'>Back at Viewer: {query}</h1>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write(body.encode("utf-8"))

        def log_message(self, *args: object) -> None:
            pass

    app = ClientApp(ThreadingHTTPServer(("127.0.0.1", 0), Handler))
    threading.Thread(target=app.server.serve_forever, daemon=True).start()
    return app


@pytest.fixture(scope="module")
def client_app() -> Iterator[ClientApp]:
    app = _client_app()
    yield app
    app.server.shutdown()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("browser-rqp"), rules_text=RULES)
    for name, role in (("alice", "owner"), ("bob", "nurse"), ("carol", "visitor")):
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


def _flow(server: LiveServer, client_app: ClientApp, party: str) -> Flow:
    """alice's resource set, and `party`'s AAT at the Viewer client (as `token issue` makes one
    for a person), with Viewer's redirect URI registered."""
    rs = server.command("client", "create", "--name", "Photo RS")
    viewer = server.command(
        "client", "create", "--name", "Viewer", "--redirect-uri", client_app.redirect_uri
    )
    pat = server.command(
        "token",
        "issue",
        "--client",
        rs["client_id"],
        "--user",
        "alice",
        "--scope",
        "uma_protection",
    )["access_token"]
    aat = server.command(
        "token", "issue", "--client", viewer["client_id"], "--user", party, "--scope",
        "uma_authorization",
    )["access_token"]  # fmt: skip
    return Flow(
        HttpApi(server.url),
        Party(rs["client_id"], rs["client_secret"], "alice", pat),
        Party(viewer["client_id"], viewer["client_secret"], party, aat),
        {"name": "Holiday photos", "scopes": ["view"]},
    )


def _send_person(
    browser: WebDriver, server: LiveServer, client_app: ClientApp, flow: Flow
) -> tuple[str, str]:
    """Steps 1 and 2: the client asks, gets redirect_required, and sends the browser to the
    requesting party claims endpoint through its own 302. The ticket and the link."""
    ticket = flow.ticket("view")
    reply = flow.ask(ticket)
    assert reply.status == 403, reply.text
    [entry] = reply.json["need_claims"]
    assert entry["type"] == "redirect_required"
    document = flow.api.get("/.well-known/uma-configuration").json
    link = (
        document["requesting_party_claims_endpoint"]
        + "?"
        + urlencode(
            {
                "scope": entry["value"],
                "redirect_uri": client_app.redirect_uri,
                "client_id": flow.app.client_id,
                "state": STATE,
            }
        )
    )
    browser.get(client_app.base + "/go?" + urlencode({"to": link}))
    WebDriverWait(browser, 20).until(lambda b: "/rqp_claims" in b.current_url)
    return ticket, link


def _back_at_client(browser: WebDriver, client_app: ClientApp) -> dict[str, str]:
    WebDriverWait(browser, 20).until(lambda b: b.find_elements(By.ID, "back"))
    assert browser.current_url.startswith(client_app.redirect_uri + "&")
    return dict(parse_qsl(urlsplit(browser.current_url).query))


def _sign_in_and_choose(
    browser: WebDriver, shots: Screenshots, username: str, choice: str = "share"
) -> None:
    shots.take("1-rqp-claims")
    submit(browser, "#signin-local")
    shots.take("2-signin")
    fill_in(browser, username, f"{username}'s password")
    shots.take("3-share")
    assert "Holiday photos" in browser.find_element(By.ID, "resource-set-name").text
    assert "Viewer" in browser.find_element(By.ID, "client-name").text
    assert username in browser.find_element(By.ID, "signed-in").text
    submit(browser, f"#{choice}")


def test_a_nurse_signs_in_shares_and_the_client_is_granted(
    browser: WebDriver, shots: Screenshots, server: LiveServer, client_app: ClientApp
) -> None:
    flow = _flow(server, client_app, "bob")
    ticket, _ = _send_person(browser, server, client_app, flow)
    _sign_in_and_choose(browser, shots, "bob")
    assert _back_at_client(browser, client_app) == {
        "app": "viewer",
        "access": "granted",
        "state": STATE,
    }
    shots.take("4-back-at-client")
    granted = flow.ask(ticket)
    assert granted.status == 201, granted.text
    [permission] = flow.introspect(granted.json["rpt"])["permissions"]
    assert (permission["resource_set_id"], permission["scopes"]) == (flow.rs_id, ["view"])


def test_claims_that_fail_come_back_denied(
    browser: WebDriver, shots: Screenshots, server: LiveServer, client_app: ClientApp
) -> None:
    flow = _flow(server, client_app, "carol")
    ticket, _ = _send_person(browser, server, client_app, flow)
    _sign_in_and_choose(browser, shots, "carol")
    assert _back_at_client(browser, client_app) == {
        "app": "viewer",
        "access": "denied",
        "state": STATE,
    }
    assert flow.ask(ticket).status == 400  # the ticket is finished


def test_another_signed_in_person_following_the_link_comes_back_denied(
    browser: WebDriver, shots: Screenshots, server: LiveServer, client_app: ClientApp
) -> None:
    # carol (a visitor) gets a link for her own AAT and sends it to bob (a nurse), who is
    # signed in here already and shares.
    flow = _flow(server, client_app, "carol")
    browser.get(server.url + "/signin")
    fill_in(browser, "bob", "bob's password")
    ticket, _ = _send_person(browser, server, client_app, flow)
    shots.take("1-signed-in-as-someone-else")
    assert "bob" in browser.find_element(By.ID, "signed-in").text
    submit(browser, "#share")
    assert _back_at_client(browser, client_app)["access"] == "denied"
    after = flow.ask(ticket)
    assert after.status != 201 and after.json["error"] == "invalid_ticket"


def test_an_unknown_redirect_uri_is_an_error_page(
    browser: WebDriver, shots: Screenshots, server: LiveServer, client_app: ClientApp
) -> None:
    flow = _flow(server, client_app, "bob")
    _, link = _send_person(browser, server, client_app, flow)
    bad = link.replace("app%3Dviewer", "app%3Devil")
    browser.get(bad)
    shots.take("error")
    assert "not registered" in browser.find_element(By.TAG_NAME, "main").text
    assert browser.current_url == bad
