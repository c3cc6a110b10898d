"""Storage: the contract the services use (`contract.Storage`), the records it speaks in
(`records`), its SQLite implementation (`sqlite`), schema versions (`migrations`) and the Flask glue
that gives each request one handle (`per_request`).

`prepare_database` is the one place a database is created or upgraded: `create_app`, `init` and
every command that opens the database call it.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from .contract import Storage
from .errors import StorageUnavailable
from .migrations import SchemaError, StorageError, migrate
from .sqlite import SQLiteStorage, connect

__all__ = [
    "SchemaError",
    "Storage",
    "StorageError",
    "StorageUnavailable",
    "open_storage",
    "prepare_database",
    "write_problem",
]

# Less free space than this beside the database, and writes are about to fail.
MIN_FREE_BYTES = 1024 * 1024


def prepare_database(path: Path, now: int) -> tuple[int, int]:
    """Creates or upgrades the database at `path`: (schema version found, version left).

    Raises SchemaError (a database newer than this code, a broken migration), or StorageError
    (StorageUnavailable among them) when the file cannot be opened or written.
    """
    try:
        conn = connect(path)
        try:
            return migrate(conn, now)
        finally:
            conn.close()
    except sqlite3.Error as error:
        raise StorageError(str(error)) from error


def open_storage(path: Path) -> Storage:
    """A new handle (one connection) on a prepared database."""
    return SQLiteStorage.open(path)


def write_problem(path: Path) -> str | None:
    """Why the prepared database at `path` cannot be written right now, or None.

    Takes the write lock and lets it go (nothing is written), and looks at the free space beside it:
    a read-only file or file system, or a full disk.
    """
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
