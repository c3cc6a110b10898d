"""The owner's policy pages in a real browser (headless Chromium, tests/browser.py) against a live
server: alice opens the page of a registration's `user_access_policy_uri`, signs in, adds a rule
that turns a client's `not_authorized_permission` into a 201 (checked through the API), edits it,
explains a decision, revokes the permission (introspection no longer shows it) and deletes the
rule; bob gets the 404 page; an invalid rule shows its error next to the field and changes nothing.
Every page visited leaves a screenshot in tests/screenshots/."""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.select import Select

from .browser import Screenshots, click_and_wait
from .conftest import LiveServer, start_server, stop_server
from .flows import Flow, HttpApi, Party
from .test_browser_signin import fill_in, submit

pytestmark = pytest.mark.live

TEAM = "urn:example:team"  # the claim type the viewer client pushes on its own word
EMPLOYEE = "urn:example:employee"  # a type it cannot push
# The operator's rule covers alice's photo sets, but only for employee claims, which the viewer
# cannot push: on its own, a request of the viewer is not_authorized_permission.
RULES = f"""
[[rules]]
id = "doctors"
owner = "alice"
scopes = ["view"]
description = "Doctors of the hospital"
[[rules.conditions]]
claim = "role"
contains = "doctor"
types = ["{EMPLOYEE}"]
"""
RADIOLOGY = [{"type": TEAM, "value": {"team": "radiology"}}]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("browser-policy"), rules_text=RULES)
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


@pytest.fixture
def flow(server: LiveServer) -> Flow:
    """alice's photo server has registered a set; bob's viewer (pushing team claims) asks."""
    rs = server.command("client", "create", "--name", "Photo <b>server</b>")
    viewer = server.command("client", "create", "--name", "Viewer", "--push-claims", TEAM)
    return Flow(
        HttpApi(server.url),
        Party(rs["client_id"], rs["client_secret"], "alice", token(server, rs["client_id"], "alice", "uma_protection")),
        Party(viewer["client_id"], viewer["client_secret"], "bob", token(server, viewer["client_id"], "bob", "uma_authorization")),
        {"name": "Holiday photos", "scopes": ["view", "print"], "type": "https://example.com/photo"},
    )  # fmt: skip


@pytest.fixture
def shots(browser: WebDriver, request: pytest.FixtureRequest) -> Screenshots:
    return Screenshots(browser, request.node.name)


def policy_uri(flow: Flow) -> str:
    read = flow.api.get(f"/rs/resource_set/{flow.rs_id}", headers=flow.rs.auth)
    assert read.status == 200, read.text
    uri: str = read.json["user_access_policy_uri"]
    return uri


def open_signed_in(browser: WebDriver, url: str, username: str) -> None:
    browser.get(url)
    assert urlsplit(browser.current_url).path == "/signin"
    fill_in(browser, username, f"{username}'s password")
    assert browser.current_url == url


def main_text(browser: WebDriver) -> str:
    return str(browser.find_element(By.TAG_NAME, "main").text)


def type_into(browser: WebDriver, name: str, text: str) -> None:
    field = browser.find_element(By.NAME, name)
    field.clear()
    field.send_keys(text)


def open_add_rule(browser: WebDriver) -> None:
    """The add-rule form sits folded under "Add a rule" (a <details>, no script): unfold it."""
    details = browser.find_element(By.CSS_SELECTOR, "details.add-rule")
    if details.get_attribute("open") is None:
        details.find_element(By.TAG_NAME, "summary").click()


def fill_rule(browser: WebDriver, row: int, claim: str, operator: str, value: str) -> None:
    type_into(browser, f"conditions-{row}-claim", claim)
    Select(browser.find_element(By.NAME, f"conditions-{row}-operator")).select_by_value(operator)
    type_into(browser, f"conditions-{row}-value", value)
    type_into(browser, f"conditions-{row}-types", TEAM)


def check_scope(browser: WebDriver, scope: str, checked: bool = True) -> None:
    box = browser.find_element(By.CSS_SELECTOR, f".rule-form input[name=scopes][value={scope}]")
    if box.is_selected() != checked:
        box.click()


def save_rule(browser: WebDriver) -> None:
    submit(browser, ".rule-form button[type=submit]:not([name])")


def ask(flow: Flow) -> tuple[int, str]:
    reply = flow.ask(flow.ticket("view"), RADIOLOGY)
    return reply.status, (reply.json or {}).get("rpt") or (reply.json or {}).get("error", "")


def test_the_owner_adds_edits_explains_revokes_and_deletes(
    server: LiveServer, flow: Flow, browser: WebDriver, shots: Screenshots
) -> None:
    assert ask(flow) == (403, "not_authorized_permission")
    open_signed_in(browser, policy_uri(flow), "alice")
    shots.take("set")
    text = main_text(browser)
    assert "Holiday photos" in text and "Photo <b>server</b>" in text and "not verified" in text
    assert "Doctors of the hospital" in text  # the operator's rule
    # Add: radiology may view.
    open_add_rule(browser)
    fill_rule(browser, 0, "team", "equals", "radiology")
    check_scope(browser, "view")
    shots.take("add-rule")
    save_rule(browser)
    assert urlsplit(browser.current_url).fragment == "own-rules"
    own = browser.find_element(By.CSS_SELECTOR, ".own-rule").text
    assert "People whose team claims say their team is 'radiology' may view." in own
    status, rpt = ask(flow)
    assert status == 201, rpt
    assert [p["scopes"] for p in flow.introspect(rpt)["permissions"]] == [["view"]]
    # Edit: print too, and a second condition row added with the button.
    click_and_wait(browser, browser.find_element(By.CSS_SELECTOR, ".own-rule a"))
    shots.take("edit-rule")
    check_scope(browser, "print")
    submit(browser, "button[name=add_row]")
    assert browser.find_element(By.NAME, "conditions-0-value").get_attribute("value") == "radiology"
    fill_rule(browser, 1, "team", "prefix", "radio")
    save_rule(browser)
    own = browser.find_element(By.CSS_SELECTOR, ".own-rule").text
    assert (
        "People whose team claims say their team is 'radiology' and their team starts with"
        " 'radio' may view and print." in own
    )
    # Explain: the viewer (picked from the list of apps) with radiology's claims is granted by her rule.
    # (by its id: the module's server has a Viewer of each screen's run, named alike)
    Select(browser.find_element(By.NAME, "client")).select_by_value(flow.app.client_id)
    browser.find_element(By.CSS_SELECTOR, "details.claims summary").click()
    explain_claims = browser.find_element(By.ID, "explain-claims")
    explain_claims.clear()
    explain_claims.send_keys(json.dumps(RADIOLOGY))
    submit(browser, ".explain-form button[type=submit]")
    shots.take("explain")
    result = browser.find_element(By.ID, "explained").text
    assert (
        "Decision: grant" in result and "Granted 'view' on resource set 'Holiday photos'" in result
    )
    assert "Doctors of the hospital does not hold (the operator's)" in result
    assert "A rule of yours without a description holds (yours)" in result
    # Revoke: the permission is gone from introspection.
    permissions = browser.find_element(By.CSS_SELECTOR, "ul.permissions")
    assert "Viewer" in permissions.text and "for bob" in permissions.text
    submit(browser, "form[action$='/permissions/revoke'] button")
    shots.take("revoked")
    assert "No application holds a permission" in main_text(browser)
    assert flow.introspect(rpt)["permissions"] == []
    # Delete: the viewer is refused again.
    submit(browser, ".own-rule form button")
    assert "You have no rules of your own" in main_text(browser)
    assert ask(flow) == (403, "not_authorized_permission")
    log = server.output()
    assert "permission revoked owner='alice'" in log
    assert "radiology" not in log  # never a condition's value


def test_someone_else_gets_the_404_page(flow: Flow, browser: WebDriver, shots: Screenshots) -> None:
    open_signed_in(browser, policy_uri(flow), "bob")
    shots.take("not-found")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Not found"
    assert "Holiday photos" not in browser.page_source


def test_an_invalid_rule_shows_the_error_next_to_the_field(
    flow: Flow, browser: WebDriver, shots: Screenshots
) -> None:
    open_signed_in(browser, policy_uri(flow), "alice")
    open_add_rule(browser)
    fill_rule(browser, 0, "team", "regex", "(unclosed")
    check_scope(browser, "view")
    save_rule(browser)
    shots.take("invalid-rule")
    error = browser.find_element(By.ID, "error-conditions-0-value")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", error)
    shots.take("invalid-rule-field")
    assert "regex" in error.text or "pattern" in error.text
    # Right after its field, which keeps what was typed.
    field = error.find_element(By.XPATH, "preceding-sibling::input[1]")
    assert field.get_attribute("name") == "conditions-0-value"
    assert field.get_attribute("value") == "(unclosed"
    assert "You have no rules of your own" in main_text(browser)
    assert ask(flow) == (403, "not_authorized_permission")


@pytest.mark.parametrize("screen", ["phone"], indirect=True)
def test_the_pages_on_a_phone(flow: Flow, browser: WebDriver, shots: Screenshots) -> None:
    open_signed_in(browser, policy_uri(flow), "alice")
    shots.take("set")
    width = browser.execute_script("return document.documentElement.scrollWidth")
    assert width <= 390, width  # nothing wider than the phone
    click_and_wait(browser, browser.find_element(By.LINK_TEXT, "All your resource sets"))
    shots.take("list")
    assert "Holiday photos" in main_text(browser)
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 390
