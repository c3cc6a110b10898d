"""The configuration documents: UMA 1.0's at /.well-known/uma-configuration, and UMA 2.0's at
/.well-known/uma2-configuration (RFC 8414 authorization server metadata with the members of UMA 2.0
Grant section 2 and Federated Authorization section 2).

Each advertises only what answers: its `*_supported` lists name only what works, and an endpoint
that is not built yet is left out. Every URL is absolute, built from `issuer`. Both describe one
server: the same endpoints under each generation's names.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from flask import Blueprint, Response, current_app

from ..claims.model import OIDC_TYPE, REDIRECT_TYPE, SAML_TYPE
from ..runtime import runtime
from .bearer import AUTHORIZATION_SCOPE, PROTECTION_SCOPE
from .code_grants import TOKEN_AUTH_METHODS
from .token import GRANT_TYPES, TOKEN_GRANT_TYPES

bp = Blueprint("discovery", __name__)


def claim_profiles() -> list[str]:
    """The claim profiles that can succeed here: OIDC claims always (a client may push them on its
    own word), SAML assertions only with an identity provider configured to verify them, and the
    redirect profile always (local users sign in here). Custom pushed claims have no profile name
    of their own."""
    return [OIDC_TYPE, *([SAML_TYPE] if runtime().config.saml_idps else []), REDIRECT_TYPE]


# The RPT is a bearer token whose permissions the resource server reads by introspection: UMA
# 1.0's bearer token profile, under its URI as UMA 1.0 clients look for it, and the short name.
RPT_PROFILES = ("bearer", "https://docs.kantarainitiative.org/uma/profiles/uma-token-bearer-1.0")


@bp.get("/.well-known/uma-configuration")
def configuration() -> Response:
    return written("umaserver.configuration_document", document)


@bp.get("/.well-known/uma2-configuration")
def configuration_2() -> Response:
    return written("umaserver.uma2_configuration_document", document_2)


def written(key: str, make: Callable[[], dict[str, object]]) -> Response:
    """A document, written once per app under `key`: it depends on the configuration alone."""
    body = current_app.extensions.get(key)
    if body is None:
        body = current_app.extensions[key] = json.dumps(make(), separators=(",", ":")).encode()
    return Response(body, 200, _HEADERS)


# Cacheable, unlike every other API answer; JSON to a browser and nothing else.
_HEADERS = (
    ("Content-Type", "application/json"),
    ("Cache-Control", "public, max-age=3600"),
    ("X-Content-Type-Options", "nosniff"),
)


def document() -> dict[str, object]:
    config = runtime().config
    return {
        "version": "1.0",
        "issuer": config.issuer,
        "pat_profiles_supported": ["bearer"],
        "aat_profiles_supported": ["bearer"],
        "rpt_profiles_supported": list(RPT_PROFILES),
        "pat_grant_types_supported": list(GRANT_TYPES),
        "aat_grant_types_supported": list(GRANT_TYPES),
        "claim_profiles_supported": claim_profiles(),
        "token_endpoint": config.url("/token"),
        # Where owners and requesting parties sign in and consent; also under the name later UMA
        # versions use.
        "user_endpoint": config.url("/authorize"),
        "authorization_endpoint": config.url("/authorize"),
        "dynamic_client_endpoint": config.url("/register"),
        "resource_set_registration_endpoint": config.url("/rs"),
        "introspection_endpoint": config.url("/introspect"),
        "permission_registration_endpoint": config.url("/permission"),
        "rpt_endpoint": config.url("/rpt"),
        "authorization_request_endpoint": config.url("/rpt_authorization"),
        "requesting_party_claims_endpoint": config.url("/rqp_claims"),
        **_jwks_uri(),
    }


def document_2() -> dict[str, object]:
    config = runtime().config
    return {
        "issuer": config.issuer,
        "authorization_endpoint": config.url("/authorize"),
        "token_endpoint": config.url("/token"),
        "registration_endpoint": config.url("/register"),
        "introspection_endpoint": config.url("/introspect"),
        "revocation_endpoint": config.url("/revoke"),
        "grant_types_supported": list(TOKEN_GRANT_TYPES),
        "token_endpoint_auth_methods_supported": [*TOKEN_AUTH_METHODS, "none"],
        "code_challenge_methods_supported": ["S256"],
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "scopes_supported": [PROTECTION_SCOPE, AUTHORIZATION_SCOPE],
        # Federated Authorization 2: the protection API, the collection shared with 1.0.
        "resource_registration_endpoint": config.url("/rs/resource_set"),
        "permission_endpoint": config.url("/permission"),
        "claims_interaction_endpoint": config.url("/claims_interaction"),
        "uma_profiles_supported": [],
        **_jwks_uri(),
    }


def _jwks_uri() -> dict[str, str]:
    """Where the keys that verify JWT RPTs are: named only when RPTs are JWTs (opaque ones are
    read by introspection alone)."""
    config = runtime().config
    return {"jwks_uri": config.url("/jwks")} if config.tokens.rpt_format == "jwt" else {}
