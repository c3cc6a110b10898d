"""Owners' own rules, kept in the database and edited on the owner's policy page (issue 12).

A rule of an owner has the same form as a rule of the file (`policy.rules.Rule`), is validated by
the same code (`policy.rule_file.parse_rule_table`, with the file's messages), is stored as the same
table in JSON, has an id `o-<random>` (the file may not use such ids), and is evaluated together with
the file's rules from the next request on (`effective_rules`): every change bumps the owner's
version in its transaction, and a process reads an owner's rules again only when that changed.
`[policies] owner_rules = false` turns them off: they are ignored in decisions, and adding,
replacing or deleting one raises OwnerRulesDisabled (pass `enabled=` from the config).

The form (`rule_from_form`), without JavaScript; field names:

- `description`: optional text.
- `coverage`: `this` (the resource set of the page; the default), `all` (every set of the owner) or
  `type`, with `coverage_type`: the resource set type.
- `scopes`: the scopes granted (repeated field, at least one; empty values are left out).
- condition rows, N = 0, 1, ...: `conditions-N-claim`, `conditions-N-operator` (one of
  `policy.rule_file.OPERATORS`), `conditions-N-value`, `conditions-N-types` and
  `conditions-N-issuers` (space-separated; empty for any), `conditions-N-hint`. A row whose claim
  is empty is ignored (the page always offers one empty row).

How `conditions-N-value` is read, by operator: `equals`, `contains` and `one_of` take the text as
JSON when it parses as JSON (`42`, `true`, `["a", "b"]`, `"42"` for the string), else as a string
(`doctor`), so `one_of` needs a JSON array; `prefix`, `suffix` and `regex` take the text as it is;
`exists` ignores it. Names (scopes, claims, types, issuers, the set type) and the hint and
description are stripped of surrounding spaces; values are not.

Every error lands on the field it concerns (`RuleFormError.errors`), with the message the rule
file's reader gives for the same mistake; `""` for the form as a whole.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import strict_json
from ..policy.rule_file import (
    OPERATORS,
    OWNER_RULE_PREFIX,
    PolicyError,
    parse_rule_table,
    rule_table,
)
from ..policy.rules import Rule, RuleSet
from ..storage import Storage
from ..storage.records import StoredOwnerRule

log = logging.getLogger("umaserver.policy")

COVERAGES = ("this", "all", "type")
ID_BYTES = 12  # 96 bits: ids are never guessed nor repeated
# Owners whose rules a process keeps parsed (the least recently used are forgotten).
CACHE_SIZE = 4096
# The place the reader's messages name for a rule of the form.
_PLACE = "rule"


class RuleFormError(Exception):
    """The form cannot make a rule; `errors` maps a field name (as above) to what is wrong with
    it, for people; `""` for the form as a whole."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        super().__init__("; ".join(f"{k or 'form'}: {v}" for k, v in errors.items()))
        self.errors = dict(errors)


class OwnerRulesDisabled(Exception):
    """`[policies] owner_rules = false`: owners' rules cannot be changed (and do not count). The
    message is for the owner."""

    def __init__(self) -> None:
        super().__init__(
            "Your own rules are turned off on this server: they cannot be changed now, and those"
            " you made do not count until the operator turns them on again."
        )


@dataclass(frozen=True)
class OwnerRule:
    rule: Rule
    created_at: int
    updated_at: int


def new_rule_id() -> str:
    return OWNER_RULE_PREFIX + secrets.token_urlsafe(ID_BYTES)


# -- the form ----------------------------------------------------------------------------------


def rule_from_form(
    owner: str, resource_set_id: str, form: Mapping[str, Sequence[str]], rule_id: str | None = None
) -> Rule:
    """A rule of `owner` from the form's fields (each a list of values, as
    `request.form.to_dict(flat=False)`); a new id when `rule_id` is None. Raises RuleFormError."""
    errors: dict[str, str] = {}

    def one(name: str, strip: bool = True) -> str:
        values = form.get(name, ())
        if len(values) > 1:
            errors.setdefault(name, "given more than once")
        value = values[0] if values else ""
        return value.strip() if strip else value

    table: dict[str, Any] = {"id": rule_id or new_rule_id(), "owner": owner}
    table["scopes"] = list(dict.fromkeys(s.strip() for s in form.get("scopes", ()) if s.strip()))
    description = one("description")
    if description:
        table["description"] = description
    coverage = one("coverage") or "this"
    if coverage == "this":
        table["resource_sets"] = {"ids": [resource_set_id]}
    elif coverage == "type":
        table["resource_sets"] = {"types": [one("coverage_type")]}
    elif coverage != "all":
        errors["coverage"] = f"must be one of {', '.join(COVERAGES)}"

    conditions: list[dict[str, Any]] = []
    rows: list[int] = []  # the form's row of each condition
    for row in _condition_rows(form):
        field = f"conditions-{row}-"
        claim = one(field + "claim")
        if not claim:
            continue
        entry: dict[str, Any] = {"claim": claim}
        operator = one(field + "operator")
        if operator in OPERATORS:
            operand = _operand(operator, one(field + "value", strip=False))
            if operand is _TOO_DEEP:
                errors.setdefault(field + "value", "values are nested too deeply")
            else:
                entry[operator] = operand
        elif operator:
            # What the file's reader says of a key that is no operator, without letting the
            # name stand for one of the condition's other keys.
            errors.setdefault(field + "operator", f"unknown operator {operator!r}")
        for key in ("types", "issuers"):
            names = one(field + key).split()
            if names:
                entry[key] = names
        hint = one(field + "hint")
        if hint:
            entry["hint"] = hint
        conditions.append(entry)
        rows.append(row)
    if conditions:
        table["conditions"] = conditions

    try:
        rule = parse_rule_table(table, _PLACE)
    except PolicyError as error:
        for line in error.errors:
            name, message = _field_of(line, rows)
            errors.setdefault(name, message)
        raise RuleFormError(errors) from None
    if errors:
        raise RuleFormError(errors)
    return rule


def form_from_rule(rule: Rule, resource_set_id: str) -> dict[str, list[str]]:
    """The form's fields for editing `rule` (the inverse of `rule_from_form`). Raises ValueError
    for a rule the form of this set cannot show: one that covers sets by id other than this one,
    by name, or by several types (the form makes none such)."""
    selector = rule.resource_sets
    coverage_type = ""
    if selector.everything:
        coverage = "all"
    elif selector.ids == {resource_set_id} and not selector.types and not selector.names:
        coverage = "this"
    elif len(selector.types) == 1 and not selector.ids and not selector.names:
        coverage = "type"
        (coverage_type,) = selector.types
    else:
        raise ValueError(
            f"rule {rule.id!r} covers {selector.description}: not this set, all sets or one type"
        )
    form: dict[str, list[str]] = {
        "description": [rule.description or ""],
        "coverage": [coverage],
        "coverage_type": [coverage_type],
        "scopes": list(rule.scopes),
    }
    for row, condition in enumerate(rule.conditions):
        field = f"conditions-{row}-"
        form[field + "claim"] = [condition.claim]
        form[field + "operator"] = [condition.operator]
        form[field + "value"] = [_value_text(condition.operator, condition.operand)]
        form[field + "types"] = [" ".join(sorted(condition.types or ()))]
        form[field + "issuers"] = [" ".join(sorted(condition.issuers or ()))]
        form[field + "hint"] = [condition.hint or ""]
    return form


_ROW_FIELD = re.compile(r"conditions-(\d{1,4})-[a-z]+")
_TOO_DEEP = object()


def _condition_rows(form: Mapping[str, Sequence[str]]) -> list[int]:
    return sorted({int(m[1]) for name in form if (m := _ROW_FIELD.fullmatch(name))})


def _operand(operator: str, text: str) -> Any:
    if operator == "exists":
        return True
    if operator in ("prefix", "suffix", "regex"):
        return text
    try:
        return strict_json.loads(text)
    except RecursionError:
        return _TOO_DEEP
    except ValueError:
        return text


def _value_text(operator: str, operand: Any) -> str:
    """The text `_operand` reads back as `operand`: a string as it is, unless it would read as
    other JSON (`42`, `"x"`), then quoted."""
    if operator == "exists":
        return ""
    if isinstance(operand, str):
        if operator in ("prefix", "suffix", "regex"):
            return operand
        try:
            strict_json.loads(operand)
        except (ValueError, RecursionError):
            return operand
    return json.dumps(operand, ensure_ascii=False)


# "rule.conditions[2].equals: must be ..." -> the path after the place, and the message.
_ERROR_LINE = re.compile(rf"{_PLACE}((?:\.[a-z_]+|\[\d+\])*): (.*)", re.DOTALL)
_CONDITION_PATH = re.compile(r"\.conditions\[(\d+)\](?:\.([a-z_]+))?")
_CONDITION_FIELDS = {"claim": "claim", "types": "types", "issuers": "issuers", "hint": "hint"}


def _field_of(line: str, rows: Sequence[int]) -> tuple[str, str]:
    """The form field a message of the reader concerns, and the message without its place."""
    found = _ERROR_LINE.fullmatch(line)
    if found is None:
        return "", line
    path, message = found.groups()
    if path == "":
        if message == "missing 'scopes'":
            return "scopes", message
        return "", message
    if path in (".scopes", ".description"):
        return path[1:], message
    if path == ".resource_sets.types":
        return "coverage_type", message
    if path.startswith(".resource_sets"):
        return "coverage", message
    condition = _CONDITION_PATH.fullmatch(path)
    if condition is not None and int(condition[1]) < len(rows):
        field = f"conditions-{rows[int(condition[1])]}-"
        key = condition[2]
        if key is None:
            if message == "missing 'claim'":
                return field + "claim", message
            if "operator" in message:
                return field + "operator", message
            return "", message
        if key in OPERATORS:
            return field + "value", message
        return field + _CONDITION_FIELDS.get(key, key), message
    return "", message


# -- stored rules ------------------------------------------------------------------------------


def _user_sub(storage: Storage, owner: str) -> str:
    user = storage.get_user_by_username(owner)
    if user is None:
        raise LookupError(f"there is no user {owner!r}: only users have rules of their own")
    return user.sub


def _checked_table(owner: str, rule: Rule) -> dict[str, Any]:
    """The rule's table, after checking it is a rule of `owner` that reads back as itself."""
    if rule.owner != owner:
        raise ValueError(f"rule {rule.id!r} is a rule of {rule.owner!r}, not of {owner!r}")
    if not rule.id.startswith(OWNER_RULE_PREFIX):
        raise ValueError(f"an owner's rule has an id starting with {OWNER_RULE_PREFIX!r}")
    table = rule_table(rule)
    parse_rule_table(table, rule.id)  # PolicyError: a rule not made by `rule_from_form`
    return table


def _read(stored: StoredOwnerRule) -> Rule:
    """The stored rule, read by the rule file's reader; its row says whose it is and its id.
    Raises PolicyError."""
    return parse_rule_table({**stored.rule, "id": stored.id, "owner": stored.username}, stored.id)


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
        OwnerRule(rule, stored.created_at, stored.updated_at)
        for stored, rule in _usable(storage.owner_rules_of(user.sub))
    ]


def add_owner_rule(
    storage: Storage, owner: str, rule: Rule, now: int, *, enabled: bool = True
) -> None:
    """Stores `rule` (from `rule_from_form`) as a new rule of `owner`. Raises OwnerRulesDisabled,
    LookupError (no such user), ValueError (not a new owner's rule of `owner`)."""
    if not enabled:
        raise OwnerRulesDisabled()
    table = _checked_table(owner, rule)
    if not storage.add_owner_rule(rule.id, _user_sub(storage, owner), table, now):
        raise ValueError(f"the rule id {rule.id!r} is taken")
    _log("added", owner, rule)


def replace_owner_rule(
    storage: Storage, owner: str, rule: Rule, now: int, *, enabled: bool = True
) -> bool:
    """Replaces the rule of `owner` with `rule`'s id. False when `owner` has no rule of that id.
    Raises OwnerRulesDisabled, LookupError, ValueError as `add_owner_rule`."""
    if not enabled:
        raise OwnerRulesDisabled()
    table = _checked_table(owner, rule)
    if not storage.replace_owner_rule(_user_sub(storage, owner), rule.id, table, now):
        return False
    _log("replaced", owner, rule)
    return True


def delete_owner_rule(
    storage: Storage, owner: str, rule_id: str, now: int, *, enabled: bool = True
) -> bool:
    """False when `owner` has no rule of that id. Raises OwnerRulesDisabled."""
    if not enabled:
        raise OwnerRulesDisabled()
    user = storage.get_user_by_username(owner)
    if user is None or not storage.delete_owner_rule(user.sub, rule_id):
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
    out). `enabled`: `[policies] owner_rules`; when false, just the file's.

    Each process keeps the owners' rules it read, parsed, by version: a decision reads the
    owner's version, and their rules only when a change (by any process) bumped it since."""
    if not enabled:
        return file_rules
    user = storage.get_user_by_username(owner)
    if user is None:  # a client acting for itself, or no such user: no rules of its own
        return file_rules
    version = storage.owner_rules_version(user.sub)
    if version == 0:
        return file_rules
    own: tuple[Rule, ...] | None = None
    with _cache_lock:
        cached = _cache.get(user.sub)
        if cached is not None and cached.version == version:
            _cache.move_to_end(user.sub)
            if cached.file_rules is file_rules:
                return cached.rules
            own = cached.own
    if own is None:
        # Read outside the lock. Rules newer than `version` may be read here; kept as `version`,
        # they are read again at the next decision, which sees the newer version.
        own = tuple(rule for _, rule in _usable(storage.owner_rules_of(user.sub)))
    rules = RuleSet((*file_rules.rules_for(owner), *own))
    with _cache_lock:
        _cache[user.sub] = _Cached(version, own, file_rules, rules)
        _cache.move_to_end(user.sub)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return rules
