"""`db copy --to postgresql://...`: moving a site from its SQLite database to PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import click

from ..storage import StorageError, describe, is_postgresql
from ..storage.postgresql import MISSING_DRIVER, driver_missing
from . import CLOCK, _config, _prepare, emit, fail, main


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
