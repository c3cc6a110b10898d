"""The pruning job: what expired more than a day ago is forgotten, in batches, off the request path,
by a thread that starts and stops with the app. Time is a FakeClock; the job's one step is called
directly, except in the test of the thread itself."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from umaserver import create_app
from umaserver.config import Config, MaintenanceSettings
from umaserver.services.maintenance import BATCH, EXPIRED_MEMORY, Pruned, PruneJob, prune
from umaserver.storage import Storage, open_storage
from umaserver.storage.people_records import AccessRequest, Invitation, Share
from umaserver.storage.records import AccessToken, Pct

from .conftest import FakeClock, Party, Store, make_party, open_store
from .flows import wait_until
from .storage.builders import (
    HOUR,
    T,
    assertion_use,
    claim,
    make_client,
    make_handle,
    make_rpt,
    make_set,
    make_ticket,
    make_user,
    permission,
)

DAY = EXPIRED_MEMORY


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "prune.db"


@pytest.fixture
def handle(db: Path) -> Iterator[Storage]:
    opened = open_store(db)
    yield opened
    opened.close()


def token(store: Storage, expires_at: int, n: int = 0) -> AccessToken:
    made = AccessToken(
        f"at-{expires_at}-{n}",
        make_client(store).client_id,
        None,
        None,
        "uma_authorization",
        expires_at - HOUR,
        expires_at,
        False,
    )
    store.add_access_token(made)
    return made


# "Expired more than a day ago" is `expires_at < now - DAY`; the boundary stays.
@pytest.mark.parametrize(
    ("expired_ago", "forgotten"),
    [
        (DAY + 1000, True),
        (DAY + 1, True),
        (DAY, False),
        (DAY - 1, False),
        (60, False),
        (-60, False),
    ],
)
def test_what_expired_more_than_a_day_ago_is_forgotten(
    handle: Storage, expired_ago: int, forgotten: bool
) -> None:
    expires_at = T - expired_ago
    rs = make_set(handle)
    ticket = make_ticket(handle, rs, expires_at=expires_at)
    handle.record_claims(ticket.digest, "bob", [claim("email", "bob@x.test")])
    handle.record_assertion_use(assertion_use(ticket.digest, expires_at=expires_at), expires_at - 5)
    aat = token(handle, expires_at)
    rpt = make_rpt(handle, aat, issued_at=expires_at - HOUR, expires_at=expires_at)
    handle.put_permission(rpt.digest, permission(rs, expires_at=expires_at))
    pat = token(handle, expires_at, 1)

    pruned = prune(handle, T)

    expected = Pruned(1, 1, 1, 2) if forgotten else Pruned()
    assert pruned == expected
    assert (handle.get_ticket(ticket.digest) is None) is forgotten
    assert (handle.gathered_claims(ticket.digest, "bob") == []) is forgotten
    assert (handle.get_rpt(rpt.digest) is None) is forgotten
    assert (handle.get_permission(rpt.digest, rs.id) is None) is forgotten
    assert (handle.get_access_token(aat.digest) is None) is forgotten
    assert (handle.get_access_token(pat.digest) is None) is forgotten
    assert prune(handle, T) == Pruned()  # nothing left to do


def test_expired_claims_handles_are_forgotten_before_their_ticket(handle: Storage) -> None:
    # A handle keeps its ticket alive (the ticket lives at least as long), so a handle outliving
    # its ticket's own expiry is pruned on its own, and the ticket with it or later.
    ticket = make_ticket(handle, expires_at=T + HOUR)
    expired = make_handle(handle, ticket, expires_at=T - DAY - 1)
    live = make_handle(handle, make_ticket(handle), expires_at=T - DAY)  # the boundary stays
    assert prune(handle, T) == Pruned(claims_handles=1)
    assert handle.get_claims_handle(expired.digest) is None
    assert handle.get_claims_handle(live.digest) == live
    assert handle.get_ticket(ticket.digest) is not None


def test_expired_pcts_are_forgotten(handle: Storage) -> None:
    client = make_client(handle)
    for digest, expires_at in (("pct-expired", T - DAY - 1), ("pct-kept", T - DAY)):
        handle.add_pct(Pct(digest, client.client_id, "client:x", None, T - 2 * DAY, expires_at), [])
    assert prune(handle, T) == Pruned(pcts=1)
    assert handle.get_pct("pct-expired") is None and handle.get_pct("pct-kept") is not None


def test_invitations_expired_or_used_more_than_a_day_ago_are_forgotten(handle: Storage) -> None:
    alice, carol = make_user(handle), make_user(handle)
    cases = {
        "expired": (T - DAY - 1, None),
        "kept": (T - DAY, None),
        "used": (T + HOUR, T - DAY - 1),
    }
    for name, (expires_at, used_at) in cases.items():
        rule = {"id": name, "owner": alice.username, "scopes": ["view"]}
        assert handle.add_owner_rule(name, alice.sub, rule, T - 9 * DAY)
        share = Share(name, alice.sub, "rs", "c@x.test", "email", ("view",), None, T - 9 * DAY)
        assert handle.add_share(share)
        made = Invitation(f"i-{name}", name, alice.sub, "c@x.test", T - 9 * DAY, expires_at)
        assert handle.add_invitation(made)
        if used_at is not None:
            assert handle.use_invitation(made.digest, carol.sub, used_at)
    assert prune(handle, T) == Pruned(invitations=2)
    assert [i.rule_id for i in handle.invitations_of(alice.sub)] == ["kept"]
    assert handle.get_share(alice.sub, "expired") is not None  # the share stays


def test_an_access_token_stays_while_an_rpt_under_it_is_kept(handle: Storage) -> None:
    aat = token(handle, T - DAY - 10)
    rpt = make_rpt(handle, aat, issued_at=T - DAY - 20, expires_at=T - 60)  # outlives its AAT
    assert prune(handle, T) == Pruned()
    assert handle.get_access_token(aat.digest) is not None
    assert handle.get_rpt(rpt.digest) == rpt
    assert prune(handle, T + DAY) == Pruned(rpts=1, access_tokens=1)


def test_pruning_runs_in_batches_until_everything_is_gone(handle: Storage) -> None:
    rs = make_set(handle)
    for _ in range(7):
        make_ticket(handle, rs, expires_at=T - DAY - 5)
    calls: list[int] = []
    delete = handle.delete_tickets_expired_before

    def counting(moment: int, limit: int) -> int:
        calls.append(limit)
        return delete(moment, limit)

    handle.delete_tickets_expired_before = counting  # type: ignore[method-assign]
    assert prune(handle, T, batch=3).tickets == 7
    assert calls == [3, 3, 3]  # 3 + 3 + 1: the short batch ends it
    assert BATCH <= 1000  # no single write holds the lock long


def test_several_processes_may_prune_one_database_at_once(db: Path, handle: Storage) -> None:
    rs = make_set(handle)
    with handle.transaction():
        for _ in range(2 * BATCH + 17):
            make_ticket(handle, rs, expires_at=T - DAY - 5)
        for n in range(300):
            token(handle, T - DAY - 5, n)
    results: list[Pruned] = []
    failures: list[BaseException] = []

    def run() -> None:
        store = open_storage(db)
        try:
            results.append(prune(store, T, batch=50))
        except BaseException as error:
            failures.append(error)
        finally:
            store.close()

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    assert sum(r.tickets for r in results) == 2 * BATCH + 17
    assert sum(r.access_tokens for r in results) == 300
    assert prune(handle, T) == Pruned()


def test_the_job_reads_now_from_its_clock(db: Path, handle: Storage) -> None:
    ticket = make_ticket(handle, expires_at=T)
    clock = FakeClock(T)
    job = PruneJob(lambda: open_storage(db), clock, interval=300)
    assert job.run_once() == Pruned()
    clock.advance(DAY)
    assert job.run_once() == Pruned()
    clock.advance(1)
    assert job.run_once() == Pruned(tickets=1)
    assert handle.get_ticket(ticket.digest) is None


def test_the_thread_prunes_at_its_interval_and_stops(db: Path, handle: Storage) -> None:
    clock = FakeClock(T)
    runs: list[Pruned] = []
    job = PruneJob(lambda: open_storage(db), clock, interval=0.05)
    step = job.run_once
    job.run_once = lambda: runs.append(step()) or runs[-1]  # type: ignore[method-assign]
    make_ticket(handle, expires_at=T - DAY - 1)
    job.start()
    try:
        wait_until(lambda: len(runs) >= 3, timeout=10, message="the job did not run three times")
        assert runs[0] == Pruned(tickets=1) and runs[1:3] == [Pruned(), Pruned()]
    finally:
        job.stop()
    stopped_at = len(runs)
    threading.Event().wait(0.2)
    assert len(runs) == stopped_at


def test_a_failing_run_is_logged_and_the_job_goes_on(
    db: Path, handle: Storage, caplog: pytest.LogCaptureFixture
) -> None:
    attempts: list[int] = []

    def broken() -> Storage:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("disk on fire")
        return open_storage(db)

    job = PruneJob(broken, FakeClock(T), interval=0.02)
    job.start()
    try:
        wait_until(lambda: len(attempts) >= 2, timeout=10)
    finally:
        job.stop()
    assert "pruning failed" in caplog.text


# -- in the app: started with it, and requests never prune ------------------------------------


def test_the_app_starts_the_job_with_its_interval_and_clock(
    tmp_path: Path, config: Config, clock: FakeClock
) -> None:
    fast = replace(config, maintenance=MaintenanceSettings(prune_interval=1))
    store = open_store(fast.database)
    try:
        ticket = make_ticket(store, expires_at=clock.now() - DAY - 1)
        app = create_app(fast, clock=clock)
        wait_until(lambda: store.get_ticket(ticket.digest) is None, timeout=10)
        del app
    finally:
        store.close()


def test_requests_do_not_prune(http: FlaskClient, store: Store, clock: FakeClock) -> None:
    rs: Party = make_party(store, "alice", "uma_protection")
    bob = make_party(store, "bob", "uma_authorization")
    old = make_ticket(store, expires_at=clock.now() - 2 * DAY)
    old_rpt = make_rpt(store, issued_at=clock.now() - 3 * DAY, expires_at=clock.now() - 2 * DAY)
    assert http.post("/rpt", headers=bob.auth).status_code in (200, 201)
    assert store.get_rpt(old_rpt.digest) == old_rpt
    description = {"name": "Photos", "scopes": ["view"]}
    created = http.post("/rs/resource_set", json=description, headers=rs.auth)
    body = {"resource_set_id": created.get_json()["_id"], "scopes": ["view"]}
    assert http.post("/permission", json=body, headers=rs.auth).status_code == 201
    assert store.get_ticket(old.digest) == old


def test_requests_to_owners_are_forgotten_a_day_after_they_expire(handle: Storage) -> None:
    alice, bob = make_user(handle), make_user(handle)
    rs = make_set(handle, owner=alice.sub)
    for request_id, expires_at in (("req-gone", T - DAY - 1), ("req-kept", T - DAY)):
        handle.add_request(
            AccessRequest(
                request_id,
                alice.sub,
                rs.id,
                ("view",),
                bob.sub,
                bob.username,
                "c",
                "App",
                f"digest-{request_id}",
                T - 2 * DAY,
                expires_at,
            )
        )
    assert prune(handle, T) == Pruned(requests=1)
    assert handle.get_request("req-gone") is None and handle.get_request("req-kept") is not None
