"""Forgetting what has expired, on a schedule and off the request path.

`prune` deletes what expired more than a day ago (`EXPIRED_MEMORY`): tickets with the claims gathered
for them (an expired ticket is remembered that long so that it can be told apart from an unknown
one), assertion uses, RPTs with their permissions, initial access tokens, PATs and AATs (after
their RPTs: an RPT may outlive its AAT, and a token with an RPT still stored under it stays),
authorization codes and refresh tokens (used ones too: until then a reused one is still recognised
and revokes its family); also sessions as soon as they have expired, and failed sign-ins older than
a day (or than `failure_memory`, when the sign-in limits look further back), with the open
registrations counted in the same table (`registration_limit`, which looks back an hour), and the access
history's events older than `[audit] keep_days`, requests to owners a day past their
`expires_at` (decided or not: a decided one is kept while its ticket may still be polled),
invitations expired or used more than a day ago (the link then reads as unknown), and notices
older than `[audit] keep_days` (but those whose mail is still to be sent). Each batch of at most `BATCH`
rows is its own short transaction, so no write holds the lock for long, and several processes may
prune one database at once: each deletes what the others have not.

`PruneJob` runs `prune` every `[maintenance] prune_interval` seconds on a thread of its own; the
app starts it and stops it with itself. "Now" is the app's clock.

`CheckpointJob` copies an SQLite database's write-ahead log into the database file every
`CHECKPOINT_INTERVAL` seconds, on a thread of its own, so that no commit of a request does it
(see `storage.sqlite.AUTOCHECKPOINT_PAGES`). PostgreSQL has its own checkpointer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..background import BackgroundJob
from ..clock import Clock
from ..storage import Storage, StorageUnavailable

log = logging.getLogger("umaserver.maintenance")

# Seconds between two checkpoints of an SQLite database's write-ahead log. Each copies what the
# log gained since the last (a page written again and again in between is copied once): every
# second, that was enough pages to hold up the requests served while it copied on the same core.
CHECKPOINT_INTERVAL = 0.25
# Seconds an expired ticket, RPT, access token or assertion use is remembered after its expiry.
EXPIRED_MEMORY = 24 * 3600
BATCH = 500
# Seconds the access history keeps an event by default (`[audit] keep_days`: 90 days).
EVENT_MEMORY = 90 * 24 * 3600


@dataclass(frozen=True)
class Pruned:
    tickets: int = 0
    assertion_uses: int = 0
    rpts: int = 0
    access_tokens: int = 0
    authorization_codes: int = 0
    refresh_tokens: int = 0
    initial_access_tokens: int = 0
    sessions: int = 0
    signin_failures: int = 0
    claims_handles: int = 0
    pcts: int = 0
    events: int = 0
    requests: int = 0
    invitations: int = 0
    notices: int = 0

    @property
    def total(self) -> int:
        return (
            self.tickets
            + self.assertion_uses
            + self.rpts
            + self.access_tokens
            + self.authorization_codes
            + self.refresh_tokens
            + self.initial_access_tokens
            + self.sessions
            + self.signin_failures
            + self.claims_handles
            + self.pcts
            + self.events
            + self.requests
            + self.invitations
            + self.notices
        )


def _in_batches(delete: Callable[[int, int], int], moment: int, batch: int) -> int:
    deleted = 0
    while True:
        count = delete(moment, batch)
        deleted += count
        if count < batch:
            return deleted


def prune(
    storage: Storage,
    now: int,
    batch: int = BATCH,
    failure_memory: int = EXPIRED_MEMORY,
    event_memory: int = EVENT_MEMORY,
) -> Pruned:
    """Deletes, batch by batch, what expired before `now - EXPIRED_MEMORY` (sessions: before
    `now`; failed sign-ins: from before `now - failure_memory`; the access history's events:
    and notices: from before `now - event_memory`); what it deleted."""
    moment = now - EXPIRED_MEMORY
    return Pruned(
        claims_handles=_in_batches(storage.delete_claims_handles_expired_before, moment, batch),
        tickets=_in_batches(storage.delete_tickets_expired_before, moment, batch),
        assertion_uses=_in_batches(storage.delete_assertion_uses_expired_before, moment, batch),
        rpts=_in_batches(storage.delete_rpts_expired_before, moment, batch),
        access_tokens=_in_batches(storage.delete_access_tokens_expired_before, moment, batch),
        authorization_codes=_in_batches(
            storage.delete_authorization_codes_expired_before, moment, batch
        ),
        refresh_tokens=_in_batches(storage.delete_refresh_tokens_expired_before, moment, batch),
        initial_access_tokens=_in_batches(
            storage.delete_initial_access_tokens_expired_before, moment, batch
        ),
        sessions=_in_batches(storage.delete_sessions_expired_before, now, batch),
        pcts=_in_batches(storage.delete_pcts_expired_before, moment, batch),
        signin_failures=_in_batches(
            storage.delete_signin_failures_before, now - failure_memory, batch
        ),
        events=_in_batches(storage.delete_events_before, now - event_memory, batch),
        requests=_in_batches(storage.delete_requests_expired_before, moment, batch),
        invitations=_in_batches(storage.delete_invitations_expired_before, moment, batch),
        notices=_in_batches(storage.delete_notices_before, now - event_memory, batch),
    )


class PruneJob(BackgroundJob):
    """`prune` every `interval` seconds on a daemon thread, each run on a handle of its own."""

    def __init__(
        self,
        open_storage: Callable[[], Storage],
        clock: Clock,
        interval: float,
        failure_memory: int = EXPIRED_MEMORY,
        event_memory: int = EVENT_MEMORY,
    ) -> None:
        self._open_storage = open_storage
        self._failure_memory = failure_memory
        self._event_memory = event_memory
        self._clock = clock
        self._interval = interval
        super().__init__("umaserver-prune")

    def run_once(self) -> Pruned:
        """One pruning, now (the thread's one step)."""
        storage = self._open_storage()
        try:
            pruned = prune(
                storage,
                self._clock.now(),
                failure_memory=self._failure_memory,
                event_memory=self._event_memory,
            )
        finally:
            storage.close()
        if pruned.total:
            log.info(
                "pruned tickets=%d assertion_uses=%d rpts=%d access_tokens=%d"
                " authorization_codes=%d refresh_tokens=%d initial_access_tokens=%d"
                " sessions=%d signin_failures=%d claims_handles=%d events=%d invitations=%d"
                " notices=%d",
                pruned.tickets,
                pruned.assertion_uses,
                pruned.rpts,
                pruned.access_tokens,
                pruned.authorization_codes,
                pruned.refresh_tokens,
                pruned.initial_access_tokens,
                pruned.sessions,
                pruned.signin_failures,
                pruned.claims_handles,
                pruned.events,
                pruned.invitations,
                pruned.notices,
            )
        return pruned

    def _run(self) -> None:
        while not self._stopping.wait(self._interval):
            try:
                self.run_once()
            except Exception:  # a locked or unwritable database: try again at the next interval
                log.exception("pruning failed; trying again in %s s", self._interval)


class CheckpointJob(BackgroundJob):
    """Runs `checkpoint` (an SQLite `Opener`'s) every `interval` seconds on a thread of its own."""

    def __init__(
        self, checkpoint: Callable[[], object], interval: float = CHECKPOINT_INTERVAL
    ) -> None:
        self._checkpoint = checkpoint
        self._interval = interval
        self._failing = False
        super().__init__("umaserver-checkpoint")

    def _run(self) -> None:
        while not self._stopping.wait(self._interval):
            try:
                self._checkpoint()
            except Exception as error:  # said once; a bug (not the storage) with its traceback
                if not self._failing:
                    log.warning(
                        "checkpointing the database failed: %s; trying again every %s s",
                        error,
                        self._interval,
                        exc_info=not isinstance(error, StorageUnavailable),
                    )
                self._failing = True
            else:
                if self._failing:
                    log.info("checkpointing the database works again")
                self._failing = False
