"""PostgreSQL's dialect, and what the server does with a PostgreSQL database as a whole
(`prepare`, `check_database`, `write_problem`). Imports psycopg: loaded only when a PostgreSQL
database is used (the package `umaserver.storage.postgresql` itself does not import it).

Several server processes, on one machine or many, share one database: nothing here relies on a
lock of one process. psycopg 3, one connection per handle (`connect`, or one lent by the serving
app's pool, `pool.HandlePool`), autocommit between transactions.

How the contract's promises are kept:

* **Single-use things** (`consume_ticket`, `finish_ticket`, `count_ticket_request`,
  `consume_authorization_code`, `use_refresh_token`, `bind_claims_handle`, `use_claims_handle`) are
  one `UPDATE ... WHERE <still usable>` (with `RETURNING` where a value comes back). Racers queue
  on the row's lock; at READ COMMITTED the one that waited re-reads the row as the winner left it
  and finds it no longer usable: exactly one gets True.
* **What a transaction has read stays true until it ends.** `transaction()` is READ COMMITTED, and
  every read inside a transaction locks the rows it returns until the transaction ends (SQLite's
  `BEGIN IMMEDIATE` locks the whole file instead): each read names its lock (`lock=`), which this
  dialect appends. Rows a transaction may go on to change (a
  ticket, a claims handle, a code, a token, an RPT and its permissions, the set its resource
  server reads to replace) get `FOR NO KEY UPDATE`, the lock an UPDATE takes, so that two
  transactions reading one ticket queue at the read: the second reads the ticket as the first
  left it, and never decides on a state that is gone. Rows it only reads to decide (clients,
  users, the resource set a decision is about, owners' rules) get `FOR SHARE`: decisions on one set
  go on side by side, a change of the set waits for them. What a read did not find cannot be
  locked, so the absences that matter are guarded otherwise: a ticket's gathered claims by the
  ticket's row (every write of them locks it; a read of them in a transaction too), and the uses of
  one assertion by an advisory lock on (issuer, ID) held to the end of the transaction
  (`record_assertion_use`: of racers with one assertion, each sees every use committed before it).
  Counts (`count_resource_sets_of`, the permission counts of `resource_sets_of`) lock nothing.
* SERIALIZABLE with retries was the other way: it cannot be used here, because a transaction is a
  block of the caller's code that the store cannot run again.
* Transactions that lock rows in opposite orders can deadlock (rarely: a decision locks its ticket
  then its set, a registration update its set then the set's tickets). PostgreSQL breaks a
  deadlock by aborting one of them; that one meets `StorageUnavailable` (503 with `Retry-After`,
  nothing of it committed), as does a lock waited on past `connection.LOCK_TIMEOUT_MS`.
* The queue of fetches (`claim_fetch_work`) and the mail outbox (`claim_due_mail`) take due rows
  with `FOR UPDATE SKIP LOCKED`: racing jobs take different rows and never wait on each other.

A server that cannot be reached, a connection cut, a shutdown, too many connections, a full disk
or a read-only standby raise `StorageUnavailable`; a broken connection is replaced before the
handle's next operation (`connection`). Schema versions: `migrate`.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import psycopg
from psycopg import pq
from psycopg.rows import tuple_row

from ..dialect import Dialect
from ..errors import StorageUnavailable
from . import CONNECT_TIMEOUT
from .connection import connect, roll_back, unavailable
from .migrate import check_version, migrate

__all__ = [
    "POSTGRESQL",
    "PostgreSQL",
    "check_database",
    "connect",
    "prepare",
    "write_problem",
]


class PostgreSQL(Dialect):
    name: ClassVar[str] = "postgresql"
    begin: ClassVar[str] = "BEGIN"
    row_locks: ClassVar[bool] = True
    error: ClassVar[type[Exception]] = psycopg.Error
    tuple_rows: ClassVar[Any] = staticmethod(tuple_row)

    def _translate(self, sql: str, lock: str | None) -> str:
        text = sql.replace("%", "%%").replace("?", "%s")
        text = _ROWID.sub("seq", _INSTR.sub("strpos(", text))
        text = _IN_JSON_LIST.sub(r"(\1::jsonb -> '\2') @> to_jsonb(%s::text)", text)
        return text if lock is None else f"{text} FOR {lock}"

    def unavailable(self, error: Exception) -> StorageUnavailable | None:
        return unavailable(error) if isinstance(error, psycopg.Error) else None

    def broken(self, conn: Any) -> bool:
        return bool(conn.broken or conn.closed)

    def in_transaction(self, conn: Any) -> bool:
        return bool(conn.info.transaction_status != pq.TransactionStatus.IDLE)

    def roll_back(self, conn: Any) -> None:
        roll_back(conn)


# SQLite's words that PostgreSQL says otherwise (see `dialect`): the order rows were added in
# (SQLite's `rowid`, the `seq` column of PostgreSQL's tables that need one) and a substring's
# position (same arguments).
_ROWID = re.compile(r"\browid\b")
_INSTR = re.compile(r"\binstr\(")
# And whether a JSON list in a column holds a string: SQLite reads the list's values, PostgreSQL
# asks whether the jsonb list contains the string (`@>`: a list contains a string it holds; a
# missing member is NULL, which holds nothing). Written after `?` became `%s`.
_IN_JSON_LIST = re.compile(
    r"EXISTS \(SELECT 1 FROM json_each\((\w+), '\$\.(\w+)'\) WHERE value = %s\)"
)

POSTGRESQL = PostgreSQL()


def prepare(url: str, now: int, connect_timeout: int = CONNECT_TIMEOUT) -> tuple[int, int]:
    """Creates or upgrades the schema (`init`): (version found, version left)."""
    conn = connect(url, connect_timeout)
    try:
        return migrate(conn, now)
    except psycopg.Error as error:
        raise (unavailable(error) or error) from error
    finally:
        conn.close()


def check_database(url: str, connect_timeout: int = CONNECT_TIMEOUT) -> int:
    """The schema version when it is this code's (`serve`); SchemaError when not."""
    conn = connect(url, connect_timeout)
    try:
        return check_version(conn)
    except psycopg.Error as error:
        raise (unavailable(error) or error) from error
    finally:
        conn.close()


def write_problem(
    url: str, connect_timeout: int = CONNECT_TIMEOUT, lock_timeout_ms: int | None = None
) -> str | None:
    """Why the database cannot be written right now, or None: a write that is rolled back (a
    read-only standby, a missing privilege, a server that cannot be reached). `lock_timeout_ms`:
    how long the write may wait for a lock (a migration holding the table; None: as long as it
    takes)."""
    try:
        conn = connect(url, connect_timeout)
    except StorageUnavailable as error:
        return str(error)
    try:
        with conn.transaction(force_rollback=True):
            if lock_timeout_ms is not None:
                conn.execute(f"SET LOCAL lock_timeout = {int(lock_timeout_ms)}")
            # Changes no row, yet a read-only server or a missing privilege refuses it.
            conn.execute("UPDATE schema_migrations SET applied_at = applied_at WHERE version < 0")
    except psycopg.Error as error:
        return str(unavailable(error) or error).strip()
    finally:
        conn.close()
    return None
