"""The configuration document at /.well-known/uma-configuration.

It advertises only what answers: its `*_supported` lists name only what works, and an endpoint that
is not built yet is left out. Every URL is absolute, built from `issuer`.
"""

from __future__ import annotations

import json

from flask import Blueprint, Response, current_app

from ..claims.model import OIDC_TYPE, REDIRECT_TYPE, SAML_TYPE
from ..runtime import runtime
from .token import GRANT_TYPES

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

_DOCUMENT = "umaserver.configuration_document"


@bp.get("/.well-known/uma-configuration")
def configuration() -> Response:
    """The document, written once per app: it depends on the configuration alone."""
    body = current_app.extensions.get(_DOCUMENT)
    if body is None:
        body = current_app.extensions[_DOCUMENT] = json.dumps(
            document(), separators=(",", ":")
        ).encode()
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
    }
