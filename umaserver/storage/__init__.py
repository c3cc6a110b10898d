"""Storage: the contract the services use (`contract.Storage`), the records it speaks in
(`records`), its one implementation (`store.SQLStorage`: each aggregate's statements written once,
in the module named after it) over the dialect of SQLite (`sqlite`) or PostgreSQL (`postgresql`),
schema versions (`migrations`) and the Flask glue that gives each request one handle
(`per_request`).

A database is a `Database`: a path (SQLite), or a `postgresql://` URL (a str). The functions here
take either and dispatch on it.

`prepare_database` is the one place a database is created or upgraded: `create_app` (SQLite),
`init` and every command that opens an SQLite database call it. A PostgreSQL database is shared by
several processes: only `init` upgrades it, and the others check its version (`check_database`).
PostgreSQL's driver (psycopg, an extra) is imported only when a PostgreSQL database is used.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from . import postgresql
from .contract import Storage
from .errors import StorageUnavailable
from .migrations import SchemaError, StorageError
from .postgresql import PostgreSQLSettings
from .sqlite import SQLITE, connect
from .sqlite.migrate import migrate
from .store import SQLStorage

__all__ = [
    "Database",
    "PostgreSQLSettings",
    "SQLStorage",
    "SchemaError",
    "Storage",
    "StorageError",
    "StorageUnavailable",
    "check_database",
    "describe",
    "is_postgresql",
    "open_storage",
    "prepare_database",
    "readiness_problem",
    "write_problem",
]

# A path: SQLite. A str: a PostgreSQL URL (`postgresql://...`), or a path given as text.
Database = Path | str

# Less free space than this beside the database, and writes are about to fail.
MIN_FREE_BYTES = 1024 * 1024


def is_postgresql(database: Database) -> bool:
    """Whether `database` is a PostgreSQL URL (else it is an SQLite file's path)."""
    return postgresql.is_url(database)


def describe(database: Database) -> str:
    """How messages name the database: its path, or its URL without a password."""
    return postgresql.describe(str(database)) if is_postgresql(database) else str(database)


def _timeout(settings: PostgreSQLSettings | None) -> int:
    return (settings or PostgreSQLSettings()).connect_timeout


def prepare_database(
    database: Database, now: int, settings: PostgreSQLSettings | None = None
) -> tuple[int, int]:
    """Creates or upgrades the database: (schema version found, version left).

    Raises SchemaError (a database newer than this code, a broken migration), or StorageError
    (StorageUnavailable among them) when it cannot be opened or written.
    """
    if is_postgresql(database):
        from .postgresql import database as postgresql_database

        return postgresql_database.prepare(str(database), now, _timeout(settings))
    path = Path(database)
    try:
        conn = connect(path)
        try:
            return migrate(conn, now)
        finally:
            conn.close()
    except sqlite3.Error as error:
        raise StorageError(str(error)) from error


def check_database(url: str, settings: PostgreSQLSettings | None = None) -> int:
    """PostgreSQL's schema version, when it is this code's; SchemaError saying what to do when
    not (StorageUnavailable when the server cannot be reached). (An SQLite database is only ever
    used by one process: serving it prepares it.)"""
    from .postgresql import database as postgresql_database

    return postgresql_database.check_database(url, _timeout(settings))


def open_storage(database: Database, settings: PostgreSQLSettings | None = None) -> Storage:
    """A new handle (one connection) on a prepared database."""
    if is_postgresql(database):
        from .postgresql import database as postgresql_database

        url, timeout = str(database), _timeout(settings)
        return SQLStorage(
            postgresql_database.POSTGRESQL,
            postgresql_database.connect(url, timeout),
            lambda: postgresql_database.connect(url, timeout),
        )
    path = Path(database)
    return SQLStorage(SQLITE, connect(path), lambda: connect(path))


def write_problem(database: Database, settings: PostgreSQLSettings | None = None) -> str | None:
    """Why the prepared database cannot be written right now, or None.

    SQLite: takes the write lock and lets it go (nothing is written), and looks at the free space
    beside the file: a read-only file or file system, or a full disk. PostgreSQL: a write that
    changes nothing and is rolled back (a read-only server, a missing privilege).
    """
    if is_postgresql(database):
        from .postgresql import database as postgresql_database

        return postgresql_database.write_problem(str(database), _timeout(settings))
    path = Path(database)
    try:
        conn = connect(path)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
        finally:
            conn.close()
    except (StorageUnavailable, sqlite3.Error) as error:
        return str(error)
    if not os.access(path, os.W_OK):
        return "the file is not writable"
    stat = os.statvfs(path.parent)
    free = stat.f_bavail * stat.f_frsize
    if free < MIN_FREE_BYTES:
        return f"the file system holding it has {free} bytes free"
    return None


# Seconds a readiness probe waits for SQLite's write lock or PostgreSQL's connection.
PROBE_TIMEOUT = 1


def readiness_problem(database: Database, settings: PostgreSQLSettings | None = None) -> str | None:
    """Why the database would not serve a request that writes right now, or None, asked afresh
    each time (`/readyz`): a read and a write in a transaction that is rolled back, waiting at
    most PROBE_TIMEOUT for a lock or a connection. SQLite also: the file and its folder keep a
    write bit for someone (`mode & 0o222`), since a process running as root writes through a
    0444 file and SQLite alone would not notice."""
    if is_postgresql(database):
        from .postgresql import database as postgresql_database

        return postgresql_database.write_problem(
            str(database), min(_timeout(settings), PROBE_TIMEOUT), PROBE_TIMEOUT * 1000
        )
    path = Path(database)
    for where in (path.parent, path):
        try:
            mode = where.stat().st_mode
        except OSError as error:
            return f"cannot look at {where}: {error.strerror or error}"
        if not mode & 0o222:
            return f"{where} is read-only (mode {stat.S_IMODE(mode):o})"
    try:
        # mode=rw: a missing file is an error here, never created.
        conn = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=rw",
            uri=True,
            timeout=PROBE_TIMEOUT,
            isolation_level=None,
        )
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()
            conn.execute("UPDATE schema_migrations SET applied_at = applied_at WHERE version < 0")
            conn.execute("ROLLBACK")
        finally:
            conn.close()
    except sqlite3.Error as error:
        return str(error)
    return None
