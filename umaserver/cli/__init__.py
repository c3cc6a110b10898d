"""The command line: `python -m umaserver [--config FILE] COMMAND`.

Successful commands print JSON on stdout; errors go to stderr as plain sentences with exit status 1
(2 for usage errors, as click does).
"""

from __future__ import annotations

import json
import logging
import signal
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any, NoReturn

import click
from flask import Flask

from ..app_factory import create_app
from ..claim_issuers_config import unchecked_recipients
from ..clock import SystemClock
from ..config import Config, ConfigError, load_config
from ..policy.rule_file import PolicyError
from ..policy.store import MissingRuleFile, require_rule_file
from ..services import accounts, database, signing_keys
from ..storage import (
    Storage,
    StorageError,
    check_database,
    describe,
    is_postgresql,
    open_storage,
    write_problem,
)
from ..storage.per_request import opener


class Failure(click.ClickException):
    """An error for a person: printed as a sentence, without click's 'Error:' prefix."""

    def show(self, file: Any = None) -> None:
        click.echo(self.format_message(), err=True)


def fail(message: str) -> NoReturn:
    raise Failure(message)


def emit(document: object) -> None:
    click.echo(json.dumps(document))


def _config(ctx: click.Context) -> Config:
    try:
        config: Config = load_config(ctx.obj["config_path"])
    except ConfigError as error:
        fail("\n".join(error.errors))
    return config


CLOCK = SystemClock()


def _prepare(config: Config) -> tuple[int, int]:
    try:
        versions = database.prepare(config.database, CLOCK.now(), config.postgresql)
    except (StorageError, OSError) as error:
        fail(f"The database {describe(config.database)} could not be prepared: {error}")
    except accounts.ClashingUsernames as error:
        fail(str(error))
    return versions


def _store(ctx: click.Context) -> Storage:
    """A handle for a command: on SQLite, the database created or upgraded first; on PostgreSQL
    (shared with serving processes), only `init` changes the schema: its version is checked."""
    config = _config(ctx)
    if is_postgresql(config.database):
        try:
            check_database(str(config.database), config.postgresql)
        except StorageError as error:
            fail(f"The database {describe(config.database)} cannot be used: {error}")
    else:
        _prepare(config)
    try:
        store = open_storage(config.database, config.postgresql)
    except StorageError as error:
        fail(f"The database {describe(config.database)} cannot be used: {error}")
    ctx.call_on_close(store.close)
    if is_postgresql(config.database):  # what preparing checks on SQLite
        try:
            accounts.check_stored_usernames(store)
        except accounts.ClashingUsernames as error:
            fail(str(error))
    return store


@click.group()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="The TOML settings file (default: $UMASERVER_CONFIG).",
)
@click.pass_context
def main(ctx: click.Context, config_path: str | None) -> None:
    """umaserver: a UMA authorization server."""
    ctx.obj = {"config_path": config_path}


@main.command()
@click.pass_context
def init(ctx: click.Context) -> None:
    """Create or upgrade the database (safe to run twice; back it up before an upgrade)."""
    config = _config(ctx)
    for warning in unchecked_recipients(config.saml_idps):
        click.echo(f"Warning: {warning}", err=True)
    emit(initialise(config))


def initialise(config: Config) -> dict[str, object]:
    """What `init` does (`dev` too): the database prepared and writable, and the signing key of
    JWT RPTs made; what it found and left. A rule file named but missing stops it, as it stops
    `serve`."""
    try:
        require_rule_file(config.policies)
    except MissingRuleFile as error:
        fail(str(error))
    found, left = _prepare(config)
    problem = write_problem(config.database, config.postgresql)
    if problem is not None:
        fail(f"The database {describe(config.database)} cannot be written: {problem}.")
    done: dict[str, object] = {
        "database": describe(config.database),
        "status": "ready",
        "schema_version_found": found,
        "schema_version": left,
    }
    try:
        key = _signing_key(config)
    except StorageError as error:
        fail(f"No signing key could be made in {describe(config.database)}: {error}")
    except signing_keys.KeyUnusable as error:
        fail(str(error))
    if key is not None:
        done["signing_key"] = key
    return done


def _signing_key(config: Config) -> str | None:
    """With JWT RPTs: the current signing key's kid, the key made first when there is none (or
    it is of another algorithm than jwt_algorithm); KeyUnusable when it does not open with this
    secret_key. None with opaque RPTs."""
    settings = signing_keys.configured(config)
    if settings is None:
        return None
    store = open_storage(config.database, config.postgresql)
    try:
        return signing_keys.ready_signing_key(store, settings, CLOCK.now()).kid
    finally:
        store.close()


@main.command()
@click.option("--host", help="Address to listen on (default: server.host of the config).")
@click.option("--port", type=click.IntRange(0, 65535), help="Port (default: server.port).")
@click.option(
    "--threads", type=click.IntRange(1, 1024), help="Worker threads (default: server.threads)."
)
@click.pass_context
def serve(ctx: click.Context, host: str | None, port: int | None, threads: int | None) -> None:
    """Initialise the database and serve with waitress."""
    from ..serving import configure_logging

    config = _config(ctx)
    configure_logging(config.logging.format)
    for warning in unchecked_recipients(config.saml_idps):
        logging.getLogger("umaserver").warning("%s", warning)
    run_server(config, host, port, threads)


def run_server(
    config: Config,
    host: str | None = None,
    port: int | None = None,
    threads: int | None = None,
    listening: Callable[[], None] | None = None,
) -> None:
    """What `serve` does once logging is set up (`dev` too): prepare, build the app, listen, say
    where on stdout, and serve until stopped. `host`, `port` and `threads` are the command line's
    (None: the config's); `listening` is called once the port is bound, before serving."""
    from ..serving import freeze_startup_objects, issuer_mismatch, make_server

    # SIGINT (Ctrl-C) stops the server even when this process was started with it ignored, as a
    # shell's background job or a test runner's worker starts its children.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    app = _app(config)  # prepares the database, or logs why it cannot now
    # SQLite's opener or PostgreSQL's (whose module is loaded only with a PostgreSQL database).
    handles: object = opener(app)
    prepared = not isinstance(handles, database.PreparedOnce) or handles.ready
    # When it could not even be prepared, create_app has said so already.
    problem = write_problem(config.database, config.postgresql) if prepared else None
    if problem is not None:
        # Serve anyway: reads may work, writes answer 503 until the storage can be written, and
        # that happens without a restart.
        logging.getLogger("umaserver").error(
            "The database %s cannot be written: %s; requests that write answer 503 until it can.",
            describe(config.database),
            problem,
        )
    if prepared and problem is None:
        try:
            _signing_key(config)
        except StorageError as error:  # the first RPT signed makes it
            logging.getLogger("umaserver").error("No signing key could be made now: %s", error)
        except signing_keys.KeyUnusable as error:  # each grant answers 500 until it is fixed
            logging.getLogger("umaserver").error("%s", error)
    settings = replace(
        config.server,
        host=host or config.server.host,
        port=config.server.port if port is None else port,
        threads=threads or config.server.threads,
    )
    mismatch = issuer_mismatch(config.issuer, host, port)  # what the command line says
    if mismatch is not None:
        logging.getLogger("umaserver").warning("%s", mismatch)
    host, port = settings.host, settings.port
    try:
        server = make_server(app, config.limits.max_body_bytes, settings)
    except OSError as error:  # the port is taken, the address is not this machine's, ...
        fail(f"Cannot listen on {host}:{port}: {error.strerror or error}.")
    click.echo(
        json.dumps(
            {
                "serving": config.issuer,
                "listening": f"http://{server.effective_host}:{server.effective_port}",
            }
        ),
    )
    sys.stdout.flush()
    if listening is not None:
        listening()
    try:
        freeze_startup_objects()
        server.run()  # ends on SIGINT (KeyboardInterrupt) and SystemExit, closing the server
    except KeyboardInterrupt:  # a SIGINT that came before waitress's loop began: the same stop
        server.close()


def _app(config: Config) -> Flask:
    try:
        return create_app(config, clock=CLOCK)  # the command line's clock, the served app's too
    except MissingRuleFile as error:
        fail(str(error))
    except PolicyError as error:
        fail(f"The rule file {config.policies} is broken:\n{error}")
    except accounts.ClashingUsernames as error:
        fail(str(error))
    except StorageError as error:  # another schema version, a broken migration
        fail(f"The database {describe(config.database)} could not be prepared: {error}")
    except ValueError as error:  # a broken JWKS file of an OIDC issuer
        fail(str(error))


# The command groups register themselves on `main`.
from . import audit, db, dev, keys, operators, rules, seed  # noqa: E402, F401  (clients, users, tokens; the rule file; db copy, reset and export; dev mode; signing keys; the access history; seed files)
