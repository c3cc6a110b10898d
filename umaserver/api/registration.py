"""Dynamic client registration (RFC 7591) at `/register`, and the client configuration endpoint
of RFC 7592 at `/register/<client_id>` (read, update, delete).

Registering takes an initial access token (`Authorization: Bearer`, from `registration-token
issue`) unless `[registration] open = true`. A client may push the claim types
(`uma_push_claim_types`) its initial access token lists and no others: one that registers itself
gets none. The answer carries the client's secret (none for a public client) and a registration
access token for `/register/<client_id>`; both are shown once and stored as digests. An unknown
client and a wrong registration token answer alike (401, RFC 7592 3).

Reading or updating the registration answers a new registration access token, and the one
presented stops working (RFC 7592 3: the server may issue a new one; the client must then discard
the old). The current one cannot be answered again: only its digest is kept. Of two requests that
present one token, one gets the new token and the other 401. A refused update (400) keeps the
token presented; deleting needs no new one.
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from flask import Blueprint, Response, request

from ..claims.model import ACCOUNT_CLAIM_TYPE, ACCOUNT_NOT_PUSHED, REDIRECT_TYPE
from ..error_responses import json_response
from ..errors import InvalidRequest, InvalidToken, MissingToken, echo
from ..fetching import running
from ..fetching.queue import client_uris, queue_client
from ..runtime import runtime
from ..services import clients, registration_limit, signin
from ..services.clients import ClientSettings
from ..storage.per_request import storage
from ..storage.records import Client
from .json_body import read_json_object
from .registration_schema import InvalidClientMetadata, InvalidRedirectUri, read_settings

bp = Blueprint("registration", __name__)

# RFC 6750 2.1: credentials = "Bearer" 1*SP b64token
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def _bearer_token() -> str | None:
    """The bearer token of the request; None without one. 400 for a malformed header."""
    header = request.headers.get("Authorization")
    if not header or header.split(" ", 1)[0].lower() != "bearer":
        return None
    token = header[len("bearer") :].lstrip(" ")
    if not _B64TOKEN.fullmatch(token):
        raise InvalidRequest(
            "The Authorization header is not of the form 'Bearer <token>'.",
            headers={"WWW-Authenticate": f'Bearer realm="{_realm()}", error="invalid_request"'},
        )
    return token


def _realm() -> str:
    return runtime().config.issuer


def _missing(description: str) -> MissingToken:
    return MissingToken(description, headers={"WWW-Authenticate": f'Bearer realm="{_realm()}"'})


def _invalid(description: str) -> InvalidToken:
    return InvalidToken(
        description,
        headers={"WWW-Authenticate": f'Bearer realm="{_realm()}", error="invalid_token"'},
    )


def _allowed_push_types() -> tuple[str, ...]:
    """What the registering client may push: what its initial access token lists; nothing
    without one (open registration). 401 when a token is needed or given and not live."""
    token = _bearer_token()
    if token is None:
        if runtime().config.registration.open:
            return ()
        raise _missing(
            "Registration needs an initial access token (Authorization: Bearer); an operator"
            " issues one with `registration-token issue`."
        )
    found = clients.find_initial_access_token(storage(), runtime().clock.now(), token)
    if found is None:
        raise _invalid("The initial access token is unknown or expired.")
    return found.push_claim_types


def _checked(settings: ClientSettings, allowed: tuple[str, ...], who: str) -> ClientSettings:
    if ACCOUNT_CLAIM_TYPE in settings.push_claim_types:
        raise InvalidClientMetadata(f"uma_push_claim_types: {ACCOUNT_NOT_PUSHED}.")
    beyond = [name for name in settings.push_claim_types if name not in allowed]
    if beyond:
        raise InvalidClientMetadata(
            f"uma_push_claim_types: {echo(beyond[0])} is not allowed {who}."
        )
    if REDIRECT_TYPE in settings.push_claim_types:
        raise InvalidClientMetadata(
            f"uma_push_claim_types: {REDIRECT_TYPE} is gathered by this server, not pushed."
        )
    problem = clients.settings_problem(settings)
    if problem is not None:
        code, description = problem
        kind = InvalidRedirectUri if code == "invalid_redirect_uri" else InvalidClientMetadata
        raise kind(description)
    return settings


def _body() -> dict[str, Any]:
    try:
        return read_json_object()
    except InvalidRequest as error:  # RFC 7591 3.2.2 has no invalid_request: the same words
        raise InvalidClientMetadata(error.description) from None


def _answer(client: Client, status: int, secrets: dict[str, Any] | None = None) -> Response:
    """The client information response (RFC 7591 3.2.1, RFC 7592 3); `secrets`: what was just
    issued (the client secret only at registration, a registration access token each time)."""
    document = clients.client_information(client)
    document.update(secrets or {})
    if not client.is_public:
        document["client_secret_expires_at"] = 0
    document["registration_client_uri"] = runtime().config.url(f"/register/{client.client_id}")
    return json_response(document, status)


@bp.post("/register")
def register() -> Response:
    allowed = _allowed_push_types()
    settings = _checked(
        read_settings(_body()), allowed, "by the initial access token (or without one)"
    )
    now = runtime().clock.now()
    with _counted(now):
        issued = clients.create_client(storage(), now, settings, dynamic=True)
    _queue_uris(issued.client)
    secrets: dict[str, Any] = {"registration_access_token": issued.registration_token}
    if issued.secret is not None:
        secrets["client_secret"] = issued.secret
    return _answer(issued.client, 201, secrets)


def _counted(now: int) -> AbstractContextManager[None]:
    """Open registration (no initial access token) is counted against the address's limit
    (`services.registration_limit`); the address is the one sign-in counts (after
    `[server] trusted_proxies`)."""
    if _bearer_token() is not None:
        return nullcontext()
    config = runtime().config
    address = signin.client_address(
        request.remote_addr,
        request.headers.getlist("X-Forwarded-For"),
        config.server.trusted_proxies,
    )
    return registration_limit.counted(
        storage(), now, address, config.registration.per_address_per_hour
    )


def _queue_uris(client: Client) -> None:
    """Its logo_uri and client_uri are checked in the background (issue 12), never here."""
    queue_client(storage(), client.client_id, client.metadata, runtime().clock.now())
    if client_uris(client.metadata):
        running.wake()


_NOT_THIS_CLIENTS = "The registration access token is not this client's."


def _registered(client_id: str) -> Client:
    token = _bearer_token()
    if token is None:
        raise _missing("This endpoint needs the registration access token (Bearer).")
    client = clients.find_by_registration_token(storage(), client_id, token)
    if client is None:
        raise _invalid(_NOT_THIS_CLIENTS)
    return client


@bp.get("/register/<client_id>")
def read_client(client_id: str) -> Response:
    client = _registered(client_id)
    token = clients.renew_registration_token(storage(), client)
    if token is None:  # another request with the same token renewed it first
        raise _invalid(_NOT_THIS_CLIENTS)
    return _answer(client, 200, {"registration_access_token": token})


@bp.put("/register/<client_id>")
def update_client(client_id: str) -> Response:
    client = _registered(client_id)
    body = _body()
    if body.get("client_id") != client.client_id:
        raise InvalidClientMetadata("client_id: must be given, and be this client's (RFC 7592).")
    secret = body.get("client_secret")
    if secret is not None and not (isinstance(secret, str) and client.check_secret(secret)):
        raise InvalidClientMetadata("client_secret: when given, it must be this client's.")
    settings = read_settings(body)
    if settings.is_public != client.is_public:
        raise InvalidClientMetadata(
            "token_endpoint_auth_method: a client cannot change between public (none) and"
            " confidential; register a new one."
        )
    settings = _checked(settings, client.push_claim_types, "beyond what the client had")
    done = clients.update_registration(storage(), client, settings)
    if done is None:  # deleted, or its token renewed by another request, in between
        raise _invalid(_NOT_THIS_CLIENTS)
    updated, token = done
    _queue_uris(updated)
    return _answer(updated, 200, {"registration_access_token": token})


@bp.delete("/register/<client_id>")
def delete_client(client_id: str) -> Response:
    client = _registered(client_id)
    storage().delete_client(client.client_id)
    return Response(status=204)
