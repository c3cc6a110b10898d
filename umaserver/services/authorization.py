"""The authorization request: a client with an AAT presents an RPT and a permission ticket, and
perhaps claims about its requesting party; the owner's policies decide.

Checked in the order token (by the caller), body (by the caller), ticket, claims, decision. Reading
the ticket, recording the claims, deciding and consuming the ticket are one transaction, so of
simultaneous requests with one ticket exactly one can be granted.

Errors in the request (an unknown, used or expired ticket; a refused claim) are raised; the outcome
of a well-formed request, grant, need_claims or deny, is returned as one `Outcome`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from .. import secrets_at_rest
from ..claims.model import (
    Assertion,
    ClaimBounds,
    ClaimsError,
    ClaimsUnavailable,
    Verifiers,
    read_claim_objects,
)
from ..config import Lifetimes, Limits
from ..errors import ExpiredTicket, InvalidRequest, InvalidTicket, TemporarilyUnavailable, echo
from ..policy.decision import NeededClaim, redirect_label
from ..storage import Storage
from ..storage.records import AccessToken, AssertionUse, Claim, Client, Ticket
from . import gathering, rpts
from .decision import AccessRequest, RulesFor, Supplier, decide_access, gatherable, owner_name
from .ticket_claims import within_ticket_bound

log = logging.getLogger("umaserver.decisions")

# "need_claims leaves it usable (at most 10 requests)".
MAX_TICKET_REQUESTS = 10
OUT_OF_REQUESTS = "This ticket has had all its requests; ask the resource server for a new one."
_DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Outcome:
    kind: Literal["grant", "need_claims", "deny"]
    rpt: str | None = None  # the RPT that now carries the permission, on a grant
    need_claims: tuple[NeededClaim, ...] = ()
    reason: str | None = None  # why a deny is final, when it is not the policy's own word


def _open_ticket(storage: Storage, unverified_ticket: str, now: int) -> Ticket:
    ticket = storage.get_ticket(secrets_at_rest.digest(unverified_ticket))
    if ticket is None or ticket.state != "open":
        raise InvalidTicket()
    if ticket.expires_at <= now:
        raise ExpiredTicket()
    return ticket


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
    storage: Storage, ticket: str, party: str, assertions: Iterable[Assertion]
) -> list[Claim]:
    """One subject per issuer per ticket: the word of an issuer about another subject than the
    one it spoke of before on this ticket replaces everything that issuer said here before, so
    claims about two people never combine. (`read_claim_objects` refused two in one request.)
    Returns the claims the ticket still holds for this party."""
    held = storage.gathered_claims(ticket, party)
    stored: dict[str, set[str | None]] = {}
    for claim in held:
        stored.setdefault(claim.issuer, set()).add(claim.subject)
    forgotten = set()
    for issuer, subject in dict.fromkeys((a.issuer, a.subject) for a in assertions):
        if subject is not None and stored.get(issuer, {subject}) != {subject}:
            storage.forget_issuer_claims(ticket, party, issuer)
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


def _count_refused_request(storage: Storage, digest: str) -> None:
    """A request refused with invalid_request counts toward the ticket's requests, and nothing
    else of it is recorded; the last one finishes the ticket."""
    with storage.transaction():
        if storage.count_ticket_request(digest) >= MAX_TICKET_REQUESTS:
            storage.finish_ticket(digest)


@contextmanager
def _counted_if_refused(storage: Storage, digest: str) -> Iterator[None]:
    """Counts the request when what it wraps refuses it with invalid_request (after the
    transaction it wraps has rolled back)."""
    try:
        yield
    except InvalidRequest:
        _count_refused_request(storage, digest)
        raise


def request_authorization(
    storage: Storage,
    rules: RulesFor,
    *,
    now: int,
    aat: AccessToken,
    client: Client,
    verifiers: Verifiers,
    unverified_rpt: str,
    unverified_ticket: str,
    claim_objects: list[dict[str, Any]],
    lifetimes: Lifetimes,
    rpt_key: bytes,
    limits: Limits = _DEFAULT_LIMITS,
    server_issuer: str = "",
    sign_in_providers: Mapping[str, str] | None = None,
) -> Outcome:
    """`rules` gives the rules of the ticket's owner, read in the request's transaction.
    `server_issuer` and `sign_in_providers` (issuer -> display name) are where this server can
    gather claims by redirecting a requesting party who is a person (`redirect_required`); without
    `server_issuer`, never."""
    display_names = dict(sign_in_providers or {})
    can_gather = (
        gatherable(server_issuer, display_names, has_person=aat.user_sub is not None)
        if server_issuer
        else frozenset()
    )
    # Verification (signatures, key look-ups) happens outside the write lock; nothing is recorded
    # unless every claim object passes. The ticket is read once, under the lock; a refusal of the
    # claims reads it first, so that an unknown, used or expired ticket is still the error named.
    try:
        pushed = read_claim_objects(
            claim_objects,
            client.client_id,
            client.push_claim_types,
            verifiers,
            now,
            ClaimBounds(
                limits.claims_per_object,
                limits.claim_objects_per_request,
                limits.claim_value_bytes,
            ),
        )
    except ClaimsUnavailable as error:
        _open_ticket(storage, unverified_ticket, now)
        raise TemporarilyUnavailable(
            error.description, headers={"Retry-After": str(error.retry_after)}
        ) from None
    except ClaimsError as error:
        _count_refused_request(storage, _open_ticket(storage, unverified_ticket, now).digest)
        raise InvalidRequest(error.description) from None
    party = aat.owner

    with (
        _counted_if_refused(storage, secrets_at_rest.digest(unverified_ticket)),
        storage.transaction(),
    ):
        ticket = _open_ticket(storage, unverified_ticket, now)
        resource_set = storage.find_resource_set(ticket.resource_set_id)
        if resource_set is None:
            raise InvalidTicket()
        for assertion in pushed.assertions:
            use = AssertionUse(
                assertion.issuer, assertion.assertion_id, ticket.digest, party, assertion.expires_at
            )
            collision = _replay(
                storage.record_assertion_use(use, now), assertion, ticket.digest, party
            )
            if collision is not None:  # raising rolls the whole request back
                raise InvalidRequest(
                    f"{assertion.kind} refused: the {assertion.kind} {echo(assertion.assertion_id)}"
                    f" of {assertion.issuer} was presented before (replay: {collision})."
                )
        held = _keep_one_subject_per_issuer(storage, ticket.digest, party, pushed.assertions)
        within_ticket_bound(held, pushed.claims, limits)
        storage.record_claims(ticket.digest, party, pushed.claims)
        claims = _recorded(held, pushed.claims)
        requests = storage.count_ticket_request(ticket.digest)
        # A new request on the ticket voids the handles of earlier redirect_required answers.
        storage.void_claims_handles(ticket.digest)
        owner = owner_name(storage, ticket.owner)
        decision = decide_access(
            rules(storage, owner),
            AccessRequest(
                owner=owner,
                resource_set=resource_set,
                scopes=ticket.scopes,
                client=Supplier.of(
                    client.client_id, client.push_claim_types, verifiers, can_gather
                ),
                requesting_party=party,
                claims=claims,
            ),
        )
        if decision.outcome == "grant":
            if not storage.consume_ticket(ticket.digest):  # cannot happen under the lock
                raise InvalidTicket()
            rpt = rpts.grant(
                storage,
                now,
                aat,
                unverified_rpt,
                resource_set.id,
                ticket.scopes,
                lifetimes,
                rpt_key,
            )
            outcome = Outcome("grant", rpt=rpt)
        elif decision.outcome == "deny":
            storage.finish_ticket(ticket.digest)
            outcome = Outcome("deny")
        elif requests >= MAX_TICKET_REQUESTS:
            storage.finish_ticket(ticket.digest)
            outcome = Outcome("deny", reason=OUT_OF_REQUESTS)
        elif decision.redirect is not None:
            handle = gathering.make_handle(
                storage, ticket=ticket, aat=aat, now=now, lifetime=lifetimes.claims_handle
            )
            label = redirect_label(decision.redirect)
            outcome = Outcome(
                "need_claims", need_claims=(NeededClaim("redirect_required", label, handle),)
            )
        else:
            outcome = Outcome("need_claims", need_claims=decision.need_claims)

    log.info(
        "decision=%s owner=%s resource_set=%s scopes=%s client=%s rules=%s requests=%d",
        outcome.kind,
        owner,
        ticket.resource_set_id,
        ",".join(ticket.scopes),
        client.client_id,
        ",".join(decision.rule_ids) or "-",
        requests,
    )
    return outcome
