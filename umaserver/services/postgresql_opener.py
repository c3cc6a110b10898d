"""Opening storage handles on a PostgreSQL database for a serving app: the same duties as
`database.Opener` (SQLite's), over a pool of connections that several processes' pools share the
database with.

A serving process never changes the schema: the first use checks that the database has this code's
version (`init` upgrades it, with every process stopped), and refuses to serve another. A database
that cannot be reached at start is checked on the first request after it can be: until then each
request meets StorageUnavailable (503), and no restart is needed.
"""

from __future__ import annotations

import logging

from ..clock import Clock
from ..storage import (
    PostgreSQLSettings,
    SchemaError,
    Storage,
    StorageUnavailable,
    check_database,
    describe,
)
from ..storage.postgresql.pool import HandlePool
from . import accounts
from .database import PreparedOnce

log = logging.getLogger("umaserver")


class PostgreSQLOpener(PreparedOnce):
    """Handles over the process's pool of connections: `release` gives a handle's connection back."""

    unusable = "cannot be reached"

    def __init__(self, url: str, clock: Clock, settings: PostgreSQLSettings) -> None:
        super().__init__()
        self.url = url
        self.clock = clock
        self.settings = settings
        self._pool = HandlePool(url, settings)

    @property
    def database(self) -> str:
        return describe(self.url)

    def prepare(self) -> None:
        """Checks the schema version (SchemaError when it is not this code's) and the stored
        usernames (ClashingUsernames)."""
        check_database(self.url, self.settings)
        handle = self._pool.handle()
        try:
            accounts.check_stored_usernames(handle)
        finally:
            handle.close()
        self._ready.set()

    def __call__(self) -> Storage:
        if not self.ready:
            try:
                self.prepare()
            except SchemaError as error:
                # Reached at last, but of another version (an upgrade half done): this process
                # cannot serve until `init` or the right code runs; a 503, not a 500.
                log.error("The database %s cannot be served: %s", describe(self.url), error)
                raise StorageUnavailable(str(error)) from error
        return self._pool.handle()

    def release(self, handle: Storage) -> None:
        """The connection goes back to the pool (which keeps it, or discards a broken one)."""
        handle.close()

    def close_idle(self) -> None:
        """Closes the pool's connections (at the app's end)."""
        self._pool.close()
