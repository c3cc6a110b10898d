"""UMA 2.0's claim tokens (Grant section 3.3.1: `claim_token` and `claim_token_format`) as the
claim objects of the 1.0 profiles, so that both generations push claims through one reader
(`model.read_claim_objects`) under the same trust rules:

* an OpenID Connect ID token (format `http://openid.net/specs/openid-connect-core-1_0.html#IDToken`,
  or the same with https, as Keycloak's documentation writes it) is the OIDC profile's object
  `{"id_token": TOKEN}`;
* a SAML 2.0 assertion (format `urn:ietf:params:oauth:token-type:saml2`, base64url of the XML) is
  the SAML profile's `{"saml_assertion": <base64 of it>}`;
* any other format is a deployment's custom claim type: the token is base64url (padding optional;
  standard base64 read too) of the JSON object the 1.0 profile carries as `value`;
* Keycloak's `urn:ietf:params:oauth:token-type:jwt`, on its realm face, is read the same way, as
  claims of the type the operator names for it (`jwt_type`); elsewhere it is a custom type like any.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from .model import (
    ACCOUNT_CLAIM_TYPE,
    ACCOUNT_NOT_PUSHED,
    OIDC_TYPE,
    REDIRECT_TYPE,
    SAML_TYPE,
    ClaimsError,
)

ID_TOKEN_FORMATS = (
    "http://openid.net/specs/openid-connect-core-1_0.html#IDToken",
    "https://openid.net/specs/openid-connect-core-1_0.html#IDToken",
)
SAML2_FORMAT = "urn:ietf:params:oauth:token-type:saml2"
JWT_FORMAT = "urn:ietf:params:oauth:token-type:jwt"

_BASE64 = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")


def format_of(claim_type: str) -> str | None:
    """The claim token format a client sends claims of `claim_type` in (for `required_claims`);
    None for the redirect profile's, which no client sends."""
    if claim_type == OIDC_TYPE:
        return ID_TOKEN_FORMATS[0]
    if claim_type == SAML_TYPE:
        return SAML2_FORMAT
    if claim_type in (REDIRECT_TYPE, ACCOUNT_CLAIM_TYPE):
        return None
    return claim_type


def claim_object(
    claim_token_format: str, claim_token: str, jwt_type: str | None = None
) -> dict[str, Any]:
    """The 1.0 claim object `{type, value}` a claim token stands for; ClaimsError (naming why) for
    a token that cannot be read as its format says. With `jwt_type`, a token of Keycloak's
    `JWT_FORMAT` stands for claims of that type."""
    if claim_token_format in ID_TOKEN_FORMATS:
        return {"type": OIDC_TYPE, "value": {"id_token": claim_token}}
    if claim_token_format == SAML2_FORMAT:
        return {"type": SAML_TYPE, "value": {"saml_assertion": _standard_base64(claim_token)}}
    if claim_token_format == REDIRECT_TYPE:
        raise ClaimsError(
            f"claim_token_format: claims of type {REDIRECT_TYPE} are gathered by this server, not"
            " sent: send the person to the claims_interaction_endpoint"
        )
    if claim_token_format == ACCOUNT_CLAIM_TYPE:
        raise ClaimsError(f"claim_token_format: {ACCOUNT_NOT_PUSHED}")
    try:
        value = json.loads(_decode(claim_token))
    except (ValueError, UnicodeDecodeError):
        raise ClaimsError(
            f"claim_token: a token of the custom format {claim_token_format!r} must be base64url"
            " of a JSON object"
        ) from None
    if not isinstance(value, dict):
        raise ClaimsError(
            f"claim_token: a token of the custom format {claim_token_format!r} must be base64url"
            " of a JSON object, not of another JSON value"
        )
    if claim_token_format == JWT_FORMAT and jwt_type is not None:
        return {"type": jwt_type, "value": value}
    return {"type": claim_token_format, "value": value}


def _decode(token: str) -> bytes:
    """base64url or standard base64, padded or not; ValueError for anything else."""
    if not _BASE64.fullmatch(token):
        raise ValueError("not base64")
    standard = token.rstrip("=").replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except binascii.Error as error:
        raise ValueError(str(error)) from None


def _standard_base64(token: str) -> str:
    """A SAML claim token (base64url, or base64) as the SAML profile's base64 text."""
    try:
        return base64.b64encode(_decode(token)).decode("ascii")
    except ValueError:
        raise ClaimsError(
            "claim_token: a SAML 2.0 assertion must be base64url of its XML"
        ) from None
