"""Real browsers through /authorize: headless Chromium (tests/browser.py) signs in and consents
(or refuses); the test, as the resource server or the requesting party's client, is a real OAuth
client (Authlib's `OAuth2Session`) that exchanges the code and uses the token. The redirect URI is
a loopback port where nothing listens: the code is read from the browser's URL after the redirect
fails to load. Every page visited leaves a screenshot in tests/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

from .browser import Screenshots
from .conftest import LiveServer, free_port, start_server, stop_server
from .test_browser_signin import fill_in, submit

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("browser-consent"))
    for name in ("alice", "bob", "carol"):
        live.command("user", "create", name, "--password-stdin", input=f"{name}'s password\n")
    yield live
    stop_server(live)


@pytest.fixture
def shots(browser: WebDriver, request: pytest.FixtureRequest) -> Screenshots:
    return Screenshots(browser, request.node.name)


class App:
    """A client registered with a loopback redirect URI where nothing listens."""

    def __init__(self, server: LiveServer, name: str, scope: str) -> None:
        self.redirect = f"http://127.0.0.1:{free_port()}/callback"
        made = server.command("client", "create", "--name", name, "--redirect-uri", self.redirect)
        endpoints = requests.get(
            server.url + "/.well-known/oauth-authorization-server", timeout=10
        ).json()
        self.authorization_endpoint = endpoints["authorization_endpoint"]
        self.token_endpoint = endpoints["token_endpoint"]
        self.session = OAuth2Session(
            client_id=made["client_id"],
            client_secret=made["client_secret"],
            scope=scope,
            redirect_uri=self.redirect,
            code_challenge_method="S256",
        )
        self.verifier = generate_token(48)
        self.url, self.state = self.session.create_authorization_url(
            self.authorization_endpoint, code_verifier=self.verifier
        )

    def back_in(self, browser: WebDriver) -> str:
        """The URL the browser was sent back to (it fails to load: nothing listens there)."""
        WebDriverWait(browser, 20).until(lambda b: b.current_url.startswith(self.redirect))
        return str(browser.current_url)

    def fetch_token(self, back: str) -> dict[str, str]:
        token: dict[str, str] = self.session.fetch_token(
            self.token_endpoint, authorization_response=back, code_verifier=self.verifier
        )
        return token


def sign_in_and_see_consent(
    browser: WebDriver, shots: Screenshots, app: App, username: str, words: str
) -> None:
    browser.get(app.url)
    assert urlsplit(browser.current_url).path == "/signin"
    fill_in(browser, username, f"{username}'s password")
    assert browser.current_url == app.url
    shots.take("consent")
    main = browser.find_element(By.TAG_NAME, "main").text
    assert words in main and username in main


def decide(browser: WebDriver, decision: str) -> None:
    browser.find_element(By.CSS_SELECTOR, f"button[name=decision][value={decision}]").click()


def test_the_consent_page_says_the_app_acts_with_the_persons_username_roles_and_groups(
    server: LiveServer, browser: WebDriver, shots: Screenshots, screen: str
) -> None:
    dora = f"dora-{screen}"  # one server for the module: a person of her own on each screen
    server.command(
        "user", "create", dora, "--password-stdin",
        "--claim", 'roles=["editor", "admin"]', "--claim", "groups=research",
        input=f"{dora}'s password\n",
    )  # fmt: skip
    app = App(server, "Photo Viewer", "uma_authorization")
    sign_in_and_see_consent(browser, shots, app, dora, "ask for access on your behalf")
    said = browser.find_element(By.CSS_SELECTOR, "p.account-claims").text
    assert said == (
        "When it asks for access, it acts as you: this server tells the owners' rules your"
        f" username {dora}, your roles editor, admin, your groups research."
    )


def test_an_owner_consents_and_the_resource_server_registers_a_resource_set(
    server: LiveServer, browser: WebDriver, shots: Screenshots
) -> None:
    app = App(server, "Photo Cloud", "uma_protection")
    sign_in_and_see_consent(
        browser, shots, app, "alice", "register and manage resource sets for you"
    )
    assert "Photo Cloud" in browser.find_element(By.TAG_NAME, "h1").text
    decide(browser, "allow")
    back = app.back_in(browser)
    assert parse_qs(urlsplit(back).query)["state"] == [app.state]
    token = app.fetch_token(back)
    assert token["scope"] == "uma_protection"
    created = app.session.post(
        server.url + "/rs/resource_set", json={"name": "Holiday", "scopes": ["view"]}, timeout=10
    )
    assert created.status_code == 201, created.text
    # Her account page lists the consent; withdrawing it ends the PAT.
    browser.get(server.url + "/account")
    shots.take("account")
    assert "Photo Cloud" in browser.find_element(By.TAG_NAME, "main").text
    submit(browser, "form[action='/account/withdraw'] button")
    assert "not allowed any application" in browser.find_element(By.TAG_NAME, "main").text
    listed = app.session.get(server.url + "/rs/resource_set", timeout=10)
    assert listed.status_code == 401


def test_a_requesting_party_consents_and_the_client_gets_an_rpt(
    server: LiveServer, browser: WebDriver, shots: Screenshots
) -> None:
    app = App(server, "Photo Viewer", "uma_authorization")
    sign_in_and_see_consent(browser, shots, app, "bob", "ask for access on your behalf")
    decide(browser, "allow")
    token = app.fetch_token(app.back_in(browser))
    assert token["scope"] == "uma_authorization"
    rpt = app.session.post(server.url + "/rpt", timeout=10)
    assert rpt.status_code == 200 and rpt.json()["rpt"]


def test_a_refusal_sends_access_denied_back(
    server: LiveServer, browser: WebDriver, shots: Screenshots
) -> None:
    app = App(server, "Nosy App", "uma_protection")
    sign_in_and_see_consent(
        browser, shots, app, "carol", "register and manage resource sets for you"
    )
    decide(browser, "deny")
    got = parse_qs(urlsplit(app.back_in(browser)).query)
    assert got["error"] == ["access_denied"] and got["state"] == [app.state]
    assert "code" not in got
