"""The records storage hands out and takes in: plain frozen dataclasses, no behaviour beyond
reading themselves. Tokens appear only as their digests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .. import secrets_at_rest

TicketState = Literal["open", "granted", "finished"]


@dataclass(frozen=True)
class Client:
    client_id: str
    secret_digest: str
    name: str
    redirect_uris: tuple[str, ...]
    push_claim_types: tuple[str, ...]

    def check_secret(self, unverified: str) -> bool:
        return secrets_at_rest.matches_digest(unverified, self.secret_digest)


@dataclass(frozen=True)
class User:
    sub: str
    username: str
    password_hash: str | None
    claims: dict[str, Any]


@dataclass(frozen=True)
class Session:
    """A person's signed-in session on the pages, by the digest of its cookie's id. It ends at
    `expires_at`: the sooner of the idle and the absolute timeout, as of its last request."""

    digest: str
    user_sub: str
    csrf_secret: str
    created_at: int
    last_seen_at: int
    expires_at: int


@dataclass(frozen=True)
class AccessToken:
    """A PAT or an AAT as stored (the token itself is never stored). `username` is read with it."""

    digest: str
    client_id: str
    user_sub: str | None
    username: str | None
    scope: str
    issued_at: int
    expires_at: int
    revoked: bool

    @property
    def owner(self) -> str:
        """Whom the token acts for: a user, or the client itself (client_credentials)."""
        return self.user_sub if self.user_sub is not None else f"client:{self.client_id}"

    @property
    def owner_name(self) -> str:
        """The owner as policies name it: the username, or `client:<client_id>`."""
        return self.username if self.username is not None else f"client:{self.client_id}"


@dataclass(frozen=True)
class ResourceSet:
    id: str
    owner: str
    client_id: str
    description: dict[str, Any]


@dataclass(frozen=True)
class Ticket:
    digest: str
    owner: str
    client_id: str
    resource_set_id: str
    scopes: tuple[str, ...]
    created_at: int
    expires_at: int
    requests: int = 0
    state: TicketState = "open"


@dataclass(frozen=True)
class Rpt:
    digest: str
    seed: str
    aat_digest: str
    client_id: str
    requesting_party: str
    issued_at: int
    expires_at: int
    revoked: bool = False

    def is_live(self, now: float) -> bool:
        return not self.revoked and self.expires_at > now


@dataclass(frozen=True)
class Permission:
    resource_set_id: str
    scopes: tuple[str, ...]
    issued_at: int
    expires_at: int


@dataclass(frozen=True)
class AssertionUse:
    """One acceptance of a verified SAML assertion or ID token (by issuer and its ID: the
    assertion's ID; `jti:<jti>`, else `sha256:<digest of the token>`, for an ID token): for which
    ticket and requesting party, remembered until it expires."""

    issuer: str
    assertion_id: str
    ticket_digest: str
    requesting_party: str
    expires_at: int
