"""The owner's pages redesigned for people (issue 25, item 6) in a real browser (headless
Chromium, tests/browser.py) on the README walk's state: alice's "Holiday photos" under the rules
of policies.example.toml, bob's viewer granted as a doctor. At desktop width (a 1280x800 screen)
alice shares the set with bob, and the explain form, with the app picked by name and bob named,
says the share grants; the set page has two columns and fits in two screens (<= 1600 px). At
phone width (390x844) everything is one column, nothing wider than the screen. The set, list,
history and account pages leave screenshots at both widths in tests/screenshots/ (the screen,
and the whole page: `-full`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.select import Select

from .browser import SCREENS, Screenshots, metrics
from .conftest import LiveServer, start_server, stop_server
from .flows import Flow, HttpApi, Party
from .test_browser_policy import main_text, open_signed_in, policy_uri, token, type_into
from .test_browser_signin import submit

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parent.parent
EMPLOYEE = "https://example.com/claims/employee"
DOCTOR = [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}]
TWO_SCREENS = 1600


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    rules = (ROOT / "policies.example.toml").read_text(encoding="utf-8")
    live = start_server(tmp_path_factory.mktemp("browser-pages"), rules_text=rules)
    live.command(
        "user", "create", "alice", "--claim", "email=alice@example.com",
        "--password-stdin", input="alice's password\n",
    )  # fmt: skip
    live.command("user", "create", "bob", "--password-stdin", input="bob's password\n")
    yield live
    stop_server(live)


@pytest.fixture(scope="module")
def walk(server: LiveServer) -> Flow:
    """The README walk: the photo server registers Holiday photos; bob's viewer, pushing the
    hospital's employee claims, is granted view as a doctor."""
    rs = server.command("client", "create", "--name", "Photo server")
    viewer = server.command("client", "create", "--name", "Viewer", "--push-claims", EMPLOYEE)
    flow = Flow(
        HttpApi(server.url),
        Party(rs["client_id"], rs["client_secret"], "alice", token(server, rs["client_id"], "alice", "uma_protection")),
        Party(viewer["client_id"], viewer["client_secret"], "bob", token(server, viewer["client_id"], "bob", "uma_authorization")),
        {"name": "Holiday photos", "scopes": ["view", "print"], "type": "https://example.com/rsets/photo"},
    )  # fmt: skip
    reply = flow.ask(flow.ticket("view"), DOCTOR)
    assert reply.status == 201, reply.text
    return flow


@pytest.fixture
def shots(browser: WebDriver, request: pytest.FixtureRequest) -> Screenshots:
    return Screenshots(browser, request.node.name)


def js(browser: WebDriver, script: str, *args: Any) -> Any:
    return browser.execute_script(script, *args)


def page_height(browser: WebDriver) -> int:
    return int(js(browser, "return document.documentElement.scrollHeight"))


def look(browser: WebDriver, shots: Screenshots, screen: str, name: str) -> None:
    """Screenshots of the screen and of the whole page; nothing is wider than the screen."""
    width, height = SCREENS[screen]
    assert js(browser, "return document.documentElement.scrollWidth") <= width, name
    shots.take(name)
    metrics(browser, width, max(height, page_height(browser)), screen == "phone")
    shots.take(name + "-full")
    metrics(browser, width, height, screen == "phone")


def box(browser: WebDriver, element_id: str) -> dict[str, float]:
    found: dict[str, float] = js(
        browser,
        "const r = document.getElementById(arguments[0]).getBoundingClientRect();"
        " return {x: r.left, y: r.top + window.scrollY, width: r.width};",
        element_id,
    )
    return found


def test_the_owners_pages(
    server: LiveServer, walk: Flow, browser: WebDriver, shots: Screenshots, screen: str
) -> None:
    open_signed_in(browser, policy_uri(walk), "alice")
    nav = browser.find_element(By.CSS_SELECTOR, "header nav")
    assert nav.text.split("\n") == [
        "Resource sets",
        "Requests",
        "History",
        "Notices",
        "Account",
        "Sign out",
    ]
    current = browser.find_element(By.CSS_SELECTOR, "header nav a[aria-current]")
    assert (current.text, current.get_attribute("aria-current")) == ("Resource sets", "true")
    text = main_text(browser)
    assert (
        "People whose employee claims say their role contains 'doctor' may view and print on"
        " your resource sets of type 'https://example.com/rsets/photo'." in text
    )
    assert "Viewer (not verified) for bob may view until" in text
    if screen == "desktop":
        # Share with bob, then ask the page why bob's viewer would get in.
        type_into(browser, "to", "bob")
        browser.find_element(By.CSS_SELECTOR, ".share-form input[name=scopes][value=view]").click()
        submit(browser, ".share-form button[type=submit]")
        assert "bob - view Stop sharing" in main_text(browser)
        Select(browser.find_element(By.NAME, "client")).select_by_visible_text("Viewer")
        type_into(browser, "as", "bob")
        submit(browser, ".explain-form button[type=submit]")
        explained = browser.find_element(By.ID, "explained").text
        assert "Decision: grant" in explained
        assert "Your share with bob holds" in explained, explained
        assert "o-" not in explained
        shots.take("explained")
        browser.get(policy_uri(walk))
    # Who has access and Share beside the rules and Explain on a wide screen; one column on a
    # phone, in the page's order.
    access, rules, explain = (box(browser, name) for name in ("access", "rules", "explain"))
    if screen == "desktop":
        assert access["x"] < rules["x"] and abs(access["y"] - rules["y"]) < 1
        assert access["width"] < 640
    else:
        assert access["x"] == rules["x"] and access["y"] < rules["y"] < explain["y"]
    look(browser, shots, screen, "set")
    if screen == "desktop":
        height = page_height(browser)
        assert height <= TWO_SCREENS, f"the set page is {height} px tall"
    for link, name, heading in (
        ("Resource sets", "list", "Your resource sets"),
        ("History", "history", "Access history"),
        ("Account", "account", "Your account"),
    ):
        browser.get(
            server.url
            + {"list": "/policy", "history": "/policy/history", "account": "/account"}[name]
        )
        assert browser.find_element(By.TAG_NAME, "h1").text == heading
        marked = browser.find_element(By.CSS_SELECTOR, "header nav a[aria-current]")
        assert (marked.text, marked.get_attribute("aria-current")) == (link, "page")
        look(browser, shots, screen, name)
