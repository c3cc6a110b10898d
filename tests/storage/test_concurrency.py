"""Handles, transactions and races: what one handle's transaction lets another handle see, and the
contract's atomic operations under racing callers, each on its own handle (its own connection):
"of racers on one open ticket exactly one consumes it". Every racer waits at one barrier, so that
they start together."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TypeVar

import pytest

from umaserver.storage import Storage
from umaserver.storage.people_records import Invitation, Notice, SeededParty, Share
from umaserver.storage.records import Client, User

from .builders import (
    T,
    assertion_use,
    claim,
    make_code,
    make_handle,
    make_refresh_token,
    make_rpt,
    make_set,
    make_ticket,
    make_token,
    make_user,
)
from .conftest import StoreFactory

RACERS = 16
R = TypeVar("R")


class Boom(Exception):
    """Raised inside a transaction to roll it back."""


def race(store_factory: StoreFactory, action: Callable[[Storage, int], R]) -> list[R]:
    """Runs `action(handle, racer)` in RACERS threads at once, each with its own handle; the
    results in racer order (a racer's exception is raised here)."""
    handles = [store_factory() for _ in range(RACERS)]
    barrier = threading.Barrier(RACERS, timeout=30)

    def run(racer: int) -> R:
        barrier.wait()
        return action(handles[racer], racer)

    with ThreadPoolExecutor(max_workers=RACERS) as pool:
        return list(pool.map(run, range(RACERS), timeout=60))


def test_of_racers_consuming_one_ticket_exactly_one_does(store_factory: StoreFactory) -> None:
    store = store_factory()
    ticket = make_ticket(store)
    results = race(store_factory, lambda handle, _: handle.consume_ticket(ticket.digest))
    assert results.count(True) == 1
    assert store.get_ticket(ticket.digest) == replace(ticket, state="granted")


def test_of_racers_binding_and_using_one_handle_exactly_one_does_each(
    store_factory: StoreFactory,
) -> None:
    store = store_factory()
    handle = make_handle(store)
    bound = race(store_factory, lambda h, racer: h.bind_claims_handle(handle.digest, f"b{racer}"))
    assert bound.count(True) == 1
    used = race(store_factory, lambda h, _: h.use_claims_handle(handle.digest))
    assert used.count(True) == 1
    assert store.get_claims_handle(handle.digest) == replace(
        handle, binding_digest=f"b{bound.index(True)}", state="used"
    )


def test_of_racers_consuming_one_code_exactly_one_does(store_factory: StoreFactory) -> None:
    store = store_factory()
    code = make_code(store)
    results = race(
        store_factory, lambda handle, _: handle.consume_authorization_code(code.digest, T)
    )
    assert results.count(True) == 1
    assert store.get_authorization_code(code.digest) == replace(code, used=True)


def test_of_racers_using_one_refresh_token_exactly_one_does(store_factory: StoreFactory) -> None:
    store = store_factory()
    token = make_refresh_token(store)
    results = race(store_factory, lambda handle, _: handle.use_refresh_token(token.digest, T))
    assert results.count(True) == 1
    assert store.get_refresh_token(token.digest) == replace(token, used=True)


def test_of_racers_accepting_one_invitation_exactly_one_does(store_factory: StoreFactory) -> None:
    store = store_factory()
    alice = make_user(store)
    racers = [make_user(store) for _ in range(RACERS)]
    rule = {"id": "o-inv", "owner": alice.username, "scopes": ["view"]}
    assert store.add_owner_rule("o-inv", alice.sub, rule, T)
    assert store.add_share(
        Share("o-inv", alice.sub, "rs-1", "c@x.test", "email", ("view",), None, T)
    )
    assert store.add_invitation(Invitation("inv", "o-inv", alice.sub, "c@x.test", T, T + 60))
    results = race(store_factory, lambda h, racer: h.use_invitation("inv", racers[racer].sub, T))
    [winner] = [found for found in results if found is not None]
    assert winner.used_by in {user.sub for user in racers}
    assert store.get_invitation("inv") == winner


def test_of_racers_consuming_and_finishing_one_ticket_exactly_one_does(
    store_factory: StoreFactory,
) -> None:
    store = store_factory()
    ticket = make_ticket(store)

    def close(handle: Storage, racer: int) -> bool:
        if racer % 2:
            return handle.finish_ticket(ticket.digest)
        return handle.consume_ticket(ticket.digest)

    results = race(store_factory, close)
    assert results.count(True) == 1
    winner = results.index(True)
    got = store.get_ticket(ticket.digest)
    assert got == replace(ticket, state="finished" if winner % 2 else "granted")


def test_racers_counting_requests_get_every_count_once(store_factory: StoreFactory) -> None:
    store = store_factory()
    ticket = make_ticket(store)
    counts = race(store_factory, lambda handle, _: handle.count_ticket_request(ticket.digest))
    assert sorted(counts) == list(range(1, RACERS + 1))
    assert store.get_ticket(ticket.digest) == replace(ticket, requests=RACERS)


def test_racers_using_one_assertion_see_each_others_uses(store_factory: StoreFactory) -> None:
    store = store_factory()
    rs = make_set(store)
    tickets = [make_ticket(store, rs).digest for _ in range(RACERS)]
    earlier = race(
        store_factory,
        lambda handle, racer: handle.record_assertion_use(
            assertion_use(tickets[racer], f"party-{racer}"), T
        ),
    )
    # One saw no earlier use; every later one saw all those before it.
    assert sorted(len(uses) for uses in earlier) == list(range(RACERS))
    for racer, uses in enumerate(earlier):
        assert tickets[racer] not in {use.ticket_digest for use in uses}
    remembered = store.record_assertion_use(assertion_use(make_ticket(store, rs).digest), T)
    assert sorted(use.ticket_digest for use in remembered) == sorted(tickets)


def test_racers_deciding_in_a_transaction_see_the_ticket_open_only_once(
    store_factory: StoreFactory,
) -> None:
    """The authorization request reads the ticket, records what it gathered and consumes the
    ticket in one transaction: what it read must still hold when it writes."""
    store = store_factory()
    ticket = make_ticket(store)

    def decide(handle: Storage, racer: int) -> tuple[bool, bool]:
        with handle.transaction():
            read = handle.get_ticket(ticket.digest)
            is_open = read is not None and read.state == "open"
            time.sleep(0.005)  # a decision takes time: let the others read meanwhile
            if is_open:
                handle.record_claims(ticket.digest, f"party-{racer}", [claim("n", racer)])
                handle.count_ticket_request(ticket.digest)
            return is_open, handle.consume_ticket(ticket.digest)

    results = race(store_factory, decide)
    assert [saw_open for saw_open, _ in results].count(True) == 1
    assert [result for result in results if result[0] or result[1]] == [(True, True)]
    winner = results.index((True, True))
    assert store.get_ticket(ticket.digest) == replace(ticket, requests=1, state="granted")
    assert store.gathered_claims(ticket.digest, f"party-{winner}") == [claim("n", winner)]


def test_racers_issuing_under_one_aat_they_hold_leave_it_one_live_rpt(
    store_factory: StoreFactory,
) -> None:
    """An RPT is issued in a transaction that first reads its AAT (`rpts.hold_aat`): each racer
    finds the live RPT a racer before it made, and of racers on an AAT with none exactly one
    makes one."""
    store = store_factory()
    aat = make_token(store, scope="uma_authorization")

    def issue(handle: Storage, _: int) -> bool:
        with handle.transaction():
            handle.get_access_token(aat.digest)
            if handle.live_rpt_of(aat.digest, T) is not None:
                return False
            time.sleep(0.005)  # issuing takes time: let the others look meanwhile
            make_rpt(handle, aat)
            return True

    assert race(store_factory, issue).count(True) == 1


def test_an_assertion_use_in_a_transaction_that_raises_is_forgotten(store: Storage) -> None:
    first, second = make_ticket(store).digest, make_ticket(store).digest
    with pytest.raises(RuntimeError), store.transaction():
        assert store.record_assertion_use(assertion_use(first), T) == []
        raise RuntimeError("the request was refused")
    assert store.record_assertion_use(assertion_use(second), T) == []


# -- transactions and handles ----------------------------------------------------------------------


def test_a_transaction_that_raises_leaves_nothing(store_factory: StoreFactory) -> None:
    store, other = store_factory(), store_factory()
    ticket = make_ticket(store)
    with pytest.raises(Boom), store.transaction():
        assert store.consume_ticket(ticket.digest)
        store.record_claims(ticket.digest, "bob", [claim("email", "bob@x.test")])
        assert store.get_ticket(ticket.digest) == replace(ticket, state="granted")  # own writes
        raise Boom
    for handle in (store, other):
        assert handle.get_ticket(ticket.digest) == ticket
        assert handle.gathered_claims(ticket.digest, "bob") == []


def test_a_nested_transaction_joins_the_outer_one(store: Storage) -> None:
    ticket, client = make_ticket(store), Client("c-nested", "d", "n", (), ())
    with pytest.raises(Boom), store.transaction():
        store.add_client(client, T)
        with store.transaction():
            assert store.count_ticket_request(ticket.digest) == 1
        assert store.get_client("c-nested") == client  # the inner one did not end it
        with store.transaction():
            store.finish_ticket(ticket.digest)
            raise Boom
    assert store.get_client("c-nested") is None
    assert store.get_ticket(ticket.digest) == ticket


def test_a_transaction_commits_when_it_ends(store_factory: StoreFactory) -> None:
    store, other = store_factory(), store_factory()
    ticket = make_ticket(store)
    with store.transaction():
        store.consume_ticket(ticket.digest)
        with store.transaction():
            store.add_user(User("sub-t", "tina", None, {}), T)
        assert other.get_ticket(ticket.digest) == ticket  # not before it commits
        assert other.get_username("sub-t") is None
    assert other.get_ticket(ticket.digest) == replace(ticket, state="granted")
    assert other.get_username("sub-t") == "tina"


def test_a_taken_username_in_a_transaction_does_not_spoil_it(store_factory: StoreFactory) -> None:
    store, other = store_factory(), store_factory()
    alice = make_user(store, "alice")
    with store.transaction():
        assert store.add_user(User("sub-a2", "alice", None, {}), T) is False
        assert store.add_user(User("sub-b", "bob", None, {}), T) is True
    assert other.get_user_by_username("alice") == alice
    assert other.get_username("sub-b") == "bob"
    assert other.get_username("sub-a2") is None


def test_outside_a_transaction_each_operation_commits_on_its_own(
    store_factory: StoreFactory,
) -> None:
    store, other = store_factory(), store_factory()
    ticket = make_ticket(store)
    assert other.get_ticket(ticket.digest) == ticket
    assert store.count_ticket_request(ticket.digest) == 1
    assert other.get_ticket(ticket.digest) == replace(ticket, requests=1)
    token = make_token(store)
    assert store.revoke_access_token(token.digest)
    assert other.revoke_access_token(token.digest) is False


def test_what_a_closed_handle_committed_stays(store_factory: StoreFactory) -> None:
    store = store_factory()
    user = make_user(store, "closer")
    store.close()
    assert store_factory().get_user_by_username("closer") == user


def test_of_racers_claiming_fetch_work_each_row_goes_to_one(store_factory: StoreFactory) -> None:
    first = store_factory()
    for index in range(40):
        first.queue_uri(f"https://a.example/{index}", "page", f"row-{index}", T)
    taken = race(store_factory, lambda handle, racer: handle.claim_fetch_work(T, T + 30, 5))
    ids = [row.id for rows in taken for row in rows]
    assert sorted(ids) == sorted(f"row-{index}" for index in range(40))


def test_of_racers_claiming_due_mail_each_notice_goes_to_one(store_factory: StoreFactory) -> None:
    first = store_factory()
    for index in range(40):
        first.add_notice(
            Notice(
                f"notice-{index}",
                None,
                f"person{index}@example.org",
                "invitation",
                "You are invited",
                "Follow the link.",
                "https://uma.example/invitations/x",
                T,
                mail_state="pending",
                next_attempt_at=T,
            )
        )
    taken = race(store_factory, lambda handle, racer: handle.claim_due_mail(T, T + 600, 5))
    ids = [notice.id for notices in taken for notice in notices]
    assert sorted(ids) == sorted(f"notice-{index}" for index in range(40))


def test_racers_applying_seeds_take_turns(store_factory: StoreFactory) -> None:
    # Each racer reads what is recorded and records the next number: only one at a time between
    # lock_seeding and the end of its transaction, so no two pick the same number.
    def apply(handle: Storage, racer: int) -> bool:
        with handle.transaction():
            handle.lock_seeding()
            found = len(handle.seeded_parties())
            time.sleep(0.01)
            return handle.record_seeded(SeededParty("user", f"{found:02}"), T)

    assert race(store_factory, apply) == [True] * RACERS
    assert store_factory().seeded_parties() == [
        SeededParty("user", f"{index:02}") for index in range(RACERS)
    ]


def test_racers_holding_a_signin_key_count_and_add_one_at_a_time(
    store_factory: StoreFactory,
) -> None:
    # What sign-in does before it checks a password: count the key's failures and add one only
    # while fewer than 5, all under the key's hold. Of 16 racers exactly 5 add one.
    def reserve(handle: Storage, _: int) -> bool:
        with handle.transaction():
            handle.hold_signin_key("address:k")
            if len(handle.signin_failures_since("address:k", 0)) >= 5:
                return False
            handle.record_signin_failure("address:k", T)
            return True

    assert sum(race(store_factory, reserve)) == 5
    assert len(store_factory().signin_failures_since("address:k", 0)) == 5
