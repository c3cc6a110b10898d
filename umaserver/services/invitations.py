"""Invitations (issue 25, item 2): sharing with an e-mail address that no local user has makes a
single-use link, `{issuer}/invitations/{token}`, for the person to accept.

- `share` is the Share form's one call: the share (`services.shares`) and, when it is by an
  address no local account has verified, its invitation, in one transaction. The link exists only
  in the return value (the owner's page shows it once); the store keeps the token's SHA-256.
  `invitation_created` is the one place told of a new link, inside the transaction that made
  it (the mail notice goes there).
- "New link" (`new_link`) gives the invitation a new token and a full lifetime: the old link is
  dead. "Cancel" (`cancel`) deletes the invitation only: the share stays on the address, matching
  a verified e-mail of it, until the owner stops sharing (which takes the invitation with it), so
  that cancelling a link sent to the wrong place never ends the access the owner gave.
- `accept`: the first account that accepts a usable link takes the share, in one transaction: the
  invitation is marked used (one statement: of two racers one wins), the share's rule holds on
  that username from then on and its row names it, and the account's `email` becomes the address,
  marked verified, when it had none (accepting the link proves the address). The owner's history
  records it as a share with the username.
- `look_up`: what a link is now (usable, used, expired, or unknown: never made, replaced or
  cancelled, or pruned a day after its end), for the invitation's page.

Addresses are compared whole and case-insensitively (`claims.model.email_key`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .. import secrets_at_rest
from ..claims.model import email_key
from ..policy.rule_file import rule_table
from ..storage import Storage
from ..storage.people_records import Invitation, Share
from ..storage.records import ResourceSet, User
from . import access_history, notices, shares
from .account_claims import account_values

log = logging.getLogger("umaserver.policy")

# A recognisable prefix (a leaked link is easy to spot), then 43 characters of token_urlsafe(32).
INVITATION_PREFIX = "uma_iv_"
TOKEN = re.compile(r"[A-Za-z0-9_-]{22,128}")

LinkState = Literal["usable", "used", "expired", "unknown"]


@dataclass(frozen=True)
class NewInvitation:
    """An invitation just made or renewed, with its link (which exists nowhere else)."""

    invitation: Invitation
    link: str


@dataclass(frozen=True)
class Found:
    """What a link is now, with what its page names: the share, its set and the owner."""

    state: LinkState
    invitation: Invitation | None = None
    share: Share | None = None
    resource_set: ResourceSet | None = None
    owner: str | None = None  # the owner's username


class InvitationRefused(Exception):
    """The link cannot be accepted (now, or by this account); `state` says why, the message is
    for the person."""

    def __init__(self, state: LinkState | Literal["own"], message: str) -> None:
        super().__init__(message)
        self.state = state
        self.message = message


def same_address(a: str, b: str) -> bool:
    return email_key(a) == email_key(b)


def link_of(issuer: str, token: str) -> str:
    return f"{issuer.rstrip('/')}/invitations/{token}"


def _new_token() -> str:
    return secrets_at_rest.new_token(INVITATION_PREFIX)


def has_local_account(storage: Storage, address: str) -> bool:
    """Whether a local account has `address` as its verified e-mail (its account claims say so):
    then the share by address already matches that person, and no invitation is made. Reads every
    account: sharing by address is rare next to the decisions."""
    for user in storage.list_users():
        email = account_values(user).get("email")
        if isinstance(email, str) and same_address(email, address):
            return True
    return False


def invitation_created(
    storage: Storage,
    new: NewInvitation,
    owner: str,
    resource_set: ResourceSet,
    scopes: Sequence[str],
    outbox: notices.Outbox | None,
) -> None:
    """Told of every new link (a share by address, or "New link"), inside the transaction that
    made it, so that its notice is written with it or not at all: with `[mail]` (`outbox.mail`),
    the link is mailed to the address (issue 25, item 4). Without mail no notice is written: no
    page shows an address's notices, and the link would only sit in the database (the store
    keeps an invitation's token only as a digest; a notice forgets the link once mailed). Logs
    it, never the link."""
    if outbox is not None and outbox.mail:
        message = notices.invitation(
            outbox,
            owner=owner,
            set_name=resource_set.label,
            scopes=scopes,
            link=new.link,
            expires_at=new.invitation.expires_at,
        )
        notices.notify(
            storage,
            outbox,
            message,
            now=new.invitation.created_at,
            address=new.invitation.address,
        )
    log.info(
        "invitation: owner=%s rule=%s resource_set=%s expires_at=%s",
        owner,
        new.invitation.rule_id,
        resource_set.id,
        new.invitation.expires_at,
    )


def share(
    storage: Storage,
    owner: str,
    resource_set: ResourceSet,
    to: str,
    scopes: Sequence[str],
    until: int | None,
    now: int,
    *,
    limit: int,
    lifetime: int,
    issuer: str,
    outbox: notices.Outbox | None,
) -> tuple[Share, NewInvitation | None]:
    """`shares.share` (its notice through `outbox`), and an invitation when the share is by an
    address that no local account has, in one transaction. Raises as `shares.share`."""
    with storage.transaction():
        made = shares.share(
            storage, owner, resource_set, to, scopes, until, now, limit=limit, outbox=outbox
        )
        if made.kind != "email" or has_local_account(storage, made.recipient):
            return made, None
        token = _new_token()
        invitation = Invitation(
            secrets_at_rest.digest(token),
            made.rule_id,
            made.owner,
            made.recipient,
            now,
            now + lifetime,
        )
        if not storage.add_invitation(invitation):
            raise RuntimeError(f"the share {made.rule_id!r} was not there to invite to")
        new = NewInvitation(invitation, link_of(issuer, token))
        invitation_created(storage, new, owner, resource_set, made.scopes, outbox)
    return made, new


def pending(storage: Storage, owner_sub: str, rule_ids: Sequence[str]) -> list[Invitation]:
    """The owner's unused invitations to the shares `rule_ids` (expired ones too: "New link"
    renews them), oldest first."""
    wanted = set(rule_ids)
    return [
        found
        for found in storage.invitations_of(owner_sub)
        if found.used_at is None and found.rule_id in wanted
    ]


def new_link(
    storage: Storage,
    owner: User,
    resource_set: ResourceSet,
    rule_id: str,
    now: int,
    *,
    lifetime: int,
    issuer: str,
    outbox: notices.Outbox | None,
) -> NewInvitation | None:
    """A new token for the unused invitation of the owner's share `rule_id` on `resource_set`,
    valid `lifetime` seconds from now; the old link is dead. None when there is no such
    invitation (cancelled, used, or never made)."""
    token = _new_token()
    digest = secrets_at_rest.digest(token)
    with storage.transaction():
        found = storage.get_share(owner.sub, rule_id)
        if found is None or found.resource_set_id != resource_set.id:
            return None
        if not storage.replace_invitation(owner.sub, rule_id, digest, now, now + lifetime):
            return None
        invitation = Invitation(digest, rule_id, owner.sub, found.recipient, now, now + lifetime)
        new = NewInvitation(invitation, link_of(issuer, token))
        invitation_created(storage, new, owner.username, resource_set, found.scopes, outbox)
    return new


def cancel(storage: Storage, owner: User, resource_set: ResourceSet, rule_id: str) -> bool:
    """Deletes the unused invitation of the owner's share `rule_id` on `resource_set` (the share
    stays); False when there is none."""
    found = storage.get_share(owner.sub, rule_id)
    if found is None or found.resource_set_id != resource_set.id:
        return False
    cancelled = storage.delete_invitation(owner.sub, rule_id)
    if cancelled:
        log.info("invitation cancelled: owner=%s rule=%s", owner.username, rule_id)
    return cancelled


def look_up(storage: Storage, unverified_token: str, now: int) -> Found:
    """What the link of `unverified_token` is now."""
    if not TOKEN.fullmatch(unverified_token):
        return Found("unknown")
    invitation = storage.get_invitation(secrets_at_rest.digest(unverified_token))
    if invitation is None:
        return Found("unknown")
    found = storage.get_share(invitation.owner, invitation.rule_id)
    resource_set = None if found is None else storage.find_resource_set(found.resource_set_id)
    if found is None or resource_set is None:
        return Found("unknown")
    if invitation.used_at is not None:
        state: LinkState = "used"
    elif invitation.expires_at <= now or (found.until is not None and found.until <= now):
        state = "expired"  # the link's end, or the share's (`until`): nothing left to accept
    else:
        state = "usable"
    owner = storage.get_username(invitation.owner)
    return Found(state, invitation, found, resource_set, owner)


REFUSALS: dict[LinkState, str] = {
    "unknown": (
        "This invitation link does not work: it was cancelled, replaced by a newer link, or never"
        " existed. Ask the person who shared with you for a new link."
    ),
    "used": "This invitation has been accepted already: a link works once.",
    "expired": "This invitation has expired. Ask the person who shared with you for a new link.",
    "usable": "",
}


def accept(storage: Storage, unverified_token: str, user: User, now: int) -> Found:
    """`user` accepts the link: the share becomes theirs (see the module). What the link was, as
    used. Raises InvitationRefused when the link is not usable, or is the owner's own."""
    with storage.transaction():
        found = look_up(storage, unverified_token, now)
        if found.state != "usable" or found.invitation is None or found.share is None:
            state = "unknown" if found.state == "usable" else found.state
            raise InvitationRefused(state, REFUSALS[state])
        if found.invitation.owner == user.sub:
            raise InvitationRefused(
                "own", "This is your own invitation: send the link to the person you invited."
            )
        used = storage.use_invitation(found.invitation.digest, user.sub, now)
        if used is None:  # cannot happen under the transaction's lock
            raise InvitationRefused("used", REFUSALS["used"])
        _share_with(storage, found.share, found.owner or "", user.username, now)
        if "email" not in user.claims:
            claims: dict[str, Any] = {
                **user.claims,
                "email": found.invitation.address,
                "email_verified": True,
            }
            storage.set_user_claims(user.sub, claims)
        if found.resource_set is not None:
            access_history.record_share(
                storage,
                now=now,
                kind="share",
                resource_set=found.resource_set,
                scopes=found.share.scopes,
                to=user.username,
            )
    log.info(
        "invitation accepted: owner=%s rule=%s user=%s",
        found.owner,
        found.share.rule_id,
        user.username,
    )
    return Found("used", used, found.share, found.resource_set, found.owner)


def _share_with(storage: Storage, found: Share, owner: str, username: str, now: int) -> None:
    """Rewrites the share's rule to hold on `username` (and its row to name them)."""
    rule = shares.share_rule(
        found.rule_id,
        owner,
        found.resource_set_id,
        shares.Recipient("user", username),
        found.scopes,
        found.until,
    )
    if not storage.replace_owner_rule(found.owner, found.rule_id, rule_table(rule), now):
        raise RuntimeError(f"the share's rule {found.rule_id!r} is gone")
    if not storage.reassign_share(found.owner, found.rule_id, username, "user"):
        raise RuntimeError(f"the share {found.rule_id!r} is gone")
