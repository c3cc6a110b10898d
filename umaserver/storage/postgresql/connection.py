"""Opening a PostgreSQL connection, and which of psycopg's errors mean that the database, not the
statement, is the trouble.

Connections are in autocommit mode: an operation outside a transaction is one statement, or a
short transaction of its own. The database cannot be used at times: the server is down or
restarting, the network is gone, the connection was cut, too many clients, a lock waited on past
`LOCK_TIMEOUT_MS`, a deadlock that PostgreSQL broke by aborting this transaction, a read-only
standby. Those errors become `StorageUnavailable` (the HTTP layer answers 503 with `Retry-After`;
nothing was committed); errors of a statement or of the data (a constraint) are raised as psycopg
raised them.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

import psycopg
from psycopg import pq
from psycopg.rows import DictRow, dict_row

from ..errors import StorageUnavailable
from . import CONNECT_TIMEOUT

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


def roll_back(conn: Connection) -> None:
    """The connection may be gone already: the error that ended the transaction is the one to
    raise, not a failed ROLLBACK."""
    if conn.broken or conn.closed:
        return
    if conn.info.transaction_status != pq.TransactionStatus.IDLE:
        with suppress(psycopg.Error):
            conn.execute("ROLLBACK")
