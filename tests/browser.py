"""Headless Chromium for the browser tests, from Debian's packages, offline.

`chromium_driver(tmp, phone=False)` starts Chromium through Selenium with the driver's path given
(`/usr/bin/chromedriver`), the browser's (`/usr/bin/chromium`), `SE_OFFLINE=true` (Selenium
Manager downloads nothing) and a temporary profile; `--no-sandbox` because tests and CI run as
root. Without the packages the tests fail, saying what to install: they are never skipped.
`Screenshots.take(name)` saves `tests/screenshots/<test>-<name>.png` (kept out of git)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
PHONE = (390, 844)
DESKTOP = (1280, 900)
# The screens the pages are looked at on: exactly these many CSS pixels of page (the window's
# frame is not counted), a desktop's and a phone's.
SCREENS = {"desktop": (1280, 800), "phone": (390, 844)}


def chromium_driver(profile: Path, phone: bool = False) -> webdriver.Chrome:
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        pytest.fail(
            f"The browser tests need {' and '.join(missing)}: install Debian's chromium and"
            " chromium-driver (apt-get install chromium chromium-driver, or `make system-deps`).",
            pytrace=False,
        )
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must download nothing
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    width, height = PHONE if phone else DESKTOP
    if phone:  # a window cannot be made as narrow as a phone: emulate its screen
        options.add_experimental_option(
            "mobileEmulation",
            {"deviceMetrics": {"width": width, "height": height, "pixelRatio": 1}},
        )
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    return driver


def screen_driver(profile: Path, screen: str) -> webdriver.Chrome:
    """Chromium showing pages on the screen `screen` names (a key of SCREENS) exactly."""
    phone = screen == "phone"
    driver = chromium_driver(profile, phone=phone)
    metrics(driver, *SCREENS[screen], phone)
    return driver


def metrics(driver: webdriver.Chrome, width: int, height: int, phone: bool) -> None:
    """The page's screen: exactly `width` x `height` CSS pixels."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": phone},
    )


class Screenshots:
    """One PNG per page visited, named after the test."""

    def __init__(self, driver: webdriver.Chrome, test_name: str) -> None:
        self.driver = driver
        self.prefix = re.sub(r"[^A-Za-z0-9_.-]+", "_", test_name)

    def take(self, page: str) -> Path:
        SCREENSHOTS.mkdir(exist_ok=True)
        path = SCREENSHOTS / f"{self.prefix}-{page}.png"
        assert self.driver.save_screenshot(str(path)), path
        return path


def click_and_wait(browser: WebDriver, element: WebElement) -> None:
    """Clicks and waits for the next page (a click does not wait for it). While the page is
    being replaced chromedriver may answer an "unhandled inspector error" for the old element:
    that is a moment of the navigation, not its end, so it is waited through too."""
    old_page = browser.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(browser, 20, ignored_exceptions=[WebDriverException]).until(
        expected_conditions.staleness_of(old_page)
    )
