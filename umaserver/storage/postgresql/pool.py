"""A serving process's connections to PostgreSQL: psycopg_pool keeps between `pool_min` and
`pool_max` of them open; a storage handle borrows one for its unit of work and gives it back when
it is closed.

A borrowed connection that has been idle in the pool for more than IDLE_CHECK seconds is checked
first (one round trip), so that after a restart of the server the first request on each old
connection does not fail; one given back a moment ago is lent as it is (a round trip for every
request would cost more than most requests' queries). A connection that broke in use is discarded
by the pool, which opens another. When none is free within `connect_timeout` seconds (every one in
use, or the server cannot be reached), the handle cannot be had: StorageUnavailable (503).
"""

from __future__ import annotations

import threading
import time
import weakref

import psycopg
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from ..errors import StorageUnavailable
from ..store import SQLStorage
from . import PostgreSQLSettings
from .connection import Connection, connection_settings, unavailable
from .database import POSTGRESQL


class HandlePool:
    """Handles over pooled connections. The pool opens on first use; `close()` closes its
    connections, and a later use opens a new pool (as SQLite's opener opens new handles)."""

    def __init__(self, url: str, settings: PostgreSQLSettings) -> None:
        self.url = url
        self.settings = settings
        self._pool: ConnectionPool[Connection] | None = None
        self._lock = threading.Lock()

    def handle(self) -> SQLStorage:
        pool = self._open()

        def give_back(conn: Connection) -> None:
            _RETURNED[conn] = time.monotonic()
            pool.putconn(conn)

        return SQLStorage(POSTGRESQL, _borrow(pool), lambda: _borrow(pool), give_back)

    def _open(self) -> ConnectionPool[Connection]:
        with self._lock:
            if self._pool is None:
                # Its workers open pool_min connections in the background, and keep trying
                # while the server cannot be reached.
                self._pool = ConnectionPool(
                    self.url,
                    connection_class=psycopg.Connection[DictRow],
                    kwargs=connection_settings(self.settings.connect_timeout),
                    min_size=self.settings.pool_min,
                    max_size=self.settings.pool_max,
                    timeout=self.settings.connect_timeout,
                    check=_check_if_idle,
                    name="umaserver",
                    open=False,
                )
                self._pool.open(wait=False)
            return self._pool

    def close(self) -> None:
        """Closes the pool's connections (those lent out when they come back)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def stats(self) -> dict[str, int]:
        """psycopg_pool's counters (connections open, in use, waiting requests...)."""
        with self._lock:
            return {} if self._pool is None else self._pool.get_stats()


# Seconds a pooled connection may sit idle and still be lent without a check.
IDLE_CHECK = 5.0
# When each connection was last given back to its pool.
_RETURNED: weakref.WeakKeyDictionary[Connection, float] = weakref.WeakKeyDictionary()


def _check_if_idle(conn: Connection) -> None:
    """psycopg_pool's check, for connections idle longer than IDLE_CHECK (or never lent)."""
    returned = _RETURNED.get(conn)
    if returned is None or time.monotonic() - returned > IDLE_CHECK:
        ConnectionPool.check_connection(conn)


def _borrow(pool: ConnectionPool[Connection]) -> Connection:
    try:
        return pool.getconn()
    except PoolTimeout as error:
        raise StorageUnavailable(f"no connection to the database: {error}") from error
    except PoolClosed as error:  # closed at the app's end, while a job still ran
        raise StorageUnavailable("the database's connections are closed") from error
    except psycopg.Error as error:
        raise (unavailable(error) or error) from error
