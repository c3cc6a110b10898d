"""The UMA 2.0 grant (UMA 2.0 Grant for OAuth 2.0 Authorization, section 3.3): a client brings a
permission ticket to the token endpoint, perhaps with a claim token, a persisted claims token (PCT)
and an RPT to upgrade, and gets an RPT, or is told what is missing.

The same store, rules and decision function as the 1.0 authorization request
(`services.authorization`), with 2.0's words:

* The requesting party is the ticket's: `client:<client_id>` of the first client that brings it,
  until a person shares claims for it at the claims interaction endpoint (or the client brings a
  PCT about a person), then that person. A ticket another client has begun to use is
  `invalid_grant`, as is a PCT about another person than the ticket's.
* Claims: those recorded against the ticket (pushed claim tokens, claims the person shared),
  and a PCT's, which serve only the client it was issued to.
* `need_info` rotates the ticket: the old one stops working at once, and the new one carries the
  pairs, the claims and the count of requests (at most 10, as in 1.0). It names what is missing
  (`required_claims`, never a value, a rule id nor a rule's wording) and whether the person can
  share it by being sent to the claims interaction endpoint (`redirect_user`: only for a client
  with a claims redirect URI).
* A grant consumes the ticket. With `rpt` (the client's own live RPT of the same party) that RPT
  gains the permissions and is answered again (`upgraded`); else a new RPT, the client's own (no
  AAT). When the ticket held claims, a new PCT carries them forward (`[lifetimes] pct`).

Reading the ticket, recording the claims, deciding and consuming or rotating the ticket are one
transaction, as in 1.0. The answers themselves are built in `services.uma_answers`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from .. import secrets_at_rest
from ..claims.model import ClaimsError, ClaimsUnavailable, Verifiers
from ..config import Lifetimes, Limits
from ..errors import InvalidRequest, InvalidScope, TemporarilyUnavailable, echo
from ..sharing_config import SharingSettings
from ..storage import Storage
from ..storage.records import Claim, Client, Pct, RequestedPermission, ResourceSet, Ticket
from . import access_history, decision_log, notices, owner_requests
from .decision import MissingResourceSet, RulesFor, Supplier, decide_ticket, gatherable, owner_name
from .pushed_claims import (
    MAX_TICKET_REQUESTS,
    count_refused_request,
    counted_if_refused,
    finish_for,
    record_pushed,
)
from .signing_keys import JwtRpts
from .uma_answers import (
    Answer,
    InvalidGrant,
    denied,
    grant_rpt,
    need_info,
    own_rpt,
    read_claim_token,
    submitted,
)

log = logging.getLogger("umaserver.decisions")

UMA_TICKET = "urn:ietf:params:oauth:grant-type:uma-ticket"


@dataclass(frozen=True)
class GrantRequest:
    """The uma-ticket grant's parameters, unverified."""

    ticket: str
    claim_token: str | None = None
    claim_token_format: str | None = None
    pct: str | None = None
    rpt: str | None = None
    scope: str | None = None
    submit_request: bool = False


_SETTLED = "The ticket is unknown, already used, expired, or was replaced by a newer one."


def request_rpt(
    storage: Storage,
    rules: RulesFor,
    client: Client,
    request: GrantRequest,
    *,
    now: int,
    verifiers: Verifiers,
    lifetimes: Lifetimes,
    limits: Limits,
    rpt_keys: Sequence[bytes],
    server_issuer: str,
    sign_in_providers: Mapping[str, str] | None = None,
    person: str | None = None,
    account: Sequence[Claim] = (),
    jwt_type: str | None = None,
    jwt: JwtRpts | None = None,
    rpt_issuer: str | None = None,
    sharing: SharingSettings | None = None,
    outbox: notices.Outbox | None = None,
) -> Answer:
    """`rules` gives the rules of the ticket's owner, read in the request's transaction; the
    claims interaction endpoint can gather claims of this server (`server_issuer`) and of the
    sign-in providers (issuer -> display name).

    Keycloak's form (its realm face): the client acts with a person's token instead of its own
    credentials; `person` is then the requesting party, and `account` the claims this server
    vouches for about that person (used in the decision, never recorded nor carried in a PCT).
    `jwt_type`: the claim type of a claim token of Keycloak's JWT format.

    With `jwt`, a grant mints a JWT RPT whose `iss` is `rpt_issuer` (the issuer of the document
    the client was sent through: the realm's on the realm face; `server_issuer` when None).

    With `sharing`, a ticket with a request to its owner answers from it while it is pending
    (request_submitted with a rotated ticket) or denied (request_denied); with `submit_request`
    too, a refusal of a person's request (Keycloak's form: `person`) asks the owner
    (`owner_requests`)."""
    digest = secrets_at_rest.digest(request.ticket)
    # Verification (signatures, key look-ups) happens outside the write lock; nothing is recorded
    # unless the claim token passes.
    try:
        pushed = read_claim_token(
            request.claim_token,
            request.claim_token_format,
            client,
            verifiers,
            now,
            limits,
            jwt_type,
        )
    except ClaimsUnavailable as error:
        _live_ticket(storage, digest, now)
        raise TemporarilyUnavailable(
            error.description, headers={"Retry-After": str(error.retry_after)}
        ) from None
    except ClaimsError as error:
        count_refused_request(storage, _live_ticket(storage, digest, now).digest, client.client_id)
        raise InvalidRequest(error.description) from None
    own = f"client:{client.client_id}"
    with counted_if_refused(storage, digest, client.client_id), storage.transaction():
        ticket = _live_ticket(storage, digest, now)
        party = ticket.requesting_party or own
        if party.startswith("client:") and party != own:
            raise InvalidGrant("This ticket is being used by another client.")
        if person is not None and party != person:
            if party != own:
                raise InvalidGrant("Another person has shared claims for this ticket.")
            party = person
        if sharing is not None and ticket.asked:
            asked, ticket = owner_requests.waiting_on(storage, ticket)
            if asked is not None:
                # No decision, and no request counted: the owner has the word.
                log.info(
                    "decision=%s grant=uma-ticket owner=%s request=%s client=%s",
                    asked.status,
                    ticket.owner,
                    asked.id,
                    client.client_id,
                )
                if asked.status == "denied":
                    return denied(owner_requests.DENIED_DESCRIPTION)
                shared = storage.ticket_used_by_others(digest, client.client_id)
                return submitted(storage, digest, sharing, request.ticket if shared else None)
        pct_claims: list[Claim] = []
        if request.pct is not None:
            pct = _own_pct(storage, request.pct, client, now)
            if pct.user_sub is not None and party != pct.user_sub:
                if party != own:
                    raise InvalidGrant(
                        "The PCT is about another person than the one who shared claims for this"
                        " ticket."
                    )
                party = pct.user_sub
                if ticket.requesting_party is not None:  # its claims move to the person
                    storage.set_ticket_party(digest, party)
            pct_claims = storage.pct_claims(pct.digest, now)
        upgrading = own_rpt(storage, request.rpt, client, now, rpt_keys) if request.rpt else None
        permissions = ticket.permissions
        if request.scope:
            permissions = _with_scopes(storage, permissions, request.scope)
            storage.set_ticket_permissions(digest, permissions)
        # Recorded against the ticket only when it goes on (need_info): a grant carries them in
        # its PCT, a refusal keeps nothing.
        held = record_pushed(
            storage, digest, party, pushed, limits, now, client_id=client.client_id, record=False
        )
        # Claims serve the client they were pushed by or shared with, never another.
        claims = [claim for claim in held if claim.client_id == client.client_id] + pct_claims
        requests = storage.count_ticket_request(digest, client.client_id)
        storage.void_claims_handles(digest, client.client_id)
        owner = owner_name(storage, ticket.owner)
        can_gather = (
            gatherable(server_issuer, dict(sign_in_providers or {}), has_person=True)
            if client.claims_redirect_uris
            else frozenset()
        )
        try:
            decision = decide_ticket(
                storage,
                rules(storage, owner),
                owner,
                permissions,
                Supplier.of(client.client_id, client.push_claim_types, verifiers, can_gather),
                party,
                [*claims, *account],
                now=now,
            )
        except MissingResourceSet:
            raise InvalidGrant(_SETTLED) from None
        if upgrading is not None and upgrading.requesting_party != party:
            raise InvalidGrant("The RPT is of another requesting party than this ticket's.")
        if decision.outcome == "grant":
            storage.consume_ticket(digest)
            answer = grant_rpt(
                storage,
                now,
                client,
                party,
                upgrading,
                request.rpt,
                decision.granted(),
                claims,
                lifetimes,
                rpt_keys[0],
                jwt=jwt,
                issuer=server_issuer if rpt_issuer is None else rpt_issuer,
            )
        elif decision.outcome == "deny":
            filed = (
                owner_requests.file_request(
                    storage,
                    sharing,
                    owner=ticket.owner,
                    pairs=permissions,
                    ticket_digest=digest,
                    client=client,
                    party=person,
                    now=now,
                    rs_name=decision.pairs[0][0].label,
                    outbox=outbox,
                )
                if request.submit_request and sharing is not None
                else None
            )
            if filed is not None and filed.request is not None and sharing is not None:
                if party != ticket.requesting_party:  # the person's, from now on
                    storage.set_ticket_party(digest, party)
                shared = storage.ticket_used_by_others(digest, client.client_id)
                answer = submitted(storage, digest, sharing, request.ticket if shared else None)
            else:
                finish_for(storage, digest, client.client_id)
                answer = denied(
                    filed.reason
                    if filed is not None and filed.reason
                    else "The resource owner's policies do not allow this access."
                )
        elif requests >= MAX_TICKET_REQUESTS:
            finish_for(storage, digest, client.client_id)
            answer = denied(
                "This ticket has had all its requests; ask the resource server for a new one."
            )
        else:
            if party != ticket.requesting_party:  # kept with the ticket from now on
                storage.set_ticket_party(digest, party)
            storage.record_claims(digest, party, pushed.claims)
            if storage.ticket_used_by_others(digest, client.client_id):
                # Rotating would end the ticket another client holds: it goes on as it is.
                rotated = request.ticket
            else:
                rotated = secrets_at_rest.new_token(secrets_at_rest.TICKET_PREFIX)
                storage.rotate_ticket(digest, secrets_at_rest.digest(rotated))
            answer = need_info(rotated, decision.need_claims, decision.gathers)
        said = decision.outcome
        said_error = answer.body.get("error") if isinstance(answer.body, dict) else None
        if said_error == "request_denied":
            said = "deny"  # the policy's word, or out of requests
        access_history.record(
            storage,
            now=now,
            kind="grant" if said == "grant" else "decision",
            outcome=owner_requests.SUBMITTED
            if said_error == "request_submitted"
            else access_history.OUTCOMES[said],
            client=client,
            party=party,
            pairs=((rs, scopes, d.rule_ids) for rs, scopes, d in decision.pairs),
        )
    who = decision_log.party_of(storage, party, claims)
    decision_log.report(
        "request_submitted" if said_error == "request_submitted" else said,
        owner,
        permissions,
        client.client_id,
        who,
        decision.rule_ids,
        grant="uma-ticket",
        requests=requests,
    )
    return answer


def _live_ticket(storage: Storage, digest: str, now: int) -> Ticket:
    ticket = storage.get_ticket(digest)
    if ticket is None or ticket.state != "open" or ticket.expires_at <= now:
        raise InvalidGrant(_SETTLED)
    return ticket


def _own_pct(storage: Storage, unverified_pct: str, client: Client, now: int) -> Pct:
    pct = storage.get_pct(secrets_at_rest.digest(unverified_pct))
    if pct is None or not pct.is_live(now) or pct.client_id != client.client_id:
        raise InvalidGrant("The PCT is unknown, expired, withdrawn, or another client's.")
    return pct


def _with_scopes(
    storage: Storage, permissions: Sequence[RequestedPermission], scope: str
) -> tuple[RequestedPermission, ...]:
    """Each scope of `scope` added to every pair whose set registers it; InvalidScope for one that
    no pair's set registers."""
    sets: dict[str, ResourceSet | None] = {
        pair.resource_set_id: storage.find_resource_set(pair.resource_set_id)
        for pair in permissions
    }
    wanted = [name for name in scope.split(" ") if name]
    for name in wanted:
        if not any(rs is not None and name in rs.scopes for rs in sets.values()):
            raise InvalidScope(
                f"scope: {echo(name)} is registered on none of the resource sets of this ticket."
            )
    return tuple(
        replace(
            pair,
            scopes=tuple(
                dict.fromkeys(
                    [
                        *pair.scopes,
                        *(
                            n
                            for n in wanted
                            if (rs := sets[pair.resource_set_id]) and n in rs.scopes
                        ),
                    ]
                )
            ),
        )
        for pair in permissions
    )
