"""Asking the owner (issue 25, item 3): when the owner's rules refuse a person's client, the
client may ask the owner instead (`submit_request`), and the owner approves or denies the
request on /policy/requests.

* A request is filed on a refusal only (never on need_claims/need_info), for a ticket of one
  (set, scopes) pair, when a person is behind the client's token and a person owns the set, and
  the owner takes requests: `[sharing] requests` (the server's word: false turns requests off for
  everyone) and the owner's own switch on /account (unset: yes). One person has at most
  `[sharing] max_pending_requests` pending: past it the refusal stays, saying why.
* Filing keeps the ticket open as long as the request waits (`[sharing] request_lifetime`; then
  the ticket answers expired_ticket). While the request is pending, the client's requests with
  the ticket are answered request_submitted again without a decision, and do not count toward
  the ticket's requests (`pushed_claims.MAX_TICKET_REQUESTS`).
* Approve makes a share (`services.shares`) with the person, for the scopes approved (some or
  all of those asked) until an optional end. The client's next request with the ticket narrows
  it to those scopes (`waiting_on`, under the ticket's lock) and is decided again: the share
  grants it. Deny leaves the ticket open
  for the one request that is told so (1.0 not_authorized_permission, 2.0 request_denied), which
  finishes it.

Every step is an event of the owner's history, written in its transaction: the request (a
decision with the outcome "request submitted"), the approval, the denial. `request_filed` and
`request_decided` are the two moments a notice would be sent at.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from .. import secrets_at_rest
from ..sharing_config import SharingSettings
from ..storage import Storage
from ..storage.people_records import AccessRequest, Event
from ..storage.records import Client, RequestedPermission, Ticket
from . import notices, shares

log = logging.getLogger("umaserver.requests")

REQUEST_PREFIX = "req_"
SUBMITTED = "request submitted"
DENIED_DESCRIPTION = "The resource owner denied the request for access."
# How many requests the owner's page lists of each kind.
LISTED = 200


class RequestRefused(Exception):
    """The owner's answer cannot be taken; the message is a sentence for the owner, about the
    form's field `field` (None: the whole request)."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Filed:
    """What asking the owner came to: the request filed, or the reason the refusal stays."""

    request: AccessRequest | None = None
    reason: str | None = None


def takes_requests(storage: Storage, owner_sub: str, settings: SharingSettings) -> bool:
    """Whether others may ask the owner: the server allows requests and the owner has not turned
    them off."""
    return settings.requests and storage.takes_requests(owner_sub) is not False


def pending_count(storage: Storage, owner_sub: str, now: int | None = None) -> int:
    """How many requests wait for the owner's answer (the header's "Requests (N)"); `now` is the
    app's clock, the system's when not given."""
    return storage.count_pending_requests_to(owner_sub, int(time.time()) if now is None else now)


def waiting_on(storage: Storage, ticket: Ticket) -> tuple[AccessRequest | None, Ticket]:
    """The ticket's request when it settles the client's answer without a decision: pending
    (answer request_submitted again) or denied (answer the denial, and finish the ticket); and
    the ticket the decision is about. An approved request lets the decision run on the ticket
    narrowed to the scopes approved. The narrowing is written here, under the ticket's lock that
    the caller's transaction holds, and not by the approval: a polling client rotates the ticket
    on each request, and an approval that took the ticket's lock would race each rotation."""
    asked = storage.request_for_ticket(ticket.digest)
    if asked is None:
        return None, ticket
    if asked.status == "approved":
        scopes = asked.approved_scopes or asked.scopes
        approved = (RequestedPermission(asked.resource_set_id, scopes),)
        if ticket.permissions != approved:
            storage.set_ticket_permissions(ticket.digest, approved)
            ticket = replace(ticket, resource_set_id=asked.resource_set_id, scopes=scopes, more=())
        return None, ticket
    if asked.status == "denied":
        storage.finish_ticket(ticket.digest)
    return asked, ticket


def file_request(
    storage: Storage,
    settings: SharingSettings,
    *,
    owner: str,
    pairs: Sequence[RequestedPermission],
    ticket_digest: str | None,
    client: Client,
    party: str | None,
    now: int,
    rs_name: str,
    outbox: notices.Outbox | None = None,
) -> Filed | None:
    """Asks `owner` (a sub) for what the rules refused `party` (a user's sub): `pairs`, one
    (set, scopes) pair, on the ticket the client polls with from now on (`ticket_digest`: the
    ticket's own, or its rotated successor; None for Keycloak's ticketless form, where the client
    simply asks again). None when the flag changes nothing here (no person behind the token or
    owning the set, several pairs asked, requests turned off, the ticket asked already); a `Filed`
    with the request waiting when the same person asked for the same without a ticket before,
    without a request when the person has too many pending. A new request is a notice to the
    owner through `outbox` (None: none). In the caller's transaction."""
    if party is None or len(pairs) != 1:
        return None
    person = storage.get_user(party)
    if person is None or person.sub == owner or storage.get_user(owner) is None:
        return None
    if not takes_requests(storage, owner, settings):
        return None
    pair = pairs[0]
    if ticket_digest is not None:
        if storage.request_for_ticket(ticket_digest) is not None:
            return None
    else:
        # Keycloak's client asks again with the same permission: the request waiting answers.
        for found in storage.requests_of(owner, "pending", now, LISTED):
            if (
                found.party == person.sub
                and found.resource_set_id == pair.resource_set_id
                and set(pair.scopes) <= set(found.scopes)
            ):
                return Filed(request=found)
    if storage.count_pending_requests_by(person.sub, now) >= settings.max_pending_requests:
        return Filed(
            reason=f"The requesting party has {settings.max_pending_requests} requests waiting"
            " for owners' answers already, as many as this server keeps: the refusal stands."
        )
    request = AccessRequest(
        id=secrets_at_rest.new_id(REQUEST_PREFIX),
        owner=owner,
        resource_set_id=pair.resource_set_id,
        scopes=pair.scopes,
        party=person.sub,
        party_name=person.username,
        client_id=client.client_id,
        client_name=client.name or client.client_id,
        ticket_digest=ticket_digest or "",
        created_at=now,
        expires_at=now + settings.request_lifetime,
    )
    storage.add_request(request)
    if ticket_digest is not None:
        # The ticket lives as long as its request.
        storage.extend_ticket(ticket_digest, request.expires_at)
    request_filed(storage, request, rs_name, outbox)
    return Filed(request=request)


def request_filed(
    storage: Storage, request: AccessRequest, rs_name: str, outbox: notices.Outbox | None
) -> None:
    """The moment a request is filed (in its transaction): the owner gets a notice through
    `outbox` (None: none)."""
    log.info(
        "request filed: id=%s owner=%s resource_set=%s scopes=%s client=%s",
        request.id,
        request.owner,
        request.resource_set_id,
        ",".join(request.scopes),
        request.client_id,
    )
    if outbox is not None:
        message = notices.request_to_owner(
            outbox,
            party=request.party_name,
            client_name=request.client_name,
            set_name=rs_name,
            scopes=request.scopes,
        )
        notices.notify(storage, outbox, message, now=request.created_at, user_sub=request.owner)


def request_decided(
    storage: Storage,
    request: AccessRequest,
    *,
    outbox: notices.Outbox | None,
    set_name: str,
    now: int,
    until: int | None = None,
) -> None:
    """The moment the owner answers a request (in its transaction): the person who asked gets a
    notice of the answer through `outbox` (None: none)."""
    log.info("request %s: id=%s owner=%s", request.status, request.id, request.owner)
    owner = storage.get_username(request.owner)
    if outbox is None or owner is None:
        return
    message = notices.decision_to_party(
        outbox,
        owner=owner,
        set_name=set_name,
        scopes=request.approved_scopes or request.scopes,
        approved=request.status == "approved",
        until=until,
    )
    notices.notify(storage, outbox, message, now=now, user_sub=request.party)


def requests_for_owner(
    storage: Storage, owner_sub: str, now: int
) -> tuple[list[AccessRequest], list[AccessRequest]]:
    """The owner's pending requests, newest first, and the decided ones (approved, denied, or
    expired unanswered), newest first."""
    pending = storage.requests_of(owner_sub, "pending", now, LISTED)
    decided = [
        *storage.requests_of(owner_sub, "approved", now, LISTED),
        *storage.requests_of(owner_sub, "denied", now, LISTED),
        *storage.requests_of(owner_sub, "expired", now, LISTED),
    ]
    decided.sort(key=lambda r: (r.decided_at or r.expires_at, r.id), reverse=True)
    return pending, decided[:LISTED]


def _pending_of(storage: Storage, owner_sub: str, request_id: str, now: int) -> AccessRequest:
    found = storage.get_request(request_id)
    if found is None or found.owner != owner_sub:
        raise RequestRefused(None, "There is no such request to you.")
    if found.status != "pending":
        raise RequestRefused(None, f"You have {found.status} this request already.")
    if found.expires_at <= now:
        raise RequestRefused(None, "This request has expired: the app has to ask again.")
    return found


def approve(
    storage: Storage,
    owner_sub: str,
    request_id: str,
    scopes: Sequence[str],
    until: int | None,
    now: int,
    *,
    limit: int,
    outbox: notices.Outbox | None = None,
) -> AccessRequest:
    """The owner approves the request for `scopes` (those asked; none given: all of them) until
    `until` (epoch seconds from `shares.end_of_day`; None: no end): a share with the person, whose
    client's next request with the ticket is decided on those scopes; the person gets a notice through `outbox`
    (None: none). Raises RequestRefused, shares.ShareRefused."""
    with storage.transaction():
        asked = _pending_of(storage, owner_sub, request_id, now)
        return _approved(storage, owner_sub, asked, scopes, until, now, limit, outbox)


def _approved(
    storage: Storage,
    owner_sub: str,
    asked: AccessRequest,
    scopes: Sequence[str],
    until: int | None,
    now: int,
    limit: int,
    outbox: notices.Outbox | None,
) -> AccessRequest:
    wanted = tuple(dict.fromkeys(scopes)) or asked.scopes
    for scope in wanted:
        if scope not in asked.scopes:
            raise RequestRefused("scopes", "Choose among the things the person asked for.")
    owner = storage.get_username(owner_sub)
    resource_set = storage.find_resource_set(asked.resource_set_id)
    if owner is None or resource_set is None:
        raise RequestRefused(None, "The resource this request was for is gone.")
    person = storage.get_username(asked.party) or asked.party_name
    # No share notice: the approval tells the person in its own words (`request_decided`).
    shares.share(storage, owner, resource_set, person, wanted, until, now, limit=limit, outbox=None)
    if not storage.decide_request(asked.id, "approved", now, wanted):
        raise RequestRefused(None, "This request was answered meanwhile.")
    decided = storage.get_request(asked.id) or asked
    _event(storage, decided, resource_set.label, wanted, "approval", "approved", now)
    request_decided(
        storage, decided, outbox=outbox, set_name=resource_set.label, now=now, until=until
    )
    return decided


def deny(
    storage: Storage,
    owner_sub: str,
    request_id: str,
    now: int,
    *,
    outbox: notices.Outbox | None = None,
) -> AccessRequest:
    """The owner denies the request: the client's next request with its ticket is told so, and
    the person gets a notice through `outbox` (None: none). Raises RequestRefused."""
    with storage.transaction():
        asked = _pending_of(storage, owner_sub, request_id, now)
        if not storage.decide_request(asked.id, "denied", now):
            raise RequestRefused(None, "This request was answered meanwhile.")
        resource_set = storage.find_resource_set(asked.resource_set_id)
        decided = storage.get_request(asked.id) or asked
        label = resource_set.label if resource_set is not None else asked.resource_set_id
        _event(storage, decided, label, asked.scopes, "denial", "denied", now)
        request_decided(storage, decided, outbox=outbox, set_name=label, now=now)
    return decided


def _event(
    storage: Storage,
    request: AccessRequest,
    rs_name: str,
    scopes: Sequence[str],
    kind: str,
    outcome: str,
    now: int,
) -> None:
    storage.add_event(
        Event(
            at=now,
            owner=request.owner,
            rs_id=request.resource_set_id,
            rs_name=rs_name,
            scopes=tuple(scopes),
            client_id=request.client_id,
            client_name=request.client_name,
            party=request.party_name,
            kind="approval" if kind == "approval" else "denial",
            outcome=outcome,
            decided_by=None,
        )
    )
