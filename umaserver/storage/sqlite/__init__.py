"""SQLite's dialect: one connection per handle (`sqlite3.Row`, WAL and foreign keys on, see
`connection`), and a write transaction that holds the whole database from its start.

Writers take the lock at the start (`BEGIN IMMEDIATE`), so concurrent writers queue on the busy
timeout instead of failing on a lock upgrade, and nothing a transaction read can change before it
ends: the row-lock clauses the statements carry for PostgreSQL are dropped. This process's writers
of one file wait their turn in a queue of its own first (`connection.writer_queue`).
"""

from __future__ import annotations

import re
import sqlite3
import threading
from typing import Any, ClassVar

from ..dialect import Dialect
from ..errors import StorageUnavailable
from .connection import (
    AUTOCHECKPOINT_PAGES,
    BUSY_TIMEOUT_MS,
    Connection,
    connect,
    roll_back,
    take_turn,
    unavailable,
    writer_queue,
)

__all__ = [
    "AUTOCHECKPOINT_PAGES",
    "BUSY_TIMEOUT_MS",
    "SQLITE",
    "SQLite",
    "connect",
    "writer_queue",
]

# A row-lock clause written for PostgreSQL (`FOR SHARE`, `FOR NO KEY UPDATE OF p`,
# `FOR UPDATE SKIP LOCKED`, ...).
_ROW_LOCK = re.compile(
    r" FOR (?:NO KEY UPDATE|UPDATE|KEY SHARE|SHARE)(?: OF \w+)?(?: SKIP LOCKED)?"
)


class SQLite(Dialect):
    name: ClassVar[str] = "sqlite"
    begin: ClassVar[str] = "BEGIN IMMEDIATE"
    row_locks: ClassVar[bool] = False
    error: ClassVar[type[Exception]] = sqlite3.Error
    tuple_rows: ClassVar[Any] = None

    def _translate(self, sql: str, lock: str | None) -> str:
        return _ROW_LOCK.sub("", sql)

    def unavailable(self, error: Exception) -> StorageUnavailable | None:
        return unavailable(error) if isinstance(error, sqlite3.Error) else None

    def translated(self, conn: Any, error: Exception) -> Exception:
        found = self.unavailable(error)
        if found is None:
            return error
        conn.broken = True  # replaced before the handle's next operation (see `connection`)
        return found

    def take_turn(self, conn: Any) -> threading.RLock:
        return take_turn(conn)

    def broken(self, conn: Any) -> bool:
        return isinstance(conn, Connection) and conn.broken

    def in_transaction(self, conn: Any) -> bool:
        return bool(conn.in_transaction)

    def roll_back(self, conn: Any) -> None:
        roll_back(conn)

    def checkpoint(self, conn: Any) -> tuple[int, int]:
        """SQLite's passive checkpoint, which waits for no reader or writer and leaves what a
        reader still needs."""
        row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(row[1]), int(row[2])


SQLITE = SQLite()
