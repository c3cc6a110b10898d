"""Schema versions: a new database gets the whole current schema (`schema.sql`), an older one the
ordered migrations of this folder, each in one transaction.

Versions are recorded in `schema_migrations`; a database with tables but without it has version 1,
the schema first released (commit 2c72f37). A migration is a file `NNNN_what_it_does.sql` that takes
the database from version NNNN - 1 to NNNN. Migrations run with foreign keys off (so that a SQLite
table rebuild, which drops and renames tables, keeps the rows that point at it) and
`PRAGMA foreign_key_check` must find nothing before the version is committed.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from importlib import resources

_FILE = re.compile(r"(\d{4})_[a-z0-9_]+\.sql")


class StorageError(Exception):
    """The database cannot be opened, created or upgraded; the message says why."""


class SchemaError(StorageError):
    """The database cannot be brought to this code's schema; the message says why."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations() -> list[Migration]:
    found = []
    for entry in resources.files(__package__).iterdir():
        matched = _FILE.fullmatch(entry.name)
        if matched:
            found.append(Migration(int(matched[1]), entry.name, entry.read_text(encoding="utf-8")))
    found.sort(key=lambda migration: migration.version)
    versions = [migration.version for migration in found]
    assert versions == list(range(2, len(found) + 2)), f"migrations out of sequence: {versions}"
    return found


def current_version() -> int:
    return 1 + len(migrations())


def _schema_sql() -> str:
    return (resources.files("umaserver.storage") / "schema.sql").read_text(encoding="utf-8")


def statements(script: str) -> list[str]:
    """The statements of a script, in order (sqlite3's `executescript` would commit first)."""
    found, pending = [], ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            found.append(pending.strip())
            pending = ""
    if pending.strip() and not all(
        part.strip().startswith("--") or not part.strip() for part in pending.splitlines()
    ):
        raise SchemaError(f"an unfinished statement at the end of a script: {pending.strip()!r}")
    return found


def schema_version(conn: sqlite3.Connection) -> int:
    """0 for an empty database, 1 for one without versions, else the highest version applied."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "schema_migrations" in tables:
        row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
        return int(row[0] or 1)
    return 1 if tables else 0


def migrate(conn: sqlite3.Connection, now: int) -> tuple[int, int]:
    """Brings the database to the current version; returns (version found, version left).

    Safe when several processes start at once: each step re-reads the version under the write lock.
    Raises SchemaError for a database newer than this code, or a migration that breaks a foreign key.
    """
    target = current_version()
    found = schema_version(conn)
    if found > target:
        raise SchemaError(
            f"the database has schema version {found}, newer than this umaserver's {target};"
            " run the newer umaserver, or restore a backup made before it upgraded"
        )
    if found == 0:
        _apply(conn, _schema_sql(), range(1, target + 1), now, only_if_version=0)
        return found, schema_version(conn)
    for migration in migrations():
        if migration.version > found:
            _apply(
                conn,
                migration.sql,
                (migration.version,),
                now,
                only_if_version=migration.version - 1,
                name=migration.name,
            )
    return found, schema_version(conn)


def _apply(
    conn: sqlite3.Connection,
    script: str,
    versions: range | tuple[int, ...],
    now: int,
    *,
    only_if_version: int,
    name: str = "schema.sql",
) -> None:
    conn.execute("PRAGMA foreign_keys = OFF")  # a no-op inside a transaction: set before BEGIN
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if schema_version(conn) != only_if_version:
                conn.execute("ROLLBACK")  # another process got here first
                return
            already = conn.execute("PRAGMA foreign_key_check").fetchall()
            if already:
                raise SchemaError(
                    f"the database already has {len(already)} rows pointing at nothing (first in"
                    f" table {already[0][0]!r}), written with foreign keys off; repair them (or"
                    f" restore a backup) before upgrading; nothing was changed"
                )
            for statement in statements(script):
                conn.execute(statement)
            broken = conn.execute("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise SchemaError(
                    f"{name} would leave {len(broken)} rows pointing at nothing"
                    f" (first in table {broken[0][0]!r}); nothing was changed"
                )
            conn.executemany(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                [(version, now) for version in versions],
            )
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    finally:
        conn.execute("PRAGMA foreign_keys = ON")
