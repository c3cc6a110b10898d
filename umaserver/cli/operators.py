"""Commands for operators: OAuth clients, local users, and PATs and AATs without a browser."""

from __future__ import annotations

import json
import sys
from typing import Any
from urllib.parse import urlsplit

import click

from .. import secrets_at_rest
from ..api.bearer import SCOPE_ALIASES
from ..claims.model import REDIRECT_TYPE
from ..services import accounts
from . import CLOCK, _config, _store, emit, fail, main

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
    password_hash = _password_hash() if password_stdin else None
    created = accounts.create_user(_store(ctx), CLOCK.now(), username, password_hash, attributes)
    if created is None:
        fail(f"The username {username!r} is taken.")
    emit({"sub": created.sub})


def _password_hash() -> str:
    """The argon2id hash of the password on the first line of standard input."""
    password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        fail("No password was read from standard input.")
    return secrets_at_rest.hash_password(password)


@user.command("list")
@click.pass_context
def user_list(ctx: click.Context) -> None:
    """List the users: usernames and subs."""
    emit({"users": [{"username": u.username, "sub": u.sub} for u in _store(ctx).list_users()]})


@user.command("set-password")
@click.argument("username")
@click.option(
    "--password-stdin", is_flag=True, required=True, help="Read the password from standard input."
)
@click.pass_context
def user_set_password(ctx: click.Context, username: str, password_stdin: bool) -> None:
    """Give a user a new password (argon2id); their sessions end."""
    store = _store(ctx)
    found = store.get_user_by_username(username)
    if found is None:
        fail(f"There is no user {username!r}.")
    password_hash = _password_hash()
    with store.transaction():
        store.set_password_hash(found.sub, password_hash)
        ended = store.delete_sessions_of(found.sub)
    emit({"username": username, "password_set": True, "sessions_ended": ended})


@user.command("delete")
@click.argument("username")
@click.pass_context
def user_delete(ctx: click.Context, username: str) -> None:
    """Delete a user with their sessions, tokens and consents."""
    store = _store(ctx)
    found = store.get_user_by_username(username)
    if found is None or not store.delete_user(found.sub):
        fail(f"There is no user {username!r}.")
    emit({"deleted": username})


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
