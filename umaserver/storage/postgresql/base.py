"""One PostgreSQL connection with the transaction helper every aggregate's operations share.

The connection is in autocommit mode: an operation outside a transaction is one statement, or a
short transaction of its own (`with self.transaction()`). `transaction()` runs `BEGIN` at READ
COMMITTED; a nested use joins the outer one.

What a transaction has read stays true until it ends: every read inside a transaction locks the
rows it returns (`self._lock(...)` appends the clause), see the package's docstring for which lock.

The database cannot be used at times: the server is down or restarting, the network is gone, the
connection was cut, too many clients, a lock waited on past `LOCK_TIMEOUT_MS`, a deadlock that
PostgreSQL broke by aborting this transaction, a read-only standby. Those errors become
`StorageUnavailable` (the HTTP layer answers 503 with `Retry-After`; nothing was committed) and a
connection that broke is replaced before the handle's next operation. Errors of a statement or of
the data (a constraint) are raised as psycopg raised them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, Literal

import psycopg
from psycopg import pq
from psycopg.rows import DictRow, dict_row

from ..errors import StorageUnavailable

# Seconds to wait for a connection when the settings do not say (`[postgresql] connect_timeout`).
CONNECT_TIMEOUT = 5
# A row lock waited on longer than this fails the operation (StorageUnavailable), as SQLite's busy
# timeout does.
LOCK_TIMEOUT_MS = 10_000
# A session left idle inside a transaction this long (a process frozen or cut off by the network
# mid-transaction) is ended by the server, and the row locks it held are released: a transaction
# of this server never waits on its client for more than moments.
IDLE_IN_TRANSACTION_MS = 60_000
# TCP keepalives (ignored on a unix socket): a connection whose peer vanished is found dead in
# about a minute, not after the kernel's two hours.
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}

# SQLSTATE classes and codes that say the database, not the statement, is the trouble: connection
# exceptions, transaction rollbacks (serialization failures, deadlocks), insufficient resources
# (a full disk, too many connections), operator intervention (a shutdown), system errors; and a
# lock not available in time, a read-only transaction (a standby, `default_transaction_read_only`).
_UNAVAILABLE_CLASSES = {"08", "40", "53", "57", "58"}
_UNAVAILABLE_CODES = {"55P03", "25006"}

Connection = psycopg.Connection[DictRow]
LockMode = Literal["UPDATE", "NO KEY UPDATE", "SHARE"]


def unavailable(error: psycopg.Error) -> StorageUnavailable | None:
    """The StorageUnavailable `error` means, or None for an error of the statement or the data."""
    code = error.sqlstate or ""
    if (
        isinstance(error, psycopg.OperationalError | psycopg.InterfaceError)
        or code[:2] in _UNAVAILABLE_CLASSES
        or code in _UNAVAILABLE_CODES
    ):
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return StorageUnavailable(f"{reason} ({code or type(error).__name__})")
    return None


def connect(url: str, connect_timeout: int = CONNECT_TIMEOUT) -> Connection:
    """A new connection in autocommit mode; StorageUnavailable when the server cannot be reached
    right now (or refuses us)."""
    try:
        return psycopg.connect(url, **connection_settings(connect_timeout))
    except psycopg.Error as error:
        raise (unavailable(error) or error) from error


def connection_settings(connect_timeout: int = CONNECT_TIMEOUT) -> dict[str, Any]:
    """What every connection of the server is opened with (`connect`, and the pool's)."""
    return {
        "autocommit": True,
        "row_factory": dict_row,
        "connect_timeout": connect_timeout,
        "application_name": "umaserver",
        "options": (
            f"-c lock_timeout={LOCK_TIMEOUT_MS}"
            f" -c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"
        ),
        **KEEPALIVES,
    }


class Base:
    """The connection and the transaction helper; subclasses add the operations.

    `give_back` is what `close()` does with the connection: close it (the default), or hand it to
    the pool it came from. `reconnect` makes a new connection when the one held broke.
    """

    def __init__(
        self,
        conn: Connection,
        reconnect: Callable[[], Connection],
        give_back: Callable[[Connection], None] | None = None,
    ) -> None:
        self._conn = conn
        self._reconnect = reconnect
        self._give_back = give_back or _close
        self._closed = False
        self._transaction_open = False

    @property
    def conn(self) -> Connection:
        """The connection; a new one after the old one broke (see the module)."""
        conn = self._conn
        if conn.broken or conn.closed:
            if self._transaction_open:  # what it did is lost: never go on outside it
                raise StorageUnavailable("the connection was lost in the middle of a transaction")
            self._give_back(conn)  # the pool discards a broken connection
            self._conn = self._reconnect()
        return self._conn

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        _roll_back(self._conn)
        self._give_back(self._conn)

    def reusable(self) -> bool:
        conn = self._conn
        return (
            not self._closed and not conn.broken and not conn.closed and not self._in_transaction()
        )

    def _in_transaction(self) -> bool:
        return (
            self._transaction_open
            or self._conn.info.transaction_status != pq.TransactionStatus.IDLE
        )

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction; a nested use joins the outer one."""
        if self._transaction_open:
            yield
            return
        self._execute("BEGIN")
        self._transaction_open = True
        try:
            yield
            self._execute("COMMIT")
        except BaseException:
            _roll_back(self._conn)
            raise
        finally:
            self._transaction_open = False

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
        """Inside a transaction: what the block did is undone when it raises, and the transaction
        goes on (an error aborts a whole PostgreSQL transaction otherwise)."""
        with self.transaction():
            self._execute("SAVEPOINT attempt")
            try:
                yield
            except BaseException:
                if self._conn.info.transaction_status == pq.TransactionStatus.INERROR:
                    self._execute("ROLLBACK TO SAVEPOINT attempt")
                raise
            self._execute("RELEASE SAVEPOINT attempt")

    def _lock(self, mode: LockMode = "NO KEY UPDATE", of: str | None = None) -> str:
        """The clause that locks what a read returns until the transaction ends; nothing outside
        a transaction (a read then needs no lock: nothing is decided on it in the same unit)."""
        if not self._transaction_open:
            return ""
        return f" FOR {mode}" + (f" OF {of}" if of else "")

    def _execute(self, sql: str, parameters: Sequence[Any] = ()) -> psycopg.Cursor[DictRow]:
        try:
            return self.conn.execute(sql, tuple(parameters))
        except psycopg.Error as error:
            raise (unavailable(error) or error) from error

    def _execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = [tuple(row) for row in rows]
        if not rows:
            return
        try:
            with self.conn.cursor() as cursor:
                cursor.executemany(sql, rows)
        except psycopg.Error as error:
            raise (unavailable(error) or error) from error

    def _write(self, sql: str, parameters: Sequence[Any] = ()) -> int:
        """One statement, a transaction of its own outside one: how many rows it changed."""
        return self._execute(sql, parameters).rowcount

    def _one(self, sql: str, parameters: Sequence[Any] = ()) -> DictRow | None:
        return self._execute(sql, parameters).fetchone()

    def _all(self, sql: str, parameters: Sequence[Any] = ()) -> list[DictRow]:
        return self._execute(sql, parameters).fetchall()


def _close(conn: Connection) -> None:
    conn.close()


def _roll_back(conn: Connection) -> None:
    """The connection may be gone already: the error that ended the transaction is the one to
    raise, not a failed ROLLBACK."""
    if conn.broken or conn.closed:
        return
    if conn.info.transaction_status != pq.TransactionStatus.IDLE:
        with suppress(psycopg.Error):
            conn.execute("ROLLBACK")
