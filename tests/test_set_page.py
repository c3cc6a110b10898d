"""The set page redesigned for people (issue 25, item 6), through the Flask test client: it leads
with who has access, then Share, then the rules as sentences, then the explain form, which picks
the app from a list by name and may name a person, so that a share explains itself; the verdicts
name rules by title, never by a generated id."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from umaserver import secrets_at_rest

from .conftest import Party, Store, make_party, make_person
from .flows import EMPLOYEE, FlaskApi, Flow
from .pages_helpers import TOKEN, sign_in

RULES = f"""
[[rules]]
id = "doctors"
owner = "alice"
scopes = ["view", "print"]
description = "Doctors at the hospital"
[[rules.conditions]]
claim = "role"
contains = "doctor"
types = ["{EMPLOYEE}"]
"""
PHOTOS = {"name": "Holiday photos", "scopes": ["view", "print"]}
TEAM = "urn:example:team"


@pytest.fixture
def rules_text() -> str:
    return RULES


@pytest.fixture(autouse=True)
def people(store: Store) -> None:
    for name in ("alice", "bob"):
        make_person(store, name, secrets_at_rest.hash_password(f"{name}'s password"))


@pytest.fixture
def viewer(store: Store, people: None) -> Party:
    """bob's client ("client of bob"), with his AAT."""
    return make_party(store, "bob", "uma_authorization", push_types=(EMPLOYEE, TEAM))


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


def post(alice: FlaskClient, flow: Flow, path: str, form: dict[str, Any]) -> Any:
    found = TOKEN.search(alice.get(page_of(flow)).text)
    assert found is not None
    return alice.post(page_of(flow) + path, data={**form, "csrf_token": found.group(1)})


def add_team_rule(alice: FlaskClient, flow: Flow) -> None:
    form = {
        "description": "The radiology team",
        "coverage": "this",
        "scopes": "view",
        "conditions-0-claim": "team",
        "conditions-0-operator": "equals",
        "conditions-0-value": "radiology",
        "conditions-0-types": TEAM,
    }
    assert post(alice, flow, "/rules", form).status_code == 303


def test_the_page_leads_with_who_has_access_then_share_rules_and_explain(
    alice: FlaskClient, flow: Flow
) -> None:
    page = alice.get(page_of(flow))
    headings = re.findall(r"<h2 id=\"([a-z-]+)\">(.*?)</h2>", page.text)
    assert headings == [
        ("access", "Who has access"),
        ("share", "Share"),
        ("rules", "Rules"),
        ("explain", "Explain a decision"),
    ]
    # In that order on a phone; on a wide screen (style.css's grid areas) who has access, Share
    # and Explain in the first column, the rules in the second.
    areas = re.findall(
        r'<section class="area-([a-z]+)"', page.text.split('<div class="columns">')[1]
    )
    assert areas == ["access", "share", "rules", "explain"]
    assert '"access rules" "share rules" "explain rules"' in page.text  # the inline style sheet
    assert '<main class="wide">' in page.text


def test_rules_are_sentences_without_lists_or_ids(alice: FlaskClient, flow: Flow) -> None:
    add_team_rule(alice, flow)
    assert post(alice, flow, "/shares", {"to": "bob", "scopes": ["view"]}).status_code == 303
    page = alice.get(page_of(flow))
    text = text_of(page)
    assert (
        "Doctors at the hospital (doctors) People whose employee claims say their role contains"
        " 'doctor' may view and print on all your resource sets." in text
    )
    assert (
        "The radiology team People whose team claims say their team is 'radiology' may view."
        in text
    )
    # The share is listed under who has access, not among the rules.
    assert "bob - view Stop sharing" in text
    rules = text.split("Rules", 1)[1]
    assert "bob may view" not in rules
    # Nothing reads like debug output.
    assert "['" not in text and "on ids" not in text and "condition 0" not in text
    assert not re.search(r"\bo-[A-Za-z0-9_-]{8,}", text)


def test_the_explain_form_lists_the_apps_by_name(alice: FlaskClient, flow: Flow) -> None:
    page = alice.get(page_of(flow))
    select = re.search(r'<select id="explain-client" name="client".*?</select>', page.text, re.S)
    assert select is not None
    options = re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', select.group(0))
    assert options[0] == ("", "Any app (as if it could send any claim)")
    assert (flow.app.client_id, "client of bob") in options
    assert '<input type="text" id="explain-as" name="as"' in page.text


def explain(alice: FlaskClient, flow: Flow, **form: Any) -> Any:
    return post(alice, flow, "/explain", {"scopes": "view", "claims": "[]", **form})


def verdicts_of(page: Any) -> list[str]:
    found = re.findall(
        r'<strong class="rule-title">(.*?)</strong> (holds|does not hold)', page.text
    )
    return [f"{html.unescape(title)}: {verdict}" for title, verdict in found]


def test_a_share_explains_itself_for_its_person(alice: FlaskClient, flow: Flow) -> None:
    add_team_rule(alice, flow)
    assert post(alice, flow, "/shares", {"to": "bob", "scopes": ["view"]}).status_code == 303
    as_bob = explain(alice, flow, client=flow.app.client_id, **{"as": "bob"})
    assert as_bob.status_code == 200, as_bob.text
    assert "Decision: grant" in text_of(as_bob)
    summary = re.search(r'<p class="summary">(.*?)</p>', as_bob.text)
    assert summary is not None
    assert html.unescape(summary.group(1)) == (
        "Granted 'view' on resource set 'Holiday photos' by rule “your share with bob”."
    )
    assert verdicts_of(as_bob) == [
        "Doctors at the hospital: does not hold",
        "The radiology team: does not hold",
        "Your share with bob: holds",
    ]
    assert "(the operator's)" in text_of(as_bob) and "(yours)" in text_of(as_bob)
    # Reasons name claim types as words, never as a Python list.
    assert f"(accepted types {EMPLOYEE})" in text_of(as_bob)
    assert "['" not in text_of(as_bob)
    # Nobody named: the share does not hold; the form keeps what was typed.
    nobody = explain(alice, flow, client=flow.app.client_id)
    assert "Decision: grant" not in text_of(nobody)
    assert "Your share with bob: does not hold" in verdicts_of(nobody)
    assert 'name="as" value="bob"' in as_bob.text
    chosen = re.search(rf'<option value="{flow.app.client_id}" selected>', as_bob.text)
    assert chosen is not None


@pytest.mark.parametrize(
    ("form", "field", "sentence"),
    [
        ({"as": "nobody"}, "as", "There is no one with this username here: check the spelling."),
        ({"client": "no-such-app"}, "client", "Choose an app from the list."),
        ({"scopes": ""}, "scopes", "Choose at least one scope."),
    ],
)
def test_explain_errors_are_sentences_next_to_their_field(
    alice: FlaskClient, flow: Flow, form: dict[str, str], field: str, sentence: str
) -> None:
    page = explain(alice, flow, **form)
    assert page.status_code == 400
    found = re.search(rf'<span class="field-error" id="error-{field}">(.*?)</span>', page.text)
    assert found is not None and html.unescape(found.group(1)) == sentence


def field_error(page: Any, field: str) -> str | None:
    found = re.search(rf'<span class="field-error" id="error-{field}">(.*?)</span>', page.text)
    return None if found is None else html.unescape(found.group(1))


def test_rule_form_errors_are_sentences_for_the_owner_next_to_their_field(
    alice: FlaskClient, flow: Flow
) -> None:
    form = {
        "coverage": "type",
        "conditions-0-claim": "role",
        "conditions-0-operator": "equals",
        "conditions-0-value": "",
        "conditions-1-claim": "ward",
        "conditions-1-operator": "one_of",
        "conditions-1-value": "3",
    }
    page = post(alice, flow, "/rules", form)
    assert page.status_code == 400
    assert field_error(page, "scopes") == "Choose at least one scope."
    assert (
        field_error(page, "coverage_type") == "Write the type of the resource sets the rule covers."
    )
    assert field_error(page, "conditions-0-value") == (
        'Write the value the claim must have ("" for empty text).'
    )
    assert field_error(page, "conditions-1-value") == (
        'Write the values the claim may have, as a JSON list such as ["doctor", "nurse"].'
    )
    assert "must be" not in text_of(page)
    # The form comes back unfolded, with what was typed.
    assert '<details class="add-rule" open>' in page.text
    assert 'name="conditions-1-value" value="3"' in page.text


def test_the_edit_page_is_titled_by_the_rule_never_its_id(alice: FlaskClient, flow: Flow) -> None:
    add_team_rule(alice, flow)
    page = alice.get(page_of(flow))
    link = re.search(r'<a href="(/policy/resource_set/[^"]+/rules/(o-[^"]+))">Edit</a>', page.text)
    assert link is not None
    edit = alice.get(link.group(1))
    assert edit.status_code == 200
    assert '<h1>Edit your rule “<span class="client">The radiology team</span>”</h1>' in edit.text
    assert link.group(2) not in text_of(edit)


def test_the_rule_forms_tests_are_words(alice: FlaskClient, flow: Flow) -> None:
    page = alice.get(page_of(flow))
    select = re.search(r'<select id="conditions-0-operator".*?</select>', page.text, re.S)
    assert select is not None
    assert re.findall(r'<option value="([a-z_]+)"[^>]*>([^<]+)</option>', select.group(0)) == [
        ("equals", "is"),
        ("one_of", "is one of (a JSON list)"),
        ("contains", "contains"),
        ("contains_any", "contains one of (a JSON list)"),
        ("prefix", "starts with"),
        ("suffix", "ends with"),
        ("exists", "is given (any value)"),
        ("regex", "matches the pattern (RE2)"),
    ]


def test_a_rule_picks_its_apps_by_name(alice: FlaskClient, flow: Flow) -> None:
    page = alice.get(page_of(flow))
    boxes = re.findall(
        r'<input type="checkbox" name="clients" value="([^"]+)"> <span class="client">([^<]+)</span>',
        page.text,
    )
    assert (flow.app.client_id, "client of bob") in boxes
    form = {"description": "Bob's viewer only", "scopes": "view", "clients": flow.app.client_id}
    assert post(alice, flow, "/rules", form).status_code == 303
    page = alice.get(page_of(flow))
    assert "Bob's viewer only Anyone may view through the app client of bob." in text_of(page)
    # Its edit page has the box checked, under an unfolded "Only through some apps".
    link = re.search(r'<a href="(/policy/resource_set/[^"]+/rules/o-[^"]+)">Edit</a>', page.text)
    assert link is not None
    edit = alice.get(link.group(1)).text
    assert f'name="clients" value="{flow.app.client_id}" checked>' in edit
    assert '<fieldset class="apps">\n<legend>Through which apps</legend>\n<details open>' in edit
