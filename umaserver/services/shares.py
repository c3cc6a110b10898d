"""Sharing a resource set with a person (issue 25): "Bob may view and print my holiday photos
until Friday".

A share is an owner's rule underneath, so that the decision, `policy explain` and the explain
form need no second path: the rule covers the one set by id, grants the scopes shared, ends at
`until` (`Rule.until`, compared with the decision's current time), and holds on one condition
about the requesting party's own identity, the account claims of the person behind the AAT or
Bearer token (`services.account_claims`, type `ACCOUNT_CLAIM_TYPE`, which no client can push):
`username` equal to the username shared with, or the account's verified `email` equal to the
address shared with. A row of the `shares` table marks the rule as a share and keeps `to` as the
owner registered it; the rule and the row are written in one transaction.

Shares have their own limit (`[limits] shares_per_owner`), count with `[policies] owner_rules =
false` (`owner_rules.effective_rules`), and are never edited or deleted as rules
(`owner_rules.ShareRule`): `stop_sharing` deletes both and revokes the permissions already
granted on the set to the person shared with.

An `email` from a verified ID token counts too: a rule's conditions must all hold and one
condition reads one claim, so rather than alternatives in the rule language, the ID token's
verification (`claims.id_tokens`) adds an account claim `email` (issuer: the provider) when the
token says `email_verified: true`; a client's own word (plain members, custom types) never has the
account claims' type. Addresses are compared whole and lowercased (`claims.model.email_key`): the
condition holds the lowercased address, the row keeps it as the owner typed it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from ..claims.model import ACCOUNT_CLAIM_TYPE, email_key
from ..errors import echo
from ..policy.rule_file import PolicyError, parse_rule_table
from ..policy.rules import Rule, RuleSet
from ..storage import Storage
from ..storage.people_records import Share, ShareKind
from ..storage.records import ResourceSet, User
from . import access_history, notices, owner_rules
from .account_claims import account_values

log = logging.getLogger("umaserver.policy")

# What `to` may be: a username as registered, or an address of the form local@domain.
TO_LENGTH = 254
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
DAY = 86400


class ShareRefused(Exception):
    """The share cannot be made; `field` is the form's field the sentence is about (`to`,
    `scopes`, `until`), or None for the whole form. The message is for the owner."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class TooManyShares(ShareRefused):
    def __init__(self, limit: int) -> None:
        super().__init__(
            None,
            f"You have {limit:,} shares already, as many as this server keeps for one person:"
            " stop sharing something first.",
        )


@dataclass(frozen=True)
class Recipient:
    """Whom `to` names: a local user (their username as registered) or an e-mail address."""

    kind: ShareKind
    name: str


def recipient(storage: Storage, to: str) -> Recipient:
    """`to` read as an existing username first, else as an e-mail address. Raises ShareRefused
    for the field `to`."""
    to = to.strip()
    if not to:
        raise ShareRefused("to", "Enter the username or the e-mail address of the person.")
    if len(to) > TO_LENGTH:
        raise ShareRefused("to", f"This is longer than {TO_LENGTH} characters.")
    user = storage.get_user_by_username(to)
    if user is not None:
        return Recipient("user", user.username)
    if _EMAIL.fullmatch(to):
        return Recipient("email", to)
    raise ShareRefused(
        "to", f"There is no user named {echo(to)}, and it is not an e-mail address either."
    )


def end_of_day(text: str, now: int) -> int | None:
    """The end (exclusive, epoch seconds) of the day `text` (YYYY-MM-DD, an HTML date input's
    value), UTC; None for an empty value (no end). Raises ShareRefused for the field `until`
    when it is no date, or a day before today (UTC)."""
    text = text.strip()
    if not text:
        return None
    try:
        day = date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        day = None
    if day is None:
        raise ShareRefused("until", "Enter a date such as 2026-11-28, or leave it empty.")
    end = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
    until = int(end.timestamp())
    if until <= now:
        raise ShareRefused("until", "This date is in the past: choose today or a later day.")
    return until


def last_day(until: int) -> date:
    """The day a share ends at the end of (what `end_of_day` was given)."""
    return datetime.fromtimestamp(until - 1, UTC).date()


def share_rule(
    rule_id: str,
    owner: str,
    resource_set_id: str,
    person: Recipient,
    scopes: Sequence[str],
    until: int | None,
) -> Rule:
    """The owner's rule a share is: `scopes` on the one set, until `until`, for the person's
    account claim (`username`, or a verified `email`). Raises ShareRefused for the whole form
    only if the rule reader changed under this table."""
    table: dict[str, Any] = {
        "id": rule_id,
        "owner": owner,
        "scopes": list(scopes),
        "description": f"Shared with {person.name}",
        "resource_sets": {"ids": [resource_set_id]},
        "conditions": [
            {
                "claim": "username" if person.kind == "user" else "email",
                "one_of": [person.name if person.kind == "user" else email_key(person.name)],
                "types": [ACCOUNT_CLAIM_TYPE],
            }
        ],
    }
    if until is not None:
        table["until"] = until
    try:
        return parse_rule_table(table, "share")
    except PolicyError as error:
        raise ShareRefused(None, "; ".join(error.errors)) from None


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
    outbox: notices.Outbox | None,
) -> Share:
    """Shares `resource_set` of `owner` (a username) with the person `to` names, for `scopes`
    (each one of the set's), until `until` (epoch seconds, from `end_of_day`; None: no end).
    A local user shared with gets a notice through `outbox` (None: the caller tells the person
    in words of its own, as an approved request does). Raises ShareRefused (naming its field),
    TooManyShares."""
    user = storage.get_user_by_username(owner)
    if user is None or user.sub != resource_set.owner:
        raise ShareRefused(None, "Only the owner of a resource set shares it.")
    person = recipient(storage, to)
    if person.kind == "user" and person.name == owner:
        raise ShareRefused("to", "This is you: you have every access to your own resources.")
    wanted = list(dict.fromkeys(scopes))
    if not wanted:
        raise ShareRefused("scopes", "Choose at least one thing the person may do.")
    for scope in wanted:
        if scope not in resource_set.scopes:
            raise ShareRefused("scopes", f"{echo(scope)} is not something this resource allows.")
    if until is not None and until <= now:
        raise ShareRefused("until", "This date is in the past: choose today or a later day.")
    rule_id = owner_rules.new_rule_id()
    rule = share_rule(rule_id, owner, resource_set.id, person, wanted, until)
    made = Share(
        rule_id, user.sub, resource_set.id, person.name, person.kind, tuple(wanted), until, now
    )
    with storage.transaction():
        if storage.count_shares(user.sub) >= limit:
            raise TooManyShares(limit)
        # A share is not one of the rules `[policies] owner_rules` turns off.
        # Nor do shares count under `[limits] owner_rules_per_owner`: `limit` above counts them.
        owner_rules.add_owner_rule(storage, owner, rule, now, enabled=True, limits=None)
        if not storage.add_share(made):
            raise RuntimeError(f"the rule {rule_id!r} was not there to mark as a share")
        access_history.record_share(
            storage, now=now, kind="share", resource_set=resource_set, scopes=wanted, to=person.name
        )
        shared_with = storage.get_user_by_username(person.name) if person.kind == "user" else None
        if outbox is not None and shared_with is not None:
            message = notices.shared_with_you(
                outbox, owner=owner, set_name=resource_set.label, scopes=wanted, until=until
            )
            notices.notify(storage, outbox, message, now=now, user_sub=shared_with.sub)
    log.info(
        "shared: owner=%s rule=%s resource_set=%s kind=%s scopes=%s until=%s",
        owner,
        rule_id,
        resource_set.id,
        person.kind,
        ",".join(wanted),
        until if until is not None else "-",
    )
    return made


def rule_titles(
    storage: Storage, rules: RuleSet, owner: User, shared: Sequence[Share] | None = None
) -> dict[str, str]:
    """How the owner's pages name each rule that may decide on the owner's sets, by id: a file
    rule by its description (else its id), an owner's rule by its name or description, a share
    by its person ("your share with bob"). `shared`: the shares to name, all the owner's when
    not given."""
    titles = {rule.id: rule.description or rule.id for rule in rules.rules_for(owner.username)}
    for found in owner_rules.owner_rules(storage, owner.username):
        titles[found.rule.id] = found.name or found.rule.description or "a rule of yours"
    for one in storage.shares_of(owner.sub) if shared is None else shared:
        titles[one.rule_id] = f"your share with {one.recipient}"
    return titles


def shares_on(storage: Storage, owner_sub: str, resource_set_id: str) -> list[Share]:
    """The shares of the set, oldest first."""
    return storage.shares_of(owner_sub, resource_set_id)


def stop_sharing(storage: Storage, owner_sub: str, rule_id: str, now: int) -> Share | None:
    """Ends the share (its rule and row) and revokes the permissions on its set held for the
    person shared with (a user by username; by e-mail, the local users whose account has that
    address). None when the owner has no such share.

    A permission does not say which rule granted it: those of the person on the set are all
    revoked, and a client whose person another rule still allows gets them again at its next
    request."""
    with storage.transaction():
        found = storage.get_share(owner_sub, rule_id)
        if found is None:
            return None
        resource_set = storage.find_resource_set(found.resource_set_id)
        storage.delete_owner_rule(owner_sub, rule_id)  # the share's row goes with it
        if resource_set is not None:
            access_history.record_share(
                storage,
                now=now,
                kind="stop",
                resource_set=resource_set,
                scopes=found.scopes,
                to=found.recipient,
            )
        for rpt_digest, _ in storage.permissions_on(found.resource_set_id):
            rpt = storage.get_rpt(rpt_digest)
            if rpt is not None and _is_recipient(storage, found, rpt.requesting_party):
                storage.delete_permission(rpt_digest, found.resource_set_id)
    log.info("share stopped: rule=%s resource_set=%s", rule_id, found.resource_set_id)
    return found


def _is_recipient(storage: Storage, found: Share, requesting_party: str) -> bool:
    """Whether the requesting party (a user's sub, or client:<id>) is the person shared with:
    the user of that username, or a user whose account claims carry that e-mail address."""
    user = storage.get_user(requesting_party)
    if user is None:
        return False
    if found.kind == "user":
        return user.username == found.recipient
    return account_values(user).get("email") == email_key(found.recipient)
