"""Opening an SQLite connection, and this process's queue of writers of one database file.

The storage cannot be used at times: read-only (a remount, a changed file mode), a full disk, an I/O
error, a lock held past the busy timeout. SQLite says so with one of `UNAVAILABLE`'s result codes;
the connection raises `StorageUnavailable` for them (nothing was changed), and the handle opens a
new connection before its next operation: an old one can keep a read-only view of the database (its
`-shm` file) after the storage is writable again.

SQLite creates the `-wal` and `-shm` files with the database file's mode. Made while the file was
read-only, they stay read-only after its mode is restored, and every later connection would be
read-only too: `connect` gives them the database file's mode again when it is writable and they
are not.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from ..errors import StorageUnavailable

BUSY_TIMEOUT_MS = 10_000
# A commit copies the write-ahead log into the database file (SQLite's automatic checkpoint) only
# once the log holds this many pages (16 MB), not at SQLite's 1,000: a serving app checkpoints on a
# thread of its own four times a second (`services.maintenance.CheckpointJob`). At 1,000 the commit
# that crossed the line copied the log, and its request waited: the p99 of a token request at
# concurrency 1 was 4.2 ms, 1.6 ms with the thread. Under steady writes the thread's checkpoints
# never find the log at rest (commits add to it while they copy), so it starts over only when a
# commit crosses this line and copies the little the thread has not. It is also the bound should
# the thread fall behind, and what a command's own writes (`init`, an import) go by.
AUTOCHECKPOINT_PAGES = 4_000

# Primary result codes (https://sqlite.org/rescode.html) that say the storage, not the statement,
# is the trouble: BUSY, LOCKED, READONLY, IOERR, FULL, CANTOPEN, PROTOCOL.
UNAVAILABLE = {5, 6, 8, 10, 13, 14, 15}


def unavailable(error: sqlite3.Error) -> StorageUnavailable | None:
    """The StorageUnavailable `error` means, or None for an error of the statement or the data."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is None or code & 0xFF not in UNAVAILABLE:
        return None
    name = getattr(error, "sqlite_errorname", "") or str(code)
    return StorageUnavailable(f"{error} ({name})")


class Connection(sqlite3.Connection):
    """A connection that raises StorageUnavailable for the codes of UNAVAILABLE, and remembers
    that it did (`broken`): its handle replaces it before the next operation."""

    path: Path
    writers: threading.RLock
    broken = False

    def execute(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
        try:
            return super().execute(*args, **kwargs)
        except sqlite3.Error as error:
            raise self._translated(error) from error

    def executemany(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
        try:
            return super().executemany(*args, **kwargs)
        except sqlite3.Error as error:
            raise self._translated(error) from error

    def _translated(self, error: sqlite3.Error) -> Exception:
        found = unavailable(error)
        if found is None:
            return error
        self.broken = True
        return found


def connect(path: Path) -> Connection:
    """A new connection; StorageUnavailable when the storage cannot be opened right now."""
    _match_side_files(path)
    try:
        conn = sqlite3.connect(
            path,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
            check_same_thread=False,
            factory=Connection,
        )
    except sqlite3.Error as error:
        raise (unavailable(error) or error) from error
    conn.path = path
    conn.writers = writer_queue(path.resolve())
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _use_wal(conn)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}")
    except BaseException:
        conn.close()
        raise
    return conn


_queues: dict[Path | None, threading.RLock] = {}  # by the database file's resolved path
_queues_lock = threading.Lock()


def writer_queue(path: Path | None) -> threading.RLock:
    """The queue this process's writers of one database file wait in, in turn, before taking
    SQLite's write lock. Without it, threads that find the lock taken wait on SQLite's busy
    handler, which sleeps (1 ms, then 2, 5, 10, ...) whatever the holder's transaction takes:
    writes that each take a fraction of a millisecond wait milliseconds, and the core idles. A
    decision over 100 rules covering one set holds the lock for about a millisecond: under 8
    concurrent requests the p99 of the authorization request was 500 ms without the queue, 53 ms
    with it, at the same throughput (issue 13). Correctness never rests on it: `BEGIN IMMEDIATE` still decides, and writers of other processes
    still meet the busy timeout. Re-entrant, so that a second handle used in the same thread
    behaves as it did without the queue (it meets SQLite's lock)."""
    with _queues_lock:
        found = _queues.get(path)
        if found is None:
            found = _queues[path] = threading.RLock()
        return found


def take_turn(conn: sqlite3.Connection) -> threading.RLock:
    """Waits for this process's writers of `conn`'s database before it (see `writer_queue`);
    the caller releases the queue it returns."""
    queue = getattr(conn, "writers", None) or writer_queue(None)
    if not queue.acquire(timeout=BUSY_TIMEOUT_MS / 1000):
        raise StorageUnavailable("waited too long for this process's other writers")
    return queue


def _match_side_files(path: Path) -> None:
    """Gives the -wal and -shm files the database file's mode if it is writable and they are not
    (see the module); a file of another owner is left as it is."""
    for suffix in ("-shm", "-wal"):
        side = path.with_name(path.name + suffix)
        if os.access(side, os.W_OK) or not side.exists() or not os.access(path, os.W_OK):
            continue
        with suppress(OSError):
            side.chmod(path.stat().st_mode & 0o777)


def roll_back(conn: sqlite3.Connection) -> None:
    """SQLite may have rolled back already (a full disk, an I/O error): the error that ended the
    transaction is the one to raise, not a failed ROLLBACK."""
    if conn.in_transaction:
        with suppress(sqlite3.Error, StorageUnavailable):
            conn.execute("ROLLBACK")


def _use_wal(conn: Connection) -> None:
    """Switching a database to WAL needs it to itself for a moment and does not wait on the busy
    timeout: connections that open a new database together retry here instead of failing."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except StorageUnavailable as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            conn.broken = False  # not broken: busy with another connection's switch
            time.sleep(0.01)
