"""The background job that checks queued URIs: any process's job takes due rows of
`fetched_uris` (a lease in one write transaction, so several processes on one database share the
work and never fetch one row twice at once), fetches each with the safe fetcher, and records what
it found:

- `scope`: the description's `name` (and `icon_uri`, which is queued as an image in turn);
- `image`: the image itself, stored in the database under a new random id (the old one deleted);
- `page`: that it is a web page.

Each process runs `[fetch] concurrency` workers (threads); each takes one due row at a time, the
fairest (`claim_fetch_work`: round-robin by the set or client that queued it), so that one
registration's URIs that never answer hold another's back by one fetch's `timeout` at most.

A good result is kept `[fetch] cache_lifetime` seconds, then the row is due again (until the
refetch, the old result stands). A failure forgets the result and retries after 30 s, then twice
as long each time, at most `retry_max` seconds. Times in the database are the app's clock's;
deadlines of fetches are `time.monotonic`'s.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .. import secrets_at_rest
from ..background import BackgroundJob
from ..clock import Clock
from ..config import FetchSettings
from ..storage import Storage
from ..storage.errors import StorageUnavailable
from ..storage.records import FetchedImage, FetchedUri
from . import content
from .fetcher import Fetcher, FetchError
from .queue import queue

log = logging.getLogger("umaserver.fetching")

FIRST_RETRY = 30  # seconds after a first failure
BATCH = 8  # rows one step takes
POLL_INTERVAL = 5.0  # seconds between looks at the queue when it was empty (requests wake it)


def retry_delay(failures: int, retry_max: int) -> int:
    """Seconds until the next try after `failures` failures in a row."""
    return int(min(retry_max, FIRST_RETRY * 2 ** min(max(failures - 1, 0), 30)))


@dataclass(frozen=True)
class Found:
    """What a good fetch found, ready to record."""

    name: str | None = None
    icon_uri: str | None = None
    content_type: str | None = None
    image: bytes | None = None


def check(fetcher: Fetcher, row: FetchedUri) -> Found:
    """Fetches the row's URI and checks the answer for its kind; FetchError when it fails."""
    if row.kind == "page":
        fetched = fetcher.fetch(row.uri, content.ACCEPT["page"], read_body=False)
        return Found(content_type=content.page_type(fetched))
    fetched = fetcher.fetch(row.uri, content.ACCEPT[row.kind])
    if row.kind == "image":
        return Found(content_type=content.image_type(fetched), image=fetched.body)
    described = content.scope_description(fetched)
    return Found(name=described.name, icon_uri=described.icon_uri, content_type="application/json")


class FetchJob(BackgroundJob):
    """Checks due URIs on `settings.concurrency` daemon threads; `run_once` is one step."""

    def __init__(
        self,
        open_storage: Callable[[], Storage],
        clock: Clock,
        settings: FetchSettings,
        fetcher: Fetcher | None = None,
    ) -> None:
        self._open_storage = open_storage
        self._clock = clock
        self.settings = settings
        self.fetcher = fetcher or Fetcher(
            settings.timeout, settings.max_bytes, settings.allow_loopback
        )
        # Wakes are counted, not flagged: a worker waits for a wake after the one it saw before
        # its last look, so no worker's wake is taken by another's. A wake brings in one worker;
        # a worker that took a row brings in one more, so idle workers cost nothing.
        self._woken = threading.Condition()
        self._wakes = 0
        self._workers = 0
        super().__init__("umaserver-fetch", threads=settings.concurrency)

    def wake(self) -> None:
        """Look at the queue now (something was queued): one more worker looks."""
        with self._woken:
            self._wakes += 1
            self._woken.notify()

    def stop(self) -> None:
        self._stopping.set()
        with self._woken:
            self._woken.notify_all()
        super().stop()

    def run_once(self, limit: int = BATCH) -> int:
        """Takes at most `limit` due rows and checks them, now, in this thread: how many."""
        rows = self._claim(limit)
        for row in rows:
            self._check_one(row)
        return len(rows)

    def _claim(self, limit: int) -> list[FetchedUri]:
        now = self._clock.now()
        # Long enough for every fetch of the batch to end on its deadline.
        lease = now + limit * (self.settings.timeout + 1) + 30
        with self._storage() as storage:
            return storage.claim_fetch_work(now, lease, limit)

    @contextmanager
    def _storage(self) -> Iterator[Storage]:
        """A handle for one claim or one record, never held over a fetch: the workers hold no
        connection of the pool (PostgreSQL) or file (SQLite) while they wait for a server."""
        storage = self._open_storage()
        try:
            yield storage
        finally:
            storage.close()

    def _check_one(self, row: FetchedUri) -> None:
        try:
            found = check(self.fetcher, row)
        except FetchError as error:
            self._failed(row, str(error))
            return
        except Exception as error:  # whatever a server sends, the job goes on
            log.exception("checking %s (%s) failed unexpectedly", row.uri, row.kind)
            self._failed(row, f"unexpected error: {type(error).__name__}")
            return
        now = self._clock.now()
        image = None
        if found.image is not None and found.content_type is not None:
            image = FetchedImage(secrets_at_rest.new_id(), found.content_type, found.image, now)
        with self._storage() as storage:
            recorded = storage.record_fetch_checked(
                row.id,
                row.claimed_until,
                now,
                now + self.settings.cache_lifetime,
                name=found.name,
                icon_uri=found.icon_uri,
                content_type=found.content_type,
                image=image,
            )
            if recorded and found.icon_uri is not None:
                queue(storage, found.icon_uri, "image", now, row.queued_by)
        # Routine, and a registrant's doing rather than the operator's: DEBUG, not INFO.
        log.debug("checked %s (%s)", row.uri, row.kind)

    def _failed(self, row: FetchedUri, reason: str) -> None:
        now = self._clock.now()
        delay = retry_delay(row.failures + 1, self.settings.retry_max)
        with self._storage() as storage:
            storage.record_fetch_failure(row.id, row.claimed_until, now, now + delay, reason[:500])
        log.debug("%s (%s) not checked: %s; next try in %d s", row.uri, row.kind, reason, delay)

    def _run(self) -> None:
        """One worker: takes one row at a time while there are due rows, then waits to be woken.
        The first worker also looks at every poll, and at once when it starts (rows may have
        come due while no process ran); the others look when woken."""
        with self._woken:
            self._workers += 1
            polling = self._workers == 1
        if not polling:
            self._wait(0, None)  # a wake before this worker started counts
        while not self._stopping.is_set():
            with self._woken:
                seen = self._wakes
            try:
                while not self._stopping.is_set() and (taken := self._claim(1)):
                    self.wake()  # more may be due: one more worker looks, now
                    self._check_one(taken[0])
            except StorageUnavailable as error:
                # Said once where the server found it (requests answer 503 meanwhile); the job
                # only tries again, quietly, at its next poll.
                log.debug("the fetch queue could not be read: %s; trying again", error)
            except Exception:  # anything else is a bug worth a traceback; the job goes on
                log.exception("the fetch queue could not be read; trying again")
            self._wait(seen, POLL_INTERVAL if polling else None)

    def _wait(self, seen: int, timeout: float | None) -> None:
        """Until a wake after the `seen`th, the job stops, or `timeout` seconds pass."""
        with self._woken:
            self._woken.wait_for(lambda: self._stopping.is_set() or self._wakes != seen, timeout)
