"""`seed apply FILE [--prune]`: users, clients and links declared in a file (`seed_file`)."""

from __future__ import annotations

from pathlib import Path

import click

from ..config import ConfigError
from ..seed_file import load_seed
from ..services.seeding import apply_seed
from . import CLOCK, _config, _store, emit, fail, main


@main.group()
def seed() -> None:
    """Parties declared in a seed file: configuration as code for tests and development."""


@seed.command("apply")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--prune",
    is_flag=True,
    help="Also remove the users, clients and links that an earlier seed apply created and the"
    " file no longer lists (never one made another way).",
)
@click.pass_context
def apply(ctx: click.Context, file: Path, prune: bool) -> None:
    """Create what the file declares and is missing, update what differs, keep the rest; print
    {"created": [...], "changed": [...], "kept": [...]} (and "removed" with --prune). A file with
    any problem is refused whole: nothing is written."""
    config = _config(ctx)
    try:
        declared = load_seed(file)
        report = apply_seed(_store(ctx), declared, config, now=CLOCK.now(), prune=prune)
    except ConfigError as error:  # SeedError: the file's problems, one a line
        fail("\n".join(error.errors))
    emit(report.as_json(prune))
