"""The header's navigation (issue 25, item 6): for a signed-in person, Resource sets, Requests,
History, Account and Sign out on every page, the current one marked with `aria-current`; a
Requests badge only when something waits; nothing of it for someone signed out."""

from __future__ import annotations

import re

import pytest
from flask import Flask
from flask.testing import FlaskClient

from umaserver import secrets_at_rest
from umaserver.pages import navigation

from .conftest import Store, make_person
from .pages_helpers import TOKEN, sign_in


@pytest.fixture
def alice(app: Flask, store: Store) -> FlaskClient:
    make_person(store, "alice", secrets_at_rest.hash_password("alice's password"))
    browser = app.test_client()
    assert sign_in(browser, "alice", "alice's password").status_code == 303
    return browser


def header_of(page_text: str) -> str:
    found = re.search(r"<header>(.*?)</header>", page_text, re.S)
    assert found is not None, page_text
    return found.group(1)


def links_of(header: str) -> list[tuple[str, str, str | None]]:
    """(href, words, aria-current) of each link of the navigation."""
    return [
        (href, re.sub(r"<[^>]+>", "", words).strip(), current or None)
        for href, current, words in re.findall(
            r'<a href="([^"]+)"(?: aria-current="([^"]+)")?>(.*?)</a>', header, re.S
        )
    ]


@pytest.mark.parametrize(
    ("path", "current"),
    [
        ("/", None),
        ("/policy", ("/policy", "page")),
        ("/policy/history", ("/policy/history", "page")),
        ("/account", ("/account", "page")),
        ("/notices", ("/notices", "page")),
    ],
)
def test_every_page_has_the_navigation_with_the_current_one_marked(
    alice: FlaskClient, path: str, current: tuple[str, str] | None
) -> None:
    page = alice.get(path)
    assert page.status_code == 200, page.text
    links = links_of(header_of(page.text))
    assert [(href, words) for href, words, _ in links] == [
        ("/policy", "Resource sets"),
        ("/policy/requests", "Requests"),
        ("/policy/history", "History"),
        ("/notices", "Notices"),
        ("/account", "Account"),
    ]
    marked = [(href, mark) for href, _, mark in links if mark]
    assert marked == ([current] if current else [])
    # Sign out is a POST form with its CSRF token, in the header (no longer in the footer).
    signout = re.search(
        r'<form method="post" action="/signout".*?</form>', header_of(page.text), re.S
    )
    assert signout is not None and TOKEN.search(signout.group(0))
    assert ">Sign out</button>" in signout.group(0)


def test_a_page_under_an_item_marks_it_as_the_current_section() -> None:
    assert navigation.current_item("/policy/resource_set/abc") == ("sets", False)
    assert navigation.current_item("/policy/requests") == ("requests", True)
    assert navigation.current_item("/policy/history") == ("history", True)
    assert navigation.current_item("/signin") == (None, False)


def test_signed_out_there_is_no_navigation(http: FlaskClient) -> None:
    header = header_of(http.get("/").text)
    assert '<a class="home" href="/">umaserver</a>' in header
    assert links_of(header) == []
    assert "Sign out" not in header and "/policy" not in header


def test_requests_have_a_badge_only_when_some_wait(
    alice: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No request waits: no badge.
    assert 'class="badge"' not in alice.get("/policy").text
    # With a count, the badge is in the Requests link, and only there.
    monkeypatch.setattr(navigation, "header_counts", lambda user: {"requests": 3})
    header = header_of(alice.get("/policy").text)
    assert ("/policy/requests", "Requests 3", None) in links_of(header)
    assert header.count('class="badge"') == 1
    monkeypatch.setattr(navigation, "header_counts", lambda user: {"requests": 0})
    assert 'class="badge"' not in alice.get("/policy").text
