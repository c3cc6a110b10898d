"""Untrusted content on the owner's page, in a real browser against a live server whose fetch job
may reach loopback (`[fetch] allow_loopback`, the test setting): a scope description's name and
icon appear once the job has fetched them (until then the raw scope), the set's icon and the
resource server's logo are served by this server, and the resource server's web site is reached
only through the interstitial, which shows the full URL. Every page visited leaves a screenshot."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from .browser import Screenshots, click_and_wait
from .conftest import LiveServer, start_server, stop_server
from .fake_web import PNG, FakeWeb, Route
from .flows import wait_until
from .test_browser_signin import fill_in

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as fake:
        yield fake


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(
        tmp_path_factory.mktemp("browser-untrusted"),
        extra_config="[fetch]\nallow_loopback = true\ntimeout = 2\n",
    )
    live.command("user", "create", "alice", "--password-stdin", input="alice's password\n")
    yield live
    stop_server(live)


@pytest.fixture
def shots(browser: WebDriver, request: pytest.FixtureRequest) -> Screenshots:
    return Screenshots(browser, request.node.name)


def _registered_set(server: LiveServer, web: FakeWeb) -> str:
    """alice's photo server, registered dynamically with its web site and logo, registers a set
    whose `view` scope is a URI with a description: the set's policy page URL."""
    web.routes["/scopes/view"] = Route(
        body=json.dumps(
            {"name": "View the photos", "icon_uri": web.url("/icons/view.png")}
        ).encode(),
        content_type="application/json",
    )
    for path in ("/icons/view.png", "/icons/set.png", "/logo.png"):
        web.routes[path] = Route(body=PNG, content_type="image/png")
    web.routes["/about"] = Route(body=b"<!doctype html><title>Photo server</title>")
    initial = server.command("registration-token", "issue")["initial_access_token"]
    made = requests.post(
        server.url + "/register",
        json={
            "client_name": "Photo <b>server</b>",
            "grant_types": ["client_credentials"],
            "client_uri": web.url("/about"),
            "logo_uri": web.url("/logo.png"),
        },
        headers={"Authorization": f"Bearer {initial}"},
        timeout=10,
    )
    assert made.status_code == 201, made.text
    pat = server.command(
        "token", "issue", "--client", made.json()["client_id"], "--user", "alice",
        "--scope", "uma_protection",
    )["access_token"]  # fmt: skip
    created = requests.post(
        server.url + "/rs/resource_set",
        json={
            "name": "Holiday photos",
            "scopes": [web.url("/scopes/view"), "print"],
            "icon_uri": web.url("/icons/set.png"),
        },
        headers={"Authorization": f"Bearer {pat}"},
        timeout=10,
    )
    assert created.status_code == 201, created.text
    uri: str = created.json()["user_access_policy_uri"]
    return uri


def main_text(browser: WebDriver) -> str:
    return str(browser.find_element(By.TAG_NAME, "main").text)


def reload_until(browser: WebDriver, page: str, shown: Callable[[], bool]) -> None:
    def reloaded() -> bool:
        browser.get(page)
        return shown()

    wait_until(reloaded, timeout=30, interval=0.5, message=f"never shown on {page}")


def test_scope_names_icons_and_the_interstitial(
    browser: WebDriver, shots: Screenshots, server: LiveServer, web: FakeWeb
) -> None:
    page = _registered_set(server, web)
    browser.get(page)
    assert urlsplit(browser.current_url).path == "/signin"
    fill_in(browser, "alice", "alice's password")
    assert browser.current_url == page

    # The fetch job works in the background: the page shows what it found so far.
    reload_until(browser, page, lambda: "View the photos" in main_text(browser))
    reload_until(
        browser, page, lambda: len(browser.find_elements(By.CSS_SELECTOR, "main img")) == 3
    )
    shots.take("1-policy-page-with-descriptions")
    main = main_text(browser)
    assert web.url("/scopes/view") in main  # the raw scope is still shown beside its name
    assert "Photo <b>server</b>" in main  # registered names are text, never markup
    for image in browser.find_elements(By.CSS_SELECTOR, "main img"):
        source = image.get_attribute("src") or ""
        assert urlsplit(source).netloc == urlsplit(server.url).netloc  # served by this server
        served = requests.get(source, timeout=10)
        assert served.headers["Content-Type"] == "image/png"
        assert served.headers["X-Content-Type-Options"] == "nosniff"
        assert "sandbox" in served.headers["Content-Security-Policy"]
        assert served.content == PNG

    reload_until(browser, page, lambda: bool(browser.find_elements(By.CSS_SELECTOR, "a.uri")))
    site = browser.find_element(By.CSS_SELECTOR, "a.uri")
    assert urlsplit(site.get_attribute("href") or "").path.startswith("/link/")
    click_and_wait(browser, site)
    shots.take("2-interstitial")
    interstitial = main_text(browser)
    assert web.url("/about") in interstitial and "not" in interstitial
    onward = browser.find_element(By.CSS_SELECTOR, "main a[rel~=noopener]")
    assert onward.get_attribute("href") == web.url("/about")
