"""Keycloak's URL layout for one realm (`[keycloak] realm = "NAME"`), under /realms/NAME: a second
face of this server for Keycloak's client libraries, not a second server. Each route is a thin
adapter over what the standard paths do, answering as Keycloak does where its answers differ:

* `/.well-known/uma2-configuration` and `/.well-known/openid-configuration`: the issuer is
  `{issuer}/realms/NAME`, every endpoint at the realm's paths;
* `/protocol/openid-connect/token`: /token, with Keycloak's forms (`client_credentials` with
  `scope=openid` and the empty `username`, `password`, `code`, `redirect_uri` python-keycloak adds
  issues the client a PAT; the uma-ticket grant takes a person's token as its Bearer credential,
  and `audience` with `permission` instead of a ticket: see `api.uma_grant`);
* `/protocol/openid-connect/auth`: the authorization page (/authorize), same query;
* `/protocol/openid-connect/token/introspect`: introspection for a client authenticated by its
  secret (a Bearer header beside it is tolerated): an RPT shows its permissions on the sets that
  client registered;
* `/protocol/openid-connect/revoke`: /revoke;
* `/protocol/openid-connect/certs`: the keys of /jwks (JWT RPTs);
* `/authz/protection/permission`: /permission.

Not served: `/userinfo` and `/logout` (this server is no OpenID provider), Keycloak's admin API,
other realms. The resource registration and user-managed policy APIs of the realm are blueprints
of their own (`keycloak_resources`, `keycloak_policies`).
"""

from __future__ import annotations

from typing import Any

from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import InvalidRequestError
from flask import Blueprint, Response, current_app, redirect, request
from werkzeug.datastructures import ImmutableMultiDict
from werkzeug.wrappers import Response as BaseResponse

from ..errors import APIError, InvalidClient, InvalidRequest
from ..runtime import runtime
from ..services.clients import UMA_TICKET
from ..services.rpts import introspect_rpt_for_client
from ..storage.per_request import storage
from . import discovery, introspection, jwks, permissions, revocation
from .bearer import AUTHORIZATION_SCOPE, PROTECTION_SCOPE
from .client_requests import check_parameters, check_token_request
from .code_grants import TOKEN_AUTH_METHODS
from .token import _SERVER, TOKEN_GRANT_TYPES, UMAAuthorizationServer
from .uma_grant import mark_keycloak_request

bp = Blueprint("keycloak_realm", __name__)

_OIDC = "/protocol/openid-connect"
# What python-keycloak sends empty beside a client_credentials request.
_EMPTY_EXTRAS = ("username", "password", "code", "redirect_uri")


def realm_issuer() -> str:
    config = runtime().config
    assert config.keycloak.realm is not None  # the blueprint is only registered with a realm
    return f"{config.issuer}/realms/{config.keycloak.realm}"


def realm_url(path: str) -> str:
    return realm_issuer() + path


def uma2_document() -> dict[str, object]:
    """The standard UMA 2.0 document (`discovery.document_2`) with the realm's issuer and paths,
    and Keycloak's `policy_endpoint`."""
    document = discovery.document_2()
    document.update(
        issuer=realm_issuer(),
        authorization_endpoint=realm_url(f"{_OIDC}/auth"),
        token_endpoint=realm_url(f"{_OIDC}/token"),
        introspection_endpoint=realm_url(f"{_OIDC}/token/introspect"),
        revocation_endpoint=realm_url(f"{_OIDC}/revoke"),
        jwks_uri=realm_url(f"{_OIDC}/certs"),
        resource_registration_endpoint=realm_url("/authz/protection/resource_set"),
        permission_endpoint=realm_url("/authz/protection/permission"),
        policy_endpoint=realm_url("/authz/protection/uma-policy"),
    )
    return document


def openid_document() -> dict[str, object]:
    """The realm's OpenID discovery document: the endpoints that answer here, and the members
    OpenID Connect Discovery 1.0 requires. No userinfo or end-session endpoint: this server is
    no OpenID provider (it issues no ID tokens)."""
    return {
        "issuer": realm_issuer(),
        "authorization_endpoint": realm_url(f"{_OIDC}/auth"),
        "token_endpoint": realm_url(f"{_OIDC}/token"),
        "introspection_endpoint": realm_url(f"{_OIDC}/token/introspect"),
        "revocation_endpoint": realm_url(f"{_OIDC}/revoke"),
        "jwks_uri": realm_url(f"{_OIDC}/certs"),
        "registration_endpoint": runtime().config.url("/register"),
        "grant_types_supported": list(TOKEN_GRANT_TYPES),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "token_endpoint_auth_methods_supported": [*TOKEN_AUTH_METHODS, "none"],
        "introspection_endpoint_auth_methods_supported": list(TOKEN_AUTH_METHODS),
        "code_challenge_methods_supported": ["S256"],
        "scopes_supported": ["openid", PROTECTION_SCOPE, AUTHORIZATION_SCOPE],
    }


@bp.get("/.well-known/uma2-configuration")
def uma2_configuration() -> Response:
    return discovery.written("umaserver.realm_uma2_configuration", uma2_document)


@bp.get("/.well-known/openid-configuration")
def openid_configuration() -> Response:
    return discovery.written("umaserver.realm_openid_configuration", openid_document)


@bp.post(f"{_OIDC}/token")
def token() -> Response:
    mark_keycloak_request()
    form = request.form
    bearer = request.headers.get("Authorization", "").split(" ", 1)[0].lower() == "bearer"
    if form.get("grant_type") == UMA_TICKET and bearer:
        # The person's token is the credential (Keycloak's form): no client authentication.
        check_parameters(repeatable=("permission",))
        if "client_secret" in form:
            raise InvalidRequest(
                "Authenticate with the person's Bearer token or with the client's credentials,"
                " not both."
            )
    else:
        if form.get("grant_type") == "client_credentials":
            _as_client_token()
        check_token_request(TOKEN_GRANT_TYPES, repeatable=("permission",))
    server: UMAAuthorizationServer = current_app.extensions[_SERVER]
    response: Response = server.create_token_response()
    return response


def _as_client_token() -> None:
    """Keycloak's client token (client_credentials with `scope=openid`) is this server's PAT: the
    empty extras python-keycloak adds are dropped, and `openid` stands for uma_protection."""
    form = request.form
    for name in _EMPTY_EXTRAS:
        if form.get(name):
            raise InvalidRequest(
                f"{name}: only the client's own token is issued here (client_credentials);"
                " the password grant is not served."
            )
    kept = [(name, value) for name, value in form.items(multi=True) if name not in _EMPTY_EXTRAS]
    scopes = [name for name in form.get("scope", "").split(" ") if name]
    if "scope" not in form or "openid" in scopes:
        scopes = [name for name in scopes if name != "openid"] or [PROTECTION_SCOPE]
        kept = [(n, v) for n, v in kept if n != "scope"] + [("scope", " ".join(scopes))]
    # Read by Authlib and the checks as the request's form from here on.
    request.form = ImmutableMultiDict(kept)
    request.__dict__.pop("values", None)


@bp.route(f"{_OIDC}/auth", methods=["GET"])
def authorize() -> BaseResponse:
    """Keycloak's authorization endpoint: the authorization page, with the same query."""
    query = request.query_string.decode("ascii", "replace")
    return redirect(runtime().config.url("/authorize") + (f"?{query}" if query else ""), 302)


@bp.post(f"{_OIDC}/token/introspect")
def introspect() -> Response:
    """Keycloak's introspection: the client authenticates with its id and secret (in the body or
    with HTTP Basic); python-keycloak sends a person's token as Bearer beside them when it asks
    about an RPT, which is tolerated and not used."""
    unverified = introspection.token_parameter(repeatable=())
    client = _introspecting_client()
    store = storage()
    uma = runtime()
    now = uma.clock.now()
    answer: dict[str, Any] = {"active": False}
    found = introspect_rpt_for_client(store, now, unverified, client, uma.rpt_keys)
    if found is not None:
        rpt, granted = found
        if rpt.is_live(now):
            answer = introspection.rpt_answer(rpt, granted)
    else:
        token = introspection.live_token_of(store, unverified, client, now)
        if token is not None:
            answer = introspection.access_token_answer(token)
    return introspection.answer(answer)


def _introspecting_client() -> str:
    """The client id of a request that authenticates a client with its secret (Basic, or in the
    body), as the token endpoint does; 401 invalid_client otherwise."""
    server: UMAAuthorizationServer = current_app.extensions[_SERVER]
    # A Bearer header is no client authentication to Authlib: only the body's credentials count.
    oauth_request = server.create_oauth2_request(request)
    try:
        client = server.authenticate_client(oauth_request, TOKEN_AUTH_METHODS, "introspection")
    except OAuth2Error as error:
        raise _client_error(error) from None
    client_id: str = client.get_client_id()
    return client_id


def _client_error(error: OAuth2Error) -> APIError:
    if isinstance(error, InvalidRequestError):
        return InvalidRequest(error.description or "The introspection request is malformed.")
    return InvalidClient()


@bp.get(f"{_OIDC}/certs")
def certs() -> Response:
    """The keys that verify JWT RPTs: the same as /jwks."""
    return jwks.jwks_response()


@bp.post(f"{_OIDC}/revoke")
def revoke() -> Response:
    return revocation.revoke()


@bp.post("/authz/protection/permission")
def permission() -> Response:
    """/permission; Keycloak's resource server acting for itself (its own token) asks for the sets
    it registered for any owner, as on the realm's resource registration."""
    return permissions.register(every_owner=True)
