"""The OAuth 2.0 token endpoint, served by Authlib.

`client_credentials` issues a PAT or an AAT that acts for the client itself as owner; clients
authenticate with `client_secret_basic` or `client_secret_post`, one of them (RFC 6749 2.3).

The request is checked here before Authlib sees it: no parameter twice (RFC 6749 3.1), one client
authentication, a Basic header that decodes, a grant type of the right syntax; its scopes once
Authlib has authenticated the client. Every error, Authlib's too, is written by `error_responses`
with an `error_description`.
"""

from __future__ import annotations

import logging
from typing import Any

from authlib.common.urls import add_params_to_uri
from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.integrations.flask_oauth2.requests import FlaskOAuth2Payload, FlaskOAuth2Request
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import (
    InsecureTransportError,
    OAuth2Request,
    grants,
)
from flask import Blueprint, Flask, Response, current_app
from flask import request as flask_request

from ..error_responses import error_response, json_response
from ..errors import InvalidRequest
from ..runtime import runtime
from ..services.accounts import new_access_token, store_access_token
from ..services.clients import UMA_TICKET
from ..storage.per_request import storage
from .client_requests import check_token_request, check_token_scope
from .code_grants import (
    TOKEN_AUTH_METHODS,
    OAuthClient,
    new_refresh_token,
    normalise_scope,
    register_grants,
)
from .uma_grant import UmaTicketGrant

bp = Blueprint("oauth", __name__)
log = logging.getLogger("umaserver.oauth")
_SERVER = "umaserver.authorization_server"

# The OAuth grants that issue PATs and AATs (the 1.0 configuration document lists these)...
GRANT_TYPES = ("client_credentials", "authorization_code", "refresh_token")
# ... and every grant /token serves: UMA 2.0's uma-ticket grant issues RPTs.
TOKEN_GRANT_TYPES = (*GRANT_TYPES, UMA_TICKET)


class ClientCredentialsGrant(grants.ClientCredentialsGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = list(TOKEN_AUTH_METHODS)


_DESCRIPTIONS = {
    "invalid_client": "The client is unknown or its credentials are wrong.",
    "invalid_request": "The token request is malformed.",
    "invalid_scope": "Ask for the scope uma_protection or uma_authorization.",
    "unsupported_grant_type": (
        "The grant types here are client_credentials, authorization_code and refresh_token."
    ),
    "unauthorized_client": "This client may not use this grant type.",
    "invalid_grant": "The grant is invalid.",
}


class PublicRequest(FlaskOAuth2Request):  # type: ignore[misc]
    """The request at the URL the world used: the configured issuer's, when that is https.
    Behind a reverse proxy that terminates TLS the app sees plain http, and Authlib's transport
    check (RFC 6749 3.1, 3.2: TLS required) must look at the public URL, not the proxy's hop.
    With an http issuer the request's own URL is checked (loopback passes), and a refusal is a
    400 that says why, never a 500."""

    def __init__(self, flask_request: Any) -> None:
        # Authlib reads the request's form and headers many times: from the request itself, not
        # through Flask's context-local proxy each time.
        flask_request = flask_request._get_current_object()
        public = runtime().config.url(flask_request.full_path.rstrip("?"))
        # Only the scheme and host of the request's own URL are checked: built from the WSGI
        # values, without the IRI decoding of `request.url` that costs more than the check.
        uri = (
            public
            if public.startswith("https://")
            else f"{flask_request.scheme}://{flask_request.host}{flask_request.full_path}"
        )
        try:
            OAuth2Request.__init__(
                self, method=flask_request.method, uri=uri, headers=flask_request.headers
            )
        except InsecureTransportError:
            raise InvalidRequest(
                "OAuth needs TLS: this server's issuer must be an https URL (plain http only on"
                " a loopback host)."
            ) from None
        self._request = flask_request
        self.payload = FlaskOAuth2Payload(flask_request)


class UMAAuthorizationServer(AuthorizationServer):  # type: ignore[misc]
    def authenticate_client(self, request: Any, methods: Any, endpoint: str = "token") -> Any:
        """The client first, then the token request's scope: a wrong secret is 401
        invalid_client even beside a bad scope (RFC 6749 5.2)."""
        client = super().authenticate_client(request, methods, endpoint)
        if endpoint == "token":
            check_token_scope()
        return client

    def validate_requested_scope(self, scope: str | None) -> None:
        normalise_scope(scope)

    def create_oauth2_request(self, request: Any) -> PublicRequest:
        return PublicRequest(flask_request)

    def handle_response(self, status_code: int, payload: Any, headers: Any) -> Response:
        """A JSON answer (a token; Keycloak's list of permissions) in the API's one writer; a
        redirect as Authlib writes it."""
        if not isinstance(payload, (dict, list)):
            response: Response = super().handle_response(status_code, payload, headers)
            return response
        own = {"content-type", "cache-control", "pragma"}  # json_response writes these
        return json_response(
            payload,
            status_code,
            {name: value for name, value in headers if name.lower() not in own},
        )

    def handle_error_response(self, request: Any, error: OAuth2Error) -> Response:
        """Authlib's errors in our one shape, each with an error_description; an error of the
        authorization endpoint whose redirect URI was checked goes back there (RFC 6749
        4.1.2.1)."""
        code = error.error or "invalid_request"
        description = error.description or _DESCRIPTIONS.get(code, "The token request failed.")
        if error.redirect_uri:
            return authorization_error_redirect(error.redirect_uri, code, description, error.state)
        if code == "invalid_client":
            description = _DESCRIPTIONS["invalid_client"]  # Authlib's names its internals
        status = error.status_code or 400
        headers = {}
        if status == 401:
            headers["WWW-Authenticate"] = f'Basic realm="{runtime().config.issuer}"'
        return error_response(status, code, description, headers)


def authorization_error_redirect(
    redirect_uri: str, error: str, description: str, state: str | None
) -> Response:
    """An error of /authorize sent back to the client's (checked) redirect URI."""
    params = [("error", error), ("error_description", description)]
    if state is not None:
        params.append(("state", state))
    response = Response(status=302)
    response.headers["Location"] = add_params_to_uri(redirect_uri, params)
    return response


def _query_client(client_id: str) -> OAuthClient | None:
    client = storage().get_client(client_id)
    return OAuthClient(client) if client is not None else None


def _save_token(token: dict[str, Any], request: Any) -> None:
    # client_credentials: the token acts for the client itself (no user).
    log.info(
        "token issued client_id=%r user_sub=None scope=%r refresh=no",
        request.client.get_client_id(),
        token["scope"],
    )
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
    app.config["OAUTH2_REFRESH_TOKEN_GENERATOR"] = new_refresh_token
    app.config["OAUTH2_TOKEN_EXPIRES_IN"] = {grant: access_token_lifetime for grant in GRANT_TYPES}
    server = UMAAuthorizationServer(app, query_client=_query_client, save_token=_save_token)
    server.register_grant(ClientCredentialsGrant)
    register_grants(server)
    server.register_grant(UmaTicketGrant)
    app.extensions[_SERVER] = server


def authorization_server() -> UMAAuthorizationServer:
    """The app's Authlib authorization server (for /authorize)."""
    server: UMAAuthorizationServer = current_app.extensions[_SERVER]
    return server


@bp.post("/token")
def token() -> Response:
    check_token_request(TOKEN_GRANT_TYPES)
    server: UMAAuthorizationServer = current_app.extensions[_SERVER]
    response: Response = server.create_token_response()
    return response
