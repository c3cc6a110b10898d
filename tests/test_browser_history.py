"""The access history in a real browser (headless Chromium, tests/browser.py) against a live
server, at desktop and phone width: bob's client is granted alice's photos and refused her notes;
alice goes from her list of sets to the history, sees both newest first, and filters by a set from
its row. Every page visited leaves a screenshot in tests/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from .browser import Screenshots, chromium_driver, click_and_wait
from .conftest import LiveServer, start_server, stop_server
from .flows import Flow, HttpApi, Party
from .test_browser_signin import fill_in

pytestmark = pytest.mark.live

# Anyone may view alice's Holiday photos; nothing else of hers.
RULES = """
[[rules]]
id = "photos-for-all"
owner = "alice"
scopes = ["view"]
description = "Anyone may view the holiday photos"
[rules.resource_sets]
names = ["Holiday photos"]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("browser-history"), rules_text=RULES)
    for name in ("alice", "bob"):
        live.command("user", "create", name, "--password-stdin", input=f"{name}'s password\n")
    yield live
    stop_server(live)


def token(server: LiveServer, client_id: str, user: str, scope: str) -> str:
    issued = server.command(
        "token", "issue", "--client", client_id, "--user", user, "--scope", scope
    )
    value: str = issued["access_token"]
    return value


@pytest.fixture(params=["desktop", "phone"])
def browser(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[WebDriver]:
    driver = chromium_driver(tmp_path / "profile", phone=request.param == "phone")
    yield driver
    driver.quit()


def test_alice_reads_who_came_and_filters_by_set(
    server: LiveServer, browser: WebDriver, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(browser, request.node.name)
    rs = server.command("client", "create", "--name", "Photo server")
    viewer = server.command("client", "create", "--name", "Bob's viewer")
    flow = Flow(
        HttpApi(server.url),
        Party(rs["client_id"], rs["client_secret"], "alice", token(server, rs["client_id"], "alice", "uma_protection")),
        Party(viewer["client_id"], viewer["client_secret"], "bob", token(server, viewer["client_id"], "bob", "uma_authorization")),
        {"name": "Holiday photos", "scopes": ["view", "print"], "type": "https://example.com/photo"},
    )  # fmt: skip
    notes = flow.register({"name": "Notes", "scopes": ["read"]})
    assert flow.ask(flow.ticket("view"), []).status == 201
    assert flow.ask(flow.ticket("read", rs_id=notes), []).status == 403

    browser.get(server.url + "/policy")
    fill_in(browser, "alice", "alice's password")
    click_and_wait(browser, browser.find_element(By.LINK_TEXT, "Access history"))
    assert urlsplit(browser.current_url).path == "/policy/history"
    rows = [row.text for row in browser.find_elements(By.CSS_SELECTOR, "ol.history > li")]
    assert len(rows) >= 2
    newest, older = rows[0], rows[1]
    assert "Notes" in newest and "Refused" in newest and "bob" in newest
    # The rule that decided, by its description (its id is for the operator's `umaserver audit`).
    assert "Holiday photos" in older and "Granted (by Anyone may view the holiday photos)" in older
    shots.take("history")

    click_and_wait(browser, browser.find_element(By.LINK_TEXT, "Notes"))
    assert parse_qs(urlsplit(browser.current_url).query) == {"resource_set": [notes]}
    rows = [row.text for row in browser.find_elements(By.CSS_SELECTOR, "ol.history > li")]
    assert rows and all("Notes" in row for row in rows)
    assert "Only Notes." in browser.find_element(By.TAG_NAME, "main").text
    shots.take("one-set")
