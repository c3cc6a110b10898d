"""Real browsers on the pages: headless Chromium (tests/browser.py) against a real server signs
in, lands on `next`, sees a wrong password refused and the lockout with its time, and signs out.
Every page visited leaves a screenshot in tests/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from .browser import Screenshots, chromium_driver, click_and_wait
from .conftest import LiveServer, start_server, stop_server

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(
        tmp_path_factory.mktemp("browser"), extra_config="[signin]\nmax_failures = 3\n"
    )
    for name in ("alice", "bob", "carol"):
        live.command("user", "create", name, "--password-stdin", input=f"{name}'s password\n")
    yield live
    stop_server(live)


@pytest.fixture(params=["desktop"])
def browser(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[WebDriver]:
    driver = chromium_driver(tmp_path / "profile", phone=request.param == "phone")
    yield driver
    driver.quit()


@pytest.fixture
def shots(browser: WebDriver, request: pytest.FixtureRequest) -> Screenshots:
    return Screenshots(browser, request.node.name)


def submit(browser: WebDriver, button: str) -> None:
    """Clicks and waits for the next page (a click does not wait for it)."""
    click_and_wait(browser, browser.find_element(By.CSS_SELECTOR, button))


def fill_in(browser: WebDriver, username: str, password: str) -> None:
    browser.find_element(By.ID, "username").clear()
    browser.find_element(By.ID, "username").send_keys(username)
    browser.find_element(By.ID, "password").send_keys(password)
    submit(browser, "main button[type=submit]")


def error_text(browser: WebDriver) -> str:
    return str(browser.find_element(By.CLASS_NAME, "error").text)


@pytest.mark.parametrize("browser", ["phone"], indirect=True)
def test_sign_in_lands_on_next_and_sign_out(
    server: LiveServer, browser: WebDriver, shots: Screenshots
) -> None:
    browser.get(server.url + "/")
    shots.take("home")
    assert "A UMA authorization server" in browser.find_element(By.TAG_NAME, "h1").text
    click_and_wait(browser, browser.find_element(By.LINK_TEXT, "Sign in"))
    assert browser.current_url == server.url + "/signin"
    browser.get(server.url + "/signin?next=/%3Fwelcome%3D1")
    shots.take("signin")
    # The style sheet applied (its hash is in the policy): the button is not the default grey.
    button = browser.find_element(By.CSS_SELECTOR, "main button[type=submit]")
    assert button.value_of_css_property("background-color") == "rgba(31, 95, 168, 1)"
    fill_in(browser, "alice", "alice's password")
    assert browser.current_url == server.url + "/?welcome=1"
    shots.take("home-signed-in")
    assert "You are signed in as alice" in browser.find_element(By.TAG_NAME, "main").text
    submit(browser, "header form.signout button")
    assert browser.current_url == server.url + "/"
    shots.take("home-signed-out")
    assert "Sign in" in browser.find_element(By.TAG_NAME, "main").text
    assert browser.get_cookies() == [] or all(
        c["name"] != "umaserver_session" for c in browser.get_cookies()
    )
    assert "sign-in succeeded username='alice'" in server.output()


def test_a_wrong_password_shows_the_error(
    server: LiveServer, browser: WebDriver, shots: Screenshots
) -> None:
    browser.get(server.url + "/signin")
    fill_in(browser, "bob", "not bob's password")
    shots.take("signin-error")
    assert error_text(browser) == "The username or the password is wrong."
    assert browser.find_element(By.ID, "username").get_attribute("value") == "bob"
    assert "not bob's password" not in server.output()


def test_repeated_failures_show_the_lockout_with_its_time(
    server: LiveServer, browser: WebDriver, shots: Screenshots
) -> None:
    browser.get(server.url + "/signin")
    for _ in range(2):
        fill_in(browser, "carol", "guess")
        assert error_text(browser) == "The username or the password is wrong."
    fill_in(browser, "carol", "guess")
    shots.take("lockout")
    assert error_text(browser) == (
        "Too many failed sign-ins for this account. Try again in 15 minutes."
    )
    fill_in(browser, "carol", "carol's password")  # the right one: still locked
    assert "Try again in 15 minutes." in error_text(browser)


def test_an_error_page_looks_like_the_others(
    server: LiveServer, browser: WebDriver, shots: Screenshots
) -> None:
    browser.get(server.url + "/signout")  # POST only
    shots.take("error")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Not allowed here"
