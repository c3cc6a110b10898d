"""Owners' own rules, kept in the database and edited on the owner's policy page (issue 12).

A rule of an owner has the same form as a rule of the file (`policy.rules.Rule`), is validated by
the same code (`policy.rule_file.parse_rule_table`, with the file's messages), is stored as the same
table in JSON, has an id `o-<random>` (the file may not use such ids), and is evaluated together with
the file's rules from the next request on (`effective_rules`): every change bumps the owner's
version in its transaction, and a process reads an owner's rules again only when that changed.
`[policies] owner_rules = false` turns them off: they are ignored in decisions, and adding,
replacing or deleting one raises OwnerRulesDisabled (pass `enabled=` from the config).

The policy page's form, to a rule and back, is `owner_rule_form`. A rule made through Keycloak's
policy API (`keycloak_policies`) also has a `name`, kept beside the rule's table in its stored JSON
(`NAME_KEY`), never read by the rule file's reader.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..policy.rule_file import (
    OWNER_RULE_PREFIX,
    PolicyError,
    parse_rule_table,
    rule_table,
)
from ..policy.rules import Rule, RuleSet
from ..storage import Storage
from ..storage.records import StoredOwnerRule
from . import rule_limits
from .rule_limits import DEFAULT_LIMITS, RuleLimits

log = logging.getLogger("umaserver.policy")

ID_BYTES = 12  # 96 bits: ids are never guessed nor repeated
# Owners whose rules a process keeps parsed (the least recently used are forgotten).
CACHE_SIZE = 4096
# The member of a stored rule's JSON that holds its name (Keycloak's policy name), if it has one.
NAME_KEY = "name"


class OwnerRulesDisabled(Exception):
    """`[policies] owner_rules = false`: owners' rules cannot be changed (and do not count). The
    message is for the owner."""

    def __init__(self) -> None:
        super().__init__(
            "Your own rules are turned off on this server: they cannot be changed now, and those"
            " you made do not count until the operator turns them on again."
        )


class ShareRule(Exception):
    """The rule is a share (`services.shares`): it is ended by Stop sharing, never edited or
    deleted as a rule. The message is for the owner."""

    def __init__(self) -> None:
        super().__init__(
            "This rule is a share: stop sharing on the resource set's page instead of changing it."
        )


@dataclass(frozen=True)
class OwnerRule:
    rule: Rule
    created_at: int
    updated_at: int
    name: str | None = None


def new_rule_id() -> str:
    return OWNER_RULE_PREFIX + secrets.token_urlsafe(ID_BYTES)


# -- stored rules ------------------------------------------------------------------------------


def _user_sub(storage: Storage, owner: str) -> str:
    user = storage.get_user_by_username(owner)
    if user is None:
        raise LookupError(f"there is no user {owner!r}: only users have rules of their own")
    return user.sub


def _checked_table(owner: str, rule: Rule, name: str | None = None) -> dict[str, Any]:
    """The rule's table (with `name`, if given), after checking it is a rule of `owner` that reads
    back as itself."""
    if rule.owner != owner:
        raise ValueError(f"rule {rule.id!r} is a rule of {rule.owner!r}, not of {owner!r}")
    if not rule.id.startswith(OWNER_RULE_PREFIX):
        raise ValueError(f"an owner's rule has an id starting with {OWNER_RULE_PREFIX!r}")
    table = rule_table(rule)
    parse_rule_table(table, rule.id)  # PolicyError: a rule not made by `rule_from_form`
    if name is not None:
        table[NAME_KEY] = name
    return table


def _read(stored: StoredOwnerRule) -> Rule:
    """The stored rule, read by the rule file's reader; its row says whose it is and its id.
    Raises PolicyError."""
    table = {key: value for key, value in stored.rule.items() if key != NAME_KEY}
    return parse_rule_table({**table, "id": stored.id, "owner": stored.username}, stored.id)


def _name(stored: StoredOwnerRule) -> str | None:
    name = stored.rule.get(NAME_KEY)
    return name if isinstance(name, str) else None


def _usable(stored_rules: Sequence[StoredOwnerRule]) -> list[tuple[StoredOwnerRule, Rule]]:
    usable = []
    for stored in stored_rules:
        try:
            usable.append((stored, _read(stored)))
        except PolicyError as error:
            # Only after a change of what the reader accepts: the rule grants nothing until fixed.
            log.error(
                "owner rule %s of %s is broken and ignored: %s",
                stored.id,
                stored.username,
                "; ".join(error.errors),
            )
    return usable


def owner_rules(storage: Storage, owner: str) -> list[OwnerRule]:
    """The rules `owner` (as rules name owners: a username) made, oldest first. (A stored rule the
    reader refuses, possible only after a change of the reader, is logged and left out.)"""
    user = storage.get_user_by_username(owner)
    if user is None:
        return []
    return [
        OwnerRule(rule, stored.created_at, stored.updated_at, _name(stored))
        for stored, rule in _usable(storage.owner_rules_of(user.sub))
    ]


def add_owner_rule(
    storage: Storage,
    owner: str,
    rule: Rule,
    now: int,
    *,
    enabled: bool = True,
    name: str | None = None,
    limits: RuleLimits | None = DEFAULT_LIMITS,
) -> None:
    """Stores `rule` (from `owner_rule_form.rule_from_form`) as a new rule of `owner`. Raises OwnerRulesDisabled,
    LookupError (no such user), ValueError (not a new owner's rule of `owner`), RuleTooLarge
    (past `limits`, the config's `[limits]`; None only for a share, which `services.shares`
    counts under its own limit)."""
    if not enabled:
        raise OwnerRulesDisabled()
    table = _checked_table(owner, rule, name)
    user_sub = _user_sub(storage, owner)
    if limits is not None:
        rule_limits.check(rule, limits, name)
    with storage.transaction():
        if not storage.add_owner_rule(rule.id, user_sub, table, now):
            raise ValueError(f"the rule id {rule.id!r} is taken")
        if limits is not None:
            # Counted after adding, in the same transaction (raising rolls the rule back): adding
            # bumps the owner's version, which waits for any other transaction adding a rule of
            # this owner to end, so two that both saw one place left cannot both keep theirs.
            own = len(storage.owner_rules_of(user_sub)) - storage.count_shares(user_sub)
            if own > limits.rules_per_owner:
                raise rule_limits.too_many_rules(limits)
    _log("added", owner, rule)


def replace_owner_rule(
    storage: Storage,
    owner: str,
    rule: Rule,
    now: int,
    *,
    enabled: bool = True,
    name: str | None = None,
    limits: RuleLimits = DEFAULT_LIMITS,
) -> bool:
    """Replaces the rule of `owner` with `rule`'s id. False when `owner` has no rule of that id.
    Raises OwnerRulesDisabled, LookupError, ValueError, RuleTooLarge as `add_owner_rule`,
    ShareRule."""
    if not enabled:
        raise OwnerRulesDisabled()
    table = _checked_table(owner, rule, name)
    rule_limits.check(rule, limits, name)
    user_sub = _user_sub(storage, owner)
    with storage.transaction():
        if storage.get_share(user_sub, rule.id) is not None:
            raise ShareRule()
        if not storage.replace_owner_rule(user_sub, rule.id, table, now):
            return False
    _log("replaced", owner, rule)
    return True


def delete_owner_rule(
    storage: Storage, owner: str, rule_id: str, now: int, *, enabled: bool = True
) -> bool:
    """False when `owner` has no rule of that id. Raises OwnerRulesDisabled, ShareRule."""
    if not enabled:
        raise OwnerRulesDisabled()
    user = storage.get_user_by_username(owner)
    if user is None:
        return False
    with storage.transaction():
        if storage.get_share(user.sub, rule_id) is not None:
            raise ShareRule()
        if not storage.delete_owner_rule(user.sub, rule_id):
            return False
    log.info("owner rule deleted: owner=%s rule=%s", owner, rule_id)
    return True


def _log(what: str, owner: str, rule: Rule) -> None:
    # What it grants on which sets; never the conditions' values (they may name people).
    log.info(
        "owner rule %s: owner=%s rule=%s scopes=%s sets=%s conditions=%d",
        what,
        owner,
        rule.id,
        ",".join(rule.scopes),
        rule.resource_sets.description,
        len(rule.conditions),
    )


@dataclass(frozen=True)
class StoredRulesCheck:
    """Every owner's stored rules, read as a decision would: (username, id) of those that are
    good, and a line for each that is broken, naming its owner and id."""

    rules: list[tuple[str, str]]
    errors: list[str]


def check_stored_rules(storage: Storage) -> StoredRulesCheck:
    good: list[tuple[str, str]] = []
    errors: list[str] = []
    for stored in storage.all_owner_rules():
        try:
            _read(stored)
        except PolicyError as error:
            errors.extend(f"owner {stored.username!r}: {line}" for line in error.errors)
        else:
            good.append((stored.username, stored.id))
    return StoredRulesCheck(good, errors)


# -- evaluation --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Cached:
    version: int
    enabled: bool  # False: `own` holds the owner's shares only
    own: tuple[Rule, ...]
    file_rules: RuleSet  # what `rules` was built on: the file's rules then in force
    rules: RuleSet


_cache: OrderedDict[str, _Cached] = OrderedDict()
_cache_lock = threading.Lock()


def effective_rules(
    storage: Storage, file_rules: RuleSet, owner: str, *, enabled: bool = True
) -> RuleSet:
    """The rules a decision about `owner`'s sets uses: `rules_for(owner)` of the answer is the
    file's rules of `owner`, then the owner's own, oldest first (rules of other owners may be left
    out). `enabled`: `[policies] owner_rules`; when false, the file's and the owner's shares
    (`services.shares`: a share is not one of the rules the switch turns off).

    Each process keeps the owners' rules it read, parsed, by version: a decision reads the
    owner's version, and their rules only when a change (by any process) bumped it since."""
    user = storage.get_user_by_username(owner)
    if user is None:  # a client acting for itself, or no such user: no rules of its own
        return file_rules
    version = storage.owner_rules_version(user.sub)
    if version == 0:
        return file_rules
    own: tuple[Rule, ...] | None = None
    with _cache_lock:
        cached = _cache.get(user.sub)
        if cached is not None and cached.version == version and cached.enabled == enabled:
            _cache.move_to_end(user.sub)
            if cached.file_rules is file_rules:
                return cached.rules
            own = cached.own
    if own is None:
        # Read outside the lock. Rules newer than `version` may be read here; kept as `version`,
        # they are read again at the next decision, which sees the newer version.
        own = tuple(rule for _, rule in _usable(storage.owner_rules_of(user.sub)))
        if not enabled:
            shared = {share.rule_id for share in storage.shares_of(user.sub)}
            own = tuple(rule for rule in own if rule.id in shared)
    # Off, and no shares: just the file's.
    rules = file_rules if not enabled and not own else RuleSet((*file_rules.rules_for(owner), *own))
    with _cache_lock:
        _cache[user.sub] = _Cached(version, enabled, own, file_rules, rules)
        _cache.move_to_end(user.sub)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return rules
