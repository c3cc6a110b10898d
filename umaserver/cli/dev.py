"""`dev`: a server for local work in one command (issue 26, item 3).

A generated `secret_key`, the issuer `http://127.0.0.1:{port}`, loopback fetching on, the packaged
example rules, and a database in a temporary folder that is removed when dev ends (at exit, on
SIGINT and on SIGTERM); the seed applied; then it serves as `serve` does. Everything it tells a
person is on stderr, the first line first (it is not for production); stdout carries `serve`'s
JSON line only.

With `--config FILE` the settings are written there when the file is missing (so that the CLI can
be pointed at the same server: `umaserver --config FILE ...`), and read from it when it is there;
the top-level `--config` and UMASERVER_CONFIG are never read by dev. A config dev wrote names its
temporary folder: the next dev with that config makes the folder again, empty, and removes it again
at exit.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import sys
import tempfile
from contextlib import ExitStack
from importlib import resources
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

import click

from ..config import Config, ConfigError, load_config
from ..seed_file import load_seed
from ..services import accounts
from ..services.seeding import apply_seed
from ..storage import Storage, describe, is_postgresql, open_storage
from ..toml_reader import toml_string
from . import CLOCK, fail, initialise, main, run_server

NOT_FOR_PRODUCTION = (
    "umaserver dev: for local development and tests only, never for production"
    " (a generated secret key, a throwaway database, loopback fetching on); run `serve` with a"
    " config of your own for anything else."
)
DEFAULT_PORT = 8080
# The temporary folders dev makes (in the system's temporary folder) start with this.
FOLDER_PREFIX = "umaserver-dev-"
EXAMPLE_RULES = "policies.example.toml"
# What dev tells a person where to find, beside the discovery documents.
PAGES = (
    ("home", "/"),
    ("sign in", "/signin"),
    ("account", "/account"),
    ("owner's policies", "/policy"),
    ("requests to owners", "/policy/requests"),
    ("access history", "/policy/history"),
    ("notices", "/notices"),
    ("UMA 1.0 discovery", "/.well-known/uma-configuration"),
    ("UMA 2.0 discovery", "/.well-known/uma2-configuration"),
)
# The token kinds a ready token can be, by the scope a client must have for it.
TOKEN_KINDS = (("PAT", "uma_protection"), ("AAT", "uma_authorization"))

Row = tuple[str, str, str]  # (kind, name, token): a seeded party ("" token) or a ready token


@main.command()
@click.option("--seed", "seed_path", help="A seed file of users, clients and links to apply.")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help=f"The port to serve on, and the issuer's (default {DEFAULT_PORT}, or the config's).",
)
@click.option(
    "--config",
    "config_path",
    help="Where dev writes its settings (when the file is missing) and reads them from.",
)
@click.option(
    "--database", help="A database to keep (default: one in a temporary folder, removed at exit)."
)
@click.option("--policies", help="The rule file (default: the packaged example rules).")
def dev(
    seed_path: str | None,
    port: int | None,
    config_path: str | None,
    database: str | None,
    policies: str | None,
) -> None:
    """Serve for local development in one command: a generated secret key, the issuer
    http://127.0.0.1:PORT, a temporary database (unless --database), the example rules (unless
    --policies), loopback fetching on, and the seed applied; prints ready tokens for the seeded
    parties and the pages' URLs on stderr. Not for production."""
    click.echo(NOT_FOR_PRODUCTION, err=True)
    sys.stderr.flush()
    _stop_on_sigterm()
    with ExitStack() as cleanup:
        config, config_file, temporary = _dev_config(cleanup, config_path, port, database, policies)
        from ..serving import configure_logging

        configure_logging(config.logging.format)
        initialise(config)
        rows = _apply_seed(config, Path(seed_path)) if seed_path is not None else []
        run_server(
            config,
            listening=lambda: _announce(config, config_file, temporary, rows, seed_path),
        )


def _stop_on_sigterm() -> None:
    """SIGTERM ends dev as SIGINT does, through the clean-up of its temporary folder (waitress's
    loop ends on SystemExit as on KeyboardInterrupt)."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)


# -- settings ----------------------------------------------------------------------------------


def _dev_config(
    cleanup: ExitStack,
    config_path: str | None,
    port: int | None,
    database: str | None,
    policies: str | None,
) -> tuple[Config, Path, bool]:
    """The config dev serves with, the file it is in, and whether the database is temporary
    (removed at exit)."""
    if config_path is not None and Path(config_path).exists():
        return _existing_config(cleanup, Path(config_path), port, database, policies)
    folder = _temporary_folder(cleanup)
    file = Path(config_path) if config_path is not None else folder / "config.toml"
    rules = Path(policies).resolve() if policies is not None else _example_rules(cleanup)
    if policies is not None and not rules.is_file():
        fail(f"There is no rule file {policies}.")
    stored: str = database if database is not None else str(folder / "umaserver.db")
    if not is_postgresql(stored):
        stored = str(Path(stored).resolve())
    _write_config(file, port or DEFAULT_PORT, stored, rules)
    return _load(file), file, database is None


def _existing_config(
    cleanup: ExitStack, file: Path, port: int | None, database: str | None, policies: str | None
) -> tuple[Config, Path, bool]:
    config = _load(file)
    issuer_port = urlsplit(config.issuer).port
    if port is not None and (config.server.port != port or issuer_port != port):
        fail(
            f"{file} says port {config.server.port} and the issuer {config.issuer}, not"
            f" --port {port}: leave --port out to serve where it says, or give another --config"
            " (dev writes it when it is missing)."
        )
    if database is not None and str(config.database) != _absolute(database):
        fail(
            f"{file} names the database {config.database}, not --database {database}: leave"
            " --database out, or give another --config."
        )
    if policies is not None and config.policies != Path(policies).resolve():
        fail(
            f"{file} names the rule file {config.policies}, not --policies {policies}: leave"
            " --policies out, or give another --config."
        )
    temporary = _made_by_dev(config)
    if temporary:
        # The folder of an earlier dev with this config, removed when it ended: made again,
        # empty, and removed again when this one ends.
        folder = Path(config.database).parent
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:  # another dev serves it now, or one that was killed left it
            temporary = False
        else:
            cleanup.callback(shutil.rmtree, folder, ignore_errors=True)
    return config, file, temporary


def _absolute(database: str) -> str:
    return database if is_postgresql(database) else str(Path(database).resolve())


def _made_by_dev(config: Config) -> bool:
    """Whether the config's database lies in a temporary folder of dev's (by its name: only a
    folder dev makes itself is ever removed)."""
    if is_postgresql(config.database):
        return False
    return Path(config.database).parent.name.startswith(FOLDER_PREFIX)


def _temporary_folder(cleanup: ExitStack) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX)).resolve()
    cleanup.callback(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _example_rules(cleanup: ExitStack) -> Path:
    """The example rules shipped in the package (`umaserver/examples/`), or, in a checkout from
    before they moved there, the top-level file."""
    try:
        packaged: Any = resources.files("umaserver.examples") / EXAMPLE_RULES
    except ModuleNotFoundError:
        packaged = None
    if packaged is not None and packaged.is_file():
        return Path(cleanup.enter_context(resources.as_file(packaged)))
    top_level = Path(__file__).resolve().parents[2] / EXAMPLE_RULES
    if top_level.is_file():
        return top_level
    fail(f"The example rules ({EXAMPLE_RULES}) are not installed: give --policies FILE.")


def _write_config(file: Path, port: int, database: str, rules: Path) -> None:
    """Dev's settings, written once (never over an existing file), readable by its owner only: it
    holds the secret key."""
    lines = [
        "# Written by `umaserver dev` for local development: never for production.",
        "# `umaserver dev --config` reads it again; `umaserver --config` points the CLI at it.",
        f"issuer = {toml_string(f'http://127.0.0.1:{port}')}",
        f"database = {toml_string(database)}",
        f"secret_key = {toml_string(secrets.token_urlsafe(32))}",
        "",
        "[policies]",
        f"file = {toml_string(str(rules))}",
        "",
        "[server]",
        'host = "127.0.0.1"',
        f"port = {port}",
        "",
        "[fetch]",
        "# Registrations of resource servers on this machine point at 127.0.0.1.",
        "allow_loopback = true",
        "",
    ]
    try:
        descriptor = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as error:
        fail(f"Cannot write the config {file}: {error.strerror or error}.")
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines))


def _load(file: Path) -> Config:
    try:
        config: Config = load_config(file)
    except ConfigError as error:
        fail("\n".join(error.errors))
    return config


# -- the seed ----------------------------------------------------------------------------------


def _apply_seed(config: Config, path: Path) -> list[Row]:
    """Applies the seed file (as `seed apply` does), then mints a ready token for every seeded
    user through every confidential seeded client whose scopes allow it (as `token issue` does):
    the seeded parties ("" token) and the tokens, as (kind, name, token)."""
    try:
        seed = load_seed(path)
    except ConfigError as error:  # a SeedError: every problem, with its line
        fail("\n".join(error.errors))
    store = open_storage(config.database, config.postgresql)
    try:
        try:
            apply_seed(store, seed, config, now=CLOCK.now())
        except ConfigError as error:  # what the file refers to is not there, ...
            fail("\n".join(error.errors))
        usernames = [user.username for user in seed.users]
        client_ids = [client.client_id for client in seed.clients]
        return _ready_tokens(store, config, usernames, client_ids)
    finally:
        store.close()


def _ready_tokens(
    store: Storage, config: Config, usernames: list[str], client_ids: list[str]
) -> list[Row]:
    """A token of each kind the client's scopes allow: for each user through each confidential
    client, then for each confidential client acting for itself (as `client_credentials` gives)."""
    rows: list[Row] = [("user", username, "") for username in usernames]
    issuers = []
    for client_id in client_ids:
        client = store.get_client(client_id)
        if client is None:
            continue
        confidential = client.metadata.get("token_endpoint_auth_method") != "none"
        rows.append(("client", client_id, "" if confidential else "(public: no tokens)"))
        if confidential:
            scopes = str(client.metadata.get("scope", "uma_protection uma_authorization")).split()
            issuers.append((client_id, scopes))
    holders: list[tuple[str, str | None]] = []
    for username in usernames:
        user = store.get_user_by_username(username)
        if user is not None:
            holders.append((username, user.sub))
    now, lifetime = CLOCK.now(), config.lifetimes.access_token
    for name, user_sub in [*holders, (None, None)]:
        for client_id, scopes in issuers:
            for kind, scope in TOKEN_KINDS:
                if scope not in scopes:
                    continue
                token = accounts.new_access_token()
                accounts.store_access_token(store, now, token, client_id, user_sub, scope, lifetime)
                held = f"{name} via {client_id}" if name is not None else f"{client_id} itself"
                rows.append((kind, held, token))
    return rows


# -- what dev tells a person -------------------------------------------------------------------


def _announce(
    config: Config, config_file: Path, temporary: bool, rows: list[Row], seed_path: str | None
) -> None:
    lines = [f"Serving {config.issuer}"]
    ends = " (temporary: removed when dev ends)" if temporary else ""
    lines.append(f"  database: {describe(config.database)}{ends}")
    lines.append(f"  rules:    {config.policies}")
    lines.append(f"  CLI:      umaserver --config {config_file} ...")
    parties = [row for row in rows if row[0] in ("user", "client")]
    tokens = [row for row in rows if row[0] not in ("user", "client")]
    if not parties:
        lines.append(
            "Seeded parties: none" + ("" if seed_path else " (give --seed FILE to have some)")
        )
    else:
        lines.append("Seeded parties:")
        lines.extend(
            f"  {kind:<6} {name}{'  ' + note if note else ''}" for kind, name, note in parties
        )
    if tokens:
        lines.append(f"Ready tokens (each lives {config.lifetimes.access_token} s):")
        width = max(len(name) for _, name, _ in tokens)
        lines.extend(f"  {kind:<4} {name:<{width}}  {token}" for kind, name, token in tokens)
    elif parties:
        lines.append("Ready tokens: none (no confidential seeded client with a scope for one)")
    lines.append("Pages:")
    width = max(len(name) for name, _ in PAGES)
    lines.extend(f"  {name:<{width}}  {config.url(path)}" for name, path in PAGES)
    click.echo("\n".join(lines), err=True)
    sys.stderr.flush()
