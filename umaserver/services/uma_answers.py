"""What the UMA 2.0 grant answers (UMA 2.0 Grant for OAuth 2.0 Authorization, section 3.3.5-3.3.6),
shared by `services.uma_grant` and Keycloak's forms (`services.keycloak_permissions`): an RPT
granted or upgraded with a PCT carrying the claims, need_info with `required_claims`,
request_submitted with the ticket rotated, request_denied; and the two things both read first:
the client's own RPT to upgrade and the claims of a `claim_token`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import secrets_at_rest
from ..claims.claim_tokens import claim_object, format_of
from ..claims.model import ClaimsError, VerifiedClaims, Verifiers
from ..config import Lifetimes, Limits
from ..errors import APIError
from ..policy.decision import NeededClaim
from ..sharing_config import SharingSettings
from ..storage import Storage
from ..storage.records import Claim, Client, Pct, RequestedPermission, Rpt
from . import rpts, signing_keys
from .pushed_claims import read_pushed
from .signing_keys import JwtRpts

PCT_PREFIX = "uma_pct_"


class InvalidGrant(APIError):
    """400 invalid_grant (RFC 6749 5.2): the ticket, the PCT or the RPT cannot be used."""

    error = "invalid_grant"
    description = "The grant is invalid."


@dataclass(frozen=True)
class Answer:
    """What the token endpoint answers: 200 with an RPT, or 403 need_info / request_denied (bodies
    with members beyond `error`, answered as they are)."""

    status: int
    body: dict[str, Any] | list[dict[str, Any]]  # a list: Keycloak's response_mode=permissions


def read_claim_token(
    claim_token: str | None,
    claim_token_format: str | None,
    client: Client,
    verifiers: Verifiers,
    now: int,
    limits: Limits,
    jwt_type: str | None = None,
) -> VerifiedClaims:
    """The claims of a request's `claim_token` and `claim_token_format` (both or neither),
    verified as their claim type's profile reads them, for this client."""
    if (claim_token is None) != (claim_token_format is None):
        raise ClaimsError("claim_token and claim_token_format come together: send both or neither")
    if claim_token is None or claim_token_format is None:
        return VerifiedClaims(())
    found = claim_object(claim_token_format, claim_token, jwt_type)
    try:
        return read_pushed([found], client, verifiers, now, limits)
    except ClaimsError as error:
        # The 1.0 reader names the claim object "claims[0]": here it is the claim token.
        raise ClaimsError(error.description.replace("claims[0]", "claim_token", 1)) from None


def own_rpt(
    storage: Storage, unverified_rpt: str, client: Client, now: int, rpt_keys: Sequence[bytes]
) -> Rpt:
    """The client's own live RPT; InvalidGrant for any other token (an opaque one that no listed
    secret key makes from its seed among them: `rpts.vouched`)."""
    rpt = storage.get_rpt(secrets_at_rest.digest(unverified_rpt))
    if (
        rpt is None
        or not rpt.is_live(now)
        or rpt.client_id != client.client_id
        or not (signing_keys.looks_like_jws(unverified_rpt) or rpts.vouched(rpt, rpt_keys))
    ):
        raise InvalidGrant("The RPT is unknown, expired, revoked, or another client's.")
    return rpt


def grant_rpt(
    storage: Storage,
    now: int,
    client: Client,
    party: str,
    upgrading: Rpt | None,
    unverified_rpt: str | None,
    permissions: Sequence[RequestedPermission],
    claims: Sequence[Claim],
    lifetimes: Lifetimes,
    rpt_key: bytes,
    *,
    jwt: JwtRpts | None = None,
    issuer: str = "",
) -> Answer:
    """200 with an RPT holding these permissions: `upgrading` (the client's own live RPT, sent as
    `unverified_rpt`) with them added, else a new one of the client's for `party`; and a PCT
    carrying `claims`, when there are any. With `jwt`, a new JWT RPT (`iss` = `issuer`) with every
    live permission of that party and client, the upgraded one's among them."""
    if jwt is not None:
        # A signed token cannot gain permissions: a new one with every live permission of this
        # party and client (the upgraded RPT's among them); the one upgraded stays valid.
        rpt, record = rpts.mint_jwt(
            storage,
            now,
            jwt,
            issuer=issuer,
            client_id=client.client_id,
            party=party,
            aat_digest=None,
            granted=permissions,
            lifetimes=lifetimes,
        )
    elif upgrading is not None and unverified_rpt is not None:
        rpts.add_permissions(storage, now, upgrading, permissions, lifetimes)
        rpt, record = unverified_rpt, upgrading
    else:
        rpt, record = rpts.issue_client_rpt(
            storage, now, client.client_id, party, rpt_key, lifetimes
        )
        rpts.add_permissions(storage, now, record, permissions, lifetimes)
    body: dict[str, Any] = {
        "access_token": rpt,
        "token_type": "Bearer",
        "expires_in": max(0, record.expires_at - now),
        "upgraded": upgrading is not None,
    }
    if claims:
        body["pct"] = issue_pct(storage, now, client, party, claims, lifetimes.pct)
    return Answer(200, body)


def issue_pct(
    storage: Storage, now: int, client: Client, party: str, claims: Sequence[Claim], lifetime: int
) -> str:
    pct = secrets_at_rest.new_token(PCT_PREFIX)
    person = None if party.startswith("client:") else party
    storage.add_pct(
        Pct(secrets_at_rest.digest(pct), client.client_id, party, person, now, now + lifetime),
        claims,
    )
    return pct


def submitted(
    storage: Storage, digest: str, sharing: SharingSettings, kept: str | None = None
) -> Answer:
    """403 request_submitted (Grant 3.3.6) with the ticket rotated, its request following it; or
    with the ticket `kept` as it is, when rotating would end it for another client."""
    rotated = kept
    if rotated is None:
        rotated = secrets_at_rest.new_token(secrets_at_rest.TICKET_PREFIX)
        storage.rotate_ticket(digest, secrets_at_rest.digest(rotated))
        storage.move_request(digest, secrets_at_rest.digest(rotated))
    return Answer(
        403,
        {
            "error": "request_submitted",
            "error_description": "The resource owner has been asked for access; poll with this"
            " ticket no faster than `interval` seconds.",
            "ticket": rotated,
            "interval": sharing.poll_interval,
        },
    )


def denied(description: str) -> Answer:
    return Answer(403, {"error": "request_denied", "error_description": description})


def need_info(ticket: str, needed: Sequence[NeededClaim], redirect_user: bool) -> Answer:
    body: dict[str, Any] = {
        "error": "need_info",
        "error_description": "More information about the requesting party is needed.",
        "ticket": ticket,
    }
    required = [required_claim(claim) for claim in needed]
    if required:
        body["required_claims"] = required
    if redirect_user:
        body["redirect_user"] = True
    return Answer(403, body)


def required_claim(needed: NeededClaim) -> dict[str, Any]:
    """One `required_claims` entry (Grant 3.3.6) of a need_claims entry: the claim's name, the
    owner's hint as its friendly name, the claim token formats it can come in, and the issuers
    whose word is accepted, when the rule names some. Never a value a rule wants."""
    entry: dict[str, Any] = {"name": needed.name, "friendly_name": needed.value}
    formats = [f for f in map(format_of, needed.types or (needed.type,)) if f is not None]
    if formats:
        entry["claim_token_format"] = list(dict.fromkeys(formats))
    if needed.named_issuers:
        entry["issuer"] = list(needed.named_issuers)
    return entry
