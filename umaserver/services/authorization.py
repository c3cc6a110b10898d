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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .. import secrets_at_rest
from ..claims.model import ACCOUNT_CLAIM_TYPE, ClaimsError, ClaimsUnavailable, Verifiers
from ..config import Lifetimes, Limits
from ..errors import ExpiredTicket, InvalidRequest, InvalidTicket, TemporarilyUnavailable
from ..policy.decision import NeededClaim, redirect_label
from ..sharing_config import SharingSettings
from ..storage import Storage
from ..storage.records import AccessToken, Client, Ticket
from . import access_history, decision_log, gathering, notices, owner_requests, rpts
from .account_claims import account_claims
from .decision import (
    MissingResourceSet,
    RulesFor,
    Supplier,
    decide_ticket,
    gatherable,
    owner_name,
)
from .pushed_claims import (
    MAX_TICKET_REQUESTS,
    count_refused_request,
    counted_if_refused,
    finish_for,
    read_pushed,
    record_pushed,
)
from .signing_keys import JwtRpts

log = logging.getLogger("umaserver.decisions")

OUT_OF_REQUESTS = "This ticket has had all its requests; ask the resource server for a new one."
_DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Outcome:
    kind: Literal["grant", "need_claims", "deny", "request_submitted"]
    rpt: str | None = None  # the RPT that now carries the permission, on a grant
    need_claims: tuple[NeededClaim, ...] = ()
    reason: str | None = None  # why a deny is final, when it is not the policy's own word
    interval: int = 0  # seconds between polls, on request_submitted


def _open_ticket(storage: Storage, unverified_ticket: str, now: int) -> Ticket:
    ticket = storage.get_ticket(secrets_at_rest.digest(unverified_ticket))
    if ticket is None or ticket.state != "open":
        raise InvalidTicket()
    if ticket.expires_at <= now:
        raise ExpiredTicket()
    return ticket


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
    rpt_keys: Sequence[bytes],
    limits: Limits = _DEFAULT_LIMITS,
    server_issuer: str = "",
    sign_in_providers: Mapping[str, str] | None = None,
    jwt: JwtRpts | None = None,
    rpt_issuer: str | None = None,
    submit_request: bool = False,
    sharing: SharingSettings | None = None,
    outbox: notices.Outbox | None = None,
) -> Outcome:
    """`rules` gives the rules of the ticket's owner, read in the request's transaction.
    `server_issuer` and `sign_in_providers` (issuer -> display name) are where this server can
    gather claims by redirecting a requesting party who is a person (`redirect_required`); without
    `server_issuer`, never. An AAT issued to a person brings the account claims about that person
    (`account_claims`, vouched for by `server_issuer`). With `jwt`, a grant mints a JWT RPT whose
    `iss` is `rpt_issuer` (the issuer of the document the client was sent through;
    `server_issuer` when None).

    With `sharing`, a ticket with a request to its owner answers from it while it is pending or
    denied (`owner_requests.waiting_on`); with `submit_request` too, a refusal asks the owner
    (`owner_requests.file_request`) and is answered request_submitted."""
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
        pushed = read_pushed(claim_objects, client, verifiers, now, limits)
    except ClaimsUnavailable as error:
        _open_ticket(storage, unverified_ticket, now)
        raise TemporarilyUnavailable(
            error.description, headers={"Retry-After": str(error.retry_after)}
        ) from None
    except ClaimsError as error:
        count_refused_request(
            storage, _open_ticket(storage, unverified_ticket, now).digest, client.client_id
        )
        raise InvalidRequest(error.description) from None
    party = aat.owner

    with (
        counted_if_refused(storage, secrets_at_rest.digest(unverified_ticket), client.client_id),
        storage.transaction(),
    ):
        ticket = _open_ticket(storage, unverified_ticket, now)
        if sharing is not None and ticket.asked:
            asked, ticket = owner_requests.waiting_on(storage, ticket)
            if asked is not None:
                # No decision, and no request counted: the owner has the word.
                log.info(
                    "decision=%s owner=%s request=%s client=%s",
                    asked.status,
                    ticket.owner,
                    asked.id,
                    client.client_id,
                )
                if asked.status == "denied":
                    return Outcome("deny", reason=owner_requests.DENIED_DESCRIPTION)
                return Outcome("request_submitted", interval=sharing.poll_interval)
        # The claims pushed by this client or shared with it, never another client's (N1).
        claims = record_pushed(
            storage, ticket.digest, party, pushed, limits, now, client_id=client.client_id
        )
        requests = storage.count_ticket_request(ticket.digest, client.client_id)
        # A new request of the client voids the handles of its earlier redirect_required answers.
        storage.void_claims_handles(ticket.digest, client.client_id)
        owner = owner_name(storage, ticket.owner)
        owned = rules(storage, owner)
        if (
            aat.user_sub is not None
            and server_issuer
            and owned.reads_type(owner, ACCOUNT_CLAIM_TYPE)
        ):
            # The person the AAT was issued to: this server's own word, read now, not recorded
            # (and read only when a rule of the owner could look at it).
            claims = [
                *claims,
                *account_claims(
                    storage, aat.user_sub, server_issuer, client_id=client.client_id, now=now
                ),
            ]
        try:
            decision = decide_ticket(
                storage,
                owned,
                owner,
                ticket.permissions,
                Supplier.of(client.client_id, client.push_claim_types, verifiers, can_gather),
                party,
                claims,
                now=now,
            )
        except MissingResourceSet:
            raise InvalidTicket() from None
        if decision.outcome == "grant":
            if not storage.consume_ticket(ticket.digest):  # cannot happen under the lock
                raise InvalidTicket()
            rpt = rpts.grant(
                storage,
                now,
                aat,
                unverified_rpt,
                decision.granted(),
                lifetimes,
                rpt_keys,
                jwt=jwt,
                issuer=server_issuer if rpt_issuer is None else rpt_issuer,
            )
            outcome = Outcome("grant", rpt=rpt)
        elif decision.outcome == "deny":
            filed = (
                owner_requests.file_request(
                    storage,
                    sharing,
                    owner=ticket.owner,
                    pairs=ticket.permissions,
                    ticket_digest=ticket.digest,
                    client=client,
                    party=aat.user_sub,
                    now=now,
                    rs_name=decision.pairs[0][0].label,
                    outbox=outbox,
                )
                if submit_request and sharing is not None
                else None
            )
            if filed is not None and filed.request is not None and sharing is not None:
                outcome = Outcome("request_submitted", interval=sharing.poll_interval)
            else:
                finish_for(storage, ticket.digest, client.client_id)
                outcome = Outcome("deny", reason=filed.reason if filed else None)
        elif requests >= MAX_TICKET_REQUESTS:
            finish_for(storage, ticket.digest, client.client_id)
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
        access_history.record(
            storage,
            now=now,
            kind="grant" if outcome.kind == "grant" else "decision",
            outcome=owner_requests.SUBMITTED
            if outcome.kind == "request_submitted"
            else access_history.OUTCOMES[outcome.kind],
            client=client,
            party=aat.user_sub if aat.user_sub is not None else party,
            pairs=((rs, scopes, d.rule_ids) for rs, scopes, d in decision.pairs),
            username=aat.username,
        )

    who = decision_log.requesting_party(party, aat.username, claims)
    decision_log.report(
        outcome.kind,
        owner,
        ticket.permissions,
        client.client_id,
        who,
        decision.rule_ids,
        requests=requests,
    )
    return outcome
