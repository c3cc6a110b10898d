"""The owner's policy pages (`/policy`, `/policy/resource_set/<_id>`) through the Flask test client:
sign-in and ownership, the list's pages, the set as registered with the rules that cover it, the
rule forms, revoking a permission, and explaining a decision as `policy explain` does."""

from __future__ import annotations

import html
import json
import logging
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from flask import Flask
from flask.testing import FlaskClient
from markupsafe import escape

from umaserver import secrets_at_rest

from .conftest import (
    CLI,
    Party,
    Store,
    make_party,
    make_person,
    store_owner_rule_as_is,
    stored_permissions,
    write_config,
)
from .flows import EMPLOYEE, FlaskApi, Flow
from .pages_helpers import TOKEN, sign_in

RULES = f"""
[[rules]]
id = "doctors"
owner = "alice"
scopes = ["view"]
description = "Doctors <b>only</b>"
[rules.resource_sets]
types = ["https://example.com/rsets/photo"]
[[rules.conditions]]
claim = "role"
contains = "doctor"
types = ["{EMPLOYEE}"]
hint = "Your role at the hospital"

[[rules]]
id = "notes-only"
owner = "alice"
scopes = ["read"]
[rules.resource_sets]
names = ["Notes"]

[[rules]]
id = "bobs"
owner = "bob"
scopes = ["view"]
"""
PHOTOS = {
    "name": "Holiday <photos>",
    "scopes": ["view", "print"],
    "type": "https://example.com/rsets/photo",
    "icon_uri": "https://icons.example/photo.png",
}
DOCTOR = [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}]
NURSE = [{"type": EMPLOYEE, "value": {"role": ["nurse"]}}]


@pytest.fixture
def rules_text() -> str:
    return RULES


@pytest.fixture(autouse=True)
def people(store: Store) -> None:
    """alice and bob, who sign in with passwords (before `rs` makes alice without one)."""
    for name in ("alice", "bob"):
        make_person(store, name, secrets_at_rest.hash_password(f"{name}'s password"))


@pytest.fixture
def viewer(store: Store, people: None) -> Party:
    """bob's client, which may push employee claims, with his AAT."""
    return make_party(store, "bob", "uma_authorization", push_types=(EMPLOYEE,))


@pytest.fixture
def flow(http: FlaskClient, rs: Party, viewer: Party) -> Flow:
    return Flow(FlaskApi(http), rs, viewer, PHOTOS)


@pytest.fixture
def alice(app: Flask, people: None) -> FlaskClient:
    browser = app.test_client()
    assert sign_in(browser, "alice", "alice's password").status_code == 303
    return browser


@pytest.fixture
def bob(app: Flask, people: None) -> FlaskClient:
    browser = app.test_client()
    assert sign_in(browser, "bob", "bob's password").status_code == 303
    return browser


def page_of(flow: Flow) -> str:
    return f"/policy/resource_set/{flow.rs_id}"


def token_on(browser: FlaskClient, path: str) -> str:
    found = TOKEN.search(browser.get(path).text)
    assert found is not None
    return found.group(1)


def text_of(page: Any) -> str:
    """The page's text: tags gone, entities read, spaces folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.text)).split())


def grant(flow: Flow) -> str:
    """An RPT holding a permission on the set (bob's client, as a doctor)."""
    reply = flow.ask(flow.ticket("view"), DOCTOR)
    assert reply.status == 201, reply.text
    rpt: str = reply.json["rpt"]
    return rpt


# -- sign-in and ownership -------------------------------------------------------------------


def test_signed_out_people_go_to_sign_in_and_back(http: FlaskClient, flow: Flow) -> None:
    for path in ("/policy", page_of(flow), "/policy?after=x&after_name=y"):
        answer = http.get(path)
        assert answer.status_code == 303
        assert answer.headers["Location"] == "http://uma.test/signin?next=" + quote(path, safe="/")
    for action in ("/rules", "/rules/o-x", "/rules/o-x/delete", "/permissions/revoke", "/explain"):
        assert http.post(page_of(flow) + action, data={}).status_code == 303


def test_the_registration_links_to_the_page(http: FlaskClient, flow: Flow, rs: Party) -> None:
    read = http.get(f"/rs/resource_set/{flow.rs_id}", headers=rs.auth).json
    assert read["user_access_policy_uri"] == "http://uma.test" + page_of(flow)


def test_someone_else_and_an_unknown_set_get_the_same_404_page(
    bob: FlaskClient, alice: FlaskClient, flow: Flow
) -> None:
    theirs = bob.get(page_of(flow))
    unknown = alice.get("/policy/resource_set/no-such-set")
    too_long = alice.get("/policy/resource_set/" + "x" * 300)
    assert theirs.status_code == unknown.status_code == too_long.status_code == 404
    assert theirs.mimetype == "text/html"
    tokenless = [TOKEN.sub("", page.text) for page in (theirs, unknown, too_long)]
    assert tokenless[0].replace("bob", "alice") == tokenless[1] == tokenless[2]
    token = token_on(bob, "/policy")
    for action in ("/rules", "/rules/o-x", "/rules/o-x/delete", "/permissions/revoke", "/explain"):
        assert bob.post(page_of(flow) + action, data={"csrf_token": token}).status_code == 404
    assert "Holiday" not in bob.get("/policy").text


@pytest.mark.parametrize(
    "action", ["/rules", "/rules/o-x", "/rules/o-x/delete", "/permissions/revoke", "/explain"]
)
def test_every_form_needs_its_csrf_token(alice: FlaskClient, flow: Flow, action: str) -> None:
    answer = alice.post(page_of(flow) + action, data={"permission": "x", "scopes": "view"})
    assert answer.status_code == 400 and answer.mimetype == "text/html"
    wrong = alice.post(page_of(flow) + action, data={"csrf_token": "0" * 64})
    assert wrong.status_code == 400


# -- what the set's page shows ---------------------------------------------------------------


def test_the_page_shows_the_set_its_resource_server_and_the_rules_covering_it(
    alice: FlaskClient, flow: Flow
) -> None:
    page = alice.get(page_of(flow))
    assert page.status_code == 200
    # Names from registration are text, never markup.
    assert "Holiday &lt;photos&gt;" in page.text and "<photos>" not in page.text
    assert "Doctors &lt;b&gt;only&lt;/b&gt;" in page.text
    text = text_of(page)
    assert "https://example.com/rsets/photo" in text
    assert "client of alice (its name as registered: not verified)" in text
    assert "view" in text and "print" in text
    # The operator's rule that covers it, read-only; not the one for another name, nor bob's.
    assert "doctors" in text and "role contains 'doctor'" in text
    assert "Your role at the hospital" in text
    assert "notes-only" not in text and "bobs" not in text
    assert "You have no rules of your own" in text
    assert "No application holds a permission" in text
    # The page headers: no script, no framing.
    csp = page.headers["Content-Security-Policy"]
    assert "script-src" not in csp and "default-src 'none'" in csp
    assert page.headers["X-Frame-Options"] == "DENY"
    assert "<script" not in page.text


def test_the_list_pages_through_every_set_by_name(
    alice: FlaskClient, flow: Flow, store: Store
) -> None:
    other_rs = make_party(store, "alice", "uma_protection")
    names = [f"Set {n:03d}" for n in range(119)]
    for n, name in enumerate(names):
        flow.rs = other_rs if n % 2 else flow.rs
        flow.register({"name": name, "scopes": ["view"]})
    bobs_rs = make_party(store, "bob", "uma_protection")
    Flow(flow.api, bobs_rs, flow.app, {"name": "Bob's", "scopes": ["view"]})
    seen: list[str] = []
    path: str | None = "/policy"
    pages = 0
    while path is not None:
        page = alice.get(path)
        assert page.status_code == 200
        pages += 1
        seen.extend(
            html.unescape(n)
            for n in re.findall(r'href="/policy/resource_set/[^"]+">([^<]+)<', page.text)
        )
        following = re.search(r'href="(/policy\?[^"]+)" rel="next"', page.text)
        path = html.unescape(following.group(1)) if following else None
        assert "120 resource sets" in text_of(page)
    assert pages == 3
    assert seen == sorted([*names, PHOTOS["name"]])
    assert alice.get("/policy?after=a&after=b").status_code == 400


def test_the_list_counts_live_permissions(alice: FlaskClient, flow: Flow) -> None:
    grant(flow)
    row = re.search(r"Holiday &lt;photos&gt;.*?</tr>", alice.get("/policy").text, re.S)
    assert row is not None and "<td>1</td>" in row.group(0)


# -- permissions -----------------------------------------------------------------------------


def test_revoking_a_permission_ends_it_at_once(
    alice: FlaskClient, flow: Flow, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    rpt = grant(flow)
    assert [p["resource_set_id"] for p in flow.introspect(rpt)["permissions"]] == [flow.rs_id]
    page = alice.get(page_of(flow))
    text = text_of(page)
    assert "client of bob (not verified) for bob may view until" in text
    forms = re.findall(r'action="[^"]*/permissions/revoke">(.*?)</form>', page.text, re.S)
    assert len(forms) == 1
    fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', forms[0]))
    # The form names the permission by a reference: neither the RPT nor its digest.
    digest = secrets_at_rest.digest(rpt)
    assert rpt not in page.text and digest not in page.text
    assert fields["permission"] not in (rpt, digest)
    with caplog.at_level(logging.INFO, logger="umaserver.policy"):
        done = alice.post(page_of(flow) + "/permissions/revoke", data=fields)
    assert done.status_code == 303
    assert done.headers["Location"] == "http://uma.test" + page_of(flow) + "#permissions"
    assert flow.introspect(rpt)["permissions"] == []
    assert stored_permissions(store, rpt) == []
    assert "No application holds a permission" in text_of(alice.get(page_of(flow)))
    assert [r.getMessage() for r in caplog.records if "revoked" in r.getMessage()] == [
        f"permission revoked owner='alice' resource_set={flow.rs_id!r}"
    ]
    # Again, or a reference from nowhere: nothing to revoke, and back to the page.
    assert alice.post(page_of(flow) + "/permissions/revoke", data=fields).status_code == 303
    empty = {**fields, "permission": ""}
    assert alice.post(page_of(flow) + "/permissions/revoke", data=empty).status_code == 400


def test_a_reference_of_another_set_revokes_nothing(alice: FlaskClient, flow: Flow) -> None:
    rpt = grant(flow)
    other = flow.register({**PHOTOS, "name": "Other"})
    reply = flow.ask(flow.ticket("view", rs_id=other), DOCTOR, rpt=rpt)
    assert reply.status == 201
    page = alice.get(f"/policy/resource_set/{other}").text
    fields = dict(
        re.findall(r'name="([^"]+)" value="([^"]*)"', page.split("/permissions/revoke")[1])
    )
    assert alice.post(page_of(flow) + "/permissions/revoke", data=fields).status_code == 303
    assert len(flow.introspect(rpt)["permissions"]) == 2


# -- explain ---------------------------------------------------------------------------------


def explained(page: Any) -> tuple[str, list[list[str]]]:
    """The page's summary, and the reasons of each rule's verdict."""
    summary = re.search(r'<p class="summary">(.*?)</p>', page.text, re.S)
    assert summary is not None, page.text
    verdicts = re.findall(r'<ul class="reasons">(.*?)</ul>', page.text, re.S)
    reasons = [[html.unescape(r) for r in re.findall(r"<li>(.*?)</li>", v, re.S)] for v in verdicts]
    return html.unescape(summary.group(1)), reasons


@pytest.mark.parametrize(
    ("claims", "with_client"), [(DOCTOR, True), (NURSE, True), ([], True), (NURSE, False)]
)
def test_explain_says_what_policy_explain_says(
    alice: FlaskClient,
    flow: Flow,
    cli: CLI,
    tmp_path: Path,
    claims: list[dict[str, Any]],
    with_client: bool,
) -> None:
    client = ["--client", flow.app.client_id] if with_client else []
    claims_file = tmp_path / "claims.json"
    claims_file.write_text(json.dumps(claims), encoding="utf-8")
    said = cli.json(
        "policy", "explain", "--owner", "alice", "--resource-set", flow.rs_id,
        "--scope", "view", "--claims", str(claims_file), *client,
    )  # fmt: skip
    form = {
        "csrf_token": token_on(alice, page_of(flow)),
        "client": flow.app.client_id if with_client else "",
        "scopes": "view",
        "claims": json.dumps(claims),
    }
    page = alice.post(page_of(flow) + "/explain", data=form)
    assert page.status_code == 200
    summary, reasons = explained(page)
    # The same words, the rule named by its title instead of its id.
    assert summary == said["summary"].replace("'doctors'", "“Doctors <b>only</b>”")
    assert "'doctors'" not in summary
    # The same reasons, a list of names said as words (the rules here accept one type each).
    assert reasons == [
        [reason.replace("['", "").replace("']", "") for reason in verdict["reasons"]]
        for verdict in said["explanation"]
    ]
    assert not any("['" in reason for verdict in reasons for reason in verdict)
    assert f"Decision: {said['decision'].replace('_', ' ')}" in text_of(page)
    # The form keeps what was typed.
    assert str(escape(json.dumps(claims))) in page.text


@pytest.mark.parametrize(
    ("form", "field", "message"),
    [
        ({"client": "nobody"}, "client", "Choose an app from the list."),
        ({"claims": "[{"}, "claims", "Write the claims as a JSON list of claim objects, such as"),
        ({"claims": '{"a": 1}'}, "claims", "Write the claims as a JSON list of claim objects"),
        (
            {"claims": json.dumps([{"type": "urn:other", "value": {}}])},
            "claims",
            "Claim 1: this app may not send claims of type 'urn:other'.",
        ),
        ({"scopes": None}, "scopes", "Choose at least one scope."),
    ],
)
def test_explain_refusals_are_shown_next_to_their_field(
    alice: FlaskClient, flow: Flow, form: dict[str, Any], field: str, message: str
) -> None:
    data = {"csrf_token": token_on(alice, page_of(flow)), "scopes": "view", "claims": "[]"}
    data |= {"client": flow.app.client_id} | form
    page = alice.post(page_of(flow) + "/explain", data={k: v for k, v in data.items() if v})
    assert page.status_code == 400
    shown = re.search(rf'<span class="field-error" id="error-{field}">(.*?)</span>', page.text)
    assert shown is not None and message in html.unescape(shown.group(1))
    assert '<p class="summary">' not in page.text


def test_a_claim_given_field_by_field_is_explained_like_its_json(
    alice: FlaskClient, flow: Flow
) -> None:
    base = {"csrf_token": token_on(alice, page_of(flow)), "client": flow.app.client_id}
    as_json = alice.post(
        page_of(flow) + "/explain", data={**base, "scopes": "view", "claims": json.dumps(DOCTOR)}
    )
    by_field = alice.post(
        page_of(flow) + "/explain",
        data={
            **base,
            "scopes": "view",
            "claims": "[]",
            "claim_type": EMPLOYEE,
            "claim_name": "role",
            "claim_value": '["doctor"]',
        },
    )
    assert by_field.status_code == 200
    assert explained(by_field) == explained(as_json)
    assert "Decision: grant" in text_of(by_field)
    assert 'name="claim_value" value="[&#34;doctor&#34;]"' in by_field.text  # kept as typed


def test_a_claim_field_by_field_needs_its_type(alice: FlaskClient, flow: Flow) -> None:
    data = {
        "csrf_token": token_on(alice, page_of(flow)),
        "scopes": "view",
        "claim_name": "role",
        "claim_value": "doctor",
    }
    page = alice.post(page_of(flow) + "/explain", data=data)
    assert page.status_code == 400
    assert 'id="error-claim_type"' in page.text


# -- the rule form, without the rules --------------------------------------------------------


def test_add_a_condition_row_keeps_what_was_typed(alice: FlaskClient, flow: Flow) -> None:
    page = alice.get(page_of(flow))
    assert 'name="conditions-0-claim"' in page.text
    assert 'name="conditions-1-claim"' not in page.text
    typed = {
        "csrf_token": token_on(alice, page_of(flow)),
        "description": "Nurses <i>too</i>",
        "coverage": "type",
        "coverage_type": "https://example.com/rsets/photo",
        "scopes": ["view", "print"],
        "conditions-0-claim": "role",
        "conditions-0-operator": "contains",
        "conditions-0-value": "nurse",
        "conditions-0-types": EMPLOYEE,
        "conditions-0-issuers": "",
        "conditions-0-hint": "Your role",
        "add_row": "1",
    }
    again = alice.post(page_of(flow) + "/rules", data=typed)
    assert again.status_code == 200
    assert 'name="conditions-1-claim"' in again.text
    assert 'name="conditions-2-claim"' not in again.text
    assert 'value="Nurses &lt;i&gt;too&lt;/i&gt;"' in again.text
    assert 'name="coverage" value="type" checked' in again.text
    assert 'value="https://example.com/rsets/photo"' in again.text
    assert 'name="scopes" value="print" checked' in again.text
    assert '<option value="contains" selected>' in again.text
    assert 'id="conditions-0-value" name="conditions-0-value" value="nurse"' in again.text


# -- the owner's rules -----------------------------------------------------------------------

NURSES = {
    "description": "Nurses too",
    "coverage": "this",
    "scopes": ["view"],
    "conditions-0-claim": "role",
    "conditions-0-operator": "contains",
    "conditions-0-value": "nurse",
    "conditions-0-types": EMPLOYEE,
    "conditions-0-issuers": "",
    "conditions-0-hint": "Your role",
    "conditions-1-claim": "",
    "conditions-1-operator": "equals",
    "conditions-1-value": "",
    "conditions-1-types": "",
    "conditions-1-issuers": "",
    "conditions-1-hint": "",
}


def own_rule_ids(browser: FlaskClient, flow: Flow) -> list[str]:
    return re.findall(
        r'<li class="rule own-rule" id="rule-([^"]+)">', browser.get(page_of(flow)).text
    )


def test_an_owner_adds_edits_and_deletes_a_rule(
    alice: FlaskClient, flow: Flow, caplog: pytest.LogCaptureFixture
) -> None:
    assert flow.ask(flow.ticket("view"), NURSE).json["error"] == "not_authorized_permission"
    token = token_on(alice, page_of(flow))
    with caplog.at_level(logging.INFO, logger="umaserver"):
        added = alice.post(page_of(flow) + "/rules", data={**NURSES, "csrf_token": token})
    assert added.status_code == 303
    assert added.headers["Location"] == "http://uma.test" + page_of(flow) + "#own-rules"
    [rule_id] = own_rule_ids(alice, flow)
    assert rule_id.startswith("o-")
    assert len([r for r in caplog.records if rule_id in r.getMessage()]) == 1
    assert flow.ask(flow.ticket("view"), NURSE).status == 201
    # The edit page shows the rule's fields and one empty row more.
    edit_path = f"{page_of(flow)}/rules/{rule_id}"
    edit = alice.get(edit_path)
    assert edit.status_code == 200
    assert 'id="conditions-0-value" name="conditions-0-value" value="nurse"' in edit.text
    assert 'name="conditions-1-claim" value=""' in edit.text
    changed = {**NURSES, "conditions-0-value": "midwife", "scopes": ["view", "print"]}
    saved = alice.post(edit_path, data={**changed, "csrf_token": token})
    assert saved.status_code == 303
    assert own_rule_ids(alice, flow) == [rule_id]
    assert "contains 'midwife'" in text_of(alice.get(page_of(flow)))
    assert flow.ask(flow.ticket("view"), NURSE).json["error"] == "not_authorized_permission"
    deleted = alice.post(f"{edit_path}/delete", data={"csrf_token": token})
    assert deleted.status_code == 303
    assert own_rule_ids(alice, flow) == []
    assert alice.get(edit_path).status_code == 404
    assert alice.post(f"{edit_path}/delete", data={"csrf_token": token}).status_code == 404


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"scopes": []}, "scopes"),
        (
            {"conditions-0-operator": "regex", "conditions-0-value": "(unclosed"},
            "conditions-0-value",
        ),
        ({"coverage": "type", "coverage_type": ""}, "coverage_type"),
    ],
)
def test_an_invalid_rule_shows_errors_at_their_fields_and_stores_nothing(
    alice: FlaskClient, flow: Flow, change: dict[str, Any], field: str
) -> None:
    form = {**NURSES, **change, "csrf_token": token_on(alice, page_of(flow))}
    page = alice.post(page_of(flow) + "/rules", data=form)
    assert page.status_code == 400
    # Right after its field (the scopes: after the last of their boxes).
    before = (
        r'name="scopes" value="print"[^>]*>[^\n]*\n'
        if field == "scopes"
        else rf'name="{field}"[^>]*>'
    )
    shown = re.search(
        before + rf'\s*<span class="field-error" id="error-{field}">[^<]+</span>', page.text
    )
    assert shown is not None, page.text
    assert "The rule was not saved" in page.text
    assert own_rule_ids(alice, flow) == []
    # What was typed is kept.
    assert 'value="Nurses too"' in page.text


def test_someone_elses_rule_cannot_be_edited_or_deleted(
    alice: FlaskClient, bob: FlaskClient, flow: Flow, store: Store
) -> None:
    alice.post(
        page_of(flow) + "/rules", data={**NURSES, "csrf_token": token_on(alice, page_of(flow))}
    )
    [rule_id] = own_rule_ids(alice, flow)
    bobs_rs = make_party(store, "bob", "uma_protection")
    bobs = Flow(flow.api, bobs_rs, flow.app, {"name": "Bob's", "scopes": ["view"]})
    token = token_on(bob, page_of(bobs))
    path = f"{page_of(bobs)}/rules/{rule_id}"
    assert bob.get(path).status_code == 404
    assert bob.post(path, data={**NURSES, "csrf_token": token}).status_code == 404
    assert bob.post(f"{path}/delete", data={"csrf_token": token}).status_code == 404
    assert own_rule_ids(alice, flow) == [rule_id]


class TestOwnerRulesSwitchedOff:
    """`[policies] owner_rules = false`: the forms are gone, their POSTs are refused, and rules an
    owner stored before count for nothing."""

    @pytest.fixture
    def config_path(self, tmp_path: Path, rules_text: str) -> Path:
        (tmp_path / "policies.toml").write_text(rules_text, encoding="utf-8")
        path = write_config(tmp_path)
        text = path.read_text(encoding="utf-8").replace('policies = "policies.toml"\n', "")
        path.write_text(
            text + '\n[policies]\nfile = "policies.toml"\nowner_rules = false\n', encoding="utf-8"
        )
        return path

    def test_no_forms_and_their_posts_are_refused(self, alice: FlaskClient, flow: Flow) -> None:
        page = alice.get(page_of(flow))
        assert page.status_code == 200
        assert 'action="' + page_of(flow) + '/rules"' not in page.text
        token = token_on(alice, page_of(flow))
        for action in ("/rules", "/rules/o-x", "/rules/o-x/delete"):
            refused = alice.post(page_of(flow) + action, data={**NURSES, "csrf_token": token})
            assert refused.status_code == 403, action
        assert own_rule_ids(alice, flow) == []

    def test_a_rule_stored_before_grants_nothing(self, store: Store, flow: Flow) -> None:
        table = {
            "id": "o-before",
            "owner": "alice",
            "scopes": ["view"],
            "resource_sets": {"ids": [flow.rs_id]},
        }
        assert store_owner_rule_as_is(store, "alice", "o-before", table)
        reply = flow.ask(flow.ticket("view"))  # with owner rules on, o-before would grant it
        assert reply.status == 403 and reply.json["need_claims"][0]["name"] == "role"


@pytest.mark.parametrize(
    ("description", "title"),
    [("Nurses too", "Nurses too"), ("", "A rule of yours without a description")],
)
def test_a_rule_is_titled_by_its_description_never_its_generated_id(
    alice: FlaskClient, flow: Flow, description: str, title: str
) -> None:
    form = {**NURSES, "description": description, "csrf_token": token_on(alice, page_of(flow))}
    assert alice.post(page_of(flow) + "/rules", data=form).status_code == 303
    page = alice.get(page_of(flow)).text
    heads = re.findall(r'<p class="rule-head">(.*?)</p>', page, re.S)
    assert any(f'<strong class="rule-name">{title}</strong>' in head for head in heads), heads
    # A generated id (o- and random characters) is in no title.
    generated = re.compile(r"(?<![\w-])o-[\w-]{8,}")
    assert not any(generated.search(re.sub(r"<[^>]+>", "", head)) for head in heads), heads
