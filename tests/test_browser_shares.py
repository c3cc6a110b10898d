"""Sharing in a real browser (headless Chromium, tests/browser.py) against a live server (issue
25): alice opens her set's page, shares it with bob by username for view until a day after
tomorrow, and bob's client (his AAT) is granted through the 1.0 authorization request; a past
date is refused next to its field; after Stop sharing bob's client is refused again. Screenshots
at desktop size (1280x800) in tests/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from .browser import Screenshots
from .conftest import LiveServer, start_server, stop_server
from .flows import Flow, HttpApi, Party
from .test_browser_policy import main_text, open_signed_in, policy_uri, token, type_into
from .test_browser_signin import submit

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("browser-shares"), rules_text="")
    for name in ("alice", "bob"):
        live.command("user", "create", name, "--password-stdin", input=f"{name}'s password\n")
    yield live
    stop_server(live)


@pytest.fixture
def flow(server: LiveServer) -> Flow:
    """alice's photo server has registered a set; bob's viewer asks with his AAT."""
    rs = server.command("client", "create", "--name", "Photo server")
    viewer = server.command("client", "create", "--name", "Viewer")
    return Flow(
        HttpApi(server.url),
        Party(rs["client_id"], rs["client_secret"], "alice", token(server, rs["client_id"], "alice", "uma_protection")),
        Party(viewer["client_id"], viewer["client_secret"], "bob", token(server, viewer["client_id"], "bob", "uma_authorization")),
        {"name": "Holiday photos", "scopes": ["view", "print"]},
    )  # fmt: skip


@pytest.fixture
def shots(browser: WebDriver, request: pytest.FixtureRequest) -> Screenshots:
    return Screenshots(browser, request.node.name)


def asked(flow: Flow) -> tuple[int, str]:
    reply = flow.ask(flow.ticket("view"))
    return reply.status, (reply.json or {}).get("error", "granted")


def set_date(browser: WebDriver, value: str) -> None:
    # A date input's typing order follows the browser's locale: set its value as a form would.
    field = browser.find_element(By.NAME, "until")
    browser.execute_script("arguments[0].value = arguments[1];", field, value)


def test_alice_shares_with_bob_and_stops(
    server: LiveServer, flow: Flow, browser: WebDriver, shots: Screenshots
) -> None:
    assert asked(flow) == (403, "not_authorized_permission")
    open_signed_in(browser, policy_uri(flow), "alice")
    assert "You have not shared this resource set with anyone." in main_text(browser)

    # A past date: the sentence next to the field, nothing shared.
    type_into(browser, "to", "bob")
    browser.find_element(By.CSS_SELECTOR, ".share-form input[name=scopes][value=view]").click()
    set_date(browser, "2020-01-01")
    submit(browser, ".share-form button[type=submit]")
    error = browser.find_element(By.ID, "error-until").text
    assert error == "This date is in the past: choose today or a later day."
    shots.take("past-date")
    assert asked(flow) == (403, "not_authorized_permission")

    until = (datetime.now(UTC) + timedelta(days=2)).date()
    set_date(browser, until.isoformat())
    submit(browser, ".share-form button[type=submit]")
    listed = browser.find_element(By.CSS_SELECTOR, "li.share").text
    assert listed.startswith(f"bob - view - until {until.day} {until:%b %Y}")
    shots.take("shared")
    assert asked(flow) == (201, "granted")

    submit(browser, "li.share button[type=submit]")
    assert "You have not shared this resource set with anyone." in main_text(browser)
    shots.take("stopped")
    assert asked(flow) == (403, "not_authorized_permission")
