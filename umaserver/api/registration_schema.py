"""The client metadata of RFC 7591 2 as `/register` reads it: one marshmallow schema, then
`ClientSettings`. Unknown members are ignored and never stored (RFC 7591 2); a member of the wrong
type or out of bounds is `invalid_client_metadata`, a bad redirect URI `invalid_redirect_uri`."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate

from ..errors import APIError
from ..services.clients import (
    AUTH_METHODS,
    GRANT_TYPES,
    MAX_REDIRECT_URI,
    RESPONSE_TYPES,
    SCOPES,
    ClientSettings,
    redirect_uri_problem,
)
from .bearer import SCOPE_ALIASES
from .schemas import _first_message, _not_blank

MAX_NAME = 200
MAX_URI = 2000
MAX_REDIRECT_URIS = 32
MAX_PUSH_TYPES = 32
MAX_CLAIM_TYPE = 256


class InvalidClientMetadata(APIError):
    error = "invalid_client_metadata"
    description = "The client metadata is invalid."


class InvalidRedirectUri(APIError):
    error = "invalid_redirect_uri"
    description = "A redirect URI is invalid."


def _text(value: str) -> None:
    _not_blank(value)
    if any(not c.isprintable() for c in value):
        raise ValidationError("Must not hold control characters.")


def _redirect_uri(value: str) -> None:
    problem = redirect_uri_problem(value)
    if problem is not None:
        raise ValidationError(f"The redirect URI {problem}.")


def _page_uri(value: str) -> None:
    """logo_uri and client_uri: shown to people (as untrusted content), never fetched here."""
    if not value.isascii() or any(c.isspace() or not c.isprintable() for c in value):
        raise ValidationError("Must be ASCII without white space.")
    try:
        parts = urlsplit(value)
    except ValueError:
        raise ValidationError("Must be an absolute http or https URI.") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        raise ValidationError("Must be an absolute http or https URI without user information.")


def _scope(value: str) -> None:
    names = value.split(" ")
    if not value or any(name not in SCOPE_ALIASES for name in names):
        raise ValidationError(f"Must be one or both of {' and '.join(SCOPES)}, space-separated.")


class ClientMetadata(Schema):
    class Meta:
        unknown = EXCLUDE

    client_name = fields.String(validate=[validate.Length(max=MAX_NAME), _text])
    redirect_uris = fields.List(
        fields.String(validate=[validate.Length(min=1, max=MAX_REDIRECT_URI), _redirect_uri]),
        validate=validate.Length(max=MAX_REDIRECT_URIS),
    )
    grant_types = fields.List(
        fields.String(validate=validate.OneOf(GRANT_TYPES)),
        validate=validate.Length(max=len(GRANT_TYPES) * 2),
    )
    response_types = fields.List(
        fields.String(validate=validate.OneOf(RESPONSE_TYPES)),
        validate=validate.Length(max=len(RESPONSE_TYPES) * 2),
    )
    token_endpoint_auth_method = fields.String(validate=validate.OneOf(AUTH_METHODS))
    logo_uri = fields.String(validate=[validate.Length(min=1, max=MAX_URI), _page_uri])
    client_uri = fields.String(validate=[validate.Length(min=1, max=MAX_URI), _page_uri])
    scope = fields.String(validate=[validate.Length(max=MAX_URI), _scope])
    uma_push_claim_types = fields.List(
        fields.String(validate=[validate.Length(max=MAX_CLAIM_TYPE), _text]),
        validate=validate.Length(max=MAX_PUSH_TYPES),
    )
    # UMA 2.0 Grant 3.3.2: where the claims interaction endpoint may send a person back.
    claims_redirect_uris = fields.List(
        fields.String(validate=[validate.Length(min=1, max=MAX_REDIRECT_URI), _redirect_uri]),
        validate=validate.Length(max=MAX_REDIRECT_URIS),
    )


_SCHEMA = ClientMetadata()


def _unique_in_order(values: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def read_settings(body: dict[str, Any]) -> ClientSettings:
    """The settings `body` asks for, with RFC 7591's defaults; raises InvalidRedirectUri or
    InvalidClientMetadata naming the member. Consistency is `settings_problem`'s to check."""
    try:
        loaded: dict[str, Any] = _SCHEMA.load(body)
    except ValidationError as error:
        messages: Any = error.messages
        for member in ("redirect_uris", "claims_redirect_uris"):
            if isinstance(messages, dict) and member in messages:
                raise InvalidRedirectUri(_first_message({member: messages[member]})) from None
        raise InvalidClientMetadata(_first_message(messages)) from None
    defaults = ClientSettings()
    scope = loaded.get("scope")
    scopes = defaults.scope
    if scope is not None:
        asked = {SCOPE_ALIASES[name] for name in scope.split(" ")}
        scopes = tuple(name for name in SCOPES if name in asked)
    # RFC 7591 2: grant_types defaults to authorization_code, response_types to code; a client
    # that gives only one of them gets the other to match it.
    grant_types = loaded.get("grant_types")
    response_types = loaded.get("response_types")
    if grant_types is None:
        code = response_types is None or "code" in response_types
        grant_types = ["authorization_code"] if code else []
    if response_types is None:
        response_types = ["code"] if "authorization_code" in grant_types else []
    return ClientSettings(
        name=loaded.get("client_name", ""),
        redirect_uris=tuple(loaded.get("redirect_uris", ())),
        grant_types=_unique_in_order(grant_types),
        response_types=_unique_in_order(response_types),
        token_endpoint_auth_method=loaded.get(
            "token_endpoint_auth_method", defaults.token_endpoint_auth_method
        ),
        scope=scopes,
        logo_uri=loaded.get("logo_uri"),
        client_uri=loaded.get("client_uri"),
        push_claim_types=_unique_in_order(loaded.get("uma_push_claim_types", [])),
        claims_redirect_uris=_unique_in_order(loaded.get("claims_redirect_uris", [])),
    )
