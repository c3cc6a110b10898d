"""The records of people and what owners do with them (issues 24 to 26): shares, invitations, the
access history's events, requests to owners, notices, and the parties a seed file made. Plain
frozen dataclasses, as in `records`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

ShareKind = Literal["user", "email"]


@dataclass(frozen=True)
class Share:
    """An owner's rule marked as a share of one set with one person: `rule_id` the rule's id,
    `owner` the owner's sub, `recipient` the username or e-mail address as registered (`kind`
    says which), the scopes shared, `until` when it ends (epoch seconds; None: never)."""

    rule_id: str
    owner: str
    resource_set_id: str
    recipient: str
    kind: ShareKind
    scopes: tuple[str, ...]
    until: int | None
    created_at: int


@dataclass(frozen=True)
class Invitation:
    """A single-use link to a share by e-mail: `digest` the SHA-256 of its token, `rule_id` the
    share's rule, `owner` the owner's sub, `address` the e-mail address as the owner typed it;
    usable while `expires_at > now` and `used_at` is None; `used_by` the sub of the account that
    accepted it."""

    digest: str
    rule_id: str
    owner: str
    address: str
    created_at: int
    expires_at: int
    used_at: int | None = None
    used_by: str | None = None

    def is_usable(self, now: int) -> bool:
        return self.used_at is None and self.expires_at > now


EventKind = Literal["decision", "grant", "share", "stop", "approval", "denial", "revocation"]


@dataclass(frozen=True)
class Event:
    """One entry of an owner's access history. Names are text, as they were at `at`: the set's
    name (`rs_name`), the client's, and the requesting party's username (None for a client acting
    for itself). `outcome` says what came of it (granted, refused, revoked, ...), `decided_by` the
    rule or share that decided, if one did. `seq` orders the events of one second; the store sets
    it on reading (0 on an event not yet stored), and pages use (`at`, `seq`) as their cursor."""

    at: int
    owner: str
    rs_id: str
    rs_name: str
    scopes: tuple[str, ...]
    client_id: str
    client_name: str
    party: str | None
    kind: EventKind
    outcome: str
    decided_by: str | None = None
    seq: int = field(default=0, compare=False)


RequestStatus = Literal["pending", "approved", "denied", "expired"]


@dataclass(frozen=True)
class AccessRequest:
    """A client's request to an owner for access the rules refused (issue 25, item 3): `party`
    the requesting person's sub and `party_name` their username as it was, the client's id and
    name as they were, `ticket_digest` the ticket the client polls with, `expires_at` the end of
    the wait for the owner, `decided_at` and `approved_scopes` what the owner answered."""

    id: str
    owner: str
    resource_set_id: str
    scopes: tuple[str, ...]
    party: str
    party_name: str
    client_id: str
    client_name: str
    ticket_digest: str
    created_at: int
    expires_at: int
    status: RequestStatus = "pending"
    decided_at: int | None = None
    approved_scopes: tuple[str, ...] | None = None


NoticeKind = Literal["share", "request", "approved", "denied", "invitation"]
MailState = Literal["none", "pending", "sent", "failed"]


@dataclass(frozen=True)
class Notice:
    """What the server tells a person, on the pages and by mail: for the user `user_sub` (None:
    a bare address, such as an invitation's), mailed to `address` (None: no verified address is
    known). `mail_state` none (not to be mailed), pending, sent or failed; `attempts` the tries
    so far, `next_attempt_at` when it is due (None once sent or failed), `last_error` why the
    last try failed. `seq` orders the notices of one second; the store sets it on reading (0 on
    a notice not yet stored)."""

    id: str
    user_sub: str | None
    address: str | None
    kind: NoticeKind
    subject: str
    body: str
    link: str
    created_at: int
    mail_state: MailState = "none"
    next_attempt_at: int | None = None
    seen_at: int | None = None
    attempts: int = 0
    last_error: str | None = None
    seq: int = field(default=0, compare=False)


SeededKind = Literal["user", "client", "link"]


@dataclass(frozen=True)
class SeededParty:
    """A party that `seed apply` created: a user by sub, a client by client_id, or a link by
    issuer (`party`) and subject ("" for users and clients)."""

    kind: SeededKind
    party: str
    subject: str = ""
