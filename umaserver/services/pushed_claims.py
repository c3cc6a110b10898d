"""Claims a client pushes for a ticket's requesting party, read and recorded the same way by the
UMA 1.0 authorization request (claim objects) and the UMA 2.0 grant (a claim token, as the claim
object it stands for): verified outside the write lock, then, in the request's transaction,
remembered against replay, kept to one subject per issuer, bounded, and recorded against the
ticket and the client that pushed them: they serve that client's requests with the ticket, never
another's (issue 27, N1), and `[limits] claims_per_ticket` and the ticket's 10 requests count per
client. A request refused for its claims still counts toward its client's requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from ..claims.model import Assertion, ClaimBounds, VerifiedClaims, Verifiers, read_claim_objects
from ..config import Limits
from ..errors import InvalidRequest, echo
from ..storage import Storage
from ..storage.records import AssertionUse, Claim, Client
from .ticket_claims import within_ticket_bound

# "need_claims leaves it usable (at most 10 requests)"; UMA 2.0's need_info likewise.
MAX_TICKET_REQUESTS = 10


def read_pushed(
    claim_objects: list[dict[str, Any]],
    client: Client,
    verifiers: Verifiers,
    now: int,
    limits: Limits,
) -> VerifiedClaims:
    """The claims of the claim objects, each verified (raises ClaimsError, ClaimsUnavailable);
    a claim an assertion or ID token vouches for ends when it does (`Claim.expires_at`)."""
    pushed = read_claim_objects(
        claim_objects,
        client.client_id,
        client.push_claim_types,
        verifiers,
        now,
        ClaimBounds(
            limits.claims_per_object, limits.claim_objects_per_request, limits.claim_value_bytes
        ),
    )
    ends = {(a.issuer, a.subject): a.expires_at for a in pushed.assertions}
    return replace(
        pushed,
        claims=tuple(
            replace(claim, expires_at=ends[(claim.issuer, claim.subject)])
            if (claim.issuer, claim.subject) in ends
            else claim
            for claim in pushed.claims
        ),
    )


def record_pushed(
    storage: Storage,
    ticket_digest: str,
    party: str,
    pushed: VerifiedClaims,
    limits: Limits,
    now: int,
    *,
    client_id: str,
    record: bool = True,
) -> list[Claim]:
    """Records `pushed` (by the client `client_id`) against the ticket for `party`, in the
    caller's transaction: each assertion's use remembered (a replay raises InvalidRequest, rolling
    the request back), the word of an issuer about another subject than before replacing what it
    said, within `[limits] claims_per_ticket`. Returns every claim the ticket now holds for the
    party and this client (another client's are neither read nor counted). With
    `record` false the claims themselves are left for the caller to record (`record_claims`),
    should the ticket go on."""
    for assertion in pushed.assertions:
        use = AssertionUse(
            assertion.issuer, assertion.assertion_id, ticket_digest, party, assertion.expires_at
        )
        collision = _replay(storage.record_assertion_use(use, now), assertion, ticket_digest, party)
        if collision is not None:
            raise InvalidRequest(
                f"{assertion.kind} refused: the {assertion.kind} {echo(assertion.assertion_id)}"
                f" of {assertion.issuer} was presented before (replay: {collision})."
            )
    held = _keep_one_subject_per_issuer(storage, ticket_digest, party, client_id, pushed.assertions)
    within_ticket_bound(held, pushed.claims, limits)
    if record:
        storage.record_claims(ticket_digest, party, pushed.claims)
    return _recorded(held, pushed.claims)


def _replay(uses: list[AssertionUse], assertion: Assertion, ticket: str, party: str) -> str | None:
    """Why an assertion may not be used now, given its earlier uses."""
    # "an assertion ID is accepted once per ticket and requesting party"; and a bearer assertion
    # is about one person, so a second requesting party presenting it is refused too, as is any
    # second use of a OneTimeUse assertion.
    if any(use.ticket_digest == ticket for use in uses):
        return "with this ticket"
    if uses and assertion.one_time:
        return "it is for one time use only"
    if any(use.requesting_party != party for use in uses):
        return "by another requesting party"
    return None


def _keep_one_subject_per_issuer(
    storage: Storage, ticket: str, party: str, client_id: str, assertions: Iterable[Assertion]
) -> list[Claim]:
    """One subject per issuer per ticket and client: the word of an issuer about another subject
    than the one it spoke of before on this ticket replaces everything that issuer said here
    before, so claims about two people never combine. (`read_claim_objects` refused two in one
    request.) Returns the claims the ticket still holds for this party and client."""
    held = storage.gathered_claims(ticket, party, client_id)
    stored: dict[str, set[str | None]] = {}
    for claim in held:
        stored.setdefault(claim.issuer, set()).add(claim.subject)
    forgotten = set()
    for issuer, subject in dict.fromkeys((a.issuer, a.subject) for a in assertions):
        if subject is not None and stored.get(issuer, {subject}) != {subject}:
            storage.forget_issuer_claims(ticket, party, issuer, client_id)
            forgotten.add(issuer)
    return [claim for claim in held if claim.issuer not in forgotten]


def _recorded(held: list[Claim], pushed: Iterable[Claim]) -> list[Claim]:
    """What the ticket holds for the party once `pushed` is recorded, as `record_claims` stores
    it (one claim per type, name and issuer; a pushed one replaces a held one, the last pushed
    wins), without reading it back."""
    merged = {(claim.type, claim.name, claim.issuer): claim for claim in held}
    for claim in pushed:
        merged[(claim.type, claim.name, claim.issuer)] = claim
    return list(merged.values())


def count_refused_request(storage: Storage, digest: str, client_id: str) -> None:
    """A request refused with invalid_request counts toward its client's requests with the
    ticket, and nothing else of it is recorded; the client's last one finishes the ticket (unless
    another client uses it: `finish_for`)."""
    with storage.transaction():
        if storage.count_ticket_request(digest, client_id) >= MAX_TICKET_REQUESTS:
            finish_for(storage, digest, client_id)


def finish_for(storage: Storage, digest: str, client_id: str) -> bool:
    """Finishes the ticket on a refusal of `client_id`'s request, unless another client made
    requests with it or holds claims gathered for it: that client's claims and requests stay
    usable, and a refusal of this one ends nothing of theirs. In the caller's transaction; True
    when the ticket was finished."""
    if storage.ticket_used_by_others(digest, client_id):
        return False
    return storage.finish_ticket(digest)


@contextmanager
def counted_if_refused(storage: Storage, digest: str, client_id: str) -> Iterator[None]:
    """Counts the request when what it wraps refuses it with invalid_request (after the
    transaction it wraps has rolled back)."""
    try:
        yield
    except InvalidRequest:
        count_refused_request(storage, digest, client_id)
        raise
