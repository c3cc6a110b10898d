"""Asking the owner (services/owner_requests.py, issue 25 item 3): a client whose person the rules
refuse asks the owner with `submit_request`; the request waits on alice's /policy/requests; she
approves (a share, the ticket narrowed) or denies. UMA 1.0's authorization request and UMA 2.0's
uma-ticket grant (Keycloak's realm face, the person's own token), through the test client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from umaserver.services import owner_requests, shares
from umaserver.storage.people_records import AccessRequest
from umaserver.storage.records import ResourceSet

from .conftest import (
    FakeClock,
    Party,
    Store,
    make_client_party,
    make_party,
    make_person,
    write_config,
)
from .flows import DOCTORS_MAY_VIEW, EMPLOYEE, FlaskApi, Flow
from .test_uma2_grant import UMA_TICKET, make_uma2_client

DAY = 86400


def person(store: Store, username: str) -> Party:
    make_person(store, username, None, {})
    return make_party(store, username, "uma_authorization")


@pytest.fixture
def sharing() -> str:
    """The `[sharing]` table of the test's configuration (none: the defaults)."""
    return ""


@pytest.fixture
def config_path(tmp_path: Path, rules_text: str, sharing: str) -> Path:
    (tmp_path / "policies.toml").write_text(rules_text, encoding="utf-8")
    return write_config(tmp_path, extra=f'[keycloak]\nrealm = "demo"\n{sharing}')


@pytest.fixture
def flow(http: FlaskClient, store: Store, rs: Party) -> Flow:
    return Flow(
        FlaskApi(http), rs, person(store, "bob"), {"name": "Photos", "scopes": ["view", "print"]}
    )


def alice_sub(store: Store) -> str:
    alice = store.get_user_by_username("alice")
    assert alice is not None
    return alice.sub


def ask(flow: Flow, ticket: str, party: Party | None = None, **body: Any) -> tuple[int, Any]:
    reply = flow.api.post(
        flow.endpoints["authorization_request_endpoint"],
        json={"rpt": "none-yet", "ticket": ticket, **body},
        headers=(party or flow.app).auth,
    )
    return reply.status, reply.json


def pending(store: Store, clock: FakeClock) -> list[AccessRequest]:
    return store.requests_of(alice_sub(store), "pending", clock.now(), 100)


SUBMITTED = {
    "error": "request_submitted",
    "error_description": "The resource owner has been asked for access; poll with the ticket no"
    " faster than the interval.",
    "interval": 5,
}


class TestUma1:
    def test_without_the_flag_a_refusal_stays_and_nothing_is_asked(
        self, store: Store, flow: Flow, clock: FakeClock
    ) -> None:
        ticket = flow.ticket("view")
        status, body = ask(flow, ticket)
        assert (status, body["error"]) == (403, "not_authorized_permission")
        assert pending(store, clock) == []
        assert ask(flow, ticket, submit_request=True)[1]["error"] == "invalid_ticket"

    @pytest.mark.parametrize("value", ["true", 1, None, "yes"])
    def test_the_flag_is_a_json_boolean(self, flow: Flow, value: Any) -> None:
        status, body = ask(flow, flow.ticket("view"), submit_request=value)
        assert (status, body["error"]) == (400, "invalid_request")
        assert "submit_request" in body["error_description"]

    def test_a_refusal_asks_alice_the_ticket_waits_and_polls_are_not_counted(
        self, store: Store, flow: Flow, clock: FakeClock
    ) -> None:
        ticket = flow.ticket("view", "print")
        assert ask(flow, ticket, submit_request=True) == (403, SUBMITTED)
        [asked] = pending(store, clock)
        assert (asked.party_name, asked.client_name, asked.scopes) == (
            "bob",
            "client of bob",
            ("view", "print"),
        )
        assert asked.expires_at == clock.now() + 7 * DAY
        assert owner_requests.pending_count(store, alice_sub(store), clock.now()) == 1
        # Far more polls than a ticket's 10 requests: while pending, none of them counts.
        for _ in range(12):
            clock.advance(5)
            assert ask(flow, ticket) == (403, SUBMITTED)
        assert pending(store, clock) == [asked]  # asked once
        rpt = flow.new_rpt()
        owner_requests.approve(store, alice_sub(store), asked.id, [], None, clock.now(), limit=9)
        status, body = ask(flow, ticket, rpt=rpt)
        assert status == 201, body
        [permission] = flow.introspect(rpt)["permissions"]
        assert sorted(permission["scopes"]) == ["print", "view"]
        assert ask(flow, ticket)[1]["error"] == "invalid_ticket"  # used
        assert owner_requests.pending_count(store, alice_sub(store), clock.now()) == 0

    def test_approve_fewer_scopes_until_a_day_narrows_the_ticket_and_shares(
        self, store: Store, flow: Flow, clock: FakeClock
    ) -> None:
        ticket = flow.ticket("view", "print")
        assert ask(flow, ticket, submit_request=True)[0] == 403
        [asked] = pending(store, clock)
        until = shares.end_of_day(shares.last_day(clock.now() + 2 * DAY).isoformat(), clock.now())
        with pytest.raises(owner_requests.RequestRefused) as refused:
            owner_requests.approve(
                store, alice_sub(store), asked.id, ["edit"], until, clock.now(), limit=9
            )
        assert refused.value.field == "scopes"
        decided = owner_requests.approve(
            store, alice_sub(store), asked.id, ["view"], until, clock.now(), limit=9
        )
        assert (decided.status, decided.approved_scopes) == ("approved", ("view",))
        [made] = store.shares_of(alice_sub(store))
        assert (made.recipient, made.scopes, made.until) == ("bob", ("view",), until)
        # The approval leaves the ticket alone (it never waits on a ticket its client keeps
        # rotating): the client's next request narrows it, under the ticket's lock.
        still = store.get_ticket(asked.ticket_digest)
        assert still is not None and still.scopes == ("view", "print")
        rpt = flow.new_rpt()
        status, _ = ask(flow, ticket, rpt=rpt)
        assert status == 201
        [permission] = flow.introspect(rpt)["permissions"]
        assert permission["scopes"] == ["view"]
        with pytest.raises(owner_requests.RequestRefused):  # answered once
            owner_requests.deny(store, alice_sub(store), asked.id, clock.now())

    def test_deny_answers_not_authorized_once_and_finishes_the_ticket(
        self, store: Store, flow: Flow, clock: FakeClock
    ) -> None:
        ticket = flow.ticket("view")
        assert ask(flow, ticket, submit_request=True)[0] == 403
        [asked] = pending(store, clock)
        owner_requests.deny(store, alice_sub(store), asked.id, clock.now())
        status, body = ask(flow, ticket, submit_request=True)
        assert (status, body["error"]) == (403, "not_authorized_permission")
        assert body["error_description"] == owner_requests.DENIED_DESCRIPTION
        assert ask(flow, ticket)[1]["error"] == "invalid_ticket"
        assert store.shares_of(alice_sub(store)) == []
        assert pending(store, clock) == []

    def test_past_the_request_lifetime_the_ticket_has_expired(
        self, store: Store, flow: Flow, clock: FakeClock
    ) -> None:
        ticket = flow.ticket("view")
        assert ask(flow, ticket, submit_request=True)[0] == 403
        [asked] = pending(store, clock)
        clock.advance(7 * DAY - 1)
        assert ask(flow, ticket) == (403, SUBMITTED)  # the ticket lives as long as the request
        clock.advance(1)
        status, body = ask(flow, ticket)
        assert (status, body["error"]) == (400, "expired_ticket")
        assert pending(store, clock) == []
        assert owner_requests.pending_count(store, alice_sub(store), clock.now()) == 0
        with pytest.raises(owner_requests.RequestRefused) as refused:
            owner_requests.approve(
                store, alice_sub(store), asked.id, [], None, clock.now(), limit=9
            )
        assert "expired" in refused.value.message

    def test_alices_switch_off_leaves_the_refusal(
        self, store: Store, flow: Flow, clock: FakeClock
    ) -> None:
        assert store.set_takes_requests(alice_sub(store), False)
        status, body = ask(flow, flow.ticket("view"), submit_request=True)
        assert (status, body["error"]) == (403, "not_authorized_permission")
        assert pending(store, clock) == []
        assert store.set_takes_requests(alice_sub(store), None)  # the server's default: yes
        assert ask(flow, flow.ticket("view"), submit_request=True)[0] == 403
        assert len(pending(store, clock)) == 1

    def test_a_client_acting_for_itself_asks_no_one(
        self, store: Store, flow: Flow, clock: FakeClock
    ) -> None:
        own = make_client_party(store, flow.app.client_id, "uma_authorization")
        status, body = ask(flow, flow.ticket("view"), party=own, submit_request=True)
        assert (status, body["error"]) == (403, "not_authorized_permission")
        assert pending(store, clock) == []

    def test_the_history_has_the_request_the_approval_and_the_denial(
        self, store: Store, flow: Flow, clock: FakeClock
    ) -> None:
        first, second = flow.ticket("view"), flow.ticket("print")
        for ticket in (first, second):
            assert ask(flow, ticket, submit_request=True)[0] == 403
        by_scope = {r.scopes: r for r in pending(store, clock)}
        owner_requests.approve(
            store, alice_sub(store), by_scope[("view",)].id, [], None, clock.now(), limit=9
        )
        owner_requests.deny(store, alice_sub(store), by_scope[("print",)].id, clock.now())
        events = store.events_of(alice_sub(store), 20)
        seen = [(e.kind, e.outcome, e.scopes, e.party, e.client_name) for e in events]
        assert ("decision", "request submitted", ("view",), "bob", "client of bob") in seen
        assert ("decision", "request submitted", ("print",), "bob", "client of bob") in seen
        assert ("approval", "approved", ("view",), "bob", "client of bob") in seen
        assert ("denial", "denied", ("print",), "bob", "client of bob") in seen
        assert ("share", "shared", ("view",), "bob", "") in seen


class TestLimits:
    @pytest.fixture
    def sharing(self) -> str:
        return "[sharing]\nmax_pending_requests = 2\nrequest_lifetime = 600\n"

    def test_past_max_pending_requests_the_refusal_stays_and_says_why(
        self, store: Store, flow: Flow, clock: FakeClock
    ) -> None:
        for _ in range(2):
            assert ask(flow, flow.ticket("view"), submit_request=True) == (403, SUBMITTED)
        status, body = ask(flow, flow.ticket("view"), submit_request=True)
        assert (status, body["error"]) == (403, "not_authorized_permission")
        assert "2 requests waiting" in body["error_description"]
        carol = person(store, "carol")  # another person's count is their own
        assert ask(flow, flow.ticket("view"), party=carol, submit_request=True)[0] == 403
        assert len(pending(store, clock)) == 3
        clock.advance(600)  # bob's expire: he may ask again
        assert ask(flow, flow.ticket("view"), submit_request=True) == (403, SUBMITTED)


class TestServerOff:
    @pytest.fixture
    def sharing(self) -> str:
        return "[sharing]\nrequests = false\n"

    def test_requests_off_on_the_server_leave_the_refusal(
        self, store: Store, flow: Flow, clock: FakeClock
    ) -> None:
        assert store.set_takes_requests(alice_sub(store), True)
        status, body = ask(flow, flow.ticket("view"), submit_request=True)
        assert (status, body["error"]) == (403, "not_authorized_permission")
        assert pending(store, clock) == []


class TestUma2:
    """The uma-ticket grant on Keycloak's realm face, bob's own token as the credential."""

    @pytest.fixture
    def photos(self, http: FlaskClient, store: Store, rs: Party) -> ResourceSet:
        description = {"name": "Photos", "resource_scopes": ["view", "print"]}
        registered = http.post("/rs/resource_set", json=description, headers=rs.auth)
        assert registered.status_code == 201, registered.json
        found = store.find_resource_set(registered.json["_id"])
        assert found is not None
        return found

    @pytest.fixture
    def bob(self, store: Store) -> Party:
        app_id, _ = make_uma2_client(store, "Keycloak app", ())
        make_person(store, "bob", None, {})
        return make_party(store, "bob", "uma_authorization", client_id=app_id)

    def ticket(self, http: FlaskClient, rs: Party, photos: ResourceSet, *scopes: str) -> str:
        reply = http.post(
            "/permission",
            json={"resource_id": photos.id, "resource_scopes": list(scopes)},
            headers=rs.auth,
        )
        ticket: str = reply.json["ticket"]
        return ticket

    def grant(self, http: FlaskClient, bob: Party, ticket: str, **form: str) -> tuple[int, Any]:
        reply = http.post(
            "/realms/demo/protocol/openid-connect/token",
            data={"grant_type": UMA_TICKET, "ticket": ticket, **form},
            headers={"Authorization": f"Bearer {bob.token}"},
        )
        return reply.status_code, reply.json

    def test_another_apps_poll_leaves_the_ticket_of_the_app_that_asked(
        self,
        http: FlaskClient,
        store: Store,
        rs: Party,
        photos: ResourceSet,
        bob: Party,
        clock: FakeClock,
    ) -> None:
        # Issue 27, N1: another app with a token for bob sends the ticket while the owner is
        # asked: request_submitted with the same ticket, not rotated away from the app that asked.
        other_id, _ = make_uma2_client(store, "Other app", ())
        other = make_party(store, "bob", "uma_authorization", client_id=other_id)
        first = self.ticket(http, rs, photos, "view")
        status, body = self.grant(http, bob, first, submit_request="true")
        assert (status, body["error"]) == (403, "request_submitted"), body
        ticket = body["ticket"]
        status, body = self.grant(http, other, ticket)
        assert (status, body["error"], body["ticket"]) == (403, "request_submitted", ticket)
        [asked] = store.requests_of(photos.owner, "pending", clock.now(), 10)
        owner_requests.approve(store, photos.owner, asked.id, ["view"], None, clock.now(), limit=9)
        status, body = self.grant(http, bob, ticket)
        assert status == 200, body

    def test_submit_rotates_the_ticket_each_poll_until_approved(
        self,
        http: FlaskClient,
        store: Store,
        rs: Party,
        photos: ResourceSet,
        bob: Party,
        clock: FakeClock,
    ) -> None:
        first = self.ticket(http, rs, photos, "view", "print")
        status, body = self.grant(http, bob, first, submit_request="true")
        assert (status, body["error"], body["interval"]) == (403, "request_submitted", 5)
        ticket = body["ticket"]
        assert ticket != first
        assert self.grant(http, bob, first)[1]["error"] == "invalid_grant"  # rotated away
        for _ in range(11):
            status, body = self.grant(http, bob, ticket)
            assert (status, body["error"]) == (403, "request_submitted")
            assert body["ticket"] != ticket
            ticket = body["ticket"]
        [asked] = store.requests_of(photos.owner, "pending", clock.now(), 10)
        assert (asked.party_name, asked.client_name, asked.scopes) == (
            "bob",
            "Keycloak app",
            ("view", "print"),
        )
        # alice is told once, however often the client polls.
        [told] = store.notices_of(photos.owner, 10)
        assert (told.kind, told.subject) == ("request", "bob asks to view, print Photos")
        owner_requests.approve(store, photos.owner, asked.id, ["print"], None, clock.now(), limit=9)
        status, body = self.grant(http, bob, ticket)
        assert status == 200, body
        assert self.grant(http, bob, ticket)[1]["error"] == "invalid_grant"

    def test_deny_answers_request_denied(
        self,
        http: FlaskClient,
        store: Store,
        rs: Party,
        photos: ResourceSet,
        bob: Party,
        clock: FakeClock,
    ) -> None:
        _, body = self.grant(
            http, bob, self.ticket(http, rs, photos, "view"), submit_request="true"
        )
        [asked] = store.requests_of(photos.owner, "pending", clock.now(), 10)
        owner_requests.deny(store, photos.owner, asked.id, clock.now())
        status, denied = self.grant(http, bob, body["ticket"])
        assert (status, denied["error"]) == (403, "request_denied")
        assert denied["error_description"] == owner_requests.DENIED_DESCRIPTION
        assert self.grant(http, bob, body["ticket"])[1]["error"] == "invalid_grant"

    def test_without_the_flag_or_a_person_the_refusal_stays(
        self,
        http: FlaskClient,
        store: Store,
        rs: Party,
        photos: ResourceSet,
        bob: Party,
        clock: FakeClock,
    ) -> None:
        status, body = self.grant(http, bob, self.ticket(http, rs, photos, "view"))
        assert (status, body["error"]) == (403, "request_denied")
        app_id, secret = make_uma2_client(store, "Own app", ())
        reply = http.post(
            "/token",
            data={
                "grant_type": UMA_TICKET,
                "ticket": self.ticket(http, rs, photos, "view"),
                "submit_request": "true",
            },
            auth=(app_id, secret),
        )
        assert (reply.status_code, reply.json["error"]) == (403, "request_denied")
        assert store.requests_of(photos.owner, "pending", clock.now(), 10) == []


class TestOnlyRefusals:
    """A rule that could still grant, were a claim pushed: need_claims (1.0) and need_info (2.0)
    are answered as they are, submit_request or not."""

    @pytest.fixture
    def rules_text(self) -> str:
        return DOCTORS_MAY_VIEW

    def test_need_claims_stays_need_claims(
        self, http: FlaskClient, store: Store, rs: Party, clock: FakeClock
    ) -> None:
        make_person(store, "bob", None, {})
        bob = make_party(store, "bob", "uma_authorization", push_types=(EMPLOYEE,))
        flow = Flow(FlaskApi(http), rs, bob, {"name": "Photos", "scopes": ["view", "print"]})
        status, body = ask(flow, flow.ticket("view"), submit_request=True)
        assert status == 403 and "need_claims" in body, body
        assert pending(store, clock) == []

    def test_need_info_stays_need_info_and_a_ticket_of_two_sets_is_not_asked(
        self, http: FlaskClient, store: Store, rs: Party, clock: FakeClock
    ) -> None:
        sets = []
        for name in ("Photos", "Notes"):
            description = {"name": name, "resource_scopes": ["view", "print"]}
            registered = http.post("/rs/resource_set", json=description, headers=rs.auth)
            sets.append(registered.json["_id"])
        app_id, _ = make_uma2_client(store, "Keycloak app", (EMPLOYEE,))
        make_person(store, "bob", None, {})
        bob = make_party(store, "bob", "uma_authorization", client_id=app_id)

        def grant(*requested: tuple[str, str]) -> tuple[int, Any]:
            body = [
                {"resource_id": rs_id, "resource_scopes": [scope]} for rs_id, scope in requested
            ]
            ticket = http.post("/permission", json=body, headers=rs.auth).json["ticket"]
            reply = http.post(
                "/realms/demo/protocol/openid-connect/token",
                data={"grant_type": UMA_TICKET, "ticket": ticket, "submit_request": "true"},
                headers={"Authorization": f"Bearer {bob.token}"},
            )
            return reply.status_code, reply.json

        status, body = grant((sets[0], "view"))
        assert (status, body["error"]) == (403, "need_info")
        status, body = grant((sets[0], "print"), (sets[1], "print"))
        assert (status, body["error"]) == (403, "request_denied")
        assert pending(store, clock) == []
        status, body = grant((sets[0], "print"))  # one set, refused: asked
        assert (status, body["error"]) == (403, "request_submitted")
        assert len(pending(store, clock)) == 1
