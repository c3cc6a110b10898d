"""A PostgreSQL database in the config: `database = "postgresql://..."` and `[postgresql]` read and
checked; `init` creates or upgrades it, `serve` (and every other command) refuses a database of
another version; `/readyz` says whether the database answers (`/healthz` only that the process does); `db copy` moves an SQLite database
into an empty PostgreSQL one. (The storage contract itself: tests/storage, on both backends.)"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from umaserver import create_app
from umaserver.cli import main as cli_main
from umaserver.config import ConfigError, load_config
from umaserver.storage import PostgreSQLSettings, SchemaError, open_storage
from umaserver.storage.migrations import current_version, step
from umaserver.storage.people_records import SeededParty
from umaserver.storage.postgresql import pool
from umaserver.storage.postgresql.migrate import FIRST_VERSION

from .conftest import (
    SECRET,
    FakeClock,
    make_client,
    make_party,
    make_person,
    open_store,
)
from .postgres_fixture import PostgresCluster


def config_text(database: str, extra: str = "") -> str:
    return (
        'issuer = "http://uma.test"\n'
        f'database = "{database}"\n'
        'policies = "policies.toml"\n'
        f'secret_key = "{SECRET}"\n' + extra
    )


def write(folder: Path, text: str) -> Path:
    (folder / "policies.toml").write_text("", encoding="utf-8")
    path = folder / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def invoke(config: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli_main, ["--config", str(config), *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def empty(postgres_cluster: PostgresCluster) -> Iterator[str]:
    """A PostgreSQL database without umaserver's schema."""
    url = postgres_cluster.empty_database()
    yield url
    postgres_cluster.drop(url)


@pytest.fixture
def prepared(postgres_cluster: PostgresCluster) -> Iterator[str]:
    """A PostgreSQL database with the current schema."""
    url = postgres_cluster.new_database()
    yield url
    postgres_cluster.drop(url)


# -- the config -----------------------------------------------------------------------------------


def test_a_url_is_postgresql_and_a_path_sqlite(tmp_path: Path) -> None:
    url = "postgresql://uma@db.example:5432/uma?sslmode=require"
    config = load_config(
        write(tmp_path, config_text(url, "[postgresql]\npool_min = 0\npool_max = 4\n"))
    )
    assert config.database == url
    assert config.postgresql == PostgreSQLSettings(pool_min=0, pool_max=4, connect_timeout=5)
    assert load_config(write(tmp_path, config_text("uma.db"))).database == tmp_path / "uma.db"
    assert "uma@db.example" not in repr(config)


@pytest.mark.parametrize(
    ("database", "table", "errors"),
    [
        (
            "uma.db",
            "pool_max = 4\n",
            ['postgresql: only applies to a PostgreSQL database (database = "postgresql://...")'],
        ),
        (
            "postgresql:///uma",
            "pool_min = 5\npool_max = 4\nconnect_timeout = 0\npool = 3\n",
            [
                "postgresql.connect_timeout: must be greater than 0",
                "postgresql.pool: unknown key",
                "postgresql.pool_max: must be at least pool_min",
            ],
        ),
        (
            "postgresql://uma:s3cret@db/uma?sslmode",
            "",
            ["database: is not a PostgreSQL connection URL that libpq can read"],
        ),
    ],
)
def test_postgresql_settings_are_checked(
    tmp_path: Path, database: str, table: str, errors: list[str]
) -> None:
    text = config_text(database, f"[postgresql]\n{table}" if table else "")
    with pytest.raises(ConfigError) as refused:
        load_config(write(tmp_path, text))
    assert [line.split(": ", 1)[1] for line in refused.value.errors] == errors
    assert "s3cret" not in str(refused.value)


# -- init, serve and the other commands ---------------------------------------------------------


def test_init_creates_the_schema_and_names_the_database_without_its_password(
    tmp_path: Path, empty: str
) -> None:
    with_password = empty.replace("postgres@", "postgres:pw@")  # trust: any password will do
    config = write(tmp_path, config_text(with_password))
    code, out, err = invoke(config, "init")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["database"] == empty.replace("postgres@", "postgres:***@")
    assert (answer["schema_version_found"], answer["schema_version"]) == (0, current_version())
    code, out, err = invoke(config, "init")
    assert code == 0 and json.loads(out)["schema_version_found"] == current_version()
    code, out, err = invoke(config, "client", "list")
    assert code == 0, err


def test_serving_and_commands_refuse_a_database_init_has_not_prepared(
    tmp_path: Path, empty: str
) -> None:
    config = write(tmp_path, config_text(empty))
    with pytest.raises(SchemaError, match="init"):
        create_app(load_config(config), clock=FakeClock())
    code, out, err = invoke(config, "client", "list")
    assert (code, out) == (1, "")
    assert "init" in err
    with psycopg.connect(empty) as conn:  # nothing was created
        assert conn.execute("SELECT to_regclass('schema_migrations')").fetchone() == (None,)


def test_serving_refuses_an_older_schema_and_init_upgrades_it(tmp_path: Path, empty: str) -> None:
    # A database left at the version before this code's, by the released steps themselves.
    older = current_version() - 1
    with psycopg.connect(empty, autocommit=True) as conn:
        for version in range(FIRST_VERSION, older + 1):
            if step("postgresql", version).strip():
                conn.execute(step("postgresql", version).encode("utf-8"))
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, 1)",
                [(version,) for version in range(1, older + 1)],
            )
    prepared = empty
    config = write(tmp_path, config_text(prepared))
    with pytest.raises(SchemaError, match=r"older.*init"):
        create_app(load_config(config), clock=FakeClock())
    # `init` upgrades it (and says from which version)...
    code, out, _ = invoke(config, "init")
    assert code == 0
    found = json.loads(out)
    assert (found["schema_version_found"], found["schema_version"]) == (
        current_version() - 1,
        current_version(),
    )
    create_app(load_config(config), clock=FakeClock())
    # ... but no PostgreSQL database was ever older than PostgreSQL's first version: init says so.
    with psycopg.connect(prepared, autocommit=True) as conn:
        conn.execute("DELETE FROM schema_migrations WHERE version >= %s", (FIRST_VERSION,))
    code, _, err = invoke(config, "init")
    assert code == 1 and "older than any PostgreSQL database" in err


# -- /healthz and /readyz ----------------------------------------------------------------------


def test_readyz_answers_when_the_database_does(tmp_path: Path, prepared: str) -> None:
    for database in (prepared, "uma.db"):
        app = create_app(load_config(write(tmp_path, config_text(database))), clock=FakeClock())
        answer = app.test_client().get("/readyz")
        assert (answer.status_code, answer.get_json()["status"]) == (200, "ready")
        assert answer.headers["Cache-Control"] == "no-store"
        answer = app.test_client().get("/healthz")
        assert (answer.status_code, answer.get_json()) == (200, {"status": "ok"})


def test_readyz_and_requests_answer_503_while_the_database_cannot_be_reached(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    nowhere = f"postgresql://postgres@/uma?host={tmp_path}&port=1"
    config = load_config(
        write(tmp_path, config_text(nowhere, "[postgresql]\npool_min = 0\nconnect_timeout = 1\n"))
    )
    with caplog.at_level(logging.ERROR, logger="umaserver"):
        app = create_app(config, clock=FakeClock())  # serves: 503 until it can be reached
    assert "cannot be reached" in caplog.text
    http = app.test_client()
    for answer in (http.get("/readyz"), http.post("/rpt", headers={"Authorization": "Bearer x"})):
        assert answer.status_code == 503
        assert answer.headers["Retry-After"]
        assert answer.get_json()["error"] == "temporarily_unavailable"
    assert set(answer.get_json()) == {"error", "error_description"}
    assert http.get("/readyz").get_json()["checks"]["database"] != "ok"
    assert http.get("/healthz").status_code == 200  # the process answers


def test_readyz_answers_503_while_the_database_is_read_only(
    tmp_path: Path, prepared: str, postgres_cluster: PostgresCluster
) -> None:
    """The rolled-back write of /readyz meets what a request that writes would: a database made
    read-only (as a standby is) is unready, and ready again once it can be written."""
    http = create_app(
        load_config(write(tmp_path, config_text(prepared))), clock=FakeClock()
    ).test_client()
    assert http.get("/readyz").status_code == 200
    name = prepared.split("?")[0].rsplit("/", 1)[1]
    with postgres_cluster.admin() as conn:
        conn.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    try:
        answer = http.get("/readyz")
        assert answer.status_code == 503
        assert "read-only transaction" in answer.get_json()["checks"]["database"]
        assert http.get("/healthz").status_code == 200
    finally:
        with postgres_cluster.admin() as conn:
            conn.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
    assert http.get("/readyz").status_code == 200


def _cut_connections(cluster: PostgresCluster, url: str) -> int:
    """Ends the server's sessions on the database at `url`, as a restart of PostgreSQL would."""
    name = url.split("?")[0].rsplit("/", 1)[1]
    with cluster.admin() as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND application_name = 'umaserver'",
            (name,),
        ).fetchall()
    return len(rows)


def test_connections_cut_by_a_restart_are_replaced(
    tmp_path: Path,
    prepared: str,
    postgres_cluster: PostgresCluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A connection idle in the pool for a while is checked before it is lent: a restart of
    PostgreSQL costs no request. One given back a moment ago is lent unchecked: a request that
    meets it cut answers 503 (nothing done), and the next one is served on a new connection."""
    one = "[postgresql]\npool_min = 1\npool_max = 1\n"  # the same connection every time
    app = create_app(load_config(write(tmp_path, config_text(prepared, one))), clock=FakeClock())
    http = app.test_client()
    assert http.get("/readyz").status_code == 200

    monkeypatch.setattr(pool, "IDLE_CHECK", 0.0)  # as if every connection had been idle a while
    assert _cut_connections(postgres_cluster, prepared) >= 1
    assert http.get("/readyz").status_code == 200

    monkeypatch.setattr(pool, "IDLE_CHECK", 3600.0)  # as if it had been given back just now
    assert _cut_connections(postgres_cluster, prepared) >= 1
    assert [http.get("/readyz").status_code for _ in range(3)] == [503, 200, 200]


# -- db copy -----------------------------------------------------------------------------------


def test_db_copy_moves_every_row_and_checks_the_counts(
    tmp_path: Path, empty: str, postgres_cluster: PostgresCluster
) -> None:
    config = write(tmp_path, config_text("site.db"))  # an SQLite file, whatever the tests run on
    store = open_store(tmp_path / "site.db")
    try:
        client_id, _ = make_client(store, "a resource server")
        party = make_party(store, "alice", "uma_protection", client_id)
        make_person(store, "bob", None, {"email": "bob@example.org"})
        for index in range(3):
            store.record_signin_failure(f"key-{index}", 1_700_000_000 + index)
        seeded = [SeededParty("client", client_id), SeededParty("link", "https://op", "a 1")]
        for entry in seeded:
            store.record_seeded(entry, 1_700_000_000)
        clients = store.list_clients()
        users = store.list_users()
    finally:
        store.close()

    code, out, err = invoke(config, "db", "copy", "--to", empty)
    assert code == 0, err
    answer = json.loads(out)
    assert answer["status"] == "copied" and answer["to"] == empty
    tables = answer["tables"]
    assert (tables["clients"], tables["users"], tables["access_tokens"]) == (1, 2, 1)
    assert tables["signin_failures"] == 3 and answer["rows"] == sum(tables.values())
    assert tables["seeded_parties"] == 2

    copied = open_storage(empty)
    try:
        assert copied.list_clients() == clients
        assert [c.created_at for c in copied.list_clients()] == [c.created_at for c in clients]
        assert copied.list_users() == users
        from umaserver import secrets_at_rest

        token = copied.get_access_token(secrets_at_rest.digest(party.token))
        assert token is not None and token.username == "alice" and token.revoked is False
        assert copied.signin_failures_since("key-2", 0) == [1_700_000_002]
        assert copied.seeded_parties() == sorted(seeded, key=lambda p: (p.kind, p.party))
    finally:
        copied.close()

    # A second copy would merge: refused, and nothing changes.
    code, out, err = invoke(config, "db", "copy", "--to", empty)
    assert (code, out) == (1, "")
    assert "not empty" in err and "clients (1)" in err


def test_db_copy_refuses_what_it_cannot_copy(tmp_path: Path, prepared: str) -> None:
    sqlite = write(tmp_path, config_text("uma.db"))
    code, _, err = invoke(sqlite, "db", "copy", "--to", "other.db")
    assert code == 1 and "PostgreSQL URL" in err
    code, _, err = invoke(sqlite, "db", "copy", "--to", prepared)
    assert code == 1 and "no SQLite database" in err
    postgres = write(tmp_path, config_text(prepared))
    code, _, err = invoke(postgres, "db", "copy", "--to", prepared)
    assert code == 1 and "PostgreSQL already" in err


def test_a_database_made_after_the_start_is_served_once_init_has_run(
    tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """Unreachable at start (not created yet): 503s. Created without a schema: still 503 (never a
    500), saying to run init. After `init`: served, without a restart."""
    name = "made_later"
    url = postgres_cluster.url(name)
    config_path = write(
        tmp_path, config_text(url, "[postgresql]\npool_min = 0\nconnect_timeout = 1\n")
    )
    http = create_app(load_config(config_path), clock=FakeClock()).test_client()
    assert http.get("/readyz").status_code == 503
    with postgres_cluster.admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    try:
        answer = http.get("/readyz")
        assert answer.status_code == 503 and answer.headers["Retry-After"]
        code, _, err = invoke(config_path, "init")
        assert code == 0, err
        assert http.get("/readyz").status_code == 200
    finally:
        postgres_cluster.drop(url)


def test_a_connection_ends_an_abandoned_transaction_and_bounds_lock_waits(
    postgres_cluster: PostgresCluster,
) -> None:
    """A process frozen or cut off mid-transaction cannot hold row locks for long: the server ends
    a session idle in a transaction after a minute, and a lock is waited on for ten seconds."""
    url = postgres_cluster.new_database()
    handle = open_storage(url)
    try:
        conn = handle.conn  # type: ignore[attr-defined]
        shown = {
            name: conn.execute(f"SHOW {name}").fetchone()[name]
            for name in ("idle_in_transaction_session_timeout", "lock_timeout")
        }
        assert shown == {"idle_in_transaction_session_timeout": "1min", "lock_timeout": "10s"}
    finally:
        handle.close()
        postgres_cluster.drop(url)
