"""The access history (issue 25, item 5): every decision of the 1.0 authorization request and of
the uma-ticket grant, and an owner's revocation, is an event of the set's owner, with the names as
they were. Over HTTP through the Flask test client; the events read back through the store here,
through `umaserver audit` and `/policy/history` further down."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from umaserver import create_app, secrets_at_rest
from umaserver.config import AuditSettings, Config, ConfigError, MaintenanceSettings, load_config
from umaserver.pages import history as history_page
from umaserver.services import shares
from umaserver.services.maintenance import prune
from umaserver.storage.people_records import Event

from .conftest import (
    CLI,
    FakeClock,
    Party,
    Store,
    make_party,
    make_person,
    open_store,
    write_config,
)
from .flows import (
    EMPLOYEE,
    OIDC,
    PHOTO_TYPE,
    PHOTOS_FOR_DOCTORS_AND_COLLEAGUES,
    FlaskApi,
    Flow,
    wait_until,
)
from .pages_helpers import sign_in
from .test_uma2_grant import Uma2
from .test_uma2_grant import doctor as doctor_token

PHOTOS = {"name": "Holiday photos", "scopes": ["view", "print"], "type": PHOTO_TYPE}
DOCTOR = [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}]


@pytest.fixture
def rules_text() -> str:
    return PHOTOS_FOR_DOCTORS_AND_COLLEAGUES


@pytest.fixture(autouse=True)
def people(store: Store) -> None:
    """alice and bob, who sign in with passwords (before `rs` makes alice without one)."""
    for name in ("alice", "bob"):
        make_person(store, name, secrets_at_rest.hash_password(f"{name}'s password"))


@pytest.fixture
def flow(http: FlaskClient, store: Store, rs: Party, people: None) -> Flow:
    """alice's Holiday photos; bob's client (pushing employee and OIDC claims) with his AAT."""
    viewer = make_party(store, "bob", "uma_authorization", push_types=(EMPLOYEE, OIDC))
    return Flow(FlaskApi(http), rs, viewer, PHOTOS)


@pytest.fixture
def alice(app: Flask, people: None) -> FlaskClient:
    browser = app.test_client()
    assert sign_in(browser, "alice", "alice's password").status_code == 303
    return browser


def events_of(store: Store, username: str) -> list[Event]:
    user = store.get_user_by_username(username)
    assert user is not None
    return store.events_of(user.sub, 100)


def summary(event: Event) -> tuple[Any, ...]:
    return (event.kind, event.outcome, event.rs_name, event.scopes, event.party, event.decided_by)


def test_each_authorization_request_is_an_event_of_the_owner(
    flow: Flow, store: Store, clock: FakeClock
) -> None:
    ticket = flow.ticket("view")
    assert flow.ask(ticket).status == 403  # need_claims
    clock.moment += 5
    assert flow.ask(ticket, DOCTOR).status == 201
    later, first = events_of(store, "alice")
    assert summary(first) == (
        "decision", "needs claims", "Holiday photos", ("view",), "bob", "doctors-view",
    )  # fmt: skip
    assert summary(later) == (
        "grant", "granted", "Holiday photos", ("view",), "bob", "doctors-view",
    )  # fmt: skip
    assert later.at == first.at + 5 == clock.moment
    assert later.client_id == flow.app.client_id and later.client_name == "client of bob"
    assert later.rs_id == flow.rs_id
    assert events_of(store, "bob") == []


def test_an_event_keeps_the_names_as_they_were(http: FlaskClient, flow: Flow, store: Store) -> None:
    assert flow.ask(flow.ticket("view"), DOCTOR).status == 201
    renamed = http.put(
        f"/rs/resource_set/{flow.rs_id}",
        json={**PHOTOS, "name": "Old photos"},
        headers=flow.rs.auth,
    )
    assert renamed.status_code == 200, renamed.text
    (event,) = events_of(store, "alice")
    assert event.rs_name == "Holiday photos"


def test_each_uma_ticket_grant_decision_is_an_event(
    http: FlaskClient, store: Store, rs: Party
) -> None:
    uma = Uma2(http, store, rs)
    status, body = uma.token(ticket=uma.ticket("print"))
    assert status == 403 and body["error"] == "need_info", body
    status, body = uma.token(ticket=uma.ticket("view"), **doctor_token())
    assert status == 200, body
    granted, asked = events_of(store, "alice")
    # The client acts for itself: no requesting party.
    assert summary(asked) == (
        "decision", "needs claims", "Photos", ("print",), None, "colleagues-print",
    )  # fmt: skip
    assert summary(granted) == ("grant", "granted", "Photos", ("view",), None, "doctors-view")
    assert granted.client_name == "Viewer"


def test_a_revocation_on_the_set_page_is_an_event(
    alice: FlaskClient, flow: Flow, store: Store
) -> None:
    assert flow.ask(flow.ticket("view"), DOCTOR).status == 201
    page = alice.get(f"/policy/resource_set/{flow.rs_id}")
    (form,) = re.findall(r'action="[^"]*/permissions/revoke">(.*?)</form>', page.text, re.S)
    fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form))
    done = alice.post(f"/policy/resource_set/{flow.rs_id}/permissions/revoke", data=fields)
    assert done.status_code == 303
    revoked, _ = events_of(store, "alice")
    assert summary(revoked) == ("revocation", "revoked", "Holiday photos", ("view",), "bob", None)
    # Revoked already: no second event.
    alice.post(f"/policy/resource_set/{flow.rs_id}/permissions/revoke", data=fields)
    assert len(events_of(store, "alice")) == 2
    assert rows_of(alice.get("/policy/history"))[0] == (
        f"{when(revoked.at)} You revoked what bob held through client of bob (not verified) :"
        " view on Holiday photos ."
    )


# -- retention ---------------------------------------------------------------------------------

DAY = 24 * 3600


def an_event(at: int, owner: str = "alice-sub") -> Event:
    return Event(
        at, owner, "set-1", "Photos", ("view",), "c-1", "Viewer", "bob", "grant", "granted"
    )


def test_keep_days_is_90_by_default_and_must_be_positive(tmp_path: Path) -> None:
    assert load_config(write_config(tmp_path)).audit.keep_days == 90
    assert (
        load_config(write_config(tmp_path, extra="[audit]\nkeep_days = 7\n")).audit.keep_days == 7
    )
    with pytest.raises(ConfigError, match="keep_days"):
        load_config(write_config(tmp_path, extra="[audit]\nkeep_days = 0\n"))
    with pytest.raises(ConfigError, match="keep"):
        load_config(write_config(tmp_path, extra="[audit]\nkeep = 7\n"))


def test_pruning_forgets_events_older_than_keep_days_in_batches(store: Store) -> None:
    now = 1_800_000_000
    for n in range(5):
        store.add_event(an_event(now - 7 * DAY - 1 - n))
    kept = an_event(now - 7 * DAY)
    store.add_event(kept)
    assert prune(store, now, batch=2, event_memory=7 * DAY).events == 5
    assert store.events_of("alice-sub", 10) == [kept]


def test_the_app_prunes_events_with_its_keep_days(config: Config, clock: FakeClock) -> None:
    fast = replace(
        config, maintenance=MaintenanceSettings(prune_interval=1), audit=AuditSettings(keep_days=2)
    )
    store = open_store(fast.database)
    try:
        store.add_event(an_event(clock.now() - 2 * DAY - 1))
        store.add_event(an_event(clock.now() - 2 * DAY + 60, owner="kept"))
        app = create_app(fast, clock=clock)
        wait_until(lambda: store.events_of("alice-sub", 1) == [], timeout=10)
        assert len(store.events_of("kept", 1)) == 1
        del app
    finally:
        store.close()


# -- umaserver audit -----------------------------------------------------------------------------


def audit_lines(cli: CLI, *args: str) -> list[dict[str, Any]]:
    result = cli("audit", *args)
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_audit_prints_an_owners_events_oldest_first_as_json_lines(
    flow: Flow, cli: CLI, clock: FakeClock
) -> None:
    ticket = flow.ticket("view")
    assert flow.ask(ticket).status == 403
    clock.moment += 60
    assert flow.ask(ticket, DOCTOR).status == 201
    first, second = audit_lines(cli, "--owner", "alice")
    assert first["kind"] == "decision" and second["kind"] == "grant"
    assert second == {
        "time": datetime.fromtimestamp(clock.moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "owner": "alice",
        "kind": "grant",
        "outcome": "granted",
        "resource_set_id": flow.rs_id,
        "resource_set_name": "Holiday photos",
        "scopes": ["view"],
        "client_id": flow.app.client_id,
        "client_name": "client of bob",
        "requesting_party": "bob",
        "decided_by": "doctors-view",
    }
    # --since: at or after; with Z, +00:00, or no offset (UTC).
    since = datetime.fromtimestamp(clock.moment, UTC)
    for text in (
        since.strftime("%Y-%m-%dT%H:%M:%SZ"),
        since.isoformat(),
        since.replace(tzinfo=None).isoformat(),
    ):
        assert audit_lines(cli, "--owner", "alice", "--since", text) == [second]
    assert len(audit_lines(cli, "--owner", "alice", "--since", since.date().isoformat())) == 2
    assert audit_lines(cli, "--owner", "bob") == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--owner", "nobody"), "There is no user 'nobody'."),
        (("--owner", "alice", "--since", "yesterday"), "is not an ISO 8601 time in UTC"),
        (("--owner", "alice", "--since", "2026-11-26T10:00:00+01:00"), "is not in UTC"),
    ],
)
def test_audit_errors_are_sentences(cli: CLI, args: tuple[str, ...], message: str) -> None:
    result = cli("audit", *args)
    assert result.exit_code == 1
    assert message in result.stderr and result.stdout == ""


# -- /policy/history -----------------------------------------------------------------------------


def text_of(page: Any) -> str:
    """The page's text: tags gone, entities read, spaces folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.text)).split())


def rows_of(page: Any) -> list[str]:
    """The text of each event on a history page."""
    listed = re.search(r'<ol class="history">(.*?)</ol>', page.text, re.S)
    if listed is None:
        return []
    rows = re.findall(r"<li>(.*?)</li>", listed.group(1), re.S)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", row)).split()) for row in rows]


def when(moment: int) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%-d %b %Y, %H:%M:%S UTC")


def test_the_history_page_shows_the_owners_events_newest_first(
    alice: FlaskClient, flow: Flow, clock: FakeClock, store: Store
) -> None:
    ticket = flow.ticket("view")
    assert flow.ask(ticket).status == 403
    clock.moment += 60
    assert flow.ask(ticket, DOCTOR).status == 201
    page = alice.get("/policy/history")
    assert page.status_code == 200
    assert rows_of(page) == [
        f"{when(clock.moment)} bob asked through client of bob (not verified) for view on"
        " Holiday photos : Granted (by doctors-view) .",
        f"{when(clock.moment - 60)} bob asked through client of bob (not verified) for view on"
        " Holiday photos : More information needed (by doctors-view) .",
    ]
    # The owner's pages link to it; bob, who owns nothing here, sees none of alice's events.
    assert 'href="/policy/history"' in alice.get("/policy").text
    assert (
        f'href="/policy/history?resource_set={flow.rs_id}"'
        in alice.get(f"/policy/resource_set/{flow.rs_id}").text
    )
    bob = alice.application.test_client()
    assert sign_in(bob, "bob", "bob's password").status_code == 303
    assert rows_of(bob.get("/policy/history")) == []
    assert "Nothing yet." in text_of(bob.get("/policy/history"))


def test_the_history_page_names_a_share_and_a_deleted_rule_by_title_never_by_id(
    alice: FlaskClient, flow: Flow, clock: FakeClock, store: Store
) -> None:
    resource_set = store.find_resource_set(flow.rs_id)
    assert resource_set is not None
    made = shares.share(
        store, "alice", resource_set, "bob", ["view"], None, clock.moment, limit=10, outbox=None
    )
    assert flow.ask(flow.ticket("view")).status == 201
    stored = store.events_of(made.owner, 1)[0]
    assert stored.decided_by == made.rule_id  # the event keeps the id (`umaserver audit` says it)
    rows = rows_of(alice.get("/policy/history"))
    assert rows[0].endswith("Granted (by your share with bob) .")
    assert made.rule_id not in " ".join(rows)
    # Once the share is gone, its server-made id is not shown either.
    shares.stop_sharing(store, made.owner, made.rule_id, clock.moment)
    rows = rows_of(alice.get("/policy/history"))
    assert any(row.endswith("Granted (by a rule of yours since deleted) .") for row in rows)


def test_the_history_page_is_filtered_by_set_and_paginated(
    alice: FlaskClient, flow: Flow, store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(history_page, "PAGE_SIZE", 2)
    other = flow.register({**PHOTOS, "name": "Notes <b>"})
    for rs_id in (flow.rs_id, other, flow.rs_id, flow.rs_id):
        clock.moment += 1
        assert flow.ask(flow.ticket("view", rs_id=rs_id), DOCTOR).status == 201
    first = alice.get("/policy/history")
    assert [row.split(" on ")[1][:14] for row in rows_of(first)] == ["Holiday photos"] * 2
    found = re.search(r'href="/policy/history\?([^"]+)" rel="next"', first.text)
    assert found is not None
    second = alice.get("/policy/history?" + html.unescape(found.group(1)))
    assert [row.split(" on ")[1][:8] for row in rows_of(second)] == ["Notes <b", "Holiday "]
    assert 'rel="next"' not in second.text and "First page" in second.text
    # The set's name is text, never markup.
    assert "Notes &lt;b&gt;" in second.text
    only = alice.get(f"/policy/history?resource_set={other}")
    assert len(rows_of(only)) == 1 and "Only Notes <b>" in text_of(only)
    mine = alice.get(f"/policy/history?resource_set={flow.rs_id}")
    found = re.search(r'href="/policy/history\?([^"]+)" rel="next"', mine.text)
    assert found is not None and f"resource_set={flow.rs_id}" in html.unescape(found.group(1))
    rest = alice.get("/policy/history?" + html.unescape(found.group(1)))
    assert len(rows_of(rest)) == 1


@pytest.mark.parametrize(
    "query", ["before=x", "before=1.2.3", "before=1&before=2", "resource_set=a&resource_set=b"]
)
def test_a_broken_history_link_is_a_400_page(alice: FlaskClient, query: str) -> None:
    page = alice.get(f"/policy/history?{query}")
    assert page.status_code == 400
    assert page.headers["Content-Type"].startswith("text/html")


def test_the_history_page_needs_a_signed_in_owner(app: Flask) -> None:
    page = app.test_client().get("/policy/history")
    assert page.status_code in (302, 303)
    assert "/signin" in page.headers["Location"]
