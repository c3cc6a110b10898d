"""Verification of the OpenID Connect ID tokens pushed inside `claim-client-claims-oidc-1.0` claims.

A client may carry an `id_token` in the value of an OIDC claim object. Its claims are believed only
after the token is verified against an identity provider listed in the config (OpenID Connect Core
1.0, 3.1.3.7 "ID Token Validation"); they then carry the provider as issuer, so a rule can demand the
provider's word instead of the client's. The other members of the value are the client's own word
and carry the client as issuer.

The providers' keys come from `key_sets.KeySets`, which never fetches inside a request: a token
naming a key we do not hold yet is answered "try again later" when a fetch may bring the key.
Plain Python: no Flask here.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from joserfc import jws
from joserfc.errors import (
    BadSignatureError,
    ExpiredTokenError,
    InvalidClaimError,
    InvalidKeyCurveError,
    InvalidKeyLengthError,
    JoseError,
    KeyParameterError,
    MissingClaimError,
)
from joserfc.jwk import KeySet
from joserfc.jwt import JWTClaimsRegistry

from umaserver import strict_json
from umaserver.claims.key_sets import KeySets
from umaserver.claims.model import (
    ACCOUNT_CLAIM_TYPE,
    OIDC_TYPE,
    Assertion,
    ClaimsError,
    ClaimsUnavailable,
    VerifiedClaims,
    email_key,
)
from umaserver.claims.oidc_issuers import SUPPORTED_ALGORITHMS, OidcIssuer
from umaserver.storage.records import Claim

MAX_ID_TOKEN_LENGTH = 16 * 1024
DEFAULT_MAX_LIFETIME = 86400

#: Claims that describe the token rather than the requesting party; they are checked here and
#: never handed to the rule engine. `acr`, `amr` and `auth_time` say how the party signed in,
#: which a rule may want, so they stay. `_claim_names`/`_claim_sources` point at aggregated or
#: distributed claims that nobody verified.
TOKEN_BOOKKEEPING_CLAIMS = frozenset(
    {
        "iss",
        "aud",
        "exp",
        "iat",
        "nbf",
        "azp",
        "nonce",
        "at_hash",
        "c_hash",
        "s_hash",
        "jti",
        "sid",
        "_claim_names",
        "_claim_sources",
    }
)

_COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
_SHOWN_LENGTH = 100


def _refuse(reason: str) -> ClaimsError:
    return ClaimsError(f"ID token refused: {reason}")


def _shown(value: str) -> str:
    """An untrusted string, quoted and cut short for an error description."""
    return repr(value[:_SHOWN_LENGTH])


def _number(value: Any) -> str:
    """A NumericDate for an error description, however large (Python will not print an int of
    thousands of digits)."""
    if isinstance(value, int | float) and abs(value) < 10**15:
        return str(value)
    return "a number out of range"


def _decode_segment(segment: str, part: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
        return strict_json.loads_object(raw)
    except (binascii.Error, strict_json.StrictJSONError) as error:
        raise _refuse(f"its {part} is not a base64url-encoded JSON object") from error


def verify_id_token(
    unverified_token: Any,
    issuers: Sequence[OidcIssuer],
    key_sets: KeySets,
    *,
    now: int,
    skew: int = 120,
    client_id: str | None = None,
    max_lifetime: int = DEFAULT_MAX_LIFETIME,
    audiences: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Verify an ID token (OpenID Connect Core 1.0, 3.1.3.7) and return its claims.

    `client_id` is the client pushing it: when the issuer's `client_audiences` names it, the token
    must be addressed to that client's id at the provider. `max_lifetime` caps `exp - iat`.
    `audiences`, when given, are the only ones accepted instead: a sign-in provider's tokens sent
    to us at sign-in are addressed to our own client id there.

    Raises ClaimsError naming the check that failed, or ClaimsUnavailable when the issuer's keys
    we hold may be out of date (a fetch is pending): the client may send the token again later.
    """
    if not isinstance(unverified_token, str):
        raise _refuse("'id_token' is not a string")
    if len(unverified_token) > MAX_ID_TOKEN_LENGTH:
        raise _refuse(f"it is longer than {MAX_ID_TOKEN_LENGTH} characters")
    if not _COMPACT_JWS.fullmatch(unverified_token):
        raise _refuse("it is not a signed JWT (three base64url parts separated by dots)")
    header_segment, payload_segment, _ = unverified_token.split(".")

    # The algorithm is checked before any key is touched, so a provider's public key can never
    # be used as an HMAC secret and "none" never skips the signature.
    header = _decode_segment(header_segment, "header")
    alg = header.get("alg")
    if not isinstance(alg, str):
        raise _refuse("its header has no 'alg'")
    if alg not in SUPPORTED_ALGORITHMS:
        raise _refuse(f"algorithm {_shown(alg)} is not accepted (asymmetric signatures only)")
    # RFC 7515, 4.1.11: a recipient that does not understand a "crit" extension must refuse.
    if "crit" in header or "b64" in header:
        raise _refuse("its header uses JWS extensions ('crit', 'b64') that we do not support")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise _refuse("its header 'kid' is not a string")

    # The unverified 'iss' only picks whose keys to try; it is checked again once signed.
    unverified_iss = _decode_segment(payload_segment, "payload").get("iss")
    if not isinstance(unverified_iss, str):
        raise _refuse("it has no 'iss' claim")
    issuer = next((i for i in issuers if i.issuer == unverified_iss), None)
    if issuer is None:
        raise _refuse(f"issuer {_shown(unverified_iss)} is not configured")
    if alg not in issuer.algorithms:
        raise _refuse(f"algorithm {alg!r} is not accepted for issuer {issuer.issuer!r}")
    key_set = key_sets.key_set(issuer.issuer)
    if key_set is None:
        # Never fetched yet, or the provider is unreachable: our side's problem, not the token's.
        # The client may try again once the fetch asked for here is due.
        raise ClaimsUnavailable(
            f"ID token not checked: keys of issuer {issuer.issuer!r} are not available yet",
            key_sets.request_refresh(issuer.issuer) or 1,
        )

    claims = _verify_signature(unverified_token, alg, kid, key_set, issuer, key_sets)
    _validate_claims(
        claims,
        issuer,
        now=now,
        skew=skew,
        client_id=client_id,
        max_lifetime=max_lifetime,
        audiences=audiences,
    )
    return claims


def _verify_signature(
    unverified_token: str,
    alg: str,
    kid: str | None,
    key_set: KeySet,
    issuer: OidcIssuer,
    key_sets: KeySets,
) -> dict[str, Any]:
    # Only this issuer's keys are tried: a key of another provider proves nothing here.
    named = [key for key in key_set.keys if kid is None or key.kid == kid]
    # Some providers publish keys without "kid" yet name one in their tokens. joserfc's KeySet
    # gives such a key its RFC 7638 thumbprint as kid.
    candidates = named or [key for key in key_set.keys if key.kid == key.thumbprint()]
    # Unregistered header parameters are tolerated (providers add their own); "crit" was refused.
    registry = jws.JWSRegistry(algorithms=[alg], strict_check_header=False)
    for key in candidates:
        try:
            signed = jws.deserialize_compact(unverified_token, key, registry=registry)
        except (BadSignatureError, KeyParameterError, InvalidKeyCurveError, InvalidKeyLengthError):
            continue
        except JoseError as error:
            raise _refuse(f"it cannot be decoded ({error.description})") from error
        assert signed.payload is not None
        try:
            return strict_json.loads_object(signed.payload)
        except strict_json.StrictJSONError as error:
            raise _refuse("its payload is not a JSON object") from error
    # Perhaps the provider rolled its keys over (with or without kids): have them fetched again,
    # outside this request.
    retry_after = key_sets.request_refresh(issuer.issuer, None if named else kid or "")
    if not named:
        missing = f"issuer {issuer.issuer!r} has no key with kid {_shown(kid or '')}"
        if retry_after is not None:
            raise ClaimsUnavailable(f"ID token not checked: {missing} yet", retry_after)
        raise _refuse(missing)
    raise _refuse(f"its signature does not verify with the keys of issuer {issuer.issuer!r}")


def _validate_claims(
    claims: dict[str, Any],
    issuer: OidcIssuer,
    *,
    now: int,
    skew: int,
    client_id: str | None = None,
    max_lifetime: int = DEFAULT_MAX_LIFETIME,
    audiences: Sequence[str] | None = None,
) -> None:
    # A client listed in `client_audiences` has one audience of its own at the provider: a token
    # issued to another client of ours (or to anyone else) is not its to push.
    own = issuer.client_audiences.get(client_id) if client_id is not None else None
    accepted = [own] if own is not None else list(issuer.audiences)
    if audiences is not None:
        accepted = list(audiences)
    if not accepted:  # an empty list would mean "any audience" to the registry
        raise _refuse(
            f"issuer {issuer.issuer!r} accepts tokens only for the clients of its"
            " 'client_audiences', and not this one"
        )
    registry = JWTClaimsRegistry(
        now=now,
        leeway=skew,
        iss={"essential": True, "value": issuer.issuer},
        sub={"essential": True},
        aud={"essential": True, "values": accepted},
        exp={"essential": True},
        iat={"essential": True},
    )
    try:
        registry.validate(claims)
    except MissingClaimError as error:
        raise _refuse(f"required claims missing: {error.claim}") from error
    except ExpiredTokenError as error:
        raise _refuse(
            f"it expired at {_number(claims['exp'])} (now {now}, allowed clock skew {skew} s)"
        ) from error
    except InvalidClaimError as error:
        raise _refuse(_invalid_claim_reason(error.claim, claims, now=now, skew=skew)) from error
    if not isinstance(claims["sub"], str) or not claims["sub"]:
        raise _refuse("its subject 'sub' is not a non-empty string")
    # Replay is detected by remembering a token until it expires: a token living for ever would
    # be forgotten while still good. NumericDates are finite numbers here (the registry checked).
    if claims["exp"] - claims["iat"] > max_lifetime:
        raise _refuse(
            f"it lives longer than {max_lifetime} s from 'iat' to 'exp' (the accepted lifetime)"
        )

    # OpenID Connect Core 1.0, 3.1.3.7: with several audiences an "azp" should be present, and
    # when present it must be our client; otherwise a token issued to another party, which
    # merely lists us too, would pass.
    audiences = claims["aud"]
    azp = claims.get("azp")
    if isinstance(audiences, list) and len(audiences) > 1 and azp is None:
        raise _refuse("it has several audiences and no 'azp'")
    if azp is not None and azp not in accepted:
        raise _refuse("its authorized party 'azp' is not an accepted audience")


def _invalid_claim_reason(name: str, claims: dict[str, Any], *, now: int, skew: int) -> str:
    value = claims.get(name)
    if name == "aud":
        return "its audience 'aud' names none of the accepted audiences (for this client)"
    if name == "iat" and isinstance(value, int | float) and not isinstance(value, bool):
        return (
            f"it was issued in the future (iat {_number(value)}, now {now},"
            f" allowed clock skew {skew} s)"
        )
    if name == "nbf" and isinstance(value, int | float) and not isinstance(value, bool):
        return f"it is not valid yet (nbf {_number(value)}, now {now}, allowed clock skew {skew} s)"
    if name == "iss":
        return "its issuer 'iss' does not match"
    return f"claim {name!r} is invalid"


def oidc_claims(
    value: Mapping[str, Any],
    *,
    issuers: Sequence[OidcIssuer],
    key_sets: KeySets,
    client_id: str,
    now: int,
    skew: int = 120,
    max_lifetime: int = DEFAULT_MAX_LIFETIME,
) -> list[Claim]:
    """The claims of one `claim-client-claims-oidc-1.0` value (see `oidc_value`)."""
    verified = oidc_value(
        value,
        issuers=issuers,
        key_sets=key_sets,
        client_id=client_id,
        now=now,
        skew=skew,
        max_lifetime=max_lifetime,
    )
    return list(verified.claims)


def oidc_value(
    value: Mapping[str, Any],
    *,
    issuers: Sequence[OidcIssuer],
    key_sets: KeySets,
    client_id: str,
    now: int,
    skew: int = 120,
    max_lifetime: int = DEFAULT_MAX_LIFETIME,
) -> VerifiedClaims:
    """The claims of one `claim-client-claims-oidc-1.0` value, and its ID token to remember.

    Plain members are the pushing client's word (issuer = the client). The claims of a verified
    `id_token` are the provider's word (issuer = its `iss`, subject = its `sub`), without the
    token's bookkeeping claims; the token is remembered against replay as a SAML assertion is, by
    issuer and `jti`, else by a digest of the token. Raises ClaimsError when the ID token is
    refused, ClaimsUnavailable when it cannot be checked now.
    """
    verified = (
        verify_id_token(
            value["id_token"],
            issuers,
            key_sets,
            now=now,
            skew=skew,
            client_id=client_id,
            max_lifetime=max_lifetime,
        )
        if "id_token" in value
        else None
    )

    claims = [
        Claim(
            type=OIDC_TYPE,
            name=name,
            value=member,
            issuer=client_id,
            client_id=client_id,
            gathered_at=now,
        )
        for name, member in value.items()
        if name != "id_token"
    ]
    if verified is None:
        return VerifiedClaims(tuple(claims))
    provider = verified["iss"]
    subject = verified["sub"]
    claims.extend(
        Claim(
            type=OIDC_TYPE,
            name=name,
            value=member,
            issuer=provider,
            client_id=client_id,
            gathered_at=now,
            subject=subject,
        )
        for name, member in verified.items()
        if name not in TOKEN_BOOKKEEPING_CLAIMS
    )
    email = verified.get("email")
    # A share by e-mail holds for this address too (issue 25): the provider's signed word that the
    # address is its subject's and verified, as an account claim (which no client can push, and
    # which a share's condition reads), lowercased as account claims are (`email_key`), with the
    # provider as issuer. `email_verified` must be the JSON true: "true" or a missing member is
    # no such word.
    if isinstance(email, str) and email and verified.get("email_verified") is True:
        claims.append(
            Claim(
                type=ACCOUNT_CLAIM_TYPE,
                name="email",
                value=email_key(email),
                issuer=provider,
                client_id=client_id,
                gathered_at=now,
                subject=subject,
            )
        )
    jti = verified.get("jti")
    if isinstance(jti, str) and jti:
        token_id = f"jti:{jti}"
    else:
        token_id = "sha256:" + hashlib.sha256(value["id_token"].encode("ascii")).hexdigest()
    # exp is at most iat + max_lifetime and iat is not in the future: a bounded number.
    token = Assertion(
        provider,
        token_id,
        math.ceil(verified["exp"]) + skew,
        subject=subject,
        kind="ID token",
    )
    return VerifiedClaims(tuple(claims), (token,))
