"""Token revocation (RFC 7009) at /revoke: a client revokes its own access or refresh tokens, or
persisted claims tokens (UMA 2.0 PCTs).

The client authenticates as at /token (Basic, body, or `none` for a public client; the same checks
of repeated parameters and of the Basic header). `token` is required; `token_type_hint`
(`access_token` or `refresh_token`) says where to look first. Revoking a refresh token revokes the
whole family issued under its grant (RFC 7009 2.1); an access token takes its RPTs along. An unknown
token, another client's, or one revoked already: 200 and nothing happens (RFC 7009 2.2).
"""

from __future__ import annotations

from typing import Any

from authlib.consts import default_json_headers
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import InvalidRequestError
from authlib.oauth2.rfc7009 import RevocationEndpoint as _RevocationEndpoint
from flask import Blueprint, Flask, Response, current_app

from ..services.grants import revoke_for_client
from ..storage.per_request import storage
from .client_requests import check_client_request
from .code_grants import TOKEN_AUTH_METHODS
from .token import _SERVER, UMAAuthorizationServer

bp = Blueprint("revocation", __name__)

TOKEN_TYPE_HINTS = ("access_token", "refresh_token")


class RevocationEndpoint(_RevocationEndpoint):  # type: ignore[misc]
    CLIENT_AUTH_METHODS = [*TOKEN_AUTH_METHODS, "none"]
    SUPPORTED_TOKEN_TYPES = TOKEN_TYPE_HINTS

    def create_endpoint_response(self, request: Any) -> tuple[int, dict[str, Any], Any]:
        client = self.authenticate_endpoint_client(request)
        token = request.form.get("token")
        if not token:
            raise InvalidRequestError("token: missing; send the token to revoke.")
        hint = request.form.get("token_type_hint")
        if hint is not None and hint not in TOKEN_TYPE_HINTS:
            # RFC 7009 2.2.1; Authlib's own error for it is a 401.
            raise OAuth2Error(
                "token_type_hint: use access_token or refresh_token (or none).",
                status_code=400,
                error="unsupported_token_type",
            )
        revoke_for_client(storage(), token, client.get_client_id(), hint)
        return 200, {}, default_json_headers


def init_app(app: Flask) -> None:
    """After `token.init_app`: the endpoint runs on its authorization server."""
    app.extensions[_SERVER].register_endpoint(RevocationEndpoint)


@bp.post("/revoke")
def revoke() -> Response:
    check_client_request()
    server: UMAAuthorizationServer = current_app.extensions[_SERVER]
    response: Response = server.create_endpoint_response(RevocationEndpoint.ENDPOINT_NAME)
    return response
