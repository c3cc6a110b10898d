"""Asking the owner in a real browser (headless Chromium, tests/browser.py) against a live server,
at desktop and phone width (issue 25, item 3): dave's client asks for alice's photos with
`submit_request`; alice opens /policy/requests, unticks print, chooses an end day and approves;
dave's next request is granted for view. erin's client asks; alice denies; erin's next request is
refused. The history tells all of it; /account has the switch. Every page visited leaves a
screenshot in tests/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from .browser import Screenshots, chromium_driver, click_and_wait
from .conftest import LiveServer, start_server, stop_server
from .flows import Flow, HttpApi, Party
from .test_browser_signin import fill_in

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("browser-requests"), rules_text="")
    for name in ("alice", "dave", "erin"):
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


def party(server: LiveServer, name: str, user: str, scope: str) -> Party:
    made = server.command("client", "create", "--name", name)
    return Party(
        made["client_id"],
        made["client_secret"],
        user,
        token(server, made["client_id"], user, scope),
    )


def ask(flow: Flow, who: Party, ticket: str, rpt: str, submit: bool) -> tuple[int, Any]:
    body: dict[str, Any] = {"rpt": rpt, "ticket": ticket}
    if submit:
        body["submit_request"] = True
    reply = flow.api.post(
        flow.endpoints["authorization_request_endpoint"], json=body, headers=who.auth
    )
    return reply.status, reply.json


def request_item(browser: WebDriver, who: str) -> Any:
    for item in browser.find_elements(By.CSS_SELECTOR, "li.request"):
        if item.text.startswith(f"{who} asks"):
            return item
    raise AssertionError(f"no request of {who} on the page")


def test_alice_approves_daves_request_and_denies_erins(
    server: LiveServer, browser: WebDriver, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(browser, request.node.name)
    rs = party(server, "Photo server", "alice", "uma_protection")
    dave = party(server, "Dave's viewer", "dave", "uma_authorization")
    erin = party(server, "Erin's printer", "erin", "uma_authorization")
    flow = Flow(
        HttpApi(server.url), rs, dave, {"name": "Holiday photos", "scopes": ["view", "print"]}
    )
    daves_rpt, erins_rpt = flow.new_rpt(dave), flow.new_rpt(erin)
    daves, erins = flow.ticket("view", "print"), flow.ticket("print")
    assert ask(flow, dave, daves, daves_rpt, True)[1]["error"] == "request_submitted"
    assert ask(flow, erin, erins, erins_rpt, True)[1]["error"] == "request_submitted"

    browser.get(server.url + "/policy/requests")
    fill_in(browser, "alice", "alice's password")
    assert urlsplit(browser.current_url).path == "/policy/requests"
    item = request_item(browser, "dave")
    assert "Dave's viewer" in item.text and "Holiday photos" in item.text
    shots.take("pending")

    item.find_element(By.CSS_SELECTOR, "input[name=scopes][value=print]").click()
    until = (datetime.now(UTC) + timedelta(days=2)).date()
    field = item.find_element(By.NAME, "until")
    browser.execute_script("arguments[0].value = arguments[1];", field, until.isoformat())
    click_and_wait(browser, item.find_element(By.XPATH, ".//button[text()='Approve']"))
    assert urlsplit(browser.current_url).path == "/policy/requests"
    status, body = ask(flow, dave, daves, daves_rpt, False)
    assert status == 201, body
    [permission] = flow.introspect(daves_rpt)["permissions"]
    assert permission["scopes"] == ["view"]

    item = request_item(browser, "erin")
    click_and_wait(browser, item.find_element(By.XPATH, ".//button[text()='Deny']"))
    assert ask(flow, erin, erins, erins_rpt, False)[1]["error"] == "not_authorized_permission"
    answered = browser.find_element(By.ID, "decided").find_element(
        By.XPATH, "following-sibling::ul"
    )
    assert "approved for view" in answered.text and "denied" in answered.text
    assert "No one is waiting for your answer." in browser.find_element(By.TAG_NAME, "main").text
    shots.take("answered")

    browser.get(server.url + "/policy/history")
    history = browser.find_element(By.CSS_SELECTOR, "ol.history").text
    for said in (
        "Refused by your rules; asked you",
        "You approved it",
        "You denied it",
        "You shared",
    ):
        assert said in history
    shots.take("history")

    browser.get(server.url + "/account")
    assert browser.find_element(By.NAME, "takes_requests").is_selected()
    browser.execute_script("document.getElementById('requests').scrollIntoView()")
    shots.take("account")
