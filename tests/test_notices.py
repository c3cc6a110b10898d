"""Notices (issue 25, item 4): a share with a local user writes a notice for that person in the
share's transaction, shown on their `/notices` page and, with `[mail]` configured and a verified
address known, mailed later by the sender's job. Through the Flask test client as the owner uses
the pages; the notices are read back from the store or from the person's page."""

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
from umaserver.services import notices
from umaserver.services.maintenance import prune
from umaserver.storage.people_records import Notice

from . import test_request_pages as request_pages
from .conftest import FakeClock, Party, Store, make_party, make_person, write_config
from .flows import FlaskApi, Flow
from .pages_helpers import TOKEN, sign_in

PHOTOS = {"name": "Holiday photos", "scopes": ["view", "print", "delete"]}
# 2026-11-26 12:00 UTC.
NOON = int(datetime(2026, 11, 26, 12, tzinfo=UTC).timestamp())
DAY = 86400
MAIL = '[mail]\nhost = "127.0.0.1"\nport = 2525\nsecurity = "none"\nfrom = "Photos <uma@example.org>"\n'


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOON)


@pytest.fixture
def mail_config() -> str:
    """The `[mail]` table of the app's config (none: notices on the pages only)."""
    return ""


@pytest.fixture
def config_path(tmp_path: Path, rules_text: str, mail_config: str) -> Path:
    (tmp_path / "policies.toml").write_text(rules_text, encoding="utf-8")
    return write_config(tmp_path, extra=mail_config)


@pytest.fixture(autouse=True)
def people(store: Store) -> None:
    make_person(store, "alice", secrets_at_rest.hash_password("alice's password"))
    make_person(
        store, "bob", secrets_at_rest.hash_password("bob's password"), {"email": "bob@example.org"}
    )
    make_person(store, "carol", secrets_at_rest.hash_password("carol's password"))


@pytest.fixture
def flow(http: FlaskClient, rs: Party, store: Store, people: None) -> Flow:
    return Flow(FlaskApi(http), rs, make_party(store, "bob", "uma_authorization"), PHOTOS)


def browser_of(app: Flask, username: str) -> FlaskClient:
    browser = app.test_client()
    assert sign_in(browser, username, f"{username}'s password").status_code == 303
    return browser


@pytest.fixture
def alice(app: Flask, people: None) -> FlaskClient:
    return browser_of(app, "alice")


def share(alice: FlaskClient, flow: Flow, to: str, *scopes: str, until: str = "") -> None:
    page = f"/policy/resource_set/{flow.rs_id}"
    found = TOKEN.search(alice.get(page).text)
    assert found is not None
    reply = alice.post(
        f"{page}/shares",
        data={"to": to, "scopes": list(scopes), "until": until, "csrf_token": found.group(1)},
    )
    assert reply.status_code == 303, reply.text


def notices_of(store: Store, username: str) -> list[Notice]:
    user = store.get_user_by_username(username)
    assert user is not None
    return store.notices_of(user.sub, 100)


def test_a_share_with_bob_is_a_notice_for_bob_only_on_the_pages_without_mail(
    alice: FlaskClient, flow: Flow, store: Store
) -> None:
    share(alice, flow, "bob", "view", "print", until="2026-11-28")
    [notice] = notices_of(store, "bob")
    assert (notice.kind, notice.subject) == ("share", "alice shared Holiday photos with you")
    assert notice.body.startswith(
        "alice shared Holiday photos with you: view, print, until 28 Nov 2026.\n"
    )
    assert notice.link == "http://uma.test/notices"
    assert (notice.created_at, notice.seen_at) == (NOON, None)
    # No [mail]: nothing to send, though bob has an address.
    assert (notice.address, notice.mail_state, notice.next_attempt_at) == (
        "bob@example.org",
        "none",
        None,
    )
    assert notices_of(store, "alice") == []
    assert notices_of(store, "carol") == []


@pytest.mark.parametrize("mail_config", [MAIL])
def test_with_mail_a_share_is_mailed_to_a_verified_address_only(
    alice: FlaskClient, flow: Flow, store: Store
) -> None:
    share(alice, flow, "bob", "view")
    share(alice, flow, "carol", "view")  # carol has no address
    share(alice, flow, "dan@example.org", "view")  # no local user: an invitation's business
    [to_bob] = notices_of(store, "bob")
    assert (to_bob.address, to_bob.mail_state, to_bob.next_attempt_at) == (
        "bob@example.org",
        "pending",
        NOON,
    )
    [to_carol] = notices_of(store, "carol")
    assert (to_carol.address, to_carol.mail_state) == (None, "none")


def test_an_unverified_address_is_never_mailed(store: Store, clock: FakeClock) -> None:
    eve = make_person(store, "eve", None, {"email": "eve@example.org", "email_verified": False})
    outbox = notices.Outbox("http://uma.test", mail=True)
    message = notices.decision_to_party(
        outbox, owner="alice", set_name="Photos", scopes=["view"], approved=False
    )
    made = notices.notify(store, outbox, message, now=clock.now(), user_sub=eve.sub)
    assert (made.address, made.mail_state) == (None, "none")
    assert made.subject == "alice denied your request for Photos"
    assert store.notices_of(eve.sub, 10) == [made]


def test_a_failed_share_writes_no_notice(alice: FlaskClient, flow: Flow, store: Store) -> None:
    page = f"/policy/resource_set/{flow.rs_id}"
    found = TOKEN.search(alice.get(page).text)
    assert found is not None
    reply = alice.post(
        f"{page}/shares",
        data={"to": "bob", "scopes": ["view"], "until": "2000-01-01", "csrf_token": found[1]},
    )
    assert reply.status_code == 400
    assert notices_of(store, "bob") == []


def test_the_words_of_each_moment() -> None:
    outbox = notices.Outbox("https://uma.example", mail=True)
    request = notices.request_to_owner(
        outbox, party="dave", client_name="Viewer", set_name="Holiday photos", scopes=["print"]
    )
    assert (request.kind, request.subject, request.link) == (
        "request",
        "dave asks to print Holiday photos",
        "https://uma.example/policy/requests",
    )
    assert "through the app Viewer" in request.body
    assert "https://uma.example/policy/requests" in request.body
    approved = notices.decision_to_party(
        outbox,
        owner="alice",
        set_name="Holiday photos",
        scopes=["view"],
        approved=True,
        until=NOON + DAY // 2,
    )
    assert approved.kind == "approved"
    assert approved.body.startswith(
        "alice approved your request for Holiday photos: view, until 26 Nov 2026."
    )
    link = "https://uma.example/invitations/" + "x" * 22
    invited = notices.invitation(
        outbox,
        owner="alice",
        set_name="Holiday\nphotos",
        scopes=["view"],
        link=link,
        expires_at=NOON + 7 * DAY,
    )
    assert invited.subject == "alice shared Holiday photos with you"  # one line
    assert f"until 3 Dec 2026, 12:00 UTC):\n\n{link}\n" in invited.body
    assert (
        len(
            notices.shared_with_you(
                outbox, owner="a", set_name="x" * 500, scopes=["v"], until=None
            ).subject
        )
        == notices.SUBJECT_LENGTH
    )


def test_pruning_forgets_old_notices_but_not_mail_still_to_send(store: Store) -> None:
    bob = store.get_user_by_username("bob")
    assert bob is not None
    mailing = notices.Outbox("http://uma.test", mail=True)
    message = notices.shared_with_you(
        mailing, owner="alice", set_name="Photos", scopes=["view"], until=None
    )
    old = NOON - 8 * DAY
    sent = notices.notify(store, mailing, message, now=old, user_sub=bob.sub)
    [claimed] = store.claim_due_mail(old, old + 60, 1)
    assert claimed.id == sent.id and store.record_mail_sent(sent.id, 1)
    waiting = notices.notify(store, mailing, message, now=old, user_sub=bob.sub)
    on_the_page = notices.notify(
        store, mailing, message, now=old, address=None, user_sub=carol(store)
    )
    recent = notices.notify(store, mailing, message, now=NOON - 6 * DAY, user_sub=bob.sub)
    assert prune(store, NOON, event_memory=7 * DAY).notices == 2
    assert {n.id for n in store.notices_of(bob.sub, 10)} == {waiting.id, recent.id}
    assert store.notices_of(on_the_page.user_sub or "", 10) == []
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", sent.id)


def carol(store: Store) -> str:
    user = store.get_user_by_username("carol")
    assert user is not None
    return user.sub


# -- /notices ------------------------------------------------------------------------------------


def text_of(page: Any) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.text)).split())


def test_without_mail_bob_sees_the_share_on_his_notices_page_with_a_count(
    app: Flask, alice: FlaskClient, flow: Flow, store: Store
) -> None:
    bob = store.get_user_by_username("bob")
    assert bob is not None
    assert notices.unseen_count(store, bob.sub) == 0
    share(alice, flow, "bob", "view", "print", until="2026-11-28")
    assert notices.unseen_count(store, bob.sub) == 1
    browser = browser_of(app, "bob")
    # The header counts it on every page, beside Notices.
    assert 'Notices <span class="badge" aria-label="1 new">1</span>' in browser.get("/account").text
    page = browser.get("/notices")
    assert page.status_code == 200
    assert 'class="badge"' not in page.text  # seen now
    assert page.headers["Content-Security-Policy"].startswith("default-src 'none'")
    text = text_of(page)
    assert "26 Nov 2026, 12:00 UTC · New alice shared Holiday photos with you" in text
    assert "alice shared Holiday photos with you: view, print, until 28 Nov 2026." in text
    assert "Each is also sent" not in text  # no [mail]
    assert 'href="http://uma.test/notices"' not in page.text  # no link to the page itself
    assert notices.unseen_count(store, bob.sub) == 0
    assert "New" not in text_of(browser.get("/notices"))
    # alice's own page says nothing of it.
    assert "Nothing yet." in text_of(alice.get("/notices"))


def test_the_notices_page_is_paginated_newest_first(
    app: Flask, store: Store, clock: FakeClock
) -> None:
    bob = store.get_user_by_username("bob")
    assert bob is not None
    outbox = notices.Outbox("http://uma.test", mail=False)
    total = notices.PAGE_SIZE + 5
    for n in range(total):
        message = notices.decision_to_party(
            outbox, owner="alice", set_name=f"Set {n:02d}", scopes=["view"], approved=True
        )
        notices.notify(store, outbox, message, now=NOON - total + n, user_sub=bob.sub)
    browser = browser_of(app, "bob")
    first = browser.get("/notices")
    subjects = re.findall(r"approved your request for (Set \d\d)</strong>", first.text)
    assert subjects == [f"Set {n:02d}" for n in range(total - 1, 4, -1)]
    found = re.search(r'href="(/notices\?before=[^"]+)" rel="next"', first.text)
    assert found is not None
    second = browser.get(html.unescape(found[1]))
    subjects = re.findall(r"approved your request for (Set \d\d)</strong>", second.text)
    assert subjects == [f"Set {n:02d}" for n in range(4, -1, -1)]
    assert 'rel="next"' not in second.text
    assert 'href="/notices">First page' in second.text
    assert notices.unseen_count(store, bob.sub) == 0


def test_the_notices_page_is_for_a_signed_in_person_and_refuses_a_broken_link(
    app: Flask, http: FlaskClient
) -> None:
    reply = http.get("/notices")
    assert reply.status_code in (302, 303)
    assert "/signin" in reply.headers["Location"]
    browser = browser_of(app, "carol")
    for broken in ("/notices?before=x", "/notices?before=1.2&before=3.4"):
        page = browser.get(broken)
        assert page.status_code == 400
    assert "Go back to the first page." in text_of(browser.get("/notices?before=nope"))


# -- the owner's answer to a request -------------------------------------------------------------


@pytest.mark.parametrize("mail_config", [MAIL])
def test_a_request_is_a_notice_to_the_owner_and_the_answer_one_to_the_person(
    alice: FlaskClient, flow: Flow, store: Store
) -> None:
    # bob's client asks for view and print; alice approves view only, until a day.
    assert request_pages.ask(flow, flow.ticket("view", "print")) == (403, "request_submitted")
    [to_alice] = notices_of(store, "alice")
    assert (to_alice.kind, to_alice.subject, to_alice.link) == (
        "request",
        "bob asks to view, print Holiday photos",
        "http://uma.test/policy/requests",
    )
    assert "bob asks, through the app " in to_alice.body
    assert (to_alice.address, to_alice.mail_state) == (None, "none")  # alice has no address
    [asked] = request_pages.request_ids(alice.get("/policy/requests"))
    reply = request_pages.answer(
        alice, asked, action="approve", scopes=["view"], until="2026-11-28"
    )
    assert reply.status_code == 303
    [approved] = notices_of(store, "bob")  # the share it made says nothing of its own
    assert (approved.kind, approved.subject) == (
        "approved",
        "alice approved your request for Holiday photos",
    )
    assert approved.body.startswith(
        "alice approved your request for Holiday photos: view, until 28 Nov 2026.\n"
    )
    assert (approved.address, approved.mail_state) == ("bob@example.org", "pending")

    assert request_pages.ask(flow, flow.ticket("print")) == (403, "request_submitted")
    [asked] = request_pages.request_ids(alice.get("/policy/requests"))
    assert request_pages.answer(alice, asked, action="deny").status_code == 303
    denied, _ = notices_of(store, "bob")
    assert (denied.kind, denied.body) == (
        "denied",
        "alice denied your request to print Holiday photos.\n",
    )
    assert [n.kind for n in notices_of(store, "alice")] == ["request", "request"]
