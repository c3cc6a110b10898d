"""Bearer token validation (RFC 6750), shared by every protected endpoint.

Authlib's resource protector looks the token up and checks expiry, revocation and scope; this module
only adds the distinctions RFC 6750 section 3.1 makes and our JSON errors: no credentials -> 401 with a
bare `WWW-Authenticate: Bearer realm=...`; a malformed header -> 400 `invalid_request`; an unknown,
expired or revoked token -> 401 `invalid_token`; the wrong scope -> 403 `insufficient_scope`.
"""

from __future__ import annotations

import re
from typing import Any

from authlib.integrations.flask_oauth2 import ResourceProtector
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import TokenMixin
from authlib.oauth2.rfc6749.requests import JsonRequest
from authlib.oauth2.rfc6750 import BearerTokenValidator, InsufficientScopeError
from flask import request

from ..errors import APIError, InsufficientScope, InvalidRequest, InvalidToken, MissingToken
from ..runtime import runtime
from ..services.accounts import find_access_token
from ..storage.per_request import storage
from ..storage.records import AccessToken

PROTECTION_SCOPE = "uma_protection"
AUTHORIZATION_SCOPE = "uma_authorization"
# Legacy scope URIs of UMA 1.0, accepted as aliases of the two scopes.
SCOPE_ALIASES = {
    "http://docs.kantarainitiative.org/uma/scopes/prot.json": PROTECTION_SCOPE,
    "http://docs.kantarainitiative.org/uma/scopes/authz.json": AUTHORIZATION_SCOPE,
    PROTECTION_SCOPE: PROTECTION_SCOPE,
    AUTHORIZATION_SCOPE: AUTHORIZATION_SCOPE,
}

# RFC 6750 section 2.1: credentials = "Bearer" 1*SP b64token
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


class _StoredToken(TokenMixin):  # type: ignore[misc]
    def __init__(self, record: AccessToken) -> None:
        self.record = record

    def get_scope(self) -> str:
        return self.record.scope

    def is_expired(self) -> bool:
        return self.record.expires_at <= runtime().clock.now()

    def is_revoked(self) -> bool:
        return self.record.revoked


class _Validator(BearerTokenValidator):  # type: ignore[misc]
    def authenticate_token(self, token_string: str) -> _StoredToken | None:
        record = find_access_token(storage(), token_string)
        return _StoredToken(record) if record is not None else None


class _Protector(ResourceProtector):  # type: ignore[misc]
    def parse_request_authorization(self, req: Any) -> tuple[Any, str]:
        header = req.headers.get("Authorization")
        if not header or header.split(" ", 1)[0].lower() != "bearer":
            raise MissingToken(headers={"WWW-Authenticate": f'Bearer realm="{_realm()}"'})
        token = header[len("bearer") :].lstrip(" ")
        if not _B64TOKEN.fullmatch(token):
            raise InvalidRequest(
                "The Authorization header is not of the form 'Bearer <token>'.",
                headers={"WWW-Authenticate": f'Bearer realm="{_realm()}", error="invalid_request"'},
            )
        return self.get_token_validator("bearer"), token


_protector = _Protector()
_protector.register_token_validator(_Validator())


def _realm() -> str:
    return runtime().config.issuer


def _translate(error: OAuth2Error, scope: str) -> APIError:
    realm = _realm()
    if isinstance(error, InsufficientScopeError):
        return InsufficientScope(
            f"This endpoint needs a token with the scope '{scope}'.",
            headers={
                "WWW-Authenticate": (
                    f'Bearer realm="{realm}", error="insufficient_scope", scope="{scope}"'
                )
            },
        )
    return InvalidToken(
        headers={"WWW-Authenticate": f'Bearer realm="{realm}", error="invalid_token"'}
    )


def authenticate(scope: str) -> AccessToken:
    """The request's PAT or AAT, which must carry `scope`; raises the RFC 6750 errors."""
    try:
        # Only the Authorization header is read: not the body, and not the full URL, which
        # Authlib's Flask wrapper builds for every request at a cost.
        header = request.headers.get("Authorization")
        checked = JsonRequest(
            request.method, request.path, {} if header is None else {"Authorization": header}
        )
        stored: _StoredToken = _protector.validate_request([scope], checked)
    except OAuth2Error as error:
        raise _translate(error, scope) from None
    return stored.record
