"""Checks on a client-authenticated request (/token, /revoke) before Authlib sees it: no
parameter twice (RFC 6749 3.1), one client authentication (RFC 6749 2.3), a Basic header that
decodes, a grant type of the right syntax; and, once Authlib has authenticated the client, scopes
of the right syntax (RFC 6749 3.3) that this server offers. Authlib would accept some of these, or
answer others with a 500."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Collection
from urllib.parse import unquote

from flask import request

from ..errors import APIError, InvalidRequest, echo
from ..runtime import runtime
from ..services.clients import UMA_TICKET
from .bearer import SCOPE_ALIASES


class _TokenError(APIError):
    """An error of the token endpoint found before Authlib runs (RFC 6749 5.2 codes)."""

    def __init__(self, status: int, error: str, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.error = error
        if status == 401:
            self.headers["WWW-Authenticate"] = f'Basic realm="{runtime().config.issuer}"'


# RFC 6749 3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ), tokens separated by spaces.
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5B\x5D-\x7E]+")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_MALFORMED_BASIC = (
    "The Authorization header is not of the form 'Basic <base64 of client_id:client_secret>'"
    " with both parts UTF-8 text."
)


def _basic_client_id(header: str) -> str:
    """The client id of a well-formed `Authorization: Basic` header; raises 400 invalid_request
    for a malformed one and 401 invalid_client for another scheme."""
    scheme, _, credentials = header.partition(" ")
    if scheme.lower() != "basic":
        raise _TokenError(
            401,
            "invalid_client",
            "The token endpoint takes client credentials with HTTP Basic or in the body.",
        )
    credentials = credentials.strip(" ")
    if not _BASE64.fullmatch(credentials):
        raise InvalidRequest(_MALFORMED_BASIC)
    try:
        text = base64.b64decode(credentials, validate=True).decode("utf-8")
        client_id, colon, client_secret = text.partition(":")
        # RFC 6749 2.3.1: each part form-urlencoded; it must decode to text too.
        unquote(client_id, errors="strict")
        unquote(client_secret, errors="strict")
    except (binascii.Error, UnicodeDecodeError):
        raise InvalidRequest(_MALFORMED_BASIC) from None
    if not colon:
        raise InvalidRequest(_MALFORMED_BASIC)
    return unquote(client_id)


def check_parameters(repeatable: Collection[str] = ()) -> None:
    """No parameter twice (RFC 6749 3.1), in the query or the body or across them, except those
    `repeatable` (Keycloak's `permission`)."""
    query, form = request.args, request.form
    for source in (query, form):
        for name, values in source.lists():
            if name in repeatable:
                continue
            if len(values) > 1 or (source is form and name in query):
                raise InvalidRequest(
                    f"The parameter {echo(name)} is given more than once (RFC 6749 3.1)."
                )


def check_client_request(repeatable: Collection[str] = ()) -> None:
    """What every client-authenticated request (/token, /revoke) must be: no parameter twice
    (RFC 6749 3.1; `check_parameters`), one client authentication (RFC 6749 2.3), a Basic header
    that decodes."""
    check_parameters(repeatable)
    form = request.form
    header = request.headers.get("Authorization")
    if header is not None:
        basic_id = _basic_client_id(header)
        body_id = form.get("client_id")
        if "client_secret" in form or (body_id is not None and body_id != basic_id):
            raise InvalidRequest(
                "Authenticate the client one way only (RFC 6749 2.3): HTTP Basic, or"
                " client_id and client_secret in the body."
            )


def check_token_request(grant_types: tuple[str, ...], repeatable: Collection[str] = ()) -> None:
    """What Authlib does not refuse, or refuses with a 500, before it authenticates the client: a
    parameter twice, two client authentications, a Basic header that does not decode, a grant type
    of the wrong syntax. The scope waits for the client's authentication (`check_token_scope`)."""
    check_client_request(repeatable)
    grant_type = request.values.get("grant_type")
    if grant_type not in grant_types:
        said = "missing" if grant_type is None else f"{echo(grant_type)} is not supported"
        raise _TokenError(
            400,
            "unsupported_grant_type",
            f"grant_type: {said}; use one of the grant_types_supported.",
        )


def check_token_scope() -> None:
    """The token request's scope: of RFC 6749 3.3's syntax, each one this server offers, and
    given for client_credentials. Called once the client is authenticated, so that a client with
    a wrong secret learns only that (401 invalid_client), whatever scope it sent."""
    parameters = request.values
    grant_type = parameters.get("grant_type")
    scopes = [name for name in parameters.get("scope", "").split(" ") if name]
    if grant_type == UMA_TICKET:
        # Resource scopes, not OAuth scopes: the grant checks each against the ticket's sets.
        return
    if not scopes:
        if grant_type == "client_credentials":
            raise _TokenError(
                400,
                "invalid_scope",
                "scope: ask for the scope uma_protection or uma_authorization.",
            )
        return  # a code carries its scope; a refresh keeps the refresh token's
    if not all(_SCOPE_TOKEN.fullmatch(name) for name in scopes):
        raise _TokenError(
            400,
            "invalid_scope",
            "scope: scopes are printable ASCII without '\"' or '\\', separated by spaces"
            " (RFC 6749 3.3).",
        )
    unknown = [name for name in scopes if name not in SCOPE_ALIASES]
    if unknown:
        raise _TokenError(
            400,
            "invalid_scope",
            f"scope: {echo(unknown[0])} is unknown; ask for uma_protection or uma_authorization.",
        )
