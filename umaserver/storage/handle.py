"""One connection, its dialect, and the transaction helper every aggregate's operations share.

An operation outside a transaction is one statement (its own transaction: SQLite's autocommit,
PostgreSQL's autocommit mode), or a short transaction of its own (`with self.transaction()`).
`transaction()` opens one write transaction (`BEGIN IMMEDIATE` on SQLite, `BEGIN` at READ
COMMITTED on PostgreSQL); a nested use joins the outer one. Reads inside it name the row lock they
need (`lock=`): PostgreSQL appends it, SQLite, whose transaction holds the whole database, has no
use for it (see `dialect`).

The database cannot be used at times (a full disk, a read-only file or server, a connection cut, a
lock waited on too long): the dialect turns those errors into `StorageUnavailable` (503, nothing
committed), and a connection that broke is replaced before the handle's next operation. Errors of
a statement or of the data are raised as the driver raised them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .dialect import Connection, Dialect
from .errors import StorageUnavailable
from .rows import Row


class Handle:
    """The connection and the transaction helper; the aggregates' classes add the operations.

    `reconnect` makes a new connection when the one held broke; `give_back` is what `close()`
    (and a replacement) does with a connection: close it (the default), or hand it back to the
    pool it came from.
    """

    def __init__(
        self,
        dialect: Dialect,
        conn: Connection,
        reconnect: Callable[[], Connection],
        give_back: Callable[[Connection], None] | None = None,
    ) -> None:
        self._dialect = dialect
        self._conn = conn
        self._reconnect = reconnect
        self._give_back = give_back or dialect.close
        self._closed = False
        self._transaction_open = False

    @property
    def conn(self) -> Connection:
        """The connection; a new one after the old one broke. A connection lost inside a
        transaction is never replaced there: what the transaction did is gone with it."""
        conn = self._conn
        if self._dialect.broken(conn):
            if self._transaction_open:
                raise StorageUnavailable("the connection was lost in the middle of a transaction")
            # First: an SQLite connection may hold a read-only view of the file that must not be
            # shared with the new one; a pool discards a broken connection.
            self._give_back(conn)
            self._conn = self._reconnect()
        return self._conn

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._dialect.roll_back(self._conn)
        self._give_back(self._conn)

    def reusable(self) -> bool:
        """Whether the handle may serve another unit of work (a pool keeps it)."""
        conn = self._conn
        return not (
            self._closed
            or self._transaction_open
            or self._dialect.broken(conn)
            or self._dialect.in_transaction(conn)
        )

    def checkpoint(self) -> tuple[int, int]:
        """Copies SQLite's write-ahead log into the database file as far as it can now, waiting
        for no reader or writer: (pages in the log, pages copied so far). Nothing on PostgreSQL,
        which has its own checkpointer."""
        return self._dialect.checkpoint(self.conn)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction; a nested use joins the outer one."""
        if self._transaction_open:
            yield
            return
        queue = self._dialect.take_turn(self.conn)
        try:
            self._execute(self._dialect.begin)
            self._transaction_open = True
            try:
                yield
                self._execute("COMMIT")
            except BaseException:
                self._dialect.roll_back(self._conn)
                raise
            finally:
                self._transaction_open = False
        finally:
            if queue is not None:
                queue.release()

    # -- statements ------------------------------------------------------------------------------

    def _execute(self, sql: str, parameters: Sequence[Any] = (), lock: str | None = None) -> Any:
        """The cursor of one statement; `lock` is the row lock a read in a transaction takes."""
        text = self._dialect.text(sql, lock if self._transaction_open else None)
        conn = self.conn
        try:
            return conn.execute(text, parameters)
        except self._dialect.error as error:
            raise self._dialect.translated(conn, error) from error

    def _one(self, sql: str, parameters: Sequence[Any] = (), lock: str | None = None) -> Any:
        """The first row (a `rows.Row`), or None."""
        return self._execute(sql, parameters, lock).fetchone()

    def _all(self, sql: str, parameters: Sequence[Any] = (), lock: str | None = None) -> list[Row]:
        rows: list[Row] = self._execute(sql, parameters, lock).fetchall()
        return rows

    def _column(
        self, sql: str, parameters: Sequence[Any] = (), lock: str | None = None
    ) -> list[Any]:
        """The first column of every row: read as plain tuples, not a row object each (an owner
        may list 10^4 sets: 4.5 ms instead of 6 on SQLite)."""
        cursor = self._execute(sql, parameters, lock)
        cursor.row_factory = self._dialect.tuple_rows
        return [row[0] for row in cursor]

    def _write(self, sql: str, parameters: Sequence[Any] = ()) -> int:
        """One statement that changes rows: inside a caller's transaction it joins it; alone it
        is its own transaction, after this process's other writers (SQLite). How many rows it
        changed."""
        if self._transaction_open:
            return int(self._execute(sql, parameters).rowcount)
        queue = self._dialect.take_turn(self.conn)
        try:
            return int(self._execute(sql, parameters).rowcount)
        finally:
            if queue is not None:
                queue.release()

    def _write_returning(self, sql: str, parameters: Sequence[Any] = ()) -> list[Row]:
        """One statement that changes rows and returns them (`... RETURNING`), as `_write`."""
        if self._transaction_open:
            return self._all(sql, parameters)
        queue = self._dialect.take_turn(self.conn)
        try:
            return self._all(sql, parameters)
        finally:
            if queue is not None:
                queue.release()

    def _write_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """One statement for each of `rows`, inside a transaction (the caller's, or one of its
        own)."""
        rows = [tuple(row) for row in rows]
        if not rows:
            return
        with self.transaction():
            text = self._dialect.text(sql)
            cursor = self.conn.cursor()
            try:
                cursor.executemany(text, rows)
            except self._dialect.error as error:
                raise self._dialect.translated(self._conn, error) from error
            finally:
                cursor.close()
