"""OAuth 2.0 authorization server metadata (RFC 8414) at /.well-known/oauth-authorization-server,
for OAuth clients that discover the server that way (Authlib's, for one).

Like the UMA configuration document it advertises only what answers, with absolute URLs built from
`issuer`, and may be cached publicly.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from ..runtime import runtime
from .bearer import AUTHORIZATION_SCOPE, PROTECTION_SCOPE
from .code_grants import TOKEN_AUTH_METHODS
from .token import TOKEN_GRANT_TYPES

bp = Blueprint("metadata", __name__)


@bp.get("/.well-known/oauth-authorization-server")
def metadata() -> Response:
    config = runtime().config
    document = {
        "issuer": config.issuer,
        "authorization_endpoint": config.url("/authorize"),
        "token_endpoint": config.url("/token"),
        "registration_endpoint": config.url("/register"),
        "revocation_endpoint": config.url("/revoke"),
        "grant_types_supported": list(TOKEN_GRANT_TYPES),
        "response_types_supported": ["code"],
        "token_endpoint_auth_methods_supported": [*TOKEN_AUTH_METHODS, "none"],
        "revocation_endpoint_auth_methods_supported": [*TOKEN_AUTH_METHODS, "none"],
        "scopes_supported": [PROTECTION_SCOPE, AUTHORIZATION_SCOPE],
        "code_challenge_methods_supported": ["S256"],
    }
    response = jsonify(document)
    response.headers["Cache-Control"] = "public, max-age=3600"
    return response
