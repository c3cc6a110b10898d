"""Small builders of valid records for the conformance suite: each makes what its record refers to
(a ticket's client and resource set, an RPT's access token) and stores it through the contract."""

from __future__ import annotations

import itertools
from typing import Any

from umaserver.storage import Storage
from umaserver.storage.records import (
    AccessToken,
    AssertionUse,
    AuthorizationCode,
    Claim,
    ClaimsHandle,
    Client,
    Permission,
    RefreshToken,
    ResourceSet,
    Rpt,
    Ticket,
    TicketState,
    User,
)

from .conftest import PREPARED_AT

T = PREPARED_AT + 1000  # "now" in most tests
HOUR = 3600

_serial = itertools.count(1)


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_serial)}"


def make_client(
    store: Storage,
    redirect_uris: tuple[str, ...] = ("https://client.test/cb",),
    push_claim_types: tuple[str, ...] = ("custom",),
) -> Client:
    client = Client(
        unique("client"), unique("secret-digest"), "A client", redirect_uris, push_claim_types
    )
    store.add_client(client, T)
    return client


def make_user(store: Storage, username: str | None = None, **claims: Any) -> User:
    user = User(unique("sub"), username or unique("user"), "hash$of$password", claims)
    assert store.add_user(user, T)
    return user


def make_token(
    store: Storage,
    client: Client | None = None,
    user: User | None = None,
    revoked: bool = False,
    family: str | None = None,
    scope: str = "uma_protection",
) -> AccessToken:
    """A PAT or AAT: the user's, or (without one) the client's own."""
    client = client or make_client(store)
    token = AccessToken(
        digest=unique("at-digest"),
        client_id=client.client_id,
        user_sub=user.sub if user else None,
        username=None,
        scope=scope,
        issued_at=T,
        expires_at=T + HOUR,
        revoked=revoked,
        family=family,
    )
    store.add_access_token(token)
    return token


def make_set(
    store: Storage,
    client: Client | None = None,
    owner: str | None = None,
    created_at: int = T,
    rs_id: str | None = None,
    description: dict[str, Any] | None = None,
) -> ResourceSet:
    client = client or make_client(store)
    resource_set = ResourceSet(
        rs_id or unique("rs"),
        owner or unique("owner"),
        client.client_id,
        description or {"name": "Photo album", "scopes": ["view", "edit"]},
    )
    store.add_resource_set(resource_set, created_at)
    return resource_set


def make_ticket(
    store: Storage,
    resource_set: ResourceSet | None = None,
    expires_at: int = T + HOUR,
    state: TicketState = "open",
    digest: str | None = None,
) -> Ticket:
    resource_set = resource_set or make_set(store)
    ticket = Ticket(
        digest=digest or unique("ticket-digest"),
        owner=resource_set.owner,
        client_id=resource_set.client_id,
        resource_set_id=resource_set.id,
        scopes=("view",),
        created_at=T,
        expires_at=expires_at,
        state=state,
    )
    store.add_ticket(ticket)
    return ticket


def make_rpt(
    store: Storage,
    aat: AccessToken | None = None,
    issued_at: int = T,
    expires_at: int = T + HOUR,
    revoked: bool = False,
) -> Rpt:
    aat = aat or make_token(store)
    rpt = Rpt(
        digest=unique("rpt-digest"),
        seed=unique("seed"),
        aat_digest=aat.digest,
        client_id=aat.client_id,
        requesting_party=aat.owner,
        issued_at=issued_at,
        expires_at=expires_at,
        revoked=revoked,
    )
    store.add_rpt(rpt)
    return rpt


def permission(
    resource_set: ResourceSet,
    scopes: tuple[str, ...] = ("view",),
    issued_at: int = T,
    expires_at: int = T + HOUR,
) -> Permission:
    return Permission(resource_set.id, scopes, issued_at, expires_at)


def claim(
    name: str,
    value: Any,
    claim_type: str = "custom",
    issuer: str = "idp",
    at: int = T,
    subject: str | None = None,
) -> Claim:
    return Claim(claim_type, name, value, issuer, "client-x", at, subject)


def assertion_use(
    ticket: str, party: str = "alice", expires_at: int = T + HOUR, assertion_id: str = "_a1"
) -> AssertionUse:
    return AssertionUse("https://idp.test", assertion_id, ticket, party, expires_at)


def make_code(
    store: Storage,
    client: Client | None = None,
    user: User | None = None,
    expires_at: int = T + 60,
    challenge: str | None = None,
) -> AuthorizationCode:
    client = client or make_client(store)
    user = user or make_user(store)
    code = AuthorizationCode(
        digest=unique("code-digest"),
        client_id=client.client_id,
        user_sub=user.sub,
        redirect_uri="https://client.test/cb?é=1",
        scope="uma_protection",
        code_challenge=challenge,
        code_challenge_method="S256" if challenge else None,
        family=unique("family"),
        created_at=T,
        expires_at=expires_at,
    )
    store.add_authorization_code(code)
    return code


def make_refresh_token(
    store: Storage,
    client: Client | None = None,
    user: User | None = None,
    family: str | None = None,
    expires_at: int = T + HOUR,
    scope: str = "uma_protection",
) -> RefreshToken:
    client = client or make_client(store)
    user = user or make_user(store)
    token = RefreshToken(
        digest=unique("rt-digest"),
        family=family or unique("family"),
        client_id=client.client_id,
        user_sub=user.sub,
        scope=scope,
        issued_at=T,
        expires_at=expires_at,
    )
    store.add_refresh_token(token)
    return token


def make_handle(
    store: Storage,
    ticket: Ticket | None = None,
    expires_at: int = T + 600,
    requesting_party: str = "bob",
) -> ClaimsHandle:
    ticket = ticket or make_ticket(store)
    handle = ClaimsHandle(
        digest=unique("handle-digest"),
        ticket_digest=ticket.digest,
        client_id=ticket.client_id,
        requesting_party=requesting_party,
        created_at=T,
        expires_at=expires_at,
    )
    store.add_claims_handle(handle)
    return handle
