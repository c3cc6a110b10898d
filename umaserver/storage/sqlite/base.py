"""One SQLite connection with the transaction helper every aggregate's operations share."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BUSY_TIMEOUT_MS = 10_000


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    _use_wal(conn)
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


class Base:
    """The connection and the transaction helper; subclasses add the operations."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction; a nested use joins the outer one."""
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def _write(self, sql: str, parameters: Iterable[Any] = ()) -> int:
        with self.transaction():
            return self.conn.execute(sql, tuple(parameters)).rowcount

    def _one(self, sql: str, parameters: Iterable[Any] = ()) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.conn.execute(sql, tuple(parameters)).fetchone()
        return row


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switching a database to WAL needs it to itself for a moment and does not wait on the busy
    timeout: connections that open a new database together retry here instead of failing."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
