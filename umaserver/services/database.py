"""Preparing the database: the one place it is created or upgraded and its contents checked for
what this version no longer allows. The command line, `create_app` and so the tests call it."""

from __future__ import annotations

import logging
import os
import threading
import weakref
from pathlib import Path
from typing import cast

from ..clock import Clock
from ..storage import (
    Database,
    PostgreSQLSettings,
    SQLStorage,
    Storage,
    StorageUnavailable,
    open_storage,
    prepare_database,
)
from . import accounts

log = logging.getLogger("umaserver")


def prepare(
    database: Database, now: int, settings: PostgreSQLSettings | None = None
) -> tuple[int, int]:
    """Creates or upgrades the database (SQLite or PostgreSQL): (schema version found, version
    left).

    Raises StorageError (StorageUnavailable when the storage cannot be used right now), or
    accounts.ClashingUsernames.
    """
    versions = prepare_database(database, now, settings)
    handle = open_storage(database, settings)
    try:
        accounts.check_stored_usernames(handle)
    finally:
        handle.close()
    return versions


class PreparedOnce:
    """What both openers share: prepared once, before the first handle; a database that cannot be
    used at start is logged (`prepare_or_log`) and prepared on the first request after it can be,
    until then each request meets StorageUnavailable (503), and no restart is needed. Subclasses
    define `prepare` (which sets `_ready`), `database` (as logs show it) and `unusable` (what is
    wrong with a database that fails to prepare)."""

    unusable = "cannot be opened"

    def __init__(self) -> None:
        self._ready = threading.Event()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    @property
    def database(self) -> str:
        raise NotImplementedError

    def prepare(self) -> None:
        raise NotImplementedError

    def prepare_or_log(self) -> None:
        try:
            self.prepare()
        except StorageUnavailable as error:
            log.error(
                "The database %s %s: %s; requests answer 503 until it can.",
                self.database,
                self.unusable,
                error,
            )


class Opener(PreparedOnce):
    """Opens storage handles on an SQLite database for a serving app (PostgreSQL's:
    `postgresql_opener`). A database that could not be prepared at start
    (read-only or full storage, a missing mount) is prepared on the first request after it can
    be: until then each request meets StorageUnavailable (503), and no restart is needed."""

    def __init__(self, path: Path, clock: Clock, pool_size: int = 16) -> None:
        super().__init__()
        self.path = path
        self.clock = clock
        # Idle handles kept between requests: at most one per serving thread is ever needed.
        self.pool_size = pool_size
        self._idle: list[Storage] = []
        self._pool_lock = threading.Lock()
        # The database file each handle opened (see `_file`).
        self._opened: weakref.WeakKeyDictionary[Storage, tuple[int, ...] | None] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def database(self) -> str:
        return str(self.path)

    def prepare(self) -> None:
        prepare(self.path, self.clock.now())
        self._ready.set()

    def _file(self) -> tuple[int, ...] | None:
        """Which file the database is now, and its mode: a pooled handle serves only while they
        are what it opened. A file replaced under the server (a backup restored) must not be
        written through a connection to the old one, and a file made read-only must not be
        written through a connection opened while it was writable."""
        try:
            found = os.stat(self.path)
        except OSError:
            return None
        return (found.st_dev, found.st_ino, found.st_mode)

    def __call__(self) -> Storage:
        """A handle: an idle one from the pool (of this very file), else a new one."""
        if not self.ready:
            self.prepare()
        now = self._file()
        stale: list[Storage] = []
        found = None
        with self._pool_lock:
            while self._idle:
                handle = self._idle.pop()
                if self._opened.get(handle) == now and now is not None:
                    found = handle
                    break
                stale.append(handle)
        for handle in stale:
            handle.close()
        if found is not None:
            return found
        handle = open_storage(self.path)
        self._opened[handle] = now
        return handle

    def checkpoint(self) -> tuple[int, int] | None:
        """Copies the write-ahead log into the database file, through a pooled handle (see
        `SQLStorage.checkpoint`): (pages in the log, pages copied). None while the database
        is not prepared: requests prepare it, not this."""
        if not self.ready:
            return None
        handle = self()
        try:
            return cast(SQLStorage, handle).checkpoint()  # open_storage's handles are SQLStorage
        finally:
            self.release(handle)

    def release(self, handle: Storage) -> None:
        """Takes a handle back when its unit of work is over: kept for the next one while the
        pool has room and the handle is sound (`reusable`), else closed. Opening a connection and
        setting it up costs more than most requests' queries."""
        if handle.reusable() and handle in self._opened:
            with self._pool_lock:
                if len(self._idle) < self.pool_size:
                    self._idle.append(handle)
                    return
        handle.close()

    def close_idle(self) -> None:
        """Closes the pooled handles (at the app's end)."""
        with self._pool_lock:
            idle, self._idle = self._idle, []
        for handle in idle:
            handle.close()
