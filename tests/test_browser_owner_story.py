"""The owner's side of issue 25 told end to end, in a real browser (headless Chromium,
tests/browser.py) against a live server whose `[mail]` points at an SMTP server in the test
process (aiosmtpd):

- alice shares her Holiday photos with bob by username: bob's client is granted;
- alice shares them with carol@example.org, whom no account has by that address: the invitation
  arrives at the SMTP server, carol follows its link, signs in to her account, accepts, and her
  client is granted;
- dave's client asks with `submit_request`; alice approves on /policy/requests; dave's next
  request is granted;
- erin's client asks; alice denies; erin's next request is refused;
- alice's /policy/history tells all of it.

Desktop width (1280x800); the pages along the way leave screenshots in tests/screenshots/."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from .browser import Screenshots, chromium_driver, click_and_wait
from .conftest import LiveServer, free_port, start_server, stop_server
from .flows import Flow, HttpApi, Party, wait_until
from .test_browser_policy import main_text, open_signed_in, policy_uri, type_into
from .test_browser_requests import ask, party, request_item
from .test_browser_signin import fill_in, submit
from .test_mail import MailServer

pytestmark = pytest.mark.live

LINK = re.compile(r"http://\S+/invitations/[A-Za-z0-9_-]{22,}")


@pytest.fixture(scope="module")
def smtp() -> Iterator[MailServer]:
    server = MailServer(free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, smtp: MailServer) -> Iterator[LiveServer]:
    mail = (
        f'[mail]\nhost = "127.0.0.1"\nport = {smtp.port}\nsecurity = "none"\n'
        'from = "Photos <uma@example.org>"\n'
    )
    live = start_server(tmp_path_factory.mktemp("owner-story"), rules_text="", extra_config=mail)
    for name in ("alice", "bob", "carol", "dave", "erin"):
        live.command("user", "create", name, "--password-stdin", input=f"{name}'s password\n")
    yield live
    stop_server(live)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    driver = chromium_driver(tmp_path / "profile")
    driver.set_window_size(1280, 800)
    yield driver
    driver.quit()


def share(browser: WebDriver, to: str, scope: str) -> None:
    type_into(browser, "to", to)
    browser.find_element(By.CSS_SELECTOR, f".share-form input[name=scopes][value={scope}]").click()
    submit(browser, ".share-form button[type=submit]")


def granted(flow: Flow, who: Party) -> tuple[int, Any]:
    """`who`'s client asks for view with a new ticket and a new RPT (no request to the owner)."""
    return ask(flow, who, flow.ticket("view"), flow.new_rpt(who), False)


def sign_out(browser: WebDriver) -> None:
    submit(browser, "header form.signout button[type=submit]")


def test_alice_shares_invites_approves_and_denies_and_the_history_tells_it(
    server: LiveServer, smtp: MailServer, browser: WebDriver, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(browser, request.node.name)
    rs = party(server, "Photo server", "alice", "uma_protection")
    bob = party(server, "Bob's viewer", "bob", "uma_authorization")
    carol = party(server, "Carol's viewer", "carol", "uma_authorization")
    dave = party(server, "Dave's viewer", "dave", "uma_authorization")
    erin = party(server, "Erin's printer", "erin", "uma_authorization")
    flow = Flow(
        HttpApi(server.url), rs, bob, {"name": "Holiday photos", "scopes": ["view", "print"]}
    )
    for who in (bob, carol, dave, erin):
        assert granted(flow, who)[1]["error"] == "not_authorized_permission"

    # alice shares with bob by username: bob's client is granted.
    open_signed_in(browser, policy_uri(flow), "alice")
    share(browser, "bob", "view")
    assert browser.find_element(By.CSS_SELECTOR, "li.share").text.startswith("bob - view")
    assert granted(flow, bob)[0] == 201

    # alice invites carol by e-mail: the link comes by mail; carol signs in and accepts.
    share(browser, "carol@example.org", "view")
    assert browser.find_element(By.ID, "new-link")  # shown once to alice, too
    shots.take("invited")
    wait_until(
        lambda: any(to == ["carol@example.org"] for _, to, _ in smtp.inbox.mails),
        message="carol's invitation did not come",
    )
    [mail] = [mail for _, to, mail in smtp.inbox.mails if to == ["carol@example.org"]]
    assert mail["From"] == "Photos <uma@example.org>"
    found = LINK.search(mail.get_content())
    assert found is not None, mail.get_content()
    sign_out(browser)
    browser.get(found.group(0))
    assert "alice shares Holiday photos with carol@example.org" in main_text(browser)
    shots.take("invitation")
    submit(browser, "a.button")  # Sign in to accept
    fill_in(browser, "carol", "carol's password")
    assert browser.current_url == found.group(0)
    submit(browser, "form[action$='/accept'] button[type=submit]")
    assert "alice shares Holiday photos with you, carol: you may view." in main_text(browser)
    assert granted(flow, carol)[0] == 201
    sign_out(browser)

    # dave's client and erin's ask alice; she approves dave's and denies erin's.
    daves, daves_rpt = flow.ticket("view"), flow.new_rpt(dave)
    erins, erins_rpt = flow.ticket("print"), flow.new_rpt(erin)
    assert ask(flow, dave, daves, daves_rpt, True)[1]["error"] == "request_submitted"
    assert ask(flow, erin, erins, erins_rpt, True)[1]["error"] == "request_submitted"
    browser.get(server.url + "/policy/requests")
    fill_in(browser, "alice", "alice's password")
    assert urlsplit(browser.current_url).path == "/policy/requests"
    assert (
        browser.find_element(By.CSS_SELECTOR, "header a[href='/policy/requests'] .badge").text
        == "2"
    )
    shots.take("requests")
    click_and_wait(
        browser, request_item(browser, "dave").find_element(By.XPATH, ".//button[text()='Approve']")
    )
    assert ask(flow, dave, daves, daves_rpt, False)[0] == 201
    click_and_wait(
        browser, request_item(browser, "erin").find_element(By.XPATH, ".//button[text()='Deny']")
    )
    assert ask(flow, erin, erins, erins_rpt, False)[1]["error"] == "not_authorized_permission"
    assert not browser.find_elements(By.CSS_SELECTOR, "header a[href='/policy/requests'] .badge")

    # The history tells all of it, newest first.
    browser.get(server.url + "/policy/history")
    history = [item.text for item in browser.find_elements(By.CSS_SELECTOR, "ol.history > li")]
    told = "\n".join(history)
    for said in (
        "You shared view on Holiday photos with bob.",
        "bob asked through Bob's viewer (not verified) for view on Holiday photos: Granted (by your share with bob).",
        "You shared view on Holiday photos with carol@example.org.",
        "You shared view on Holiday photos with carol.",
        "carol asked through Carol's viewer (not verified) for view on Holiday photos: Granted (by your share with carol).",
        "dave asked through Dave's viewer (not verified) for view on Holiday photos: Refused by your rules; asked you.",
        "You approved it",
        "dave asked through Dave's viewer (not verified) for view on Holiday photos: Granted (by your share with dave).",
        "erin asked through Erin's printer (not verified) for print on Holiday photos: Refused by your rules; asked you.",
        "You denied it",
    ):
        assert said in told, f"{said!r} not in the history:\n{told}"
    assert told.index("You denied it") < told.index("You shared view on Holiday photos with bob.")
    shots.take("history")
