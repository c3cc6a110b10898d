"""Moving a site from SQLite to PostgreSQL: every row of a prepared SQLite database into an empty
PostgreSQL one of the same schema version, in one PostgreSQL transaction that commits only when
each table holds as many rows as the SQLite one.

The SQLite side is read in one read transaction (a consistent snapshot, even while a server
writes), each table in `rowid` order, so that PostgreSQL's `seq` keeps the order rows were added
in. Tables are copied parents first (the foreign keys hold at every step); flags (SQLite's 0 and 1)
become booleans. `schema_migrations` is not copied: the target records its own versions.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg

from ..errors import StorageUnavailable
from ..migrations import SchemaError, StorageError, current_version
from ..sqlite import connect as connect_sqlite
from ..sqlite.migrate import schema_version
from . import CONNECT_TIMEOUT
from .connection import Connection, connect, unavailable
from .migrate import migrate

# Parents before the tables that point at them.
TABLES = (
    "clients",
    "users",
    "access_tokens",
    "resource_sets",
    "tickets",
    "ticket_resources",
    "ticket_requests",
    "rpts",
    "permissions",
    "gathered_claims",
    "seen_assertions",
    "claims_handles",
    "sessions",
    "signin_failures",
    "authorization_codes",
    "refresh_tokens",
    "consents",
    "initial_access_tokens",
    "identity_links",
    "owner_rules",
    "owner_rule_versions",
    "shares",
    "invitations",
    "fetched_images",
    "fetched_uris",
    "pcts",
    "pct_claims",
    "signing_keys",
    "events",
    "requests",
    "notices",
    "seeded_parties",
)


class NotEmpty(StorageError):
    """The target database holds rows already: a copy never merges."""


class CountMismatch(StorageError):
    """A table of the target did not end with the source's number of rows (nothing committed)."""


def copy_from_sqlite(
    source: Path, url: str, now: int, connect_timeout: int = CONNECT_TIMEOUT
) -> dict[str, int]:
    """Copies every table; the rows of each (as counted in both databases). The target is given
    the current schema first when it has none."""
    conn = connect(url, connect_timeout)
    try:
        migrate(conn, now)
        return _copy(source, conn)
    except psycopg.Error as error:
        raise (unavailable(error) or error) from error
    finally:
        conn.close()


def _columns(conn: Connection, table: str) -> dict[str, str]:
    """The target table's columns (but its generated `seq`) and their types."""
    rows = conn.execute(
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = %s AND is_generated = 'NEVER'"
        " AND is_identity = 'NO' ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    return {str(row["column_name"]): str(row["data_type"]) for row in rows}


def _count(conn: Connection, table: str) -> int:
    row = conn.execute(f'SELECT count(*) AS n FROM "{table}"').fetchone()
    return int(row["n"]) if row is not None else 0


def _copy(source: Path, conn: Connection) -> dict[str, int]:
    filled = {table: n for table in TABLES if (n := _count(conn, table))}
    if filled:
        listed = ", ".join(f"{table} ({n})" for table, n in filled.items())
        raise NotEmpty(f"the target database is not empty: {listed}; copy into an empty one")
    reader = connect_sqlite(source)
    try:
        reader.execute("BEGIN")  # one snapshot of every table
        found = schema_version(reader)
        if found != current_version():
            raise SchemaError(
                f"the SQLite database has schema version {found}, this umaserver"
                f" {current_version()}; prepare it first"
            )
        copied: dict[str, int] = {}
        with conn.transaction():
            for table in TABLES:
                copied[table] = _copy_table(reader, conn, table)
            mismatched = {
                table: (copied[table], n)
                for table in TABLES
                if (n := _count(conn, table)) != copied[table]
            }
            if mismatched:
                raise CountMismatch(
                    "row counts differ (SQLite, PostgreSQL): "
                    + ", ".join(f"{table} {counts}" for table, counts in mismatched.items())
                    + "; nothing was copied"
                )
        reader.execute("COMMIT")
        return copied
    except sqlite3.Error as error:
        raise StorageUnavailable(f"the SQLite database cannot be read: {error}") from error
    finally:
        reader.close()


def _copy_table(reader: sqlite3.Connection, conn: Connection, table: str) -> int:
    """Copies one table with COPY; how many rows the source holds."""
    columns = _columns(conn, table)
    if not columns:
        raise SchemaError(f"the target database has no table {table}")
    flags = [index for index, kind in enumerate(columns.values()) if kind == "boolean"]
    names = ", ".join(f'"{name}"' for name in columns)
    rows = reader.execute(f"SELECT {names} FROM {table} ORDER BY rowid")
    total = 0
    with conn.cursor() as cursor, cursor.copy(f'COPY "{table}" ({names}) FROM STDIN') as copy:
        for row in rows:
            values: list[Any] = list(row)
            for index in flags:
                values[index] = bool(values[index])
            copy.write_row(values)
            total += 1
    source = reader.execute(f"SELECT count(*) FROM {table}").fetchone()
    if source is None or int(source[0]) != total:
        raise CountMismatch(f"{table}: read {total} rows of SQLite's {source}")
    return total
