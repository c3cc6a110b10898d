"""A serving process's connections to PostgreSQL: psycopg_pool keeps between `pool_min` and
`pool_max` of them open; a storage handle borrows one for its unit of work and gives it back when
it is closed.

A borrowed connection is checked first (one round trip), so that after a restart of the server the
first request on each old connection does not fail; a connection that broke in use is discarded by
the pool, which opens another. When none is free within `connect_timeout` seconds (every one in
use, or the server cannot be reached), the handle cannot be had: StorageUnavailable (503).
"""

from __future__ import annotations

import threading

import psycopg
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import StorageUnavailable
from . import PostgreSQLSettings, PostgreSQLStorage
from .base import Connection, connection_settings, unavailable


class HandlePool:
    """Handles over pooled connections; `close()` ends the pool (at the app's end)."""

    def __init__(self, url: str, settings: PostgreSQLSettings) -> None:
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            connection_class=psycopg.Connection[DictRow],
            kwargs=connection_settings(settings.connect_timeout),
            min_size=settings.pool_min,
            max_size=settings.pool_max,
            timeout=settings.connect_timeout,
            check=ConnectionPool.check_connection,
            name="umaserver",
            open=False,
        )
        self._opened = False
        self._lock = threading.Lock()

    def handle(self) -> PostgreSQLStorage:
        return PostgreSQLStorage(self._borrow(), self._borrow, self._pool.putconn)

    def _borrow(self) -> Connection:
        if not self._opened:
            with self._lock:
                if not self._opened:
                    # Its workers open pool_min connections in the background, and keep trying
                    # while the server cannot be reached.
                    self._pool.open(wait=False)
                    self._opened = True
        try:
            return self._pool.getconn()
        except PoolTimeout as error:
            raise StorageUnavailable(f"no connection to the database: {error}") from error
        except psycopg.Error as error:
            raise (unavailable(error) or error) from error

    def close(self) -> None:
        with self._lock:
            if self._opened:
                self._pool.close()
                self._opened = False

    def stats(self) -> dict[str, int]:
        """psycopg_pool's counters (connections open, in use, waiting requests...)."""
        return self._pool.get_stats()
