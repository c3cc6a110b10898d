"""Invitations in a real browser (headless Chromium, tests/browser.py) against a live server (issue
25, item 2): alice shares her set with carol@example.org, whom no local account has; the set's
page shows the link once; carol follows it, either making an account there
(`invitations_create_accounts = true`) or signing in to the account she has, and accepts; the
share then reads "carol - view" and carol's client is granted. Screenshots of the invitation page
at desktop (1280x800) and phone (390x844) width, and of the owner's page, in tests/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from .browser import Screenshots, chromium_driver
from .conftest import LiveServer, start_server, stop_server
from .flows import Flow, HttpApi, Party
from .test_browser_policy import main_text, open_signed_in, policy_uri, token, type_into
from .test_browser_signin import fill_in, submit

pytestmark = pytest.mark.live


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    (tmp_path / "server").mkdir()
    live = start_server(
        tmp_path / "server", extra_config="[sharing]\ninvitations_create_accounts = true\n"
    )
    live.command("user", "create", "alice", "--password-stdin", input="alice's password\n")
    yield live
    stop_server(live)


@pytest.fixture
def flow(server: LiveServer) -> Flow:
    """alice's photo server has registered a set; a viewer app is ready for carol."""
    rs = server.command("client", "create", "--name", "Photo server")
    viewer = server.command("client", "create", "--name", "Viewer")
    return Flow(
        HttpApi(server.url),
        Party(rs["client_id"], rs["client_secret"], "alice", token(server, rs["client_id"], "alice", "uma_protection")),
        Party(viewer["client_id"], viewer["client_secret"], "carol", ""),
        {"name": "Holiday photos", "scopes": ["view", "print"]},
    )  # fmt: skip


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    driver = chromium_driver(tmp_path / "profile")
    driver.set_window_size(1280, 800)
    yield driver
    driver.quit()


@pytest.fixture
def shots(browser: WebDriver, request: pytest.FixtureRequest) -> Screenshots:
    return Screenshots(browser, request.node.name)


def carol_asks(server: LiveServer, flow: Flow) -> int:
    """carol's viewer, with her AAT, asks for view."""
    carol = Party(
        flow.app.client_id,
        flow.app.client_secret,
        "carol",
        token(server, flow.app.client_id, "carol", "uma_authorization"),
    )
    return flow.ask(flow.ticket("view"), party=carol).status


def invite_carol(browser: WebDriver, flow: Flow, shots: Screenshots) -> str:
    """alice shares view with carol@example.org; the link the page shows once."""
    open_signed_in(browser, policy_uri(flow), "alice")
    type_into(browser, "to", "carol@example.org")
    browser.find_element(By.CSS_SELECTOR, ".share-form input[name=scopes][value=view]").click()
    submit(browser, ".share-form button[type=submit]")
    link = str(browser.find_element(By.ID, "new-link-value").get_attribute("value"))
    assert "/invitations/" in link
    browser.execute_script("document.getElementById('new-link').scrollIntoView()")
    shots.take("link-shown-once")
    listed = browser.find_element(By.CSS_SELECTOR, "li.invitation").text
    assert listed.startswith("carol@example.org - the link works until")
    browser.refresh()
    assert not browser.find_elements(By.ID, "new-link")  # not again on reload
    assert link not in browser.page_source
    return link


def sign_out(browser: WebDriver) -> None:
    submit(browser, "form.signout button[type=submit]")


def phone_shot(link: str, profile: Path, name: str) -> None:
    phone = chromium_driver(profile, phone=True)
    try:
        phone.get(link)
        assert "An invitation to share" in phone.find_element(By.TAG_NAME, "h1").text
        Screenshots(phone, name).take("invitation-phone")
    finally:
        phone.quit()


def test_carol_makes_an_account_through_the_link(
    server: LiveServer,
    flow: Flow,
    browser: WebDriver,
    shots: Screenshots,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    link = invite_carol(browser, flow, shots)
    sign_out(browser)

    browser.get(link)
    assert "alice shares Holiday photos with carol@example.org: you may view." in main_text(browser)
    shots.take("invitation-desktop")
    phone_shot(link, tmp_path / "phone", request.node.name)

    type_into(browser, "username", "carol")
    type_into(browser, "password", "short")
    type_into(browser, "again", "short")
    submit(browser, "form[action$='/account'] button[type=submit]")
    assert (
        browser.find_element(By.ID, "error-password").text
        == "Choose a password of at least 12 characters."
    )
    shots.take("account-error")
    type_into(browser, "password", "carol's password")
    type_into(browser, "again", "carol's password")
    submit(browser, "form[action$='/account'] button[type=submit]")
    assert "alice shares Holiday photos with you, carol: you may view." in main_text(browser)
    shots.take("accepted")
    assert carol_asks(server, flow) == 201

    browser.get(link)
    assert "This invitation has been accepted already" in main_text(browser)
    shots.take("used")
    sign_out(browser)
    open_signed_in(browser, policy_uri(flow), "alice")
    assert browser.find_element(By.CSS_SELECTOR, "li.share").text.startswith("carol - view")
    assert not browser.find_elements(By.CSS_SELECTOR, "li.invitation")
    shots.take("share-reads-carol")


def test_carol_signs_in_to_her_account_and_accepts(
    server: LiveServer, flow: Flow, browser: WebDriver, shots: Screenshots
) -> None:
    server.command("user", "create", "carol", "--password-stdin", input="carol's password\n")
    link = invite_carol(browser, flow, shots)
    sign_out(browser)
    assert carol_asks(server, flow) == 403

    browser.get(link)
    submit(browser, "a.button")  # Sign in to accept
    fill_in(browser, "carol", "carol's password")
    assert browser.current_url == link
    assert "Accept as carol" in main_text(browser)
    shots.take("signed-in")
    submit(browser, "form[action$='/accept'] button[type=submit]")
    assert "alice shares Holiday photos with you, carol: you may view." in main_text(browser)
    assert carol_asks(server, flow) == 201

    sign_out(browser)
    open_signed_in(browser, policy_uri(flow), "alice")
    assert browser.find_element(By.CSS_SELECTOR, "li.share").text.startswith("carol - view")
