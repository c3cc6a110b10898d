"""Schema versions on PostgreSQL: the steps of `..migrations` whose files are PostgreSQL's.

PostgreSQL's history begins at `FIRST_VERSION`, the whole schema when this backend came. A new
database gets every step from there in one transaction and records every version up to the
current one, as a new SQLite database does; an older one gets the steps after its version, each in
one transaction (PostgreSQL's DDL is transactional: a failed step leaves the version it found).

Every step runs under a session advisory lock (`MIGRATION_LOCK`), so several processes running
`init` at once apply each version once; `check_version` is what `serve` runs instead: it refuses a
database of another version (older: run `init`; newer: run the newer code). A database that holds
tables but no `schema_migrations` is not umaserver's and is refused untouched.
"""

from __future__ import annotations

from ..migrations import FIRST_VERSION as FIRST_VERSIONS
from ..migrations import SchemaError, current_version, upgrades
from .connection import Connection

# The schema version PostgreSQL databases begin at (its first step: the schema when it came).
FIRST_VERSION = FIRST_VERSIONS["postgresql"]
# pg_advisory_lock's key for schema changes: any 64-bit number this server uses for nothing else.
MIGRATION_LOCK = 0x756D_6173_6572_7665  # "umaserve"


def schema_version(conn: Connection) -> int:
    """0 for an empty database, else the highest version applied. SchemaError for a database that
    holds tables that are not umaserver's."""
    row = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL AS ours").fetchone()
    if row is not None and row["ours"]:
        version = conn.execute("SELECT MAX(version) AS v FROM schema_migrations").fetchone()
        return int(version["v"]) if version is not None and version["v"] is not None else 0
    tables = conn.execute(
        "SELECT count(*) AS n FROM pg_catalog.pg_tables WHERE schemaname = current_schema()"
    ).fetchone()
    if tables is not None and tables["n"]:
        raise SchemaError(
            f"the database holds {tables['n']} tables but no umaserver schema (no"
            " schema_migrations table); give umaserver a database of its own"
        )
    return 0


def migrate(conn: Connection, now: int) -> tuple[int, int]:
    """Brings the database to the current version under the advisory lock; returns (version
    found, version left). Raises SchemaError for a database newer than this code, or older than
    PostgreSQL's first version (which no umaserver made)."""
    conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        found = schema_version(conn)
        for upgrade in upgrades("postgresql", found):
            _apply(conn, upgrade.script, upgrade.versions, now)
        return found, schema_version(conn)
    finally:
        if not conn.broken:
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


def check_version(conn: Connection) -> int:
    """The schema version, when it is this code's; SchemaError (saying what to do) when not."""
    target = current_version()
    found = schema_version(conn)
    if found == target:
        return found
    if found > target:
        raise SchemaError(
            f"the database has schema version {found}, newer than this umaserver's {target};"
            " run the newer umaserver"
        )
    if found == 0:
        raise SchemaError("the database has no umaserver schema yet; run `umaserver init` first")
    raise SchemaError(
        f"the database has schema version {found}, older than this umaserver's {target}; stop"
        " every umaserver process on it, run `umaserver init` (it upgrades), then start them"
    )


def _apply(conn: Connection, script: str, versions: tuple[int, ...], now: int) -> None:
    """One step in one transaction: the script (several statements, no parameters: the simple
    query protocol takes them at once) and the versions it brings."""
    with conn.transaction():
        if script.strip():
            conn.execute(script.encode("utf-8"))
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)",
                [(version, now) for version in versions],
            )
