"""What differs between SQLite and PostgreSQL, and nothing else: a `Dialect` (dex's "flavor").

Every statement of the server is written once, in the aggregates' modules beside this one, in one
language: SQLite's, with `?` placeholders, plus PostgreSQL's row-lock clauses where a statement
must always lock (`... WHERE sub = ? FOR KEY SHARE`). Each dialect turns that text into its own
once, on first use, and keeps the result (`text`):

* **SQLite** drops the row-lock clauses: it has no row locks. A write transaction takes the whole
  database at its start (`BEGIN IMMEDIATE`), so nothing a transaction read can change before it
  ends, and this process's writers queue for it (`take_turn`).
* **PostgreSQL** takes `%s` for `?` (and `%%` for `%`), calls SQLite's `rowid` (the order rows
  were added in) by its own column `seq`, `instr` (a substring's position) `strpos`, and a
  search of a JSON list (`EXISTS (SELECT 1 FROM json_each(col, '$.key') WHERE value = ?)`) a
  jsonb containment (`(col::jsonb -> 'key') @> to_jsonb(?::text)`). A read
  inside a transaction appends the lock its caller names (`lock=`, see `handle.Handle`), so that
  what the transaction read stays true until it ends (`row_locks`).

The rest is how each opens, checks and closes a connection, and which errors mean that the
database, not the statement, is the trouble (`unavailable`): those become `StorageUnavailable`.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from .errors import StorageUnavailable

# A connection of either driver (sqlite3's or psycopg's): both have `execute`, `cursor` and
# `close`, and their cursors `fetchone`, `fetchall`, `rowcount` and a settable `row_factory`.
Connection = Any


class Dialect(ABC):
    """One database's way with the statements and connections of `handle.Handle`."""

    name: ClassVar[str]
    # The statement that opens a write transaction.
    begin: ClassVar[str]
    # Whether a read inside a transaction must lock what it returns (see the module): PostgreSQL
    # yes, SQLite no (its transaction holds the database).
    row_locks: ClassVar[bool]
    # The driver's base error class: what `unavailable` sorts.
    error: ClassVar[type[Exception]]
    # The row factory that makes plain tuples (for `Handle._column`).
    tuple_rows: ClassVar[Any]

    def __init__(self) -> None:
        # Filled by whichever thread translates a text first: two that race store equal texts.
        self._texts: dict[tuple[str, str | None], str] = {}

    def text(self, sql: str, lock: str | None = None) -> str:
        """`sql` in this database's words, with `lock` (a mode such as "SHARE" or "NO KEY
        UPDATE OF t") appended where the database locks rows; translated once, then kept."""
        key = (sql, lock)
        found = self._texts.get(key)
        if found is None:
            found = self._texts[key] = self._translate(sql, lock)
        return found

    @abstractmethod
    def _translate(self, sql: str, lock: str | None) -> str: ...

    @abstractmethod
    def unavailable(self, error: Exception) -> StorageUnavailable | None:
        """The StorageUnavailable `error` means, or None for an error of the statement or the
        data (raised as the driver raised it)."""

    def translated(self, conn: Connection, error: Exception) -> Exception:
        """What to raise for the driver's `error` on `conn`."""
        return self.unavailable(error) or error

    def take_turn(self, conn: Connection) -> threading.RLock | None:
        """Waits for this process's other writers of the database, where that helps (SQLite);
        the caller releases what it returns."""
        return None

    @abstractmethod
    def broken(self, conn: Connection) -> bool:
        """Whether `conn` must be replaced before the handle's next operation."""

    @abstractmethod
    def in_transaction(self, conn: Connection) -> bool:
        """Whether the database holds a transaction open on `conn`."""

    @abstractmethod
    def roll_back(self, conn: Connection) -> None:
        """Ends a transaction left open, quietly: the error that ended it is the one raised."""

    def close(self, conn: Connection) -> None:
        conn.close()

    def checkpoint(self, conn: Connection) -> tuple[int, int]:
        """Copies a write-ahead log into the database file as far as it can now: (pages in the
        log, pages copied). Only SQLite's app does it; PostgreSQL has its own checkpointer."""
        return (0, 0)
