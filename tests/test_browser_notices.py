"""Notices in a real browser (headless Chromium, tests/browser.py) against a live server with
`[mail]` pointing at an SMTP server in the test process (aiosmtpd): alice shares her photos with
bob on the set's page, the server's sender mails bob, and bob reads the notice on `/notices`
(new the first time). At desktop (1280x800) and phone (390x844) width; screenshots in
tests/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from .browser import Screenshots, chromium_driver
from .conftest import LiveServer, free_port, start_server, stop_server
from .flows import Flow, HttpApi, Party, wait_until
from .test_browser_policy import main_text, open_signed_in, policy_uri, token, type_into
from .test_browser_signin import fill_in, submit
from .test_mail import MailServer

pytestmark = pytest.mark.live


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
    live = start_server(tmp_path_factory.mktemp("browser-notices"), extra_config=mail)
    live.command("user", "create", "alice", "--password-stdin", input="alice's password\n")
    live.command(
        "user", "create", "bob", "--claim", "email=bob@example.org", "--password-stdin",
        input="bob's password\n",
    )  # fmt: skip
    yield live
    stop_server(live)


@pytest.fixture
def flow(server: LiveServer) -> Flow:
    rs = server.command("client", "create", "--name", "Photo server")
    viewer = server.command("client", "create", "--name", "Viewer")
    return Flow(
        HttpApi(server.url),
        Party(rs["client_id"], rs["client_secret"], "alice", token(server, rs["client_id"], "alice", "uma_protection")),
        Party(viewer["client_id"], viewer["client_secret"], "bob", token(server, viewer["client_id"], "bob", "uma_authorization")),
        {"name": "Holiday photos", "scopes": ["view", "print"]},
    )  # fmt: skip


@pytest.fixture(params=["desktop", "phone"])
def browser(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[WebDriver]:
    driver = chromium_driver(tmp_path / "profile", phone=request.param == "phone")
    if request.param == "desktop":
        driver.set_window_size(1280, 800)
    yield driver
    driver.quit()


def test_alice_shares_with_bob_who_gets_a_mail_and_a_notice(
    server: LiveServer,
    smtp: MailServer,
    flow: Flow,
    browser: WebDriver,
    request: pytest.FixtureRequest,
) -> None:
    shots = Screenshots(browser, request.node.name)
    mails_before = len(smtp.inbox.mails)
    open_signed_in(browser, policy_uri(flow), "alice")
    type_into(browser, "to", "bob")
    browser.find_element(By.CSS_SELECTOR, ".share-form input[name=scopes][value=view]").click()
    submit(browser, ".share-form button[type=submit]")
    assert browser.find_element(By.CSS_SELECTOR, "li.share").text.startswith("bob - view")

    wait_until(lambda: len(smtp.inbox.mails) > mails_before, message="bob's mail did not come")
    _, recipients, mail = smtp.inbox.mails[-1]
    assert recipients == ["bob@example.org"]
    assert mail["Subject"] == "alice shared Holiday photos with you"
    assert mail["From"] == "Photos <uma@example.org>"

    submit(browser, "header form.signout button[type=submit]")  # alice signs out
    browser.get(server.url + "/notices")
    assert urlsplit(browser.current_url).path == "/signin"
    fill_in(browser, "bob", "bob's password")
    assert urlsplit(browser.current_url).path == "/notices"
    [newest, *_] = browser.find_elements(By.CSS_SELECTOR, "ul.notices > li")
    assert "New" in newest.text
    assert "alice shared Holiday photos with you: view." in newest.text
    assert "Each is also sent to your verified e-mail address" in main_text(browser)
    shots.take("new")
    browser.refresh()
    assert "New" not in browser.find_element(By.CSS_SELECTOR, "ul.notices > li").text
    shots.take("seen")
