"""Claims about a requesting party, and where they came from.

Every claim the server gathers, pushed by a client or vouched for by an identity provider, becomes a
`Claim` (a record of `storage.records`): one name and its value, with its provenance (claim
type, issuer, client, time). The rule engine sees nothing else. Plain Python: no Flask here.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import echo
from ..storage.records import Claim


class ClaimsError(Exception):
    """A claim object was refused; the message says which check failed (400 invalid_request)."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class ClaimsUnavailable(ClaimsError):
    """A claim object could not be checked now for a reason on this server's side, such as an
    identity provider's keys not fetched yet: the client may send it again after `retry_after`
    seconds (503 temporarily_unavailable). Nothing is recorded."""

    def __init__(self, description: str, retry_after: int = 30) -> None:
        super().__init__(description)
        self.retry_after = retry_after


# The claim profiles of the spec, by the type string of their claim objects.
OIDC_TYPE = "claim-client-claims-oidc-1.0"
SAML_TYPE = "claim-client-assertion-saml-1.0"
REDIRECT_TYPE = "claim-client-redirect-1.0"
# Account claims: this server's own word about the person a request's token was issued to
# (`services.account_claims`), and one `email` of a verified ID token that says it is verified
# (`id_tokens.oidc_value`; issuer: the provider). No client pushes them, sends them as a claim
# token, or is asked for them; they are never gathered by redirect.
ACCOUNT_CLAIM_TYPE = "urn:umaserver:claim-type:account"
ACCOUNT_NOT_PUSHED = (
    f"{ACCOUNT_CLAIM_TYPE} is this server's own word about a person's account: no client pushes"
    " claims of that type"
)


def email_key(address: str) -> str:
    """An e-mail address as the account claims carry it and shares compare it: the whole address,
    lowercased. The domain is case-insensitive by RFC 5321; the local part may be case-sensitive
    by the letter of it, but no provider this server talks to hands out two mailboxes that differ
    only by case (Keycloak itself stores addresses lowercased), and a person typing "Carol@" for
    "carol@" must not lose a share."""
    return address.lower()


class Verifiers(Protocol):
    """What turns one verified claim object into claims. `saml` and `oidc` slot in here."""

    def saml(self, value: Mapping[str, Any], client_id: str, now: int) -> VerifiedClaims: ...

    def oidc(self, value: Mapping[str, Any], client_id: str, now: int) -> VerifiedClaims: ...

    def issuers(self, claim_type: str) -> tuple[str, ...]:
        """The third parties that can vouch for claims of this type (IdPs, OIDC issuers)."""
        ...


@dataclass(frozen=True)
class Assertion:
    """A verified SAML assertion or ID token whose ID must be remembered against replay, and whom
    it is about (`subject` at `issuer`: the NameID, or the ID token's `sub`)."""

    issuer: str
    assertion_id: str
    expires_at: int
    # SAML <OneTimeUse/>: accepted once at all, not once per ticket and requesting party.
    one_time: bool = False
    subject: str | None = None
    kind: str = "SAML assertion"  # how refusals name it: "SAML assertion" or "ID token"


@dataclass(frozen=True)
class VerifiedClaims:
    claims: tuple[Claim, ...]
    assertions: tuple[Assertion, ...] = ()


@dataclass(frozen=True)
class ClaimBounds:
    """How much one request may push (the `[limits]` of the config, same names)."""

    claims_per_object: int = 500
    claim_objects_per_request: int = 32
    claim_value_bytes: int = 16 * 1024


def _too_many(where: str, count: int, what: str, limit: str, bound: int) -> ClaimsError:
    return ClaimsError(
        f"{where}: {count} {what} are more than this server accepts ([limits] {limit} = {bound})."
    )


def _check_values(index: int, claims: tuple[Claim, ...], bounds: ClaimBounds) -> None:
    if len(claims) > bounds.claims_per_object:
        raise _too_many(
            f"claims[{index}]",
            len(claims),
            "claims in one claim object",
            "claims_per_object",
            bounds.claims_per_object,
        )
    for claim in claims:
        size = len(json.dumps(claim.value).encode("utf-8"))  # as the store writes it
        if size > bounds.claim_value_bytes:
            raise ClaimsError(
                f"claims[{index}]: the value of the claim {echo(claim.name)} is {size} bytes of"
                f" JSON, more than this server accepts ([limits] claim_value_bytes ="
                f" {bounds.claim_value_bytes})."
            )


def read_claim_objects(
    unverified: list[dict[str, Any]],
    client_id: str,
    push_types: Collection[str],
    verifiers: Verifiers,
    now: int,
    bounds: ClaimBounds = ClaimBounds(),
) -> VerifiedClaims:
    """The claims of a request's `claims` array, every object checked; raises ClaimsError.

    "In the direct claim profiles the AS and the client have a pre-established trust
    relationship": a client may push only the claim types it was registered with, and its plain
    claims carry itself as issuer. Past one of `bounds`, nothing is read (ClaimsError naming it).
    """
    if len(unverified) > bounds.claim_objects_per_request:
        raise _too_many(
            "claims",
            len(unverified),
            "claim objects in one request",
            "claim_objects_per_request",
            bounds.claim_objects_per_request,
        )
    # A later claim of the same type, name and issuer replaces an earlier one, as a re-push in a
    # later request does. Evidence speaks of one person: one request may carry the word of an
    # issuer about one subject only.
    claims: dict[tuple[str, str, str], Claim] = {}
    subjects: dict[str, str] = {}
    assertions: list[Assertion] = []
    for index, claim_object in enumerate(unverified):
        claim_type = claim_object["type"]
        value = claim_object["value"]
        if claim_type == ACCOUNT_CLAIM_TYPE:
            raise ClaimsError(f"claims[{index}]: {ACCOUNT_NOT_PUSHED}")
        if claim_type == REDIRECT_TYPE:
            # The redirect profile's claims are gathered by this server itself, not pushed.
            raise ClaimsError(
                f"claims[{index}]: claims of type {REDIRECT_TYPE} are not pushed: redirect the"
                " requesting party to the requesting_party_claims_endpoint instead, with the"
                " redirect_required entry's value as scope"
            )
        if claim_type not in push_types:
            raise ClaimsError(
                f"claims[{index}]: this client may not push claims of type {echo(claim_type)}"
            )
        if len(value) > bounds.claims_per_object:  # before any work on it
            raise _too_many(
                f"claims[{index}]",
                len(value),
                "members in one claim object's value",
                "claims_per_object",
                bounds.claims_per_object,
            )
        if claim_type == SAML_TYPE:
            verified = verifiers.saml(value, client_id, now)
        elif claim_type == OIDC_TYPE:
            verified = verifiers.oidc(value, client_id, now)
        else:
            verified = VerifiedClaims(
                tuple(
                    Claim(claim_type, name, item, client_id, client_id, now)
                    for name, item in value.items()
                )
            )
        _check_values(index, verified.claims, bounds)
        for assertion in verified.assertions:
            if assertion.subject is None:
                continue
            known = subjects.setdefault(assertion.issuer, assertion.subject)
            if known != assertion.subject:
                raise ClaimsError(
                    f"claims[{index}]: this request carries claims of {assertion.issuer!r} about"
                    " two different subjects; send the claims of one person only"
                )
        for claim in verified.claims:
            key = (claim.type, claim.name, claim.issuer)
            claims.pop(key, None)  # keep the order of arrival
            claims[key] = claim
        assertions.extend(verified.assertions)
    return VerifiedClaims(tuple(claims.values()), tuple(assertions))


def suppliable(
    client_id: str, push_types: Collection[str], verifiers: Verifiers
) -> frozenset[tuple[str, str]]:
    """The (claim type, issuer) pairs this client can supply: its own word for plain types and
    plain OIDC claims, and the configured third parties for verified ones. Never the redirect
    profile's type (this server gathers those claims itself) nor the account claims' (this server
    vouches for those itself)."""
    pairs: set[tuple[str, str]] = set()
    for claim_type in push_types:
        if claim_type in (REDIRECT_TYPE, ACCOUNT_CLAIM_TYPE):
            continue
        if claim_type != SAML_TYPE:
            pairs.add((claim_type, client_id))
        if claim_type in (SAML_TYPE, OIDC_TYPE):
            pairs.update((claim_type, issuer) for issuer in verifiers.issuers(claim_type))
    return frozenset(pairs)
