"""The command line: `python -m umaserver [--config FILE] COMMAND`.

Successful commands print JSON on stdout; errors go to stderr as plain sentences with exit status 1
(2 for usage errors, as click does).
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

import click
from flask import Flask

from . import create_app, secrets_at_rest, strict_json
from .api.bearer import SCOPE_ALIASES
from .claims.model import REDIRECT_TYPE, ClaimsError, read_claim_objects
from .claims.verifiers import ConfiguredVerifiers
from .clock import SystemClock
from .config import Config, ConfigError, load_config
from .policy.rule_file import PolicyError, load_rules
from .services import accounts, database
from .services.decision import AccessRequest, Supplier, any_client, decide_access, owner_name
from .storage import Storage, StorageError, open_storage, write_problem
from .storage.per_request import opener


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
        versions = database.prepare(config.database, CLOCK.now())
    except (StorageError, OSError) as error:
        fail(f"The database {config.database} could not be prepared: {error}")
    except accounts.ClashingUsernames as error:
        fail(str(error))
    return versions


def _store(ctx: click.Context) -> Storage:
    config = _config(ctx)
    _prepare(config)
    store = open_storage(config.database)
    ctx.call_on_close(store.close)
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
    found, left = _prepare(config)
    problem = write_problem(config.database)
    if problem is not None:
        fail(f"The database {config.database} cannot be written: {problem}.")
    emit(
        {
            "database": str(config.database),
            "status": "ready",
            "schema_version_found": found,
            "schema_version": left,
        }
    )


@main.command()
@click.option("--host", help="Address to listen on (default: server.host of the config).")
@click.option("--port", type=click.IntRange(0, 65535), help="Port (default: server.port).")
@click.option(
    "--threads", type=click.IntRange(1, 1024), help="Worker threads (default: server.threads)."
)
@click.pass_context
def serve(ctx: click.Context, host: str | None, port: int | None, threads: int | None) -> None:
    """Initialise the database and serve with waitress."""
    from .serving import configure_logging, make_server

    configure_logging()
    config = _config(ctx)
    app = _app(config)  # prepares the database, or logs why it cannot now
    handles = opener(app)
    prepared = not isinstance(handles, database.Opener) or handles.ready
    # When it could not even be prepared, create_app has said so already.
    problem = write_problem(config.database) if prepared else None
    if problem is not None:
        # Serve anyway: reads may work, writes answer 503 until the storage can be written, and
        # that happens without a restart.
        logging.getLogger("umaserver").error(
            "The database %s cannot be written: %s; requests that write answer 503 until it can.",
            config.database,
            problem,
        )
    settings = replace(
        config.server,
        host=host or config.server.host,
        port=config.server.port if port is None else port,
        threads=threads or config.server.threads,
    )
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
    server.run()


def _app(config: Config) -> Flask:
    try:
        return create_app(config)
    except PolicyError as error:
        fail(f"The rule file {config.policies} is broken:\n{error}")
    except accounts.ClashingUsernames as error:
        fail(str(error))
    except StorageError as error:  # a database newer than this code, a broken migration
        fail(f"The database {config.database} could not be prepared: {error}")
    except ValueError as error:  # a broken JWKS file of an OIDC issuer
        fail(str(error))


# -- clients -----------------------------------------------------------------------------------


@main.group()
def client() -> None:
    """OAuth clients: resource servers and requesting parties' clients."""


def _check_redirect_uri(uri: str) -> str:
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
        fail(f"The redirect URI {uri!r} is not an absolute http(s) URI without a fragment.")
    return uri


@client.command("create")
@click.option("--name", required=True, help="A name shown to people.")
@click.option("--redirect-uri", "redirect_uris", multiple=True, help="A redirect URI (repeatable).")
@click.option(
    "--push-claims",
    "push_types",
    multiple=True,
    help="A claim type this client may push (repeatable).",
)
@click.pass_context
def client_create(
    ctx: click.Context, name: str, redirect_uris: tuple[str, ...], push_types: tuple[str, ...]
) -> None:
    """Register a client; its secret is shown once."""
    if not name.strip():
        fail("The client name must not be empty.")
    uris = [_check_redirect_uri(uri) for uri in redirect_uris]
    for claim_type in push_types:
        if not claim_type.strip():
            fail("A claim type must not be empty.")
        if claim_type == REDIRECT_TYPE:
            fail(f"{REDIRECT_TYPE} is gathered by this server, not pushed by a client.")
    created, secret = accounts.create_client(
        _store(ctx), CLOCK.now(), name, uris, list(dict.fromkeys(push_types))
    )
    emit({"client_id": created.client_id, "client_secret": secret})


# -- users -------------------------------------------------------------------------------------


@main.group()
def user() -> None:
    """Local users: resource owners and requesting parties."""


def _claim(text: str) -> tuple[str, Any]:
    name, sep, raw = text.partition("=")
    if not sep or not name:
        fail(f"The claim {text!r} is not of the form NAME=VALUE.")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return name, value


@user.command("create")
@click.argument("username")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@click.option("--claim", "claims", multiple=True, help="NAME=VALUE; a JSON VALUE is taken as JSON.")
@click.pass_context
def user_create(
    ctx: click.Context, username: str, password_stdin: bool, claims: tuple[str, ...]
) -> None:
    """Create a local user."""
    if not username or username != username.strip() or any(c.isspace() for c in username):
        fail("The username must be non-empty and have no white space.")
    if (problem := accounts.username_problem(username)) is not None:
        fail(problem)
    attributes: dict[str, Any] = {}
    for text in claims:
        name, value = _claim(text)
        if name in attributes:
            fail(f"The claim {name!r} is given twice.")
        attributes[name] = value
    password_hash = None
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
        if not password:
            fail("No password was read from standard input.")
        password_hash = secrets_at_rest.hash_password(password)
    created = accounts.create_user(_store(ctx), CLOCK.now(), username, password_hash, attributes)
    if created is None:
        fail(f"The username {username!r} is taken.")
    emit({"sub": created.sub})


# -- tokens ------------------------------------------------------------------------------------


@main.group()
def token() -> None:
    """PATs and AATs for operators, without a browser."""


@token.command("issue")
@click.option("--client", "client_id", required=True, help="The client the token is issued to.")
@click.option("--user", "username", required=True, help="The user the token acts for.")
@click.option(
    "--scope",
    required=True,
    type=click.Choice(["uma_protection", "uma_authorization"]),
    help="uma_protection (a PAT) or uma_authorization (an AAT).",
)
@click.pass_context
def token_issue(ctx: click.Context, client_id: str, username: str, scope: str) -> None:
    """Issue a PAT or an AAT for a user through a client."""
    config = _config(ctx)
    store = _store(ctx)
    if store.get_client(client_id) is None:
        fail(f"There is no client {client_id!r}.")
    found = store.get_user_by_username(username)
    if found is None:
        fail(f"There is no user {username!r}.")
    access_token = accounts.new_access_token()
    lifetime = config.lifetimes.access_token
    accounts.store_access_token(
        store, CLOCK.now(), access_token, client_id, found.sub, SCOPE_ALIASES[scope], lifetime
    )
    emit({"access_token": access_token, "token_type": "Bearer", "expires_in": lifetime})


@token.command("revoke")
@click.argument("token_value", metavar="TOKEN")
@click.pass_context
def token_revoke(ctx: click.Context, token_value: str) -> None:
    """Revoke a PAT or an AAT."""
    if not accounts.revoke_access_token(_store(ctx), token_value):
        fail("No live token matches.")
    emit({"revoked": True})


# -- policies ----------------------------------------------------------------------------------


@main.group()
def policy() -> None:
    """The owners' rule file: check it, and explain decisions."""


@policy.command("check")
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.pass_context
def policy_check(ctx: click.Context, file: str | None) -> None:
    """Validate a rule file (default: `policies` of the config), naming every error."""
    path = Path(file) if file is not None else _config(ctx).policies
    if not path.exists():
        fail(
            f"There is no rule file {path} (a server would run with no rules: nothing accessible)."
        )
    try:
        rules = load_rules(path)
    except PolicyError as error:
        fail(f"{path}:\n{error}")
    emit({"file": str(path), "valid": True, "rules": [rule.id for rule in rules.rules]})


@policy.command("explain")
@click.option("--owner", required=True, help="The resource owner's username.")
@click.option("--resource-set", "rs_id", required=True, help="The resource set's _id.")
@click.option(
    "--scope", "scopes", required=True, multiple=True, help="A requested scope (repeatable)."
)
@click.option(
    "--claims",
    "claims_file",
    required=True,
    type=click.File("r"),
    help="A JSON array of claim objects, as in an authorization request ('-' for stdin).",
)
@click.option(
    "--client",
    "client_id",
    help=(
        "The pushing client: its claim types, and its id as issuer of plain claims (default: a"
        " client that may push every type, with every issuer the rules name vouching)."
    ),
)
@click.pass_context
def policy_explain(
    ctx: click.Context,
    owner: str,
    rs_id: str,
    scopes: tuple[str, ...],
    claims_file: Any,
    client_id: str | None,
) -> None:
    """Print the decision for a request, the rule that decided it, and why each other rule did not."""
    config = _config(ctx)
    store = _store(ctx)
    resource_set = store.find_resource_set(rs_id)
    if resource_set is None or owner_name(store, resource_set.owner) != owner:
        fail(f"{owner!r} has no resource set {rs_id!r}.")
    try:
        objects = strict_json.loads(claims_file.read())
    except ValueError as error:
        fail(f"The claims file is not JSON: {error}")
    if not isinstance(objects, list) or not all(
        isinstance(o, dict) and isinstance(o.get("type"), str) and isinstance(o.get("value"), dict)
        for o in objects
    ):
        fail(
            "The claims file must be a JSON array of objects with a string type and an object value."
        )
    try:
        rules = load_rules(config.policies)
    except PolicyError as error:
        fail(f"The rule file {config.policies} is broken:\n{error}")
    verifiers = ConfiguredVerifiers(config)
    verifiers.key_sets.refresh_now()
    if client_id is not None:
        found = store.get_client(client_id)
        if found is None:
            fail(f"There is no client {client_id!r}.")
        supplier = Supplier.of(client_id, found.push_claim_types, verifiers)
    else:
        supplier = any_client(rules, owner, objects, verifiers, store)
    try:
        pushed = read_claim_objects(
            objects, supplier.client_id, supplier.push_types, verifiers, CLOCK.now()
        )
    except ClaimsError as error:
        fail(error.description)
    decision = decide_access(
        rules,
        AccessRequest(
            owner=owner,
            resource_set=resource_set,
            scopes=tuple(scopes),
            client=supplier,
            requesting_party="-",
            claims=list(pushed.claims),
        ),
    )
    emit(decision.as_dict())
