"""UMA 2.0's claims interaction endpoint (Grant section 3.3.2), on this server's side: after a
`need_info` with `redirect_user`, the client sends a person to `/claims_interaction` with its
`client_id`, the ticket, a `claims_redirect_uri` and a `state`; the person signs in and shares, and
is sent back with a new ticket. The redirect profile's pages and checks serve it
(`services.gathering`), with 2.0's differences:

* The redirect URI is one of the client's `claims_redirect_uris` (exact match; it may be left out
  when exactly one is registered). Until the client and that URI are known good, errors are shown
  on a page and never redirected.
* There is no AAT whose person must be the one who signs in: the person is whoever signs in here,
  and becomes the ticket's requesting party (the claims recorded before for the client stay on
  the ticket). A second, different person is refused for that ticket.
* The endpoint only records the claims the owner's rules gather by sign-in; the client's next
  token request decides. On Share the ticket is rotated (`authorization_state=claims_submitted`
  and the new ticket); on Cancel the person goes back with `error=access_denied` and the ticket
  stays as it was.
* Arriving extends the ticket to `[lifetimes] claims_handle` and binds the visit to the browser: a
  claims handle made for the ticket and this browser (its value derived from both, never in a
  URL) is what Share and Cancel use, once. A later arrival of the same ticket in another browser
  replaces it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass
from typing import Literal

from .. import secrets_at_rest
from ..config import Limits
from ..errors import InvalidRequest
from ..storage import Storage
from ..storage.records import ClaimsHandle, Client, User
from .decision import RulesFor, owner_name
from .gathering import (
    ArrivalRefused,
    GatheringFailed,
    Identity,
    Visit,
    claims_to_record,
    gathered_names,
)
from .ticket_claims import within_ticket_bound

log = logging.getLogger("umaserver.gathering")


@dataclass(frozen=True)
class Shared:
    """Where the person goes back to: the new ticket with `authorization_state`, or an error."""

    outcome: Literal["claims_submitted", "access_denied"]
    ticket: str | None = None


def check_client(storage: Storage, client_id: str, claims_redirect_uri: str) -> tuple[Client, str]:
    """The client and the URI the person goes back to: one of its claims redirect URIs by exact
    string match, or its only one when none is given; else ArrivalRefused."""
    client = storage.get_client(client_id) if client_id else None
    if client is None:
        raise ArrivalRefused("The application that sent you here is not known to this server.")
    registered = client.claims_redirect_uris
    if not claims_redirect_uri and len(registered) == 1:
        return client, registered[0]
    if not claims_redirect_uri or claims_redirect_uri not in registered:
        raise ArrivalRefused(
            "The address the application asked to send you back to is not registered for it,"
            " so you are not sent there."
        )
    return client, claims_redirect_uri


def handle_value(ticket: str, binding: str) -> str:
    """The claims handle of one ticket in one browser (its binding id): derived, so that it never
    travels in a URL and only that browser's form can use it."""
    return hmac.new(binding.encode(), ticket.encode(), hashlib.sha256).hexdigest()


def arrive(
    storage: Storage,
    *,
    client_id: str,
    claims_redirect_uri: str,
    state: str,
    ticket_value: str,
    binding: str,
    now: int,
    lifetime: int,
) -> Visit:
    """Checks an arrival and binds it to this browser: the client and its claims redirect URI
    first (ArrivalRefused), then the ticket (ArrivalRefused with `over`: the person goes back with
    an error). The ticket lives at least `lifetime` more seconds."""
    client, redirect_uri = check_client(storage, client_id, claims_redirect_uri)
    with storage.transaction():
        ticket = storage.get_ticket(secrets_at_rest.digest(ticket_value)) if ticket_value else None
        found = (
            [storage.find_resource_set(p.resource_set_id) for p in ticket.permissions]
            if ticket
            else []
        )
        resource_sets = tuple(rs for rs in found if rs is not None)
        party = ticket.requesting_party if ticket else None
        if (
            ticket is None
            or len(resource_sets) != len(found)
            or ticket.state != "open"
            or ticket.expires_at <= now
            or (
                party is not None and party.startswith("client:") and party != f"client:{client_id}"
            )
        ):
            raise ArrivalRefused(
                "The request this link belongs to is over, or is not this application's. Go back"
                " to the application and try again.",
                over=True,
            )
        value = handle_value(ticket_value, binding)
        digest = secrets_at_rest.digest(value)
        handle = storage.get_claims_handle(digest)
        if handle is None or handle.state != "open" or handle.expires_at <= now:
            handle = ClaimsHandle(
                digest=digest,
                ticket_digest=ticket.digest,
                client_id=client.client_id,
                requesting_party=party or f"client:{client.client_id}",
                created_at=now,
                expires_at=now + lifetime,
                binding_digest=secrets_at_rest.digest(binding),
            )
            storage.add_claims_handle(handle)
            storage.extend_ticket(ticket.digest, now + lifetime)
    return Visit(client, redirect_uri, state, value, handle, ticket, resource_sets)


def _redo(storage: Storage, visit: Visit, now: int) -> ClaimsHandle:
    """The visit's handle again, under the lock, used once; its ticket must still be open."""
    handle = storage.get_claims_handle(visit.handle.digest)
    if handle is None or handle.state == "used":
        raise ArrivalRefused("This page was used already. Go back to the application.")
    if handle.state != "open" or handle.expires_at <= now:
        raise GatheringFailed(
            "invalid_request", "the visit expired, or the ticket was used meanwhile"
        )
    ticket = storage.get_ticket(handle.ticket_digest)
    if ticket is None or ticket.state != "open" or ticket.expires_at <= now:
        raise GatheringFailed("invalid_request", "the ticket is no longer open")
    storage.use_claims_handle(handle.digest)
    return handle


def cancel(storage: Storage, visit: Visit, *, now: int, username: str | None) -> Shared:
    """The person chose not to share: the visit is over, the ticket as it was."""
    with storage.transaction():
        _redo(storage, visit, now)
    _log(visit, "access_denied", username)
    return Shared("access_denied")


def share(
    storage: Storage,
    rules_for: RulesFor,
    visit: Visit,
    *,
    user: User,
    identity: Identity | None,
    server_issuer: str,
    limits: Limits,
    now: int,
) -> Shared:
    """The signed-in `user` shares what the owner's rules gather by sign-in for the ticket's sets;
    they become the ticket's requesting party, and the ticket is rotated for the client's next
    token request. A person other than the one who shared for this ticket before is refused
    (GatheringFailed: access_denied)."""
    with storage.transaction():
        handle = _redo(storage, visit, now)
        ticket = storage.get_ticket(handle.ticket_digest)
        assert ticket is not None  # _redo read it open
        party = ticket.requesting_party
        if party is not None and not party.startswith("client:") and party != user.sub:
            raise GatheringFailed(
                "access_denied", "another person shared information for this request already"
            )
        if party != user.sub:
            storage.set_ticket_party(ticket.digest, user.sub)
        owner = owner_name(storage, ticket.owner)
        names = gathered_names(rules_for(storage, owner), owner, visit.resource_sets)
        claims = claims_to_record(
            names,
            user=user,
            server_issuer=server_issuer,
            identity=identity,
            client_id=visit.client.client_id,
            now=now,
        )
        # Shared with this client: they serve its requests with the ticket, no other's.
        agreed = visit.client.client_id
        held = storage.gathered_claims(ticket.digest, user.sub, agreed)
        for issuer, subject in {(c.issuer, c.subject) for c in claims}:
            if any(h.issuer == issuer and h.subject != subject for h in held):
                storage.forget_issuer_claims(ticket.digest, user.sub, issuer, agreed)
        try:
            within_ticket_bound(
                storage.gathered_claims(ticket.digest, user.sub, agreed), tuple(claims), limits
            )
        except InvalidRequest as error:
            raise GatheringFailed("invalid_request", error.description) from None
        storage.record_claims(ticket.digest, user.sub, claims)
        rotated = secrets_at_rest.new_token(secrets_at_rest.TICKET_PREFIX)
        storage.rotate_ticket(ticket.digest, secrets_at_rest.digest(rotated))
    _log(visit, "claims_submitted", user.username)
    return Shared("claims_submitted", rotated)


def _log(visit: Visit, outcome: str, username: str | None) -> None:
    log.info(
        "claims interaction outcome=%s client=%s resource_sets=%s person=%s",
        outcome,
        visit.client.client_id,
        ",".join(rs.id for rs in visit.resource_sets),
        username or "-",
    )
