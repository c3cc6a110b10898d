"""Storage: the contract the services use (`contract.Storage`), the records it speaks in
(`records`), its SQLite implementation (`sqlite`), schema versions (`migrations`) and the Flask glue
that gives each request one handle (`per_request`).

`prepare_database` is the one place a database is created or upgraded: `create_app`, `init` and
every command that opens the database call it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .contract import Storage
from .migrations import SchemaError, StorageError, migrate
from .sqlite import SQLiteStorage, connect

__all__ = ["SchemaError", "Storage", "StorageError", "open_storage", "prepare_database"]


def prepare_database(path: Path, now: int) -> tuple[int, int]:
    """Creates or upgrades the database at `path`: (schema version found, version left).

    Raises SchemaError (a database newer than this code, a broken migration), or StorageError
    when the file cannot be opened or written.
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
