"""Commands for operators: OAuth clients, initial access tokens for /register, local users, and
PATs and AATs without a browser."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from .. import secrets_at_rest
from ..api.bearer import SCOPE_ALIASES
from ..services import accounts, clients, identity_links, signin
from . import CLOCK, _config, _store, emit, fail, main

# -- clients -----------------------------------------------------------------------------------


@main.group()
def client() -> None:
    """OAuth clients: resource servers and requesting parties' clients."""


def _check_redirect_uri(uri: str) -> str:
    problem = clients.redirect_uri_problem(uri)
    if problem is not None:
        fail(f"The redirect URI {uri!r} {problem}.")
    return uri


def _scopes(given: tuple[str, ...]) -> tuple[str, ...]:
    names = [name for text in given for name in text.split()]
    for name in names:
        if name not in SCOPE_ALIASES:
            fail(f"The scope {name!r} is unknown; give uma_protection or uma_authorization.")
    asked = {SCOPE_ALIASES[name] for name in names}
    return tuple(name for name in clients.SCOPES if name in asked) or clients.SCOPES


def _page_uri(option: str, uri: str | None) -> str | None:
    if uri is not None and (problem := clients.page_uri_problem(uri)) is not None:
        fail(f"{option}: {uri!r} {problem}.")
    return uri


def _check_push_types(push_types: tuple[str, ...]) -> None:
    for claim_type in push_types:
        if (problem := clients.push_claim_type_problem(claim_type)) is not None:
            fail(problem)


@client.command("create")
@click.option("--name", required=True, help="A name shown to people.")
@click.option("--redirect-uri", "redirect_uris", multiple=True, help="A redirect URI (repeatable).")
@click.option(
    "--push-claims",
    "push_types",
    multiple=True,
    help="A claim type this client may push (repeatable).",
)
@click.option("--public", is_flag=True, help="A public client: no secret (auth method none).")
@click.option(
    "--grant-type",
    "grant_types",
    multiple=True,
    type=click.Choice(clients.GRANT_TYPES),
    help="A grant type (repeatable). Default: client_credentials and UMA 2.0's"
    " urn:ietf:params:oauth:grant-type:uma-ticket (not for a public client), and"
    " authorization_code and refresh_token when redirect URIs are given.",
)
@click.option(
    "--claims-redirect-uri",
    "claims_redirect_uris",
    multiple=True,
    help="Where UMA 2.0's claims interaction endpoint may send a person back (repeatable; exact"
    " match, the rules of --redirect-uri).",
)
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    help="uma_protection and/or uma_authorization (repeatable; default both).",
)
@click.option("--logo-uri", help="The client's logo, shown to people as not verified.")
@click.option("--client-uri", help="The client's home page, shown to people as not verified.")
@click.pass_context
def client_create(
    ctx: click.Context,
    name: str,
    redirect_uris: tuple[str, ...],
    push_types: tuple[str, ...],
    public: bool,
    grant_types: tuple[str, ...],
    claims_redirect_uris: tuple[str, ...],
    scopes: tuple[str, ...],
    logo_uri: str | None,
    client_uri: str | None,
) -> None:
    """Register a client, as /register does; its secret is shown once."""
    if not name.strip():
        fail("The client name must not be empty.")
    uris = tuple(_check_redirect_uri(uri) for uri in redirect_uris)
    _check_push_types(push_types)
    claims_uris = tuple(_check_redirect_uri(uri) for uri in claims_redirect_uris)
    settings = clients.declared_settings(
        name=name,
        redirect_uris=uris,
        push_claim_types=push_types,
        public=public,
        grant_types=grant_types,
        claims_redirect_uris=claims_uris,
        scopes=_scopes(scopes),
        logo_uri=_page_uri("--logo-uri", logo_uri),
        client_uri=_page_uri("--client-uri", client_uri),
    )
    problem = clients.settings_problem(settings)
    if problem is not None:
        fail(problem[1])
    issued = clients.create_client(_store(ctx), CLOCK.now(), settings)
    made: dict[str, str] = {"client_id": issued.client.client_id}
    if issued.secret is not None:
        made["client_secret"] = issued.secret
    emit(made)


@client.command("list")
@click.pass_context
def client_list(ctx: click.Context) -> None:
    """Every client with its registered metadata (never a secret), oldest first."""
    emit(
        [
            {
                **clients.client_information(found),
                "registered_at_register": found.registration_digest is not None,
            }
            for found in _store(ctx).list_clients()
        ]
    )


@client.command("delete")
@click.argument("client_id")
@click.pass_context
def client_delete(ctx: click.Context, client_id: str) -> None:
    """Delete a client with every token issued to it and everything it registered."""
    if not _store(ctx).delete_client(client_id):
        fail(f"There is no client {client_id!r}.")
    emit({"deleted": client_id})


@client.command("rotate-secret")
@click.argument("client_id")
@click.pass_context
def client_rotate_secret(ctx: click.Context, client_id: str) -> None:
    """Give a confidential client a new secret, shown once; the old one stops working."""
    try:
        secret = clients.rotate_secret(_store(ctx), client_id)
    except ValueError as error:
        fail(str(error))
    if secret is None:
        fail(f"There is no client {client_id!r}.")
    emit({"client_id": client_id, "client_secret": secret})


# -- initial access tokens for /register -------------------------------------------------------


@main.group("registration-token")
def registration_token() -> None:
    """Initial access tokens: what /register asks for unless [registration] open = true."""


@registration_token.command("issue")
@click.option(
    "--push-claims",
    "push_types",
    multiple=True,
    help="A claim type clients registered with this token may push (repeatable; default none).",
)
@click.option(
    "--expires-in",
    type=click.IntRange(1, 365 * 24 * 3600),
    default=24 * 3600,
    show_default=True,
    help="Seconds the token can be used for (any number of registrations until then).",
)
@click.pass_context
def registration_token_issue(
    ctx: click.Context, push_types: tuple[str, ...], expires_in: int
) -> None:
    """Mint an initial access token (RFC 7591 3), shown once and stored as a digest."""
    _check_push_types(push_types)
    allowed = tuple(dict.fromkeys(push_types))
    token = clients.issue_initial_access_token(_store(ctx), CLOCK.now(), allowed, expires_in)
    emit(
        {
            "initial_access_token": token,
            "token_type": "Bearer",
            "expires_in": expires_in,
            "push_claim_types": list(allowed),
        }
    )


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
    if (problem := accounts.new_username_problem(username)) is not None:
        fail(problem)
    attributes: dict[str, Any] = {}
    for text in claims:
        name, value = _claim(text)
        if name in attributes:
            fail(f"The claim {name!r} is given twice.")
        attributes[name] = value
    password_hash = _password_hash(ctx) if password_stdin else None
    created = accounts.create_user(_store(ctx), CLOCK.now(), username, password_hash, attributes)
    if created is None:
        fail(f"The username {username!r} is taken.")
    emit({"sub": created.sub})


def _password_hash(ctx: click.Context) -> str:
    """The argon2id hash of the password on the first line of standard input; at least
    `[signin] min_password_length` characters and at most what sign-in reads."""
    password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        fail("No password was read from standard input.")
    if (problem := signin.password_problem(password, _config(ctx).signin)) is not None:
        fail(problem)
    return secrets_at_rest.hash_password(password)


@user.command("list")
@click.pass_context
def user_list(ctx: click.Context) -> None:
    """List the users: usernames, subs and the external identities linked to each."""
    store = _store(ctx)
    emit(
        {
            "users": [
                {
                    "username": u.username,
                    "sub": u.sub,
                    "links": [
                        {"issuer": issuer, "subject": subject}
                        for issuer, subject in store.links_of(u.sub)
                    ],
                }
                for u in store.list_users()
            ]
        }
    )


_ISSUER = click.option(
    "--issuer", required=True, help="The provider's issuer, as in [[oidc_issuers]]."
)
_SUBJECT = click.option("--subject", required=True, help="The person's sub at that provider.")


@user.command("link")
@click.argument("username")
@_ISSUER
@_SUBJECT
@click.pass_context
def user_link(ctx: click.Context, username: str, issuer: str, subject: str) -> None:
    """Link an identity at an external OpenID Connect provider to a user: signing in there signs
    the user in here. An identity is linked to one user at most."""
    config = _config(ctx)
    problem = identity_links.link_problem(
        _store(ctx), config.oidc_issuers, CLOCK.now(), username, issuer, subject
    )
    if problem is not None:
        fail(problem)
    emit({"username": username, "linked": {"issuer": issuer, "subject": subject}})


@user.command("unlink")
@click.argument("username")
@_ISSUER
@_SUBJECT
@click.pass_context
def user_unlink(ctx: click.Context, username: str, issuer: str, subject: str) -> None:
    """Unlink an identity at an external OpenID Connect provider from a user."""
    problem = identity_links.unlink_problem(_store(ctx), username, issuer, subject)
    if problem is not None:
        fail(problem)
    emit({"username": username, "unlinked": {"issuer": issuer, "subject": subject}})


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
    ended = accounts.set_password_hash(store, found.sub, _password_hash(ctx))
    emit({"username": username, "password_set": True, "sessions_ended": ended})


@user.command("unlock")
@click.argument("username")
@click.pass_context
def user_unlock(ctx: click.Context, username: str) -> None:
    """End the lockout of a name after failed sign-ins, from everywhere and from every address
    (a new password does not). A name that is no account succeeds too: its failures are counted
    all the same."""
    forgotten = signin.unlock(_store(ctx), username)
    emit({"username": username, "unlocked": True, "failures_forgotten": forgotten})


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
