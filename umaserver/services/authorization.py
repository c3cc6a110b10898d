"""The authorization request: a client with an AAT presents an RPT and a permission ticket, and
perhaps claims about its requesting party; the owner's policies decide.

Plain Python over the data layer (no Flask): checked in the order token (by the caller), body (by
the caller), ticket, claims, decision. Reading the ticket, recording the claims, deciding and
consuming the ticket are one transaction, so of simultaneous requests with one ticket exactly one
can be granted.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from .. import secrets_at_rest
from ..claims.model import ClaimsError, ClaimsUnavailable, Verifiers, read_claim_objects, suppliable
from ..config import Lifetimes
from ..errors import ExpiredTicket, InvalidRequest, InvalidTicket, TemporarilyUnavailable
from ..policy.decision import Decision, decide
from ..policy.rules import ResourceSetRef, RuleSet
from ..storage.sqlite import AccessToken, Client, Rpt, Store, Ticket

log = logging.getLogger("umaserver.decisions")

# "need_claims leaves it usable (at most 10 requests)".
MAX_TICKET_REQUESTS = 10


_REPLAYS = {
    "this ticket": "replay: with this ticket",
    "another requesting party": "replay: by another requesting party",
    "one time use": "replay: it is for one time use only",
}


@dataclass(frozen=True)
class AuthorizationResult:
    decision: Decision
    rpt: str | None = None
    out_of_requests: bool = False


def _open_ticket(store: Store, unverified_ticket: str, now: float) -> Ticket:
    ticket = store.get_ticket(unverified_ticket)
    if ticket is None or ticket.state != "open":
        raise InvalidTicket()
    if ticket.expires_at <= now:
        raise ExpiredTicket()
    return ticket


def request_authorization(
    store: Store,
    rules: RuleSet,
    verifiers: Verifiers,
    *,
    aat: AccessToken,
    client: Client,
    unverified_rpt: str,
    unverified_ticket: str,
    claim_objects: list[dict[str, Any]],
    lifetimes: Lifetimes,
    rpt_key: bytes,
) -> AuthorizationResult:
    now = int(time.time())
    _open_ticket(store, unverified_ticket, now)
    # Verification (signatures, key look-ups) happens outside the write lock; nothing is recorded
    # unless every claim object passes.
    try:
        pushed = read_claim_objects(
            claim_objects, client.client_id, client.push_claim_types, verifiers, now
        )
    except ClaimsUnavailable as error:
        raise TemporarilyUnavailable(
            error.description, headers={"Retry-After": str(error.retry_after)}
        ) from None
    except ClaimsError as error:
        raise InvalidRequest(error.description) from None
    requesting_party = aat.owner

    with store.transaction():
        ticket = _open_ticket(store, unverified_ticket, now)  # again, under the lock
        resource_set = store.find_resource_set(ticket.resource_set_id)
        if resource_set is None:
            raise InvalidTicket()
        for assertion in pushed.assertions:
            # "an assertion ID is accepted once per ticket and requesting party"; and a bearer
            # assertion is about one person, so a second requesting party presenting it is
            # refused too, as is any second use of a OneTimeUse assertion.
            collision = store.remember_assertion(assertion, ticket.digest, requesting_party)
            if collision is not None:
                raise InvalidRequest(
                    f"SAML assertion refused: the assertion {assertion.assertion_id!r} of"
                    f" {assertion.issuer} was presented before ({_REPLAYS[collision]})."
                )
        store.record_claims(ticket.digest, requesting_party, pushed.claims)
        requests = store.count_ticket_request(ticket.digest)
        description = resource_set.description
        owner = store.owner_name(ticket.owner)
        decision = decide(
            rules,
            owner=owner,
            resource_set=ResourceSetRef(
                id=resource_set.id, name=description["name"], type=description.get("type")
            ),
            scopes=ticket.scopes,
            claims=store.gathered_claims(ticket.digest, requesting_party),
            can_supply=suppliable(client.client_id, client.push_claim_types, verifiers),
        )
        result = AuthorizationResult(decision)
        if decision.outcome == "grant":
            store.close_ticket(ticket.digest, "granted")
            rpt = _add_permission(store, aat, unverified_rpt, ticket, lifetimes, rpt_key)
            result = AuthorizationResult(decision, rpt=rpt)
        elif decision.outcome == "deny":
            store.close_ticket(ticket.digest, "finished")
        elif requests >= MAX_TICKET_REQUESTS:
            store.close_ticket(ticket.digest, "finished")
            result = AuthorizationResult(decision, out_of_requests=True)

    log.info(
        "decision=%s owner=%s resource_set=%s scopes=%s client=%s rules=%s requests=%d",
        "deny" if result.out_of_requests else decision.outcome,
        owner,
        ticket.resource_set_id,
        ",".join(ticket.scopes),
        client.client_id,
        ",".join(decision.rule_ids) or "-",
        requests,
    )
    return result


def issue_rpt(store: Store, aat: AccessToken, rpt_key: bytes, lifetime: int) -> tuple[str, Rpt]:
    """A fresh RPT for the AAT (its previous ones are revoked): the token and its record."""
    rpt, seed = secrets_at_rest.new_reissuable_token(secrets_at_rest.RPT_PREFIX, rpt_key)
    return rpt, store.create_rpt(aat, rpt, seed, lifetime)


def _add_permission(
    store: Store,
    aat: AccessToken,
    unverified_rpt: str,
    ticket: Ticket,
    lifetimes: Lifetimes,
    rpt_key: bytes,
) -> str:
    """Adds the permission to the RPT sent when it is live and this AAT's, else to the AAT's live
    RPT (made if there is none), and returns that RPT.

    The AAT's live RPT is made again from its seed: the client may be using it, so it must stay
    live rather than be replaced behind the client's back.
    """
    now = time.time()
    sent = store.get_rpt(unverified_rpt)
    if sent is not None and sent.is_live(now) and sent.aat_digest == aat.digest:
        store.add_permission(sent, ticket.resource_set_id, ticket.scopes, lifetimes.permission)
        return unverified_rpt
    live = store.live_rpt_of(aat.digest)
    if live is not None:
        rpt = secrets_at_rest.reissue_token(secrets_at_rest.RPT_PREFIX, rpt_key, live.seed)
        if secrets_at_rest.matches_digest(rpt, live.digest):
            store.add_permission(live, ticket.resource_set_id, ticket.scopes, lifetimes.permission)
            return rpt
    # No live RPT, or one made under an earlier secret_key: a new one carrying its permissions.
    rpt, record = issue_rpt(store, aat, rpt_key, lifetimes.rpt)
    if live is not None:
        store.copy_permissions(live.digest, record)
    store.add_permission(record, ticket.resource_set_id, ticket.scopes, lifetimes.permission)
    return rpt
