"""The redirect claims profile, on this server's side: the requesting party arrives at
`/rqp_claims` with a claims handle, signs in, shares, and is sent back to the client.

A handle (the `value` of a `redirect_required` entry) is made by the authorization request
(`make_handle`): random, stored as its digest, bound to the ticket, the client and the requesting
party of the AAT, short-lived (`[lifetimes] claims_handle`), and its ticket lives at least as long.
Here it is checked on arrival (`arrive`: the client and its exact redirect URI first, then the
state and the handle, then the browser it is bound to), and used once when the person chooses
(`share` or `cancel`).

Fixation: the claims of whoever signs in count only when that person is the requesting party of
the handle's AAT; otherwise nothing is recorded and the answer is `access=denied`. Only the claims
the owner's redirect-gathered conditions name are recorded, with their provenance (claim type
`claim-client-redirect-1.0`, issuer: this server for a local user's attributes, the provider for an
external identity's claims, subject at that issuer).

Errors before the redirect URI can be trusted (`ArrivalRefused`) are shown on a page and never
redirected; later ones (`GatheringFailed`) go back to the client as `error=...&state=...`.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .. import secrets_at_rest
from ..claims.model import REDIRECT_TYPE, Verifiers
from ..config import Limits
from ..errors import InvalidRequest
from ..policy.rules import ResourceSetRef, RuleSet
from ..storage import Storage
from ..storage.records import AccessToken, Claim, ClaimsHandle, Client, ResourceSet, Ticket, User
from .decision import MissingResourceSet, RulesFor, Supplier, decide_ticket, owner_name
from .ticket_claims import within_ticket_bound

log = logging.getLogger("umaserver.gathering")

HANDLE_BYTES = 32


class ArrivalRefused(Exception):
    """The request cannot be served and the client cannot be trusted with the answer: an error
    page, no redirect. The message is for people."""

    def __init__(self, description: str, *, over: bool = False) -> None:
        super().__init__(description)
        self.description = description
        # The handle expired or was replaced, or its ticket is over: on the form's answer (the
        # client and redirect URI known good) the person goes back with error=invalid_request.
        self.over = over


class GatheringFailed(Exception):
    """A failure after the client and its redirect URI were checked: the person goes back with
    `error` (invalid_request or server_error) and the state."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


@dataclass(frozen=True)
class Identity:
    """What an external sign-in vouched for: the person `subject` at the provider `issuer`, and
    the provider's claims about them (from the ID token and userinfo)."""

    issuer: str
    subject: str
    claims: Mapping[str, Any]


@dataclass(frozen=True)
class Visit:
    """One checked arrival at `/rqp_claims`: what the page shows and the form sends back."""

    client: Client
    redirect_uri: str
    state: str
    handle_value: str
    handle: ClaimsHandle
    ticket: Ticket
    resource_sets: tuple[ResourceSet, ...]  # of the ticket's pairs, in order

    @property
    def requested(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """What the page shows: each set the ticket asks for (as `ResourceSet.label` names it) and
        its scopes."""
        return tuple(
            (resource_set.label, pair.scopes)
            for resource_set, pair in zip(self.resource_sets, self.ticket.permissions, strict=True)
        )


@dataclass(frozen=True)
class Result:
    access: Literal["granted", "denied"]
    reason: str  # for the log


def make_handle(
    storage: Storage, *, ticket: Ticket, aat: AccessToken, now: int, lifetime: int
) -> str:
    """A new handle for `ticket`, for the client and requesting party of `aat`; voids the
    ticket's earlier handles and keeps the ticket alive at least as long. Call in the request's
    transaction."""
    value = secrets.token_urlsafe(HANDLE_BYTES)
    expires_at = now + lifetime
    storage.add_claims_handle(
        ClaimsHandle(
            digest=secrets_at_rest.digest(value),
            ticket_digest=ticket.digest,
            client_id=aat.client_id,
            requesting_party=aat.owner,
            created_at=now,
            expires_at=expires_at,
        )
    )
    storage.extend_ticket(ticket.digest, expires_at)
    return value


def check_client(storage: Storage, client_id: str, redirect_uri: str) -> Client:
    """The client, when it is known and `redirect_uri` is registered for it by exact string match;
    else ArrivalRefused."""
    client = storage.get_client(client_id) if client_id else None
    if client is None:
        raise ArrivalRefused("The application that sent you here is not known to this server.")
    if not redirect_uri or redirect_uri not in client.redirect_uris:
        raise ArrivalRefused(
            "The address the application asked to send you back to is not registered for it,"
            " so you are not sent there."
        )
    return client


def _live_handle(storage: Storage, handle_value: str, client: Client, now: int) -> ClaimsHandle:
    handle = (
        storage.get_claims_handle(secrets_at_rest.digest(handle_value)) if handle_value else None
    )
    if handle is None:
        raise ArrivalRefused(
            "This link does not carry a request this server knows (the scope is missing or"
            " unknown). Go back to the application and try again."
        )
    if handle.client_id != client.client_id:
        raise ArrivalRefused("This link was made for another application.")
    if handle.state == "used":
        raise ArrivalRefused(
            "This link was used already. Go back to the application and try again."
        )
    if handle.state == "void":
        raise ArrivalRefused(
            "This link was replaced by a newer request of the application. Go back to the"
            " application and try again.",
            over=True,
        )
    if handle.expires_at <= now:
        raise ArrivalRefused(
            "This link has expired. Go back to the application and try again.", over=True
        )
    return handle


def arrive(
    storage: Storage,
    *,
    client_id: str,
    redirect_uri: str,
    state: str,
    handle_value: str,
    binding: str,
    now: int,
) -> Visit:
    """Checks an arrival, in the order that keeps redirects safe, and binds the handle to this
    browser (`binding`: a random id the browser holds) the first time. Raises ArrivalRefused."""
    client = check_client(storage, client_id, redirect_uri)
    if not state:
        raise ArrivalRefused(
            "The application did not send the state it needs to recognise your return, so you"
            " are not sent back. Go back to the application and try again."
        )
    handle = _live_handle(storage, handle_value, client, now)
    bound = secrets_at_rest.digest(binding)
    if handle.binding_digest is None and storage.bind_claims_handle(handle.digest, bound):
        handle = storage.get_claims_handle(handle.digest) or handle
    if handle.binding_digest != bound:
        raise ArrivalRefused(
            "This link was opened in another browser already. Go back to the application and"
            " try again from this browser."
        )
    ticket = storage.get_ticket(handle.ticket_digest)
    found = (
        [storage.find_resource_set(pair.resource_set_id) for pair in ticket.permissions]
        if ticket
        else []
    )
    resource_sets = tuple(rs for rs in found if rs is not None)
    if (
        ticket is None
        or len(resource_sets) != len(found)
        or ticket.state != "open"
        or ticket.expires_at <= now
    ):
        raise ArrivalRefused(
            "The request this link belongs to is over. Go back to the application and try again.",
            over=True,
        )
    return Visit(client, redirect_uri, state, handle_value, handle, ticket, resource_sets)


def gathered_names(
    rules: RuleSet, owner: str, resource_sets: Sequence[ResourceSet]
) -> dict[str, set[str]]:
    """Which claims, by issuer, the owner's rules covering any of `resource_sets` gather by
    redirect: {claim name: accepted issuers ({"*"} for any)}."""
    refs = [
        ResourceSetRef(id=rs.id, name=rs.name, type=rs.description.get("type"))
        for rs in resource_sets
    ]
    names: dict[str, set[str]] = {}
    for rule in rules.rules_for(owner):
        if not any(rule.resource_sets.covers(ref) for ref in refs):
            continue
        for condition in rule.conditions:
            if condition.types is not None and REDIRECT_TYPE not in condition.types:
                continue
            names.setdefault(condition.claim, set()).update(condition.issuers or {"*"})
    return names


def claims_to_record(
    names: Mapping[str, set[str]],
    *,
    user: User,
    server_issuer: str,
    identity: Identity | None,
    client_id: str,
    now: int,
) -> list[Claim]:
    """The redirect-gathered claims the rules ask for: the local user's attributes (issuer: this
    server) and the linked external identity's claims (issuer: the provider)."""
    sources: list[tuple[str, str, Mapping[str, Any]]] = [(server_issuer, user.sub, user.claims)]
    if identity is not None:
        sources.append((identity.issuer, identity.subject, identity.claims))
    found = []
    for issuer, subject, values in sources:
        for name, accepted in names.items():
            if name in values and ("*" in accepted or issuer in accepted):
                found.append(
                    Claim(REDIRECT_TYPE, name, values[name], issuer, client_id, now, subject)
                )
    return found


def _redo(storage: Storage, visit: Visit, now: int) -> tuple[ClaimsHandle, Ticket]:
    """The handle and ticket again, under the lock; used handles and closed tickets fail."""
    handle = storage.get_claims_handle(visit.handle.digest)
    if handle is None or handle.state == "used":
        raise ArrivalRefused(
            "This link was used already. Go back to the application and try again."
        )
    if handle.state != "open" or handle.expires_at <= now:
        raise GatheringFailed(
            "invalid_request", "the claims handle expired or was replaced by a newer request"
        )
    ticket = storage.get_ticket(handle.ticket_digest)
    if ticket is None or ticket.state != "open" or ticket.expires_at <= now:
        raise GatheringFailed("invalid_request", "the ticket is no longer open")
    if not storage.use_claims_handle(handle.digest):  # cannot happen under the lock
        raise ArrivalRefused(
            "This link was used already. Go back to the application and try again."
        )
    return handle, ticket


def _finish(storage: Storage, visit: Visit, result: Result, username: str | None) -> Result:
    log.info(
        "gathering access=%s reason=%s client=%s resource_set=%s person=%s",
        result.access,
        result.reason,
        visit.client.client_id,
        ",".join(rs.id for rs in visit.resource_sets),
        username or "-",
    )
    return result


def cancel(storage: Storage, visit: Visit, *, now: int, username: str | None) -> Result:
    """The person chose not to share (or cannot): the handle is used, the ticket finished."""
    with storage.transaction():
        _, ticket = _redo(storage, visit, now)
        storage.finish_ticket(ticket.digest)
    return _finish(storage, visit, Result("denied", "cancelled"), username)


def share(
    storage: Storage,
    rules_for: RulesFor,
    visit: Visit,
    *,
    user: User,
    identity: Identity | None,
    server_issuer: str,
    verifiers: Verifiers,
    limits: Limits,
    now: int,
) -> Result:
    """The signed-in `user` shares: when they are the requesting party of the handle, the claims
    the rules gather by redirect are recorded against the ticket and the policy decides; granted
    leaves the ticket for the client's next request, denied finishes it. `rules_for` gives the
    rules of the ticket's owner."""
    with storage.transaction():
        handle, ticket = _redo(storage, visit, now)
        if user.sub != handle.requesting_party:
            # Someone else followed the link: nothing of theirs is recorded.
            storage.finish_ticket(ticket.digest)
            result = Result("denied", "not_the_requesting_party")
        else:
            owner = owner_name(storage, ticket.owner)
            rules = rules_for(storage, owner)
            names = gathered_names(rules, owner, visit.resource_sets)
            claims = claims_to_record(
                names,
                user=user,
                server_issuer=server_issuer,
                identity=identity,
                client_id=visit.client.client_id,
                now=now,
            )
            party = handle.requesting_party
            # Shared with this client: they serve its requests with the ticket, no other's.
            agreed = visit.client.client_id
            held = storage.gathered_claims(ticket.digest, party, agreed)
            for issuer, subject in {(c.issuer, c.subject) for c in claims}:
                if any(h.issuer == issuer and h.subject != subject for h in held):
                    storage.forget_issuer_claims(ticket.digest, party, issuer, agreed)
            try:
                within_ticket_bound(
                    storage.gathered_claims(ticket.digest, party, agreed), tuple(claims), limits
                )
            except InvalidRequest as error:
                raise GatheringFailed("invalid_request", error.description) from None
            storage.record_claims(ticket.digest, party, claims)
            try:
                decision = decide_ticket(
                    storage,
                    rules,
                    owner,
                    ticket.permissions,
                    Supplier.of(visit.client.client_id, visit.client.push_claim_types, verifiers),
                    party,
                    storage.gathered_claims(ticket.digest, party, agreed),
                    now=now,
                )
            except MissingResourceSet:
                raise GatheringFailed("invalid_request", "the ticket is no longer open") from None
            if decision.outcome == "grant":
                result = Result("granted", "policy_holds")
            else:
                storage.finish_ticket(ticket.digest)
                result = Result("denied", "policy_does_not_hold")
    return _finish(storage, visit, result, user.username)
