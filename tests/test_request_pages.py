"""The owner's requests page (`/policy/requests`) and the switch on `/account` (issue 25, item 3),
through the Flask test client as a browser uses them: dave's client asks, alice sees who, which
app, which set and scopes and when, approves for fewer scopes until a day or denies; errors are a
sentence next to their field; the switch turns requests off and on."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from umaserver import secrets_at_rest

from .conftest import FakeClock, Party, Store, make_party, make_person, write_config
from .flows import FlaskApi, Flow
from .pages_helpers import TOKEN, sign_in

PHOTOS = {"name": "Holiday photos", "scopes": ["view", "print"]}
NOON = int(datetime(2026, 11, 26, 12, tzinfo=UTC).timestamp())


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOON)


@pytest.fixture(autouse=True)
def people(store: Store) -> None:
    for name in ("alice", "dave"):
        make_person(store, name, secrets_at_rest.hash_password(f"{name}'s password"))


@pytest.fixture
def flow(http: FlaskClient, store: Store, rs: Party, people: None) -> Flow:
    return Flow(FlaskApi(http), rs, make_party(store, "dave", "uma_authorization"), PHOTOS)


@pytest.fixture
def alice(app: Flask, people: None) -> FlaskClient:
    browser = app.test_client()
    assert sign_in(browser, "alice", "alice's password").status_code == 303
    return browser


def text_of(page: Any) -> str:
    words = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.text)).split())
    return re.sub(r" ([,.:])", r"\1", words)


def ask(flow: Flow, ticket: str, submit: bool = True) -> tuple[int, str]:
    body: dict[str, Any] = {"rpt": flow.new_rpt(), "ticket": ticket}
    if submit:
        body["submit_request"] = True
    reply = flow.api.post(
        flow.endpoints["authorization_request_endpoint"], json=body, headers=flow.app.auth
    )
    return reply.status, reply.json.get("error", "granted")


def request_ids(page: Any) -> list[str]:
    return re.findall(r'<form method="post" action="/policy/requests/([^"#]+)#', page.text)


def answer(alice: FlaskClient, request_id: str, **form: Any) -> Any:
    page = alice.get("/policy/requests")
    found = TOKEN.search(page.text)
    assert found is not None
    return alice.post(f"/policy/requests/{request_id}", data={**form, "csrf_token": found.group(1)})


def test_signed_out_the_page_sends_to_sign_in(http: FlaskClient) -> None:
    reply = http.get("/policy/requests")
    assert reply.status_code in (302, 303)
    assert "/signin" in reply.headers["Location"]


def test_alice_sees_daves_request_and_approves_it_for_view_until_a_day(
    alice: FlaskClient, store: Store, flow: Flow
) -> None:
    page = alice.get("/policy/requests")
    assert page.status_code == 200
    assert "No one is waiting for your answer." in text_of(page)
    ticket = flow.ticket("view", "print")
    assert ask(flow, ticket) == (403, "request_submitted")
    page = alice.get("/policy/requests")
    # The header counts what waits for alice's answer, on every page.
    assert (
        '<a href="/policy/requests" aria-current="page">Requests <span class="badge" aria-label="1 waiting">1</span>'
        in page.text
    )
    said = text_of(page)
    assert "dave asks, through the app client of dave (not verified), to view, print" in said
    assert "Holiday photos" in said and "26 Nov 2026, 12:00 UTC" in said
    [request_id] = request_ids(page)
    assert page.text.count('name="scopes"') == 2 and page.text.count(" checked") == 2
    assert ">Approve</button>" in page.text and ">Deny</button>" in page.text

    reply = answer(alice, request_id, action="approve", scopes=["view"], until="2026-11-28")
    assert reply.status_code == 303, reply.text
    assert reply.headers["Location"].endswith("/policy/requests")
    page = alice.get("/policy/requests")
    assert request_ids(page) == []  # decided: no form
    assert "Requests <span" not in page.text  # nothing waits: no count beside Requests
    assert "dave asked, through client of dave, to view, print Holiday photos" in text_of(page)
    assert "approved for view" in text_of(page)
    [made] = store.shares_of(store.get_user_by_username("alice").sub)  # type: ignore[union-attr]
    assert (made.recipient, made.scopes) == ("dave", ("view",))
    assert ask(flow, ticket, submit=False) == (201, "granted")
    assert "dave - view - until 28 Nov 2026" in text_of(
        alice.get(f"/policy/resource_set/{flow.rs_id}")
    )


def test_an_approve_without_scopes_gives_all_of_them(alice: FlaskClient, flow: Flow) -> None:
    ticket = flow.ticket("view", "print")
    ask(flow, ticket)
    [request_id] = request_ids(alice.get("/policy/requests"))
    assert answer(alice, request_id, action="approve").status_code == 303
    assert ask(flow, ticket, submit=False) == (201, "granted")


def test_deny_tells_daves_client_no(alice: FlaskClient, flow: Flow) -> None:
    ticket = flow.ticket("view")
    ask(flow, ticket)
    [request_id] = request_ids(alice.get("/policy/requests"))
    assert answer(alice, request_id, action="deny").status_code == 303
    assert "denied" in text_of(alice.get("/policy/requests"))
    assert ask(flow, ticket, submit=False) == (403, "not_authorized_permission")
    history = text_of(alice.get("/policy/history"))
    assert "You denied it" in history and "Refused by your rules; asked you" in history


@pytest.mark.parametrize(
    ("form", "field", "message"),
    [
        (
            {"until": "2000-01-01"},
            "until",
            "This date is in the past: choose today or a later day.",
        ),
        ({"until": "soon"}, "until", "Enter a date such as 2026-11-28, or leave it empty."),
        ({"scopes": ["delete"]}, "scopes", "Choose among the things the person asked for."),
    ],
)
def test_a_refused_answer_is_a_sentence_next_to_its_field(
    alice: FlaskClient, store: Store, flow: Flow, form: dict[str, Any], field: str, message: str
) -> None:
    ask(flow, flow.ticket("view"))
    [request_id] = request_ids(alice.get("/policy/requests"))
    page = answer(alice, request_id, action="approve", **form)
    assert page.status_code == 400
    found = re.search(rf'id="error-{field}-{request_id}">([^<]*)<', page.text)
    assert found is not None and html.unescape(found.group(1)) == message
    assert request_ids(page) == [request_id]  # still pending, its form kept
    assert store.shares_of(store.get_user_by_username("alice").sub) == []  # type: ignore[union-attr]


def test_a_request_answered_already_is_said_at_the_top(alice: FlaskClient, flow: Flow) -> None:
    ask(flow, flow.ticket("view"))
    [request_id] = request_ids(alice.get("/policy/requests"))
    assert answer(alice, request_id, action="deny").status_code == 303
    page = answer(alice, request_id, action="approve")
    assert page.status_code == 400
    assert "You have denied this request already." in text_of(page)


@pytest.mark.parametrize(
    "form",
    [
        {"action": "maybe"},
        {},
        {"action": ["approve", "deny"]},
        {"action": "approve", "until": ["a", "b"]},
    ],
)
def test_a_broken_form_is_400(alice: FlaskClient, flow: Flow, form: dict[str, Any]) -> None:
    ask(flow, flow.ticket("view"))
    [request_id] = request_ids(alice.get("/policy/requests"))
    assert answer(alice, request_id, **form).status_code == 400


def test_another_owners_or_no_request_is_404_and_csrf_is_required(
    alice: FlaskClient, app: Flask, flow: Flow
) -> None:
    ask(flow, flow.ticket("view"))
    [request_id] = request_ids(alice.get("/policy/requests"))
    assert answer(alice, "req_no-such-request", action="deny").status_code == 404
    dave = app.test_client()
    assert sign_in(dave, "dave", "dave's password").status_code == 303
    assert answer(dave, request_id, action="deny").status_code == 404
    assert alice.post(f"/policy/requests/{request_id}", data={"action": "deny"}).status_code == 400
    assert request_ids(alice.get("/policy/requests")) == [request_id]


def test_the_switch_on_account_turns_requests_off_and_on(alice: FlaskClient, flow: Flow) -> None:
    page = alice.get("/account")
    assert "Let people ask me for access" in text_of(page)
    assert re.search(r'name="takes_requests" value="yes" checked', page.text)
    token = TOKEN.search(page.text)
    assert token is not None
    reply = alice.post("/account/requests", data={"csrf_token": token.group(1)})
    assert reply.status_code == 303
    page = alice.get("/account")
    assert not re.search(r'name="takes_requests" value="yes" checked', page.text)
    assert ask(flow, flow.ticket("view")) == (403, "not_authorized_permission")
    assert "you turned requests off" in text_of(alice.get("/policy/requests"))
    reply = alice.post(
        "/account/requests", data={"csrf_token": token.group(1), "takes_requests": "yes"}
    )
    assert reply.status_code == 303
    assert ask(flow, flow.ticket("view")) == (403, "request_submitted")
    assert alice.post("/account/requests", data={"takes_requests": "yes"}).status_code == 400
    bad = {"csrf_token": token.group(1), "takes_requests": "maybe"}
    assert alice.post("/account/requests", data=bad).status_code == 400


class TestServerOff:
    @pytest.fixture
    def config_path(self, tmp_path: Path, rules_text: str) -> Path:
        (tmp_path / "policies.toml").write_text(rules_text, encoding="utf-8")
        return write_config(tmp_path, extra="[sharing]\nrequests = false\n")

    def test_no_switch_and_the_requests_page_says_why(self, alice: FlaskClient, flow: Flow) -> None:
        account = alice.get("/account")
        assert "This server does not let apps ask owners for access." in text_of(account)
        assert 'name="takes_requests"' not in account.text
        assert ask(flow, flow.ticket("view")) == (403, "not_authorized_permission")
        page = text_of(alice.get("/policy/requests"))
        assert "This server does not let apps ask owners for access" in page
