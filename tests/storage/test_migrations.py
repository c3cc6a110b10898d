"""Schema versions: a database made by the first release (version 1, the schema of the first step,
umaserver/storage/migrations/0001_the_first_schema.sqlite.sql) is upgraded in place with every row kept, ends with the same schema as a
new database, and works through the storage contract; the runner refuses what it must refuse, and
several processes upgrading at once apply each version once."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from umaserver.cli import main as cli_main
from umaserver.storage import SchemaError, oauth, open_storage, prepare_database, resources, tokens
from umaserver.storage.migrations import current_version, migrations, step
from umaserver.storage.sqlite import SQLITE
from umaserver.storage.sqlite.migrate import _apply, schema_version

# The schema of the first release: its step is never edited (test_no_released_step_changes).
V1_SCHEMA = step("sqlite", 1)
V1_TABLES = (
    "clients",
    "users",
    "access_tokens",
    "resource_sets",
    "tickets",
    "rpts",
    "permissions",
    "gathered_claims",
    "seen_assertions",
)
NOW = 1_767_225_600  # the moment of the upgrade; the v1 rows were written the hour before
T0 = NOW - 3600


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


RS = "rs-PhotoZ9xQ2wLk4vB7"  # the resource server
PRINTER = "cl-Printer3mT8sJd0aR"  # the requesting party's client
ALICE = "sub-aL1cE9f3kQwZ0pXn"  # the owner
BOB = "sub-b0Bq7Rr2mVyU5tHc"  # the requesting party
PAT = digest("uma_at_alice-pat-for-the-photo-rs-0000000000")
AAT = digest("uma_at_bob-aat-at-the-printer-00000000000000")
CLIENT_TOKEN = digest("uma_at_the-rs-acting-for-itself-000000000000")
ALBUM = "rsid-Album7Kd2pQ9sWm"
PRINTS = "rsid-Prints4Hn8cV1bZx"
OPEN_TICKET = digest("uma_pt_open-ticket-00000000000000000000000000")
GRANTED_TICKET = digest("uma_pt_granted-ticket-000000000000000000000000")
FINISHED_TICKET = digest("uma_pt_finished-ticket-00000000000000000000000")
OLD_RPT = digest("uma_rpt_old-revoked-rpt-000000000000000000000")
LIVE_RPT = digest("uma_rpt_live-rpt-0000000000000000000000000000")
IDP = "https://idp.example.org/saml"

ALBUM_DESCRIPTION = {
    "name": "Summer 2025",
    "type": "http://www.example.com/rsets/photoalbum",
    "scopes": ["http://photoz.example.com/dev/scopes/view", "print"],
    "icon_uri": "https://photoz.example.com/icons/album.png",
    "x-extension": {"kept": True},
}
PRINTS_DESCRIPTION = {"name": "Print queue", "scopes": ["print"]}

V1_ROWS: dict[str, list[tuple[Any, ...]]] = {
    "clients": [
        (
            RS,
            digest("uma_cs_rs-secret"),
            "Photoz RS",
            json.dumps(["https://photoz.example.com/cb"]),
            "[]",
            T0,
        ),
        (
            PRINTER,
            digest("uma_cs_printer-secret"),
            "Printer Co",
            json.dumps(["https://printer.example.net/uma/cb", "http://127.0.0.1:9000/cb"]),
            json.dumps(["claim-client-assertion-saml-1.0", "urn:example:roles"]),
            T0 + 1,
        ),
    ],
    "users": [
        (
            ALICE,
            "alice",
            "scrypt$8f1d2c3b4a5968778695a4b3c2d1e0f0$" + "ab" * 64,
            json.dumps({"email": "alice@example.com", "email_verified": True}),
            T0 + 2,
        ),
        (BOB, "bob", None, json.dumps({"roles": ["doctor", "printer-admin"]}), T0 + 3),
    ],
    "access_tokens": [
        (PAT, RS, ALICE, "uma_protection", T0 + 10, T0 + 10 + 3600, 0),
        (AAT, PRINTER, BOB, "uma_authorization", T0 + 11, T0 + 11 + 3600, 0),
        (CLIENT_TOKEN, RS, None, "uma_protection", T0 + 12, T0 + 12 + 3600, 1),
    ],
    "resource_sets": [
        (
            ALBUM,
            ALICE,
            RS,
            ALBUM_DESCRIPTION["name"],
            ALBUM_DESCRIPTION["type"],
            json.dumps(ALBUM_DESCRIPTION),
            T0 + 20,
            T0 + 25,
        ),
        (
            PRINTS,
            f"client:{RS}",
            RS,
            PRINTS_DESCRIPTION["name"],
            None,
            json.dumps(PRINTS_DESCRIPTION),
            T0 + 21,
            T0 + 21,
        ),
    ],
    "tickets": [
        (OPEN_TICKET, ALICE, RS, ALBUM, json.dumps(["print"]), T0 + 30, NOW + 7200, 1, "open"),
        (
            GRANTED_TICKET,
            ALICE,
            RS,
            ALBUM,
            json.dumps(["http://photoz.example.com/dev/scopes/view"]),
            T0 + 31,
            T0 + 331,
            2,
            "granted",
        ),
        (
            FINISHED_TICKET,
            f"client:{RS}",
            RS,
            PRINTS,
            json.dumps(["print"]),
            T0 + 32,
            T0 + 332,
            3,
            "finished",
        ),
    ],
    "rpts": [
        (OLD_RPT, "seed-old-Q1w2E3r4T5y6U7i8O9p0", AAT, PRINTER, BOB, T0 + 40, T0 + 1800, 1),
        (LIVE_RPT, "seed-live-A1s2D3f4G5h6J7k8L9z0", AAT, PRINTER, BOB, T0 + 50, NOW + 7200, 0),
    ],
    "permissions": [
        (
            LIVE_RPT,
            ALBUM,
            json.dumps(["http://photoz.example.com/dev/scopes/view"]),
            T0 + 51,
            NOW + 3600,
        ),
        (LIVE_RPT, PRINTS, json.dumps(["print"]), T0 + 52, NOW + 3600),
        (OLD_RPT, ALBUM, json.dumps(["print"]), T0 + 41, T0 + 1800),
    ],
    "gathered_claims": [
        (
            GRANTED_TICKET,
            BOB,
            "urn:example:roles",
            "roles",
            PRINTER,
            '["doctor"]',
            PRINTER,
            T0 + 45,
        ),
        (
            GRANTED_TICKET,
            BOB,
            "claim-client-assertion-saml-1.0",
            "mail",
            IDP,
            '"bob@example.org"',
            PRINTER,
            T0 + 46,
        ),
        (
            OPEN_TICKET,
            BOB,
            "claim-client-assertion-saml-1.0",
            "eduPersonAffiliation",
            IDP,
            '["staff", "member"]',
            PRINTER,
            T0 + 47,
        ),
    ],
    "seen_assertions": [
        (IDP, "_a7f3c9e1d2b4", GRANTED_TICKET, BOB, NOW + 300),
        (IDP, "_a7f3c9e1d2b4", OPEN_TICKET, BOB, NOW + 300),
        (IDP, "_0b1c2d3e4f5a", FINISHED_TICKET, BOB, T0 + 600),
    ],
}


def make_v1_database(path: Path) -> None:
    """A database as the first release left it: in WAL mode (its connections set it), with its
    schema and a few rows in every table."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript(V1_SCHEMA)
        conn.execute("PRAGMA foreign_keys = ON")  # the rows must be consistent
        for table in V1_TABLES:  # in an order that inserts what is referenced first
            rows = V1_ROWS[table]
            marks = ", ".join("?" * len(rows[0]))
            conn.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)  # noqa: S608
        conn.commit()
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()


def write_config(folder: Path) -> Path:
    """A settings file whose database is uma.db beside it."""
    (folder / "policies.toml").write_text("", encoding="utf-8")
    path = folder / "config.toml"
    path.write_text(
        'issuer = "http://uma.test"\n'
        'database = "uma.db"\n'
        'policies = "policies.toml"\n'
        'secret_key = "a-secret-key-for-the-migration-tests-0123456789"\n',
        encoding="utf-8",
    )
    return path


def read(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def tables_of(conn: sqlite3.Connection) -> list[str]:
    return [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " ORDER BY name"
        )
    ]


def tables_in(path: Path) -> list[str]:
    conn = read(path)
    try:
        return tables_of(conn)
    finally:
        conn.close()


def contents(path: Path, tables: dict[str, list[str]]) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of these tables, in these columns, in a stable order."""
    conn = read(path)
    try:
        found = {}
        for table, columns in tables.items():
            names = ", ".join(columns)
            rows = conn.execute(f"SELECT {names} FROM {table}").fetchall()  # noqa: S608
            found[table] = sorted(rows, key=repr)
        return found
    finally:
        conn.close()


def v1_columns() -> dict[str, list[str]]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(V1_SCHEMA)
        return {
            table: [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            for table in tables_of(conn)
        }
    finally:
        conn.close()


def schema_of(path: Path) -> dict[str, Any]:
    """What the schema means, table by table: columns (with types, defaults, keys), foreign keys,
    and indexes with their columns, order, collation and uniqueness. Not the SQL text."""
    conn = read(path)
    try:
        described: dict[str, Any] = {}
        for table in tables_of(conn):
            indexes = {}
            for _, name, unique, origin, partial in conn.execute(f"PRAGMA index_list({table})"):
                indexes[name] = (
                    unique,
                    origin,
                    partial,
                    conn.execute(f"PRAGMA index_xinfo({name})").fetchall(),
                )
            described[table] = {
                "columns": conn.execute(f"PRAGMA table_xinfo({table})").fetchall(),
                "foreign_keys": sorted(
                    conn.execute(f"PRAGMA foreign_key_list({table})").fetchall(), key=repr
                ),
                "indexes": indexes,
            }
        described["views and triggers"] = conn.execute(
            "SELECT type, name, tbl_name FROM sqlite_master WHERE type IN ('view', 'trigger')"
            " ORDER BY type, name"
        ).fetchall()
        return described
    finally:
        conn.close()


def versions_applied(path: Path) -> list[int]:
    conn = read(path)
    try:
        return [row[0] for row in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]
    finally:
        conn.close()


def version_of(path: Path) -> int:
    conn = read(path)
    try:
        return schema_version(conn)
    finally:
        conn.close()


def dump(path: Path) -> list[str]:
    conn = read(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


@pytest.fixture
def v1_db(tmp_path: Path) -> Path:
    path = tmp_path / "uma.db"
    make_v1_database(path)
    return path


def test_the_fixture_is_version_1_with_rows_in_every_table(v1_db: Path) -> None:
    assert version_of(v1_db) == 1
    assert sorted(V1_ROWS) == sorted(V1_TABLES) == sorted(v1_columns())
    assert all(rows for rows in contents(v1_db, v1_columns()).values())


def test_a_v1_database_is_upgraded_with_every_row_kept(v1_db: Path) -> None:
    columns = v1_columns()
    before = contents(v1_db, columns)

    assert prepare_database(v1_db, NOW) == (1, current_version())

    assert contents(v1_db, columns) == before
    assert {table: len(rows) for table, rows in before.items()} == {
        table: len(rows) for table, rows in V1_ROWS.items()
    }
    assert versions_applied(v1_db) == list(range(2, current_version() + 1))
    conn = read(v1_db)
    try:
        assert conn.execute("SELECT DISTINCT applied_at FROM schema_migrations").fetchall() == [
            (NOW,)
        ]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


def test_a_migrated_database_has_the_schema_of_a_new_one(v1_db: Path, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.db"
    assert prepare_database(fresh, NOW) == (0, current_version())
    assert prepare_database(v1_db, NOW) == (1, current_version())

    migrated, new = schema_of(v1_db), schema_of(fresh)
    assert sorted(migrated) == sorted(new)
    for table in new:
        assert migrated[table] == new[table], table
    # The comparison sees what version 2 added.
    assert "rpts_by_expiry" in new["rpts"]["indexes"]
    assert "seen_assertions_by_expiry" in new["seen_assertions"]["indexes"]
    # ... and what version 3 changed: claims keep their subject, and are keyed by issuer too.
    columns = {column[1]: column for column in new["gathered_claims"]["columns"]}
    assert "subject" in columns and columns["subject"][3] == 0  # nullable
    assert columns["issuer"][5] == 5  # the fifth column of the primary key
    # ... and what version 9 changed: tokens without a family or a user are in neither index, and
    # the index of an owner's sets holds their ids.
    indexes = new["access_tokens"]["indexes"]
    assert indexes["access_tokens_by_family"][2] == indexes["access_tokens_by_user"][2] == 1
    by_owner = new["resource_sets"]["indexes"]["resource_sets_by_owner"][3]
    assert [column[2] for column in by_owner if column[5]] == [
        "owner",
        "client_id",
        "created_at",
        "id",
    ]


@pytest.mark.parametrize("released", range(1, current_version()))
def test_a_database_of_every_released_version_is_upgraded_in_place(
    v1_db: Path, tmp_path: Path, released: int
) -> None:
    """A database left at any earlier version (its rows written at version 1) reaches the
    current one with every row kept, and the schema of a new database."""
    conn = read(v1_db)
    try:
        for version in range(2, released + 1):
            name = f"version {version}"
            _apply(
                conn,
                step("sqlite", version),
                (version,),
                T0,
                only_if_version=version - 1,
                name=name,
            )
    finally:
        conn.close()
    assert version_of(v1_db) == released
    columns = v1_columns()
    before = contents(v1_db, columns)

    assert prepare_database(v1_db, NOW) == (released, current_version())

    assert contents(v1_db, columns) == before
    assert versions_applied(v1_db)[-(current_version() - released) :] == list(
        range(released + 1, current_version() + 1)
    )
    fresh = tmp_path / "fresh.db"
    prepare_database(fresh, NOW)
    assert schema_of(v1_db) == schema_of(fresh)


@pytest.mark.parametrize(
    ("statement", "first_step"),
    [
        (
            oauth._REVOKE_FAMILY_ACCESS_TOKENS,
            "SEARCH access_tokens USING INDEX access_tokens_by_family",
        ),
        (
            oauth._REVOKE_GRANT_ACCESS_TOKENS,
            "SEARCH access_tokens USING INDEX access_tokens_by_user",
        ),
        (
            "DELETE FROM access_tokens WHERE user_sub = ?",
            "SEARCH access_tokens USING INDEX access_tokens_by_user",
        ),
        (
            resources._LIST_RESOURCE_SETS,
            "SEARCH resource_sets USING COVERING INDEX resource_sets_by_owner",
        ),
        (
            tokens._PERMISSIONS_FOR,
            "SEARCH p USING INDEX sqlite_autoindex_permissions_1 (rpt_digest=?)",
        ),
        (
            "SELECT * FROM resource_sets WHERE id = ? AND owner = ? AND client_id = ?",
            "SEARCH resource_sets USING INDEX sqlite_autoindex_resource_sets_1 (id=?)",
        ),
        (
            "UPDATE resource_sets SET name = ? WHERE id = ? AND owner = ? AND client_id = ?",
            "SEARCH resource_sets USING INDEX sqlite_autoindex_resource_sets_1 (id=?)",
        ),
        (
            "DELETE FROM resource_sets WHERE id = ? AND owner = ? AND client_id = ?",
            "SEARCH resource_sets USING INDEX sqlite_autoindex_resource_sets_1 (id=?)",
        ),
    ],
)
def test_lookups_that_grow_with_the_database_start_from_the_right_index(
    tmp_path: Path, statement: str, first_step: str
) -> None:
    """An index of only the rows with a family (or a user) serves a lookup only when SQLite can
    tell the lookup never wants NULL: these must not read every token. A list of an owner's sets
    reads the index alone. An RPT's permissions are found from the RPT, and a set by its id, never
    by reading all of its owner's sets (which the index of their ids could make look cheap)."""
    prepare_database(tmp_path / "uma.db", NOW)
    conn = read(tmp_path / "uma.db")
    try:
        parameters = (None,) * statement.count("?")
        text = SQLITE.text(statement)
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {text}", parameters)]
    finally:
        conn.close()
    assert plan[0].startswith(first_step), plan


def foreign_keys_without_an_index(conn: sqlite3.Connection) -> list[str]:
    """The columns that point at a row of another table but lead no index of their own table
    (nor its primary key)."""
    missing = []
    for table in tables_of(conn):
        leading = {
            conn.execute(f"PRAGMA index_info({index[1]})").fetchone()[2]
            for index in conn.execute(f"PRAGMA index_list({table})")
        }
        primary = [
            column
            for column in sorted(conn.execute(f"PRAGMA table_info({table})"), key=lambda c: c[5])
            if column[5]
        ]
        if primary:
            leading.add(primary[0][1])
        missing += [
            f"{table}.{key[3]}"
            for key in conn.execute(f"PRAGMA foreign_key_list({table})")
            if key[3] not in leading
        ]
    return missing


def test_every_foreign_key_leads_an_index_in_a_new_and_in_an_upgraded_database(
    v1_db: Path, tmp_path: Path
) -> None:
    prepare_database(tmp_path / "fresh.db", NOW)
    prepare_database(v1_db, NOW)
    for path in (tmp_path / "fresh.db", v1_db):
        conn = read(path)
        try:
            assert foreign_keys_without_an_index(conn) == [], path
        finally:
            conn.close()


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM clients WHERE client_id = ?",
        "DELETE FROM users WHERE sub = ?",
        "DELETE FROM resource_sets WHERE id = ?",
        "DELETE FROM tickets WHERE digest = ?",
        "DELETE FROM access_tokens WHERE digest = ?",
        "DELETE FROM rpts WHERE digest = ?",
        "DELETE FROM fetched_images WHERE id = ?",
        "DELETE FROM signin_failures WHERE rowid IN"
        " (SELECT rowid FROM signin_failures WHERE failed_at < ? LIMIT ?)",
    ],
)
def test_deleting_a_row_never_reads_a_whole_table_to_find_what_points_at_it(
    tmp_path: Path, statement: str
) -> None:
    """SQLite finds the rows that point at a deleted one (ON DELETE CASCADE, SET NULL) by the
    plan's later steps: each must search an index, never scan a table, since it runs under the
    database's one write lock (deleting a client read eight tables: 220 ms at 10^6 sets). So
    must the pruning of old sign-in failures find them."""
    prepare_database(tmp_path / "uma.db", NOW)
    conn = read(tmp_path / "uma.db")
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        parameters = (None,) * statement.count("?")
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}", parameters)]
    finally:
        conn.close()
    assert len(plan) > 1, plan  # the rows pointing at it are looked for
    assert [step for step in plan if step.startswith("SCAN")] == [], plan


def test_claims_gathered_before_version_3_are_kept_without_a_subject(v1_db: Path) -> None:
    prepare_database(v1_db, NOW)
    conn = read(v1_db)
    try:
        rows = conn.execute("SELECT name, subject FROM gathered_claims ORDER BY name").fetchall()
    finally:
        conn.close()
    assert rows == [("eduPersonAffiliation", None), ("mail", None), ("roles", None)]


def test_a_migrated_database_works_through_the_contract(v1_db: Path) -> None:
    prepare_database(v1_db, NOW)
    store = open_storage(v1_db)
    try:
        client = store.get_client(PRINTER)
        assert client is not None
        assert client.check_secret("uma_cs_printer-secret")
        assert client.push_claim_types == ("claim-client-assertion-saml-1.0", "urn:example:roles")
        user = store.get_user_by_username("bob")
        assert user is not None and user.sub == BOB and user.password_hash is None
        assert user.claims == {"roles": ["doctor", "printer-admin"]}
        aat = store.get_access_token(AAT)
        assert aat is not None and aat.username == "bob" and aat.scope == "uma_authorization"

        album = store.get_resource_set(ALBUM, ALICE, RS)
        assert album is not None and album.description == ALBUM_DESCRIPTION
        prints = store.find_resource_set(PRINTS)
        assert prints is not None and prints.owner == f"client:{RS}"
        assert store.list_resource_sets(ALICE, RS) == [ALBUM]

        ticket = store.get_ticket(OPEN_TICKET)
        assert ticket is not None
        assert (ticket.resource_set_id, ticket.scopes, ticket.requests, ticket.state) == (
            ALBUM,
            ("print",),
            1,
            "open",
        )
        granted = store.get_ticket(GRANTED_TICKET)
        assert granted is not None and granted.state == "granted"
        claims = store.gathered_claims(GRANTED_TICKET, BOB)
        assert {(claim.name, json.dumps(claim.value), claim.subject) for claim in claims} == {
            ("roles", '["doctor"]', None),
            ("mail", '"bob@example.org"', None),
        }

        rpt = store.get_rpt(LIVE_RPT)
        assert rpt is not None and rpt.aat_digest == AAT and rpt.is_live(NOW)
        assert store.live_rpt_of(AAT, NOW) == rpt
        old = store.get_rpt(OLD_RPT)
        assert old is not None and old.revoked
        assert [p.resource_set_id for p in store.permissions_of(LIVE_RPT, NOW)] == [ALBUM, PRINTS]
        assert [p.resource_set_id for p in store.permissions_for(LIVE_RPT, ALICE, RS, NOW)] == [
            ALBUM
        ]

        # And it takes writes: the old rows are as good as new ones.
        assert store.count_ticket_request(OPEN_TICKET) == 2
        assert store.consume_ticket(OPEN_TICKET)
        assert store.delete_rpts_expired_before(NOW, 10) == 1  # the old RPT, with its permission
        assert store.get_permission(OLD_RPT, ALBUM) is None
        assert store.delete_assertion_uses_expired_before(NOW, 10) == 1
        assert store.delete_resource_set(ALBUM, ALICE, RS)
        assert store.get_ticket(GRANTED_TICKET) is None
        assert store.gathered_claims(GRANTED_TICKET, BOB) == []
        # Owners' rules (version 7) hang on the users of version 1.
        rule = {"id": "o-1", "owner": "alice", "scopes": ["print"]}
        assert store.add_owner_rule("o-1", ALICE, rule, NOW)
        assert store.owner_rules_version(ALICE) == 1
        assert [r.username for r in store.owner_rules_of(ALICE)] == ["alice"]
    finally:
        store.close()
    conn = read(v1_db)
    try:
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()


def test_init_upgrades_a_v1_database_and_says_so(v1_db: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path)  # its database is uma.db beside it: the v1 database
    before = contents(v1_db, v1_columns())
    runner = CliRunner()

    first = runner.invoke(cli_main, ["--config", str(config), "init"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout) == {
        "database": str(v1_db),
        "status": "ready",
        "schema_version_found": 1,
        "schema_version": current_version(),
    }
    again = runner.invoke(cli_main, ["--config", str(config), "init"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["schema_version_found"] == current_version()
    assert contents(v1_db, v1_columns()) == before


def test_preparing_twice_changes_nothing(v1_db: Path) -> None:
    prepare_database(v1_db, NOW)
    before = dump(v1_db)

    assert prepare_database(v1_db, NOW + 60) == (current_version(), current_version())

    assert dump(v1_db) == before
    assert versions_applied(v1_db) == list(range(2, current_version() + 1))


def test_a_new_database_records_every_version(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    assert prepare_database(path, NOW) == (0, current_version())
    assert versions_applied(path) == list(range(1, current_version() + 1))
    assert set(V1_TABLES) < set(tables_in(path))


def test_a_database_newer_than_the_code_is_refused_untouched(v1_db: Path, tmp_path: Path) -> None:
    prepare_database(v1_db, NOW)
    newer = current_version() + 1
    conn = read(v1_db)
    conn.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)", (newer, NOW))
    conn.close()
    before = dump(v1_db)

    with pytest.raises(SchemaError) as refused:
        prepare_database(v1_db, NOW + 60)

    message = str(refused.value)
    assert re.search(rf"\b{newer}\b", message) and re.search(rf"\b{current_version()}\b", message)
    assert dump(v1_db) == before
    assert version_of(v1_db) == newer

    result = CliRunner().invoke(cli_main, ["--config", str(write_config(tmp_path)), "init"])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert str(newer) in result.stderr and str(current_version()) in result.stderr
    assert dump(v1_db) == before


def test_a_migration_that_breaks_a_foreign_key_is_refused(v1_db: Path) -> None:
    """The runner's foreign_key_check: a step that leaves a row pointing at nothing is rolled
    back whole, and the version stays."""
    columns = v1_columns()
    before = contents(v1_db, columns)
    breaking = (
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);"
        f"\nDELETE FROM clients WHERE client_id = '{PRINTER}';"  # foreign keys are off: no cascade
    )
    conn = read(v1_db)
    try:
        with pytest.raises(SchemaError, match=r"0002_breaks_a_key\.sql.*pointing at nothing"):
            _apply(conn, breaking, (2,), NOW, only_if_version=1, name="0002_breaks_a_key.sql")
        assert not conn.in_transaction
        assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert schema_version(conn) == 1
    finally:
        conn.close()
    assert contents(v1_db, columns) == before
    assert "schema_migrations" not in tables_in(v1_db)


def test_a_v1_database_with_a_dangling_row_is_not_upgraded(v1_db: Path) -> None:
    """A row that already points at nothing (written with foreign keys off) stops the upgrade
    with the table named, rather than being carried into a version that claims to be checked."""
    conn = read(v1_db)
    conn.execute("DELETE FROM rpts WHERE digest = ?", (OLD_RPT,))  # its permission stays
    conn.close()
    columns = v1_columns()
    before = contents(v1_db, columns)

    with pytest.raises(SchemaError, match=r"'permissions'"):
        prepare_database(v1_db, NOW)

    assert version_of(v1_db) == 1
    assert contents(v1_db, columns) == before
    assert "schema_migrations" not in tables_in(v1_db)


def race_threads(path: Path, racers: int) -> tuple[list[tuple[int, int]], list[BaseException]]:
    """`racers` threads, each with its own connection, prepare the database at the same moment."""
    barrier = threading.Barrier(racers)
    results: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def prepare() -> None:
        barrier.wait()
        try:
            results.append(prepare_database(path, NOW))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=prepare) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results, errors


def test_threads_upgrading_at_once_apply_each_version_once(tmp_path: Path) -> None:
    reference = tmp_path / "reference.db"
    make_v1_database(reference)
    rows = contents(reference, v1_columns())
    for round_ in range(10):
        path = tmp_path / f"race{round_}.db"
        make_v1_database(path)

        results, errors = race_threads(path, 6)

        assert errors == []
        assert all(left == current_version() for _, left in results)
        # A racer may start while another is between two versions.
        assert all(1 <= found <= current_version() for found, _ in results)
        assert (1, current_version()) in results
        assert versions_applied(path) == list(range(2, current_version() + 1))
        assert contents(path, v1_columns()) == rows


def test_threads_creating_a_new_database_at_once_all_succeed(tmp_path: Path) -> None:
    for round_ in range(30):
        path = tmp_path / f"new{round_}.db"

        results, errors = race_threads(path, 6)

        assert errors == []
        assert all(left == current_version() for _, left in results)
        assert (0, current_version()) in results
        assert versions_applied(path) == list(range(1, current_version() + 1))


RACER = """
import sys
from pathlib import Path
from umaserver.storage import prepare_database
print("ready", flush=True)
sys.stdin.readline()
print(list(prepare_database(Path(sys.argv[1]), int(sys.argv[2]))))
"""


def test_processes_upgrading_at_once_apply_each_version_once(v1_db: Path) -> None:
    before = contents(v1_db, v1_columns())
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(v1_db), str(NOW)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    try:
        for racer in racers:  # each has imported umaserver: release them together
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
    results = [tuple(json.loads(out)) for out, _, _ in outcomes]
    assert all(left == current_version() for _, left in results)
    assert (1, current_version()) in results
    assert versions_applied(v1_db) == list(range(2, current_version() + 1))
    assert contents(v1_db, v1_columns()) == before


def test_one_history_serves_both_databases() -> None:
    """SQLite's steps run from version 1, PostgreSQL's from 8; a version's files share its name,
    and every version up to the current one has a step of at least one database."""
    sqlite_steps, postgresql_steps = migrations("sqlite"), migrations("postgresql")
    assert [found.version for found in sqlite_steps] == list(range(1, current_version() + 1))
    assert postgresql_steps[0].version == 8
    names = {found.version: found.name.split(".")[0] for found in sqlite_steps}
    for found in postgresql_steps:
        assert found.name == f"{names[found.version]}.postgresql.sql"
    assert all(found.name.startswith(f"{found.version:04d}_") for found in sqlite_steps)


def statements_digest(sql: str) -> str:
    """The digest of a step's statements: its comments and blank lines aside."""
    kept = [
        re.sub(r"\s+--.*$", "", line).rstrip()
        for line in sql.splitlines()
        if line.strip() and not line.lstrip().startswith("--")
    ]
    return hashlib.sha256("\n".join(kept).encode("utf-8")).hexdigest()


# Every released step's statements. Databases out there have applied them: a change of the schema
# is a new step, never an edit of one of these (a comment may change).
RELEASED_STEPS = {
    "0001_the_first_schema.sqlite.sql": "8be418979d55ae1399d1b9eeb069fafea8d326ba51f4e97d8806d8c0817f859d",
    "0002_schema_versions_and_expiry_indexes.sqlite.sql": "5aa2808365663a259038e92d74136ea1e8e3fb57714146a267dcca6d17bee9bc",
    "0003_claims_keep_their_subject.sqlite.sql": "c7d6dfca0955ee5e5f042105e7049f2978e5ea2b6b769f4797257a7abc6c1c88",
    "0004_people_sign_in.sqlite.sql": "4252d4bbdc036cf6a0c84e39dfe9aaf299df820c97cf0ea66d46cbddcf8cf1ed",
    "0005_claims_handles.sqlite.sql": "88cdcf5512a4242f469c55341a2d9ec8525af21a890a3896989c069c33450270",
    "0006_identity_links.sqlite.sql": "ceacddb8fb07986e174f2cab42f9481c06b54db98716c2f93530c2aa51a78738",
    "0007_owner_rules.sqlite.sql": "599d51519128411c7fe718e2ae40398fcee8761ed0580d6cdc8ec28b7172823d",
    "0008_fetched_content.sqlite.sql": "86250333e4d6c00c27baa9beff75e9c1fda123b94881df8497681f9525bcc78d",
    "0009_access_tokens_indexed_only_by_what_they_have.sqlite.sql": "ada2b2b5cbf04cc781266ebade14b5d249c532e871c736ee5bdc765d20fa415c",
    "0010_the_indexes_postgresql_has.sqlite.sql": "66ace49c6b84fda0b311a292a1136682e099eef6c2bf5ab06c3555738030867e",
    "0011_uma_2.sqlite.sql": "85737c732ea18d496e32a3204a72aaa70e3c2bd5afcb2ca98f4ef7f3c703bf27",
    "0012_signing_keys.sqlite.sql": "739ee2c2bffd1ebdf18cebf929db47059730f55326ccaafb27adcd73bda13336",
    "0013_shares.sqlite.sql": "397ef3cd99b2f2b5bd1f991cecd31a0502084dcb6b7449ea7f2dc6757fb50907",
    "0014_events.sqlite.sql": "c8a204ec2c00c247818f850bdc19ace61d9e8c4f4964c2a465c3af316ab42b93",
    "0015_requests.sqlite.sql": "57880a5f8b1bceb864a57be578c14340cd182a763215615e9ab175bfea1ede1f",
    "0016_invitations.sqlite.sql": "b55c64bc2d5578db94963c951bdba52ad9b239868e124fb549d7cc145e43aadd",
    "0017_notices.sqlite.sql": "c0e35dff48253a80fc9e25e33ba0eea9372386cb0a097acf746b3b27b4ac9161",
    "0018_seeded_parties.sqlite.sql": "20bb8cfe9ac13ee1699eac0ac91db474d4077d91682f95c60260f4dd634b793d",
    "0008_fetched_content.postgresql.sql": "d6d285574296b8d2a13e31c626d0e852533e04a5df8aed523b097b08937aded8",
    "0009_access_tokens_indexed_only_by_what_they_have.postgresql.sql": "5d70e2508d0704a563a339e0f737c8f13378051010c5b5b3fd11f63c6ccc68a8",
    "0011_uma_2.postgresql.sql": "e365644c90382e3d4f6fd68fb54643c570fb080cc0adf27385b9ee6cc2039df4",
    "0012_signing_keys.postgresql.sql": "cb0778ca6fecd8b20ca665379776838ba57786b50cec60bd1f3d50536b5cfef5",
    "0013_shares.postgresql.sql": "af7ebcbd6bf27c7d583a1aa03246ee2b43a1165c3e94babe6cd321e4d520bbed",
    "0014_events.postgresql.sql": "c0d4545722a1d83ea5341254b174808a6492ff05e8e6dceee8793fa99e51d26b",
    "0015_requests.postgresql.sql": "79b35dc96a2dbb8b8b5d29c26a6b3581f5dd0d25afe083060e96f85d21959a95",
    "0016_invitations.postgresql.sql": "875bda7c8c31b7e820e4886427a3be5e5248e362266360f7dab9b2f1a0ce9f89",
    "0017_notices.postgresql.sql": "2c6d67820a370b3ac6d1d61c9ee6710131e76072fe92a84545e11808742822e6",
    "0018_seeded_parties.postgresql.sql": "e6226b8ff24bee360f5a30774a1b80b50f498f0de7e9cd3131ce26a6cbfeadd8",
}


def test_no_released_step_changes() -> None:
    found = {
        step.name: statements_digest(step.sql)
        for backend in ("sqlite", "postgresql")
        for step in migrations(backend)
    }
    assert {name: found[name] for name in RELEASED_STEPS} == RELEASED_STEPS


def test_version_11_gives_the_uma_ticket_grant_to_confidential_clients_with_a_list(
    v1_db: Path,
) -> None:
    path = v1_db
    conn = read(path)
    try:
        for version in range(2, 11):
            name = f"version {version}"
            _apply(
                conn,
                step("sqlite", version),
                (version,),
                T0,
                only_if_version=version - 1,
                name=name,
            )
        metadata = {
            "listed": {
                "grant_types": ["client_credentials"],
                "token_endpoint_auth_method": "client_secret_basic",
            },
            "public": {"grant_types": ["authorization_code"], "token_endpoint_auth_method": "none"},
            "has-it": {"grant_types": ["urn:ietf:params:oauth:grant-type:uma-ticket"]},
            "unlisted": {},
        }
        conn.executemany(
            "INSERT INTO clients (client_id, secret_digest, name, created_at, metadata)"
            " VALUES (?, 'x', ?, 1, ?)",
            [(name, name, json.dumps(value)) for name, value in metadata.items()],
        )
    finally:
        conn.close()

    assert prepare_database(path, NOW) == (10, current_version())

    conn = read(path)
    try:
        found = {
            row[0]: json.loads(row[1])
            for row in conn.execute("SELECT client_id, metadata FROM clients")
        }
    finally:
        conn.close()
    uma_ticket = "urn:ietf:params:oauth:grant-type:uma-ticket"
    assert found["listed"]["grant_types"] == ["client_credentials", uma_ticket]
    assert found["public"] == metadata["public"]
    assert found["has-it"] == metadata["has-it"]
    assert found["unlisted"] == {}  # read with the defaults, which have it


def test_db_copy_knows_every_table_of_the_schema(tmp_path: Path) -> None:
    from umaserver.storage.postgresql.copy import TABLES

    path = tmp_path / "uma.db"
    prepare_database(path, NOW)
    # schema_migrations is the target's own (written as its schema is made), never copied.
    assert sorted(TABLES) == sorted(set(tables_in(path)) - {"schema_migrations"})


def test_db_reset_decides_every_table_of_the_schema(tmp_path: Path) -> None:
    from umaserver.storage.reset import FORGOTTEN, KEPT

    path = tmp_path / "uma.db"
    prepare_database(path, NOW)
    assert not set(KEPT) & set(FORGOTTEN)
    assert sorted(KEPT + FORGOTTEN) == sorted(tables_in(path))


def test_version_20_keeps_each_gathered_claim_for_the_client_it_was_gathered_for(
    v1_db: Path,
) -> None:
    # Issue 27, N1: rows of version 18 keep their client_id, which joins the primary key; they
    # serve that client only, and another client's claim of the same type, name and issuer on
    # the same ticket and party is stored beside them instead of replacing them.
    conn = read(v1_db)
    try:
        for version in range(2, 19):
            _apply(
                conn,
                step("sqlite", version),
                (version,),
                T0,
                only_if_version=version - 1,
                name=f"version {version}",
            )
        conn.execute(
            "INSERT INTO gathered_claims (ticket_digest, requesting_party, type, name, issuer,"
            " subject, value, client_id, gathered_at, expires_at)"
            " VALUES (?, ?, 'claim-client-redirect-1.0', 'email', 'http://uma.test', ?,"
            " '\"bob@example.org\"', ?, ?, NULL)",
            (OPEN_TICKET, BOB, BOB, PRINTER, T0 + 48),
        )
    finally:
        conn.close()

    assert prepare_database(v1_db, NOW) == (18, current_version())

    store = open_storage(v1_db)
    try:
        kept = store.gathered_claims(OPEN_TICKET, BOB, PRINTER)
        assert {(c.name, c.subject, c.client_id, c.gathered_at) for c in kept} == {
            ("eduPersonAffiliation", None, PRINTER, T0 + 47),
            ("email", BOB, PRINTER, T0 + 48),
        }
        assert store.gathered_claims(OPEN_TICKET, BOB, RS) == []  # nobody else's
        [email] = [c for c in kept if c.name == "email"]
        theirs = type(email)(
            email.type, email.name, "mallory@example.org", email.issuer, RS, NOW, email.subject
        )
        store.record_claims(OPEN_TICKET, BOB, [theirs])
        assert store.gathered_claims(OPEN_TICKET, BOB, RS) == [theirs]
        assert store.gathered_claims(OPEN_TICKET, BOB, PRINTER) == kept  # not replaced
        # The requests made before the upgrade are no client's: each client counts from here.
        assert store.count_ticket_request(OPEN_TICKET, PRINTER) == 1
        assert store.count_ticket_request(OPEN_TICKET, RS) == 1
        ticket = store.get_ticket(OPEN_TICKET)
        assert ticket is not None and ticket.requests == 3  # 1 before the upgrade, and these
        assert store.ticket_used_by_others(OPEN_TICKET, PRINTER) is True
    finally:
        store.close()
