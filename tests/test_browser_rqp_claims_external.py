"""The redirect claims profile with a real OpenID Connect provider: `oidc-provider` 8.x from the npm
registry (tests/oidc_provider, installed by `make test`), run with the machine's Node.js on loopback.
Headless Chromium is sent by the client to `/rqp_claims`, chooses "Sign in with Test Accounts",
signs in at the provider's own login form, comes back through `/rqp_claims/callback` (this server
being the provider's relying party: code + PKCE, state, nonce, the ID token verified) and shares;
the provider's word about the person decides. Every page visited leaves a screenshot."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

from .browser import Screenshots, click_and_wait
from .conftest import LiveServer, start_server, stop_server
from .oidc_provider_fixture import OidcProvider, oidc_provider_fixture  # noqa: F401
from .test_browser_rqp_claims import (
    STATE,
    ClientApp,
    _back_at_client,
    _client_app,
    _flow,
    _send_person,
)
from .test_browser_signin import submit

pytestmark = pytest.mark.live

REDIRECT = "claim-client-redirect-1.0"


def _rules(provider: OidcProvider) -> str:
    # alice's sets may be viewed by people whose email at example.org the provider vouches for,
    # shared by signing in there.
    return f"""
[[rules]]
id = "example-org-by-provider"
owner = "alice"
scopes = ["view"]
[[rules.conditions]]
claim = "email"
suffix = "@example.org"
types = ["{REDIRECT}"]
issuers = ["{provider.issuer}"]
"""


@pytest.fixture(scope="module")
def client_app() -> Iterator[ClientApp]:
    app = _client_app()
    yield app
    app.server.shutdown()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, oidc_provider: OidcProvider
) -> Iterator[LiveServer]:
    provider = oidc_provider
    extra = f"""
[[oidc_issuers]]
issuer = "{provider.issuer}"
jwks_uri = "{provider.issuer}/jwks"
client_id = "{provider.client_id}"
client_secret = "{provider.client_secret}"
display_name = "Test Accounts"
"""
    live = start_server(
        tmp_path_factory.mktemp("browser-rqp-external"),
        extra_config=extra,
        rules_text=_rules(provider),
    )
    provider.add_redirect_uri(live.url + "/rqp_claims/callback")
    for name in ("alice", "bob", "carol"):
        live.command("user", "create", name, "--password-stdin", input=f"{name}'s password\n")
    # bob here is bob at the provider; carol is nobody there.
    live.command(
        "user", "link", "bob", "--issuer", provider.issuer, "--subject", provider.account("bob").sub
    )
    yield live
    stop_server(live)


@pytest.fixture
def shots(browser: WebDriver, request: pytest.FixtureRequest) -> Screenshots:
    return Screenshots(browser, request.node.name)


def _sign_in_at_provider(
    browser: WebDriver, shots: Screenshots, provider: OidcProvider, login: str
) -> None:
    shots.take("1-rqp-claims")
    link = browser.find_element(By.CSS_SELECTOR, "a.signin-external")
    assert "Test Accounts" in link.text
    click_and_wait(browser, link)
    WebDriverWait(browser, 20).until(lambda b: b.find_elements(By.ID, "login"))
    assert browser.current_url.startswith(provider.issuer)
    shots.take("2-provider-login")
    browser.find_element(By.ID, "login").send_keys(login)
    browser.find_element(By.ID, "password").send_keys(provider.account(login).password)
    browser.find_element(By.ID, "submit").click()
    WebDriverWait(browser, 30).until(lambda b: "/rqp_claims?" in b.current_url)
    shots.take("3-back-from-provider")


def test_a_linked_person_signs_in_at_the_provider_and_the_client_is_granted(
    browser: WebDriver,
    shots: Screenshots,
    server: LiveServer,
    client_app: ClientApp,
    oidc_provider: OidcProvider,
) -> None:
    flow = _flow(server, client_app, "bob")
    ticket, _ = _send_person(browser, server, client_app, flow)
    _sign_in_at_provider(browser, shots, oidc_provider, "bob")
    assert "bob" in browser.find_element(By.ID, "signed-in").text
    submit(browser, "#share")
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
    assert "gathering access=granted" in server.output()


def test_an_unlinked_identity_is_told_why_and_comes_back_denied(
    browser: WebDriver,
    shots: Screenshots,
    server: LiveServer,
    client_app: ClientApp,
    oidc_provider: OidcProvider,
) -> None:
    flow = _flow(server, client_app, "carol")
    ticket, _ = _send_person(browser, server, client_app, flow)
    _sign_in_at_provider(browser, shots, oidc_provider, "alice")  # not linked to anyone here
    assert "not linked" in browser.find_element(By.ID, "unlinked").text
    submit(browser, "#cancel")
    assert _back_at_client(browser, client_app)["access"] == "denied"
    assert flow.ask(ticket).status == 400  # the ticket is finished
