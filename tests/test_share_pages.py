"""The Share form and the shares on a set's page (issue 25), through the Flask test client as a
browser uses them: alice shares with bob, the share is listed as "bob - view, print - until
28 Nov 2026" with a Stop sharing button, bob's client is granted and then not; errors are a
sentence next to their field, nothing shared."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from umaserver import secrets_at_rest

from .conftest import FakeClock, Party, Store, make_party, make_person
from .flows import FlaskApi, Flow
from .pages_helpers import TOKEN, sign_in

PHOTOS = {"name": "Holiday photos", "scopes": ["view", "print", "delete"]}
# 2026-11-26 12:00 UTC: the share form's dates below are today, later and past days of it.
NOON = int(datetime(2026, 11, 26, 12, tzinfo=UTC).timestamp())


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOON)


@pytest.fixture(autouse=True)
def people(store: Store) -> None:
    for name in ("alice", "bob"):
        make_person(store, name, secrets_at_rest.hash_password(f"{name}'s password"))


@pytest.fixture
def viewer(store: Store, people: None) -> Party:
    """bob's client, with his AAT."""
    return make_party(store, "bob", "uma_authorization")


@pytest.fixture
def flow(http: FlaskClient, rs: Party, viewer: Party) -> Flow:
    return Flow(FlaskApi(http), rs, viewer, PHOTOS)


@pytest.fixture
def alice(app: Flask, people: None) -> FlaskClient:
    browser = app.test_client()
    assert sign_in(browser, "alice", "alice's password").status_code == 303
    return browser


def page_of(flow: Flow) -> str:
    return f"/policy/resource_set/{flow.rs_id}"


def text_of(page: Any) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.text)).split())


def post_share(alice: FlaskClient, flow: Flow, **form: Any) -> Any:
    page = alice.get(page_of(flow))
    found = TOKEN.search(page.text)
    assert found is not None
    return alice.post(f"{page_of(flow)}/shares", data={**form, "csrf_token": found.group(1)})


def shares_listed(alice: FlaskClient, flow: Flow) -> list[str]:
    page = alice.get(page_of(flow))
    items = re.findall(r'<li class="share" id="share-[^"]+">(.*?)</li>', page.text, re.S)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", "", item)).split()) for item in items]


def granted(flow: Flow) -> bool:
    reply = flow.ask(flow.ticket("view", "print"))
    assert reply.status in (201, 403), reply.text
    return reply.status == 201


def test_the_form_is_on_the_page(alice: FlaskClient, flow: Flow) -> None:
    page = alice.get(page_of(flow))
    form = re.search(
        r'<form method="post" action="([^"]+/shares)#share".*?</form>', page.text, re.S
    )
    assert form is not None and form.group(1) == f"{page_of(flow)}/shares"
    body = form.group(0)
    assert 'name="csrf_token"' in body
    assert '<input type="text" id="share-to" name="to"' in body
    assert re.findall(r'type="checkbox" name="scopes" value="([^"]+)"', body) == PHOTOS["scopes"]
    assert '<input type="date" id="share-until" name="until"' in body
    assert '<button type="submit">Share</button>' in body
    assert "You have not shared this resource set with anyone." in text_of(page)


def test_alice_shares_with_bob_and_stops(alice: FlaskClient, flow: Flow) -> None:
    assert not granted(flow)
    reply = post_share(alice, flow, to="bob", scopes=["view", "print"], until="2026-11-28")
    assert reply.status_code == 303
    assert reply.headers["Location"].endswith(f"{page_of(flow)}#shares")
    assert shares_listed(alice, flow) == ["bob - view, print - until 28 Nov 2026 Stop sharing"]
    assert granted(flow)
    # Not among the rules to edit: a share is stopped, not edited.
    assert 'class="rule own-rule"' not in alice.get(page_of(flow)).text

    page = alice.get(page_of(flow))
    stop = re.search(r'action="([^"]+/stop)"', page.text)
    assert stop is not None
    token = TOKEN.search(page.text)
    assert token is not None
    assert alice.post(stop.group(1), data={"csrf_token": token.group(1)}).status_code == 303
    assert shares_listed(alice, flow) == []
    assert not granted(flow)


def test_a_share_by_email_without_end(alice: FlaskClient, flow: Flow) -> None:
    assert post_share(alice, flow, to="Carol@Example.com", scopes=["view"]).status_code == 303
    assert shares_listed(alice, flow) == ["Carol@Example.com - view Stop sharing"]


@pytest.mark.parametrize(
    ("form", "field", "sentence"),
    [
        (
            {"to": "nobody", "scopes": ["view"]},
            "to",
            "There is no user named 'nobody', and it is not an e-mail address either.",
        ),
        ({"to": "", "scopes": ["view"]}, "to", "Enter the username or the e-mail address"),
        ({"to": "bob"}, "scopes-share", "Choose at least one thing the person may do."),
        (
            {"to": "bob", "scopes": ["view"], "until": "2026-11-25"},
            "until",
            "This date is in the past: choose today or a later day.",
        ),
        (
            {"to": "bob", "scopes": ["view"], "until": "next friday"},
            "until",
            "Enter a date such as 2026-11-28, or leave it empty.",
        ),
    ],
)
def test_errors_are_a_sentence_next_to_their_field(
    alice: FlaskClient, flow: Flow, form: dict[str, Any], field: str, sentence: str
) -> None:
    page = post_share(alice, flow, **form)
    assert page.status_code == 400
    error = re.search(rf'<span class="field-error" id="error-{field}">([^<]*)</span>', page.text)
    assert error is not None, page.text
    assert html.unescape(error.group(1)).startswith(sentence)
    assert f'value="{html.escape(form["to"])}"' in page.text  # kept as typed
    assert shares_listed(alice, flow) == []


def test_today_is_not_past(alice: FlaskClient, flow: Flow, clock: FakeClock) -> None:
    assert post_share(alice, flow, to="bob", scopes=["view"], until="2026-11-26").status_code == 303
    assert shares_listed(alice, flow) == ["bob - view - until 26 Nov 2026 Stop sharing"]
    assert granted(flow) is False  # print is not shared
    reply = flow.ask(flow.ticket("view"))
    assert reply.status == 201
    clock.advance(12 * 3600)  # midnight: the day is over
    assert flow.ask(flow.ticket("view")).status == 403


def test_sharing_needs_the_csrf_token_and_the_owner(
    app: Flask, alice: FlaskClient, flow: Flow
) -> None:
    assert (
        alice.post(f"{page_of(flow)}/shares", data={"to": "bob", "scopes": ["view"]}).status_code
        == 400
    )
    bob = app.test_client()
    assert sign_in(bob, "bob", "bob's password").status_code == 303
    token = TOKEN.search(bob.get("/policy").text)
    assert token is not None
    refused = bob.post(
        f"{page_of(flow)}/shares",
        data={"to": "bob", "scopes": ["view"], "csrf_token": token.group(1)},
    )
    assert refused.status_code == 404
    assert shares_listed(alice, flow) == []


def test_a_shares_rule_is_not_edited_or_deleted_as_a_rule(alice: FlaskClient, flow: Flow) -> None:
    assert post_share(alice, flow, to="bob", scopes=["view"]).status_code == 303
    page = alice.get(page_of(flow))
    found = re.search(r'id="share-([^"]+)"', page.text)
    token = TOKEN.search(page.text)
    assert found is not None and token is not None
    rule = f"{page_of(flow)}/rules/{found.group(1)}"
    said = "This rule is a share: stop sharing on the resource set's page instead of changing it."
    for reply in (
        alice.get(rule),
        alice.post(rule, data={"scopes": ["view"], "csrf_token": token.group(1)}),
        alice.post(f"{rule}/delete", data={"csrf_token": token.group(1)}),
    ):
        assert reply.status_code == 400
        assert said in html.unescape(reply.text)
    assert shares_listed(alice, flow) == ["bob - view Stop sharing"]
    assert granted(flow) is False and flow.ask(flow.ticket("view")).status == 201


def test_a_share_and_its_stop_are_in_the_owners_history(alice: FlaskClient, flow: Flow) -> None:
    assert post_share(alice, flow, to="bob", scopes=["view", "print"]).status_code == 303
    page = alice.get(page_of(flow))
    stop = re.search(r'action="([^"]+/stop)"', page.text)
    token = TOKEN.search(page.text)
    assert stop is not None and token is not None
    assert alice.post(stop.group(1), data={"csrf_token": token.group(1)}).status_code == 303
    history = text_of(alice.get("/policy/history"))
    shared = history.index("You shared view, print on Holiday photos with bob .")
    stopped = history.index("You stopped sharing view, print on Holiday photos with bob .")
    assert stopped < shared  # newest first
