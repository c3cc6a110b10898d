"""`db copy --to postgresql://...`: moving a site from its SQLite database to PostgreSQL.
`db reset --keep-parties`: forgetting everything but the parties, between the tests of a suite.
`db export`: the parties as a seed file."""

from __future__ import annotations

from pathlib import Path

import click

from ..services.seeding import NotExportable, export_seed
from ..storage import StorageError, describe, is_postgresql
from ..storage.postgresql import MISSING_DRIVER, driver_missing
from ..storage.reset import KEPT
from . import CLOCK, _config, _prepare, _store, emit, fail, main


@main.group()
def db() -> None:
    """The database as a whole."""


@db.command("copy")
@click.option(
    "--to",
    "target",
    required=True,
    help="The PostgreSQL database to copy into (postgresql://...): empty, or without tables.",
)
@click.pass_context
def copy(ctx: click.Context, target: str) -> None:
    """Copy the configured SQLite database into an empty PostgreSQL database, and check that every
    table holds as many rows in both (nothing is committed otherwise). Stop the server first, or
    what it writes meanwhile stays behind; then point `database` at the URL."""
    config = _config(ctx)
    if is_postgresql(config.database):
        fail("The configured database is PostgreSQL already: db copy reads an SQLite database.")
    if not is_postgresql(target):
        fail(f"--to must be a PostgreSQL URL (postgresql://...), not {target!r}.")
    source = Path(config.database)
    if not source.exists():
        fail(f"There is no SQLite database {source} to copy.")
    if driver_missing():
        fail(f"Copying into PostgreSQL {MISSING_DRIVER}.")
    from ..storage.postgresql.copy import copy_from_sqlite  # psycopg: only when copying

    _prepare(config)  # the same schema version as the target gets
    try:
        tables = copy_from_sqlite(source, target, CLOCK.now(), config.postgresql.connect_timeout)
    except StorageError as error:
        fail(f"Copying {source} into {describe(target)} failed: {error}")
    emit(
        {
            "from": str(source),
            "to": describe(target),
            "status": "copied",
            "rows": sum(tables.values()),
            "tables": tables,
        }
    )


# Kept tables that are no party: left out of what `db reset` says it kept.
_BOOKKEEPING = ("schema_migrations", "owner_rule_versions", "seeded_parties")


@db.command("reset")
@click.option(
    "--keep-parties",
    is_flag=True,
    help="Keep users, clients and their identity links (the only reset there is: required).",
)
@click.pass_context
def reset(ctx: click.Context, keep_parties: bool) -> None:
    """Forget everything but the parties: resource sets, the owners' own rules and shares,
    tickets, gathered claims, RPTs and permissions, PATs, AATs, codes, refresh tokens, PCTs,
    sessions, consents, requests, the access history, notices, fetched content, sign-in failures
    and initial access tokens. Users, clients and identity links stay; so do the signing keys and
    the rule file (the operator's: its rules stay in force). Every token issued before dies with
    it. Safe while a server runs on the database: it is one transaction."""
    if not keep_parties:
        fail(
            "db reset forgets everything but users, clients and their identity links, and only"
            " says so with --keep-parties: run `db reset --keep-parties` (to start from nothing,"
            " delete the database instead)."
        )
    config = _config(ctx)
    store = _store(ctx)
    try:
        forgotten = store.reset_keeping_parties()
    except StorageError as error:
        fail(f"The database {describe(config.database)} could not be reset: {error}")
    emit(
        {
            "database": describe(config.database),
            "status": "reset",
            "kept": [table for table in KEPT if table not in _BOOKKEEPING],
            "forgotten": forgotten,
            "rule_file": str(config.policies),
        }
    )


@db.command("export")
@click.pass_context
def export(ctx: click.Context) -> None:
    """Print every user, client and link as a seed file (TOML, not JSON) that `seed apply`
    reads back: passwords as password_hash, client secrets as secret_digest. Keep it as you keep
    the database."""
    try:
        text = export_seed(_store(ctx))
    except NotExportable as error:
        fail(f"The database cannot be exported as a seed file: {error}.")
    click.echo(text, nl=False)
