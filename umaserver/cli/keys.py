"""`keys list`, `keys rotate`, `keys retire`: the keys that sign JWT RPTs (`[tokens] rpt_format =
"jwt"`), stored in the database, their private parts sealed under `secret_key`."""

from __future__ import annotations

import click

from ..services import signing_keys
from ..services.signing_keys import JwtRpts
from . import CLOCK, _config, _store, emit, main


@main.group()
def keys() -> None:
    """The keys that sign JWT RPTs (published at /jwks)."""


@keys.command("list")
@click.pass_context
def list_keys(ctx: click.Context) -> None:
    """Every key (kid, algorithm, created, current), oldest first."""
    store = _store(ctx)
    emit([signing_keys.describe(key) for key in store.signing_keys()])


@keys.command("rotate")
@click.pass_context
def rotate(ctx: click.Context) -> None:
    """Make a new current key (of [tokens] jwt_algorithm). RPTs signed with the keys before still
    verify, and those keys stay in /jwks, until `keys retire`."""
    config = _config(ctx)
    store = _store(ctx)
    settings = JwtRpts.of(config.tokens.jwt_algorithm, config.secret_keys)
    made = signing_keys.rotate(store, settings, CLOCK.now())
    emit(signing_keys.describe(made))


@keys.command("retire")
@click.pass_context
def retire(ctx: click.Context) -> None:
    """Drop every key that is not current: RPTs signed with them stop verifying (at /introspect
    too). Wait at least [lifetimes] rpt after a rotation, and a cache's life of /jwks."""
    store = _store(ctx)
    emit({"retired": signing_keys.retire(store)})
