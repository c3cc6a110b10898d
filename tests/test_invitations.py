"""Invitations (issue 25, item 2) through the Flask test client, as browsers use them: alice shares
with carol@example.org, whom no local account has; the set's page shows the link once and lists
the invitation with "New link" and "Cancel"; carol follows the link and accepts (signing in, or
making an account when the server allows it); the share then reads "carol - view" and carol's
client is granted. A used, expired or unknown link is a page saying so."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from umaserver import secrets_at_rest

from .conftest import FakeClock, Party, Store, make_party, make_person, write_config
from .flows import FlaskApi, Flow
from .pages_helpers import TOKEN, csrf_token, sign_in

PHOTOS = {"name": "Holiday photos", "scopes": ["view", "print", "delete"]}
NOON = int(datetime(2026, 11, 26, 12, tzinfo=UTC).timestamp())
DAY = 86400
LINK = re.compile(r'value="(http://uma\.test/invitations/([A-Za-z0-9_-]+))"')


@pytest.fixture
def create_accounts() -> bool:
    return False


@pytest.fixture
def config_path(tmp_path: Path, rules_text: str, create_accounts: bool) -> Path:
    (tmp_path / "policies.toml").write_text(rules_text, encoding="utf-8")
    value = "true" if create_accounts else "false"
    return write_config(tmp_path, extra=f"[sharing]\ninvitations_create_accounts = {value}\n")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOON)


@pytest.fixture(autouse=True)
def people(store: Store) -> None:
    for name in ("alice", "bob"):
        make_person(store, name, secrets_at_rest.hash_password(f"{name}'s password"))


@pytest.fixture
def flow(http: FlaskClient, rs: Party, store: Store) -> Flow:
    return Flow(FlaskApi(http), rs, make_party(store, "bob", "uma_authorization"), PHOTOS)


@pytest.fixture
def alice(app: Flask, people: None) -> FlaskClient:
    browser = app.test_client()
    assert sign_in(browser, "alice", "alice's password").status_code == 303
    return browser


def page_of(flow: Flow) -> str:
    return f"/policy/resource_set/{flow.rs_id}"


def text_of(page: Any) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.text)).split())


def said(page: TestResponse, css_class: str) -> str:
    """The text of the paragraph of that class, its inline markup dropped."""
    found = re.search(rf'<p class="{css_class}">(.*?)</p>', page.text, re.S)
    assert found is not None, page.text
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).split())


def csrf_of(page: TestResponse) -> str:
    found = TOKEN.search(page.text)
    assert found is not None, page.text
    return found.group(1)


def post_share(alice: FlaskClient, flow: Flow, **form: Any) -> TestResponse:
    token = csrf_of(alice.get(page_of(flow)))
    return alice.post(f"{page_of(flow)}/shares", data={**form, "csrf_token": token})


def shares_listed(alice: FlaskClient, flow: Flow) -> list[str]:
    page = alice.get(page_of(flow))
    items = re.findall(r'<li class="share" id="share-[^"]+">(.*?)</li>', page.text, re.S)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", "", item)).split()) for item in items]


def invitations_listed(page: TestResponse) -> list[str]:
    items = re.findall(r'<li class="invitation" id="invitation-[^"]+">(.*?)</li>', page.text, re.S)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", "", item)).split()) for item in items]


def invite_carol(alice: FlaskClient, flow: Flow, **form: Any) -> str:
    """alice shares view with carol@example.org; the invitation's link, from the page it shows
    on once."""
    reply = post_share(alice, flow, to="carol@example.org", scopes=["view"], **form)
    assert reply.status_code == 303
    assert reply.headers["Location"].endswith(f"{page_of(flow)}#new-link")
    page = alice.get(page_of(flow))
    found = LINK.search(page.text)
    assert found is not None, page.text
    return found.group(1)


def path_of(link: str) -> str:
    return link.removeprefix("http://uma.test")


def carol_granted(flow: Flow, store: Store) -> bool:
    carol = make_party(store, "carol", "uma_authorization")
    reply = flow.ask(flow.ticket("view"), party=carol)
    assert reply.status in (201, 403), reply.text
    return reply.status == 201


def make_carol(store: Store, **claims: Any) -> None:
    make_person(store, "carol", secrets_at_rest.hash_password("carol's password"), claims)


def accept_signed_in(app: Flask, link: str) -> tuple[FlaskClient, TestResponse]:
    """carol follows the link signed out, signs in through it, comes back and accepts."""
    carol = app.test_client()
    page = carol.get(path_of(link))
    assert page.status_code == 200
    signin = re.search(r'href="([^"]*/signin\?next=[^"]+)"', page.text)
    assert signin is not None and "Sign in to accept" in text_of(page)
    assert html.unescape(signin.group(1)).endswith(f"/signin?next={path_of(link)}")
    back = sign_in(carol, "carol", "carol's password", next_path=path_of(link))
    assert back.status_code == 303 and back.headers["Location"].endswith(path_of(link))
    page = carol.get(path_of(link))
    assert "Accept as carol" in text_of(page)
    return carol, carol.post(f"{path_of(link)}/accept", data={"csrf_token": csrf_of(page)})


# -- the owner's side --------------------------------------------------------------------------


def test_the_link_is_shown_once_and_the_invitation_is_listed(
    alice: FlaskClient, flow: Flow, store: Store
) -> None:
    link = invite_carol(alice, flow)
    token = link.rsplit("/", 1)[1]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22,}", token)
    again = alice.get(page_of(flow))
    assert LINK.search(again.text) is None  # not again on reload
    assert token not in again.text
    assert shares_listed(alice, flow) == ["carol@example.org - view Stop sharing"]
    assert invitations_listed(again) == [
        "carol@example.org - the link works until 3 Dec 2026, 12:00 UTC New link Cancel"
    ]
    # Stored as a digest only.
    (invitation,) = store.invitations_of(store.get_user_by_username("alice").sub)  # type: ignore[union-attr]
    assert invitation.digest == secrets_at_rest.digest(token)
    assert token not in repr(invitation)


def test_no_invitation_when_a_local_account_has_the_address(
    alice: FlaskClient, flow: Flow, store: Store
) -> None:
    make_carol(store, email="Carol@Example.org")
    reply = post_share(alice, flow, to="carol@example.org", scopes=["view"])
    assert reply.headers["Location"].endswith("#shares")
    page = alice.get(page_of(flow))
    assert LINK.search(page.text) is None and invitations_listed(page) == []
    assert carol_granted(flow, store)  # her account's verified address matches


def test_no_invitation_for_a_share_with_a_username(alice: FlaskClient, flow: Flow) -> None:
    reply = post_share(alice, flow, to="bob", scopes=["view"])
    assert reply.headers["Location"].endswith("#shares")
    assert invitations_listed(alice.get(page_of(flow))) == []


def owner_button(alice: FlaskClient, flow: Flow, name: str) -> TestResponse:
    page = alice.get(page_of(flow))
    action = re.search(rf'action="([^"]+/invitations/[^"]+/{name})"', page.text)
    assert action is not None
    return alice.post(action.group(1), data={"csrf_token": csrf_of(page)})


def test_a_new_link_replaces_the_old_one(
    app: Flask, alice: FlaskClient, flow: Flow, clock: FakeClock
) -> None:
    old = invite_carol(alice, flow)
    clock.advance(8 * DAY)
    assert app.test_client().get(path_of(old)).status_code == 410
    assert sign_in(alice, "alice", "alice's password").status_code == 303  # a week later
    assert invitations_listed(alice.get(page_of(flow))) == [
        "carol@example.org - the link expired on 3 Dec 2026, 12:00 UTC New link Cancel"
    ]
    reply = owner_button(alice, flow, "new_link")
    assert reply.status_code == 303 and reply.headers["Location"].endswith("#invitations")
    page = alice.get(page_of(flow))
    found = LINK.search(page.text)
    assert found is not None and found.group(1) != old
    assert LINK.search(alice.get(page_of(flow)).text) is None  # once
    assert invitations_listed(page) == [
        "carol@example.org - the link works until 11 Dec 2026, 12:00 UTC New link Cancel"
    ]
    browser = app.test_client()
    assert browser.get(path_of(old)).status_code == 404  # the old link is dead
    assert browser.get(path_of(found.group(1))).status_code == 200


def test_cancel_ends_the_link_and_the_share_stays(
    app: Flask, alice: FlaskClient, flow: Flow
) -> None:
    link = invite_carol(alice, flow)
    assert owner_button(alice, flow, "cancel").status_code == 303
    assert invitations_listed(alice.get(page_of(flow))) == []
    assert shares_listed(alice, flow) == ["carol@example.org - view Stop sharing"]
    gone = app.test_client().get(path_of(link))
    assert gone.status_code == 404
    assert "This invitation link does not work" in text_of(gone)


def test_stop_sharing_ends_the_link(app: Flask, alice: FlaskClient, flow: Flow) -> None:
    link = invite_carol(alice, flow)
    page = alice.get(page_of(flow))
    stop = re.search(r'action="([^"]+/stop)"', page.text)
    assert stop is not None
    assert alice.post(stop.group(1), data={"csrf_token": csrf_of(page)}).status_code == 303
    assert app.test_client().get(path_of(link)).status_code == 404


def test_the_owners_buttons_need_the_csrf_token_and_the_owner(
    app: Flask, alice: FlaskClient, flow: Flow
) -> None:
    link = invite_carol(alice, flow)
    page = alice.get(page_of(flow))
    actions = re.findall(r'action="([^"]+/invitations/[^"]+/(?:new_link|cancel))"', page.text)
    assert len(actions) == 2
    bob = app.test_client()
    assert sign_in(bob, "bob", "bob's password").status_code == 303
    bobs = csrf_of(bob.get("/policy"))
    for action in actions:
        assert alice.post(action, data={}).status_code == 400
        assert bob.post(action, data={"csrf_token": bobs}).status_code == 404
    assert app.test_client().get(path_of(link)).status_code == 200  # nothing changed


# -- the invited person --------------------------------------------------------------------------


def test_an_existing_account_signs_in_and_accepts(
    app: Flask, alice: FlaskClient, flow: Flow, store: Store
) -> None:
    make_carol(store)
    link = invite_carol(alice, flow)
    assert not carol_granted(flow, store)  # her account has no address yet
    carol, accepted = accept_signed_in(app, link)
    assert accepted.status_code == 200
    assert said(accepted, "invitation-accepted") == (
        "alice shares Holiday photos with you, carol: you may view."
    )
    assert shares_listed(alice, flow) == ["carol - view Stop sharing"]
    assert invitations_listed(alice.get(page_of(flow))) == []
    user = store.get_user_by_username("carol")
    assert user is not None
    assert user.claims == {"email": "carol@example.org", "email_verified": True}
    assert carol_granted(flow, store)
    alices = store.get_user_by_username("alice")
    assert alices is not None
    shared = [(e.kind, e.party) for e in store.events_of(alices.sub, 10) if e.kind == "share"]
    assert shared == [("share", "carol"), ("share", "carol@example.org")]  # newest first
    used = carol.get(path_of(link))
    assert used.status_code == 410
    assert "This invitation has been accepted already" in text_of(used)


def test_an_account_keeps_its_own_address(
    app: Flask, alice: FlaskClient, flow: Flow, store: Store
) -> None:
    make_carol(store, email="c@elsewhere.test")
    link = invite_carol(alice, flow)
    _, accepted = accept_signed_in(app, link)
    assert accepted.status_code == 200
    user = store.get_user_by_username("carol")
    assert user is not None and user.claims == {"email": "c@elsewhere.test"}
    assert shares_listed(alice, flow) == ["carol - view Stop sharing"]
    assert carol_granted(flow, store)  # by username now


def test_the_owner_cannot_accept_her_own_link(alice: FlaskClient, flow: Flow) -> None:
    link = invite_carol(alice, flow)
    page = alice.get(path_of(link))
    assert "This is your own invitation" in text_of(page)
    assert "/accept" not in page.text  # no Accept button
    refused = alice.post(f"{path_of(link)}/accept", data={"csrf_token": csrf_of(page)})
    assert refused.status_code == 400
    assert "This is your own invitation" in text_of(refused)
    assert shares_listed(alice, flow) == ["carol@example.org - view Stop sharing"]


def test_accepting_signed_out_goes_to_sign_in(app: Flask, alice: FlaskClient, flow: Flow) -> None:
    link = invite_carol(alice, flow)
    browser = app.test_client()
    assert browser.get(path_of(link)).status_code == 200
    reply = browser.post(f"{path_of(link)}/accept", data={"csrf_token": csrf_token(browser)})
    assert reply.status_code == 303 and "/signin?next=" in reply.headers["Location"]
    assert browser.post(f"{path_of(link)}/accept", data={}).status_code == 400  # no CSRF token


@pytest.mark.parametrize("create_accounts", [False])
def test_no_account_form_unless_the_server_allows_it(
    app: Flask, alice: FlaskClient, flow: Flow
) -> None:
    link = invite_carol(alice, flow)
    browser = app.test_client()
    page = browser.get(path_of(link))
    assert "You are new here" not in text_of(page)
    assert 'name="password"' not in page.text
    form = {"username": "carol", "password": "a long password", "again": "a long password"}
    token = csrf_token(browser)
    refused = browser.post(f"{path_of(link)}/account", data={**form, "csrf_token": token})
    assert refused.status_code == 404


def new_account(browser: FlaskClient, link: str, **form: str) -> TestResponse:
    page = browser.get(path_of(link))
    assert "You are new here" in text_of(page)
    return browser.post(f"{path_of(link)}/account", data={**form, "csrf_token": csrf_of(page)})


@pytest.mark.parametrize("create_accounts", [True])
def test_a_new_person_makes_an_account_and_accepts(
    app: Flask, alice: FlaskClient, flow: Flow, store: Store
) -> None:
    link = invite_carol(alice, flow)
    browser = app.test_client()
    made = new_account(
        browser, link, username="carol", password="carol's password", again="carol's password"
    )
    assert made.status_code == 200, made.text
    assert said(made, "invitation-accepted") == (
        "alice shares Holiday photos with you, carol: you may view."
    )
    assert "Signed in as carol" in text_of(browser.get("/account"))
    user = store.get_user_by_username("carol")
    assert user is not None
    assert user.claims == {"email": "carol@example.org", "email_verified": True}
    assert shares_listed(alice, flow) == ["carol - view Stop sharing"]
    assert carol_granted(flow, store)
    assert sign_in(app.test_client(), "carol", "carol's password").status_code == 303
    assert browser.get(path_of(link)).status_code == 410


@pytest.mark.parametrize("create_accounts", [True])
@pytest.mark.parametrize(
    ("form", "field", "sentence"),
    [
        (
            {"username": "", "password": "p" * 12, "again": "p" * 12},
            "username",
            "Choose a username",
        ),
        (
            {"username": "bob", "password": "p" * 12, "again": "p" * 12},
            "username",
            "This username is taken: choose another.",
        ),
        (
            {"username": "client:x", "password": "p" * 12, "again": "p" * 12},
            "username",
            "The username must not contain ':'",
        ),
        (
            {"username": "carol", "password": "short", "again": "short"},
            "password",
            "Choose a password of at least 12 characters.",
        ),
        (
            {"username": "carol", "password": "p" * 11, "again": "p" * 11},
            "password",
            "Choose a password of at least 12 characters.",
        ),
        (  # longer than sign-in reads: it could never sign in
            {"username": "carol", "password": "p" * 1025, "again": "p" * 1025},
            "password",
            "Choose a password of at most 1024 characters: sign-in reads no more.",
        ),
        (
            {"username": "carol", "password": "p" * 12, "again": "q" * 12},
            "again",
            "The two passwords are not the same",
        ),
    ],
)
def test_account_errors_are_a_sentence_next_to_their_field(
    app: Flask,
    alice: FlaskClient,
    flow: Flow,
    store: Store,
    form: dict[str, str],
    field: str,
    sentence: str,
) -> None:
    link = invite_carol(alice, flow)
    refused = new_account(app.test_client(), link, **form)
    assert refused.status_code == 400
    error = re.search(rf'<span class="field-error" id="error-{field}">([^<]*)</span>', refused.text)
    assert error is not None, refused.text
    assert html.unescape(error.group(1)).startswith(sentence)
    assert f'value="{html.escape(form["username"])}"' in refused.text
    assert store.get_user_by_username("carol") is None
    assert shares_listed(alice, flow) == ["carol@example.org - view Stop sharing"]


@pytest.mark.parametrize(
    "token", ["uma_iv_" + "x" * 43, "short", "has.dot.in.it.and.long.enough.x", "a" * 200]
)
def test_an_unknown_link_is_a_404_page(http: FlaskClient, token: str) -> None:
    page = http.get(f"/invitations/{token}")
    assert page.status_code == 404
    assert page.mimetype == "text/html"
    assert "This invitation link does not work" in text_of(page)
    assert page.headers["X-Frame-Options"] == "DENY"
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    assert page.headers["Cache-Control"] == "no-store"


def test_an_expired_link_is_a_410_page(
    app: Flask, alice: FlaskClient, flow: Flow, store: Store, clock: FakeClock
) -> None:
    make_carol(store)
    link = invite_carol(alice, flow)
    clock.advance(7 * DAY)
    page = app.test_client().get(path_of(link))
    assert page.status_code == 410 and page.mimetype == "text/html"
    assert "This invitation has expired" in text_of(page)
    assert page.headers["X-Frame-Options"] == "DENY"
    _, refused = accept_expired(app, link)
    assert refused.status_code == 410
    assert sign_in(alice, "alice", "alice's password").status_code == 303  # a week later
    assert shares_listed(alice, flow) == ["carol@example.org - view Stop sharing"]


def test_a_link_to_a_share_that_ended_is_expired(
    app: Flask, alice: FlaskClient, flow: Flow, clock: FakeClock
) -> None:
    link = invite_carol(alice, flow, until="2026-11-26")  # ends tonight; the link in 7 days
    page = app.test_client().get(path_of(link))
    assert page.status_code == 200
    assert said(page, "invitation-what") == (
        "alice shares Holiday photos with carol@example.org: you may view, until 26 Nov 2026."
    )
    clock.advance(DAY)
    page = app.test_client().get(path_of(link))
    assert page.status_code == 410 and "This invitation has expired" in text_of(page)


def accept_expired(app: Flask, link: str) -> tuple[FlaskClient, TestResponse]:
    carol = app.test_client()
    assert sign_in(carol, "carol", "carol's password").status_code == 303
    token = csrf_of(carol.get("/account"))
    return carol, carol.post(f"{path_of(link)}/accept", data={"csrf_token": token})
