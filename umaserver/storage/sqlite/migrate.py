"""Schema versions on SQLite: the steps of `..migrations` whose files are SQLite's.

Versions are recorded in `schema_migrations`; a database with tables but without it has version 1,
the schema first released. A new database gets every step in one transaction; an older one the
steps after its version, each in one transaction (`BEGIN IMMEDIATE`, which re-reads the version
under the write lock: several processes starting at once apply each version once). Steps run with
foreign keys off (so that a table rebuild, which drops and renames tables, keeps the rows that
point at it) and `PRAGMA foreign_key_check` must find nothing before the version is committed.
"""

from __future__ import annotations

import sqlite3

from ..migrations import SchemaError, upgrades


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

    Raises SchemaError for a database newer than this code, or a step that breaks a foreign key.
    """
    found = schema_version(conn)
    for upgrade in upgrades("sqlite", found):
        _apply(
            conn,
            upgrade.script,
            upgrade.versions,
            now,
            only_if_version=upgrade.versions[0] - 1,
            name=upgrade.name,
        )
    return found, schema_version(conn)


def _apply(
    conn: sqlite3.Connection,
    script: str,
    versions: tuple[int, ...],
    now: int,
    *,
    only_if_version: int,
    name: str,
) -> None:
    """`script` and the `versions` it brings, in one transaction, when the database is still at
    `only_if_version` (another process may have got there first)."""
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
