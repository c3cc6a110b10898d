"""The OAuth 2.0 token endpoint, served by Authlib.

`client_credentials` issues a PAT or an AAT that acts for the client itself as owner; clients
authenticate with `client_secret_basic` or `client_secret_post`.
"""

from __future__ import annotations

from typing import Any

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, InvalidScopeError, grants, scope_to_list
from flask import Blueprint, Flask, Response, current_app

from ..runtime import runtime
from ..services.accounts import new_access_token, store_access_token
from ..storage.per_request import storage
from ..storage.records import Client
from .bearer import SCOPE_ALIASES

bp = Blueprint("oauth", __name__)
_SERVER = "umaserver.authorization_server"

TOKEN_AUTH_METHODS = ("client_secret_basic", "client_secret_post")
GRANT_TYPES = ("client_credentials",)


def normalise_scope(unverified_scope: str | None) -> str:
    """The requested scopes with legacy URIs mapped to their names; raises InvalidScopeError."""
    requested = scope_to_list(unverified_scope) or []
    if not requested:
        raise InvalidScopeError("Ask for the scope uma_protection or uma_authorization.")
    unknown = [scope for scope in requested if scope not in SCOPE_ALIASES]
    if unknown:
        raise InvalidScopeError(f"Unknown scope: {unknown[0]}")
    return " ".join(sorted({SCOPE_ALIASES[scope] for scope in requested}))


class OAuthClient(ClientMixin):  # type: ignore[misc]
    def __init__(self, client: Client) -> None:
        self.client = client

    def get_client_id(self) -> str:
        return self.client.client_id

    def get_default_redirect_uri(self) -> str | None:
        return self.client.redirect_uris[0] if self.client.redirect_uris else None

    def get_allowed_scope(self, scope: str) -> str:
        return normalise_scope(scope)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.client.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return self.client.check_secret(client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in TOKEN_AUTH_METHODS

    def check_response_type(self, response_type: str) -> bool:
        return False

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in GRANT_TYPES


class ClientCredentialsGrant(grants.ClientCredentialsGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = list(TOKEN_AUTH_METHODS)


class UMAAuthorizationServer(AuthorizationServer):  # type: ignore[misc]
    def validate_requested_scope(self, scope: str | None) -> None:
        normalise_scope(scope)


def _query_client(client_id: str) -> OAuthClient | None:
    client = storage().get_client(client_id)
    return OAuthClient(client) if client is not None else None


def _save_token(token: dict[str, Any], request: Any) -> None:
    # client_credentials: the token acts for the client itself (no user).
    store_access_token(
        storage(),
        runtime().clock.now(),
        token["access_token"],
        request.client.get_client_id(),
        None,
        token["scope"],
        int(token["expires_in"]),
    )


def _new_access_token(**_: Any) -> str:
    return new_access_token()


def init_app(app: Flask, access_token_lifetime: int) -> None:
    app.config["OAUTH2_ACCESS_TOKEN_GENERATOR"] = _new_access_token
    app.config["OAUTH2_TOKEN_EXPIRES_IN"] = {grant: access_token_lifetime for grant in GRANT_TYPES}
    server = UMAAuthorizationServer(app, query_client=_query_client, save_token=_save_token)
    server.register_grant(ClientCredentialsGrant)
    app.extensions[_SERVER] = server


@bp.post("/token")
def token() -> Response:
    server: UMAAuthorizationServer = current_app.extensions[_SERVER]
    response: Response = server.create_token_response()
    return response
