"""Schema versions on PostgreSQL: one sequence with SQLite's. A new database records every version
up to the current one and has SQLite's tables and columns; preparing again changes nothing; several
processes preparing one database at once (the advisory lock) apply it once; a database newer than
the code, or holding tables that are not umaserver's, is refused untouched; `check_database` (what
`serve` runs) refuses any version but the code's."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from umaserver.storage import (
    SchemaError,
    StorageUnavailable,
    check_database,
    open_storage,
    prepare_database,
    write_problem,
)
from umaserver.storage.migrations import current_version, migrations, step
from umaserver.storage.postgresql import describe
from umaserver.storage.postgresql.migrate import FIRST_VERSION

from ..postgres_fixture import PostgresCluster

NOW = 1_767_225_600


@pytest.fixture
def empty(postgres_cluster: PostgresCluster) -> Iterator[str]:
    url = postgres_cluster.empty_database()
    yield url
    postgres_cluster.drop(url)


def run(url: str, sql: str, *parameters: object) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(sql, parameters)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


def versions(url: str) -> list[int]:
    return [
        int(str(row[0])) for row in run(url, "SELECT version FROM schema_migrations ORDER BY 1")
    ]


def test_a_new_database_records_every_version(empty: str) -> None:
    assert prepare_database(empty, NOW) == (0, current_version())
    assert versions(empty) == list(range(1, current_version() + 1))
    assert check_database(empty) == current_version()
    assert write_problem(empty) is None


def test_preparing_twice_changes_nothing(empty: str) -> None:
    prepare_database(empty, NOW)
    assert prepare_database(empty, NOW + 60) == (current_version(), current_version())
    assert run(empty, "SELECT DISTINCT applied_at FROM schema_migrations") == [(NOW,)]


def test_the_schema_has_sqlites_tables_and_columns(empty: str, tmp_path: Path) -> None:
    prepare_database(empty, NOW)
    prepare_database(tmp_path / "uma.db", NOW)
    sqlite = sqlite3.connect(tmp_path / "uma.db")
    try:
        tables = [
            row[0] for row in sqlite.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        expected = {
            table: sorted(row[1] for row in sqlite.execute(f"PRAGMA table_info({table})"))
            for table in tables
        }
    finally:
        sqlite.close()
    found: dict[str, list[str]] = {}
    for table, column in run(
        empty,
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() ORDER BY 1, 2",
    ):
        if column != "seq":  # PostgreSQL's stand-in for SQLite's rowid
            found.setdefault(str(table), []).append(str(column))
    assert found == expected


def test_a_database_newer_than_the_code_is_refused_untouched(empty: str) -> None:
    prepare_database(empty, NOW)
    newer = current_version() + 1
    run(empty, "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)", newer, NOW)
    with pytest.raises(SchemaError, match=rf"\b{newer}\b.*\b{current_version()}\b"):
        prepare_database(empty, NOW + 60)
    with pytest.raises(SchemaError, match="newer"):
        check_database(empty)
    assert versions(empty)[-1] == newer


def test_serving_refuses_an_older_or_an_empty_database(empty: str) -> None:
    with pytest.raises(SchemaError, match="init"):
        check_database(empty)
    prepare_database(empty, NOW)
    run(empty, "DELETE FROM schema_migrations WHERE version = %s", current_version())
    with pytest.raises(SchemaError, match=r"older.*init"):
        check_database(empty)


def test_a_database_with_tables_of_others_is_refused_untouched(empty: str) -> None:
    run(empty, "CREATE TABLE their_table (x integer)")
    with pytest.raises(SchemaError, match="no umaserver schema"):
        prepare_database(empty, NOW)
    assert run(
        empty,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()",
    ) == [("their_table",)]


def test_postgresqls_history_starts_at_its_first_version_in_the_one_sequence() -> None:
    versions = [migration.version for migration in migrations("postgresql")]
    assert versions[0] == FIRST_VERSION == 8
    assert set(versions) <= set(range(FIRST_VERSION, current_version() + 1))


def test_every_foreign_key_leads_an_index(empty: str) -> None:
    """As on SQLite: deleting a client, a user or a fetched image finds what points at it by an
    index, never by reading a whole table."""
    prepare_database(empty, NOW)
    missing = run(
        empty,
        "SELECT c.conrelid::regclass::text || '.' || a.attname FROM pg_constraint AS c"
        " JOIN pg_attribute AS a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]"
        " WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace"
        " AND NOT EXISTS (SELECT 1 FROM pg_index AS i"
        "   WHERE i.indrelid = c.conrelid AND i.indkey[0] = c.conkey[1])"
        " ORDER BY 1",
    )
    foreign_keys = run(
        empty,
        "SELECT count(*) FROM pg_constraint"
        " WHERE contype = 'f' AND connamespace = current_schema()::regnamespace",
    )
    assert missing == []
    assert int(str(foreign_keys[0][0])) >= 20  # the query sees them


# The schema PostgreSQL's history starts with: its step is never edited
# (test_migrations.py's test_no_released_step_changes).
V8_SCHEMA = step("postgresql", FIRST_VERSION)


def schema_of(url: str) -> dict[str, list[tuple[object, ...]]]:
    """What the schema means: columns (type, nullability, default, collation), constraints and
    indexes as PostgreSQL states them."""
    return {
        "columns": run(
            url,
            "SELECT table_name, column_name, data_type, is_nullable, column_default,"
            " collation_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() ORDER BY 1, 2",
        ),
        "constraints": run(
            url,
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)"
            " FROM pg_constraint WHERE connamespace = current_schema()::regnamespace"
            " ORDER BY 1, 2",
        ),
        "indexes": run(
            url,
            "SELECT tablename, indexname, indexdef FROM pg_indexes"
            " WHERE schemaname = current_schema() ORDER BY 1, 2",
        ),
    }


@pytest.mark.parametrize("released", range(FIRST_VERSION, current_version()))
def test_a_database_of_every_released_version_is_upgraded_to_the_schema_of_a_new_one_with_its_rows(
    empty: str, postgres_cluster: PostgresCluster, released: int
) -> None:
    with psycopg.connect(empty, autocommit=True) as conn:
        conn.execute(V8_SCHEMA.encode("utf-8"))
        for version in range(FIRST_VERSION + 1, released + 1):
            if step("postgresql", version).strip():
                conn.execute(step("postgresql", version).encode("utf-8"))
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)",
                [(version, NOW - 3600) for version in range(1, released + 1)],
            )
        conn.execute(
            "INSERT INTO clients (client_id, secret_digest, name, created_at)"
            " VALUES ('rs', 'x', 'RS', 1)"
        )
        conn.execute("INSERT INTO users (sub, username, created_at) VALUES ('s-alice', 'alice', 1)")
        conn.execute(
            "INSERT INTO access_tokens (digest, client_id, user_sub, scope, issued_at,"
            " expires_at, family) VALUES ('d1', 'rs', NULL, 'uma_protection', 1, 2, NULL),"
            " ('d2', 'rs', 's-alice', 'uma_authorization', 1, 2, 'f1')"
        )
    tokens = "SELECT digest, user_sub, family FROM access_tokens ORDER BY 1"
    before = run(empty, tokens)

    assert prepare_database(empty, NOW) == (released, current_version())

    assert run(empty, tokens) == before
    assert versions(empty) == list(range(1, current_version() + 1))
    fresh = postgres_cluster.empty_database()
    try:
        prepare_database(fresh, NOW)
        assert schema_of(empty) == schema_of(fresh)
    finally:
        postgres_cluster.drop(fresh)


RACER = """
import sys
from umaserver.storage import prepare_database
print("ready", flush=True)
sys.stdin.readline()
print(list(prepare_database(sys.argv[1], int(sys.argv[2]))))
"""


def test_processes_preparing_at_once_apply_it_once(empty: str) -> None:
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, empty, str(NOW)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    try:
        for racer in racers:
            assert racer.stdout is not None and racer.stdout.readline() == "ready\n"
        for racer in racers:
            assert racer.stdin is not None
            racer.stdin.write("go\n")
            racer.stdin.flush()
        outcomes = [(*racer.communicate(timeout=60), racer.returncode) for racer in racers]
    finally:
        for racer in racers:
            if racer.poll() is None:
                racer.kill()
    assert [code for _, _, code in outcomes] == [0] * len(racers), outcomes
    results = sorted(tuple(json.loads(out)) for out, _, _ in outcomes)
    assert results == [(0, current_version())] + [(current_version(), current_version())] * 3
    assert versions(empty) == list(range(1, current_version() + 1))


def test_a_server_that_cannot_be_reached_is_unavailable(tmp_path: Path) -> None:
    nowhere = f"postgresql://postgres@/uma?host={tmp_path}&port=1"
    with pytest.raises(StorageUnavailable):
        prepare_database(nowhere, NOW)
    with pytest.raises(StorageUnavailable):
        open_storage(nowhere)
    problem = write_problem(nowhere)
    assert problem is not None


def test_messages_name_the_database_without_its_password() -> None:
    assert (
        describe("postgresql://uma:s3cret@db.example:5432/uma?sslmode=require")
        == "postgresql://uma:***@db.example:5432/uma?sslmode=require"
    )
    assert (
        describe("postgresql:///uma?host=/run/postgresql&password=s3cret")
        == "postgresql:///uma?host=/run/postgresql&password=***"
    )
    assert describe("postgresql://uma@db/uma") == "postgresql://uma@db/uma"


def test_version_11_gives_the_uma_ticket_grant_to_confidential_clients_with_a_list(
    empty: str,
) -> None:
    uma_ticket = "urn:ietf:params:oauth:grant-type:uma-ticket"
    metadata = {
        "listed": {
            "grant_types": ["client_credentials"],
            "token_endpoint_auth_method": "client_secret_basic",
        },
        "public": {"grant_types": ["authorization_code"], "token_endpoint_auth_method": "none"},
        "has-it": {"grant_types": [uma_ticket]},
        "unlisted": {},
    }
    with psycopg.connect(empty, autocommit=True) as conn:
        for version in range(FIRST_VERSION, 11):
            if step("postgresql", version).strip():
                conn.execute(step("postgresql", version).encode("utf-8"))
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, 1)",
                [(version,) for version in range(1, 11)],
            )
            cursor.executemany(
                "INSERT INTO clients (client_id, secret_digest, name, created_at, metadata)"
                " VALUES (%s, 'x', %s, 1, %s)",
                [(name, name, json.dumps(value)) for name, value in metadata.items()],
            )

    assert prepare_database(empty, NOW) == (10, current_version())

    found = {
        str(row[0]): json.loads(str(row[1]))
        for row in run(empty, "SELECT client_id, metadata FROM clients")
    }
    assert found["listed"]["grant_types"] == ["client_credentials", uma_ticket]
    assert found["public"] == metadata["public"]
    assert found["has-it"] == metadata["has-it"]
    assert found["unlisted"] == {}
