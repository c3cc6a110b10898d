"""The owner's policy page's form for a rule of their own (`services.owner_rules` stores it).

The form (`rule_from_form`), without JavaScript; field names:

- `description`: optional text.
- `coverage`: `this` (the resource set of the page; the default), `all` (every set of the owner) or
  `type`, with `coverage_type`: the resource set type.
- `scopes`: the scopes granted (repeated field, at least one; empty values are left out).
- `clients`: the client ids the rule holds for (repeated: one checkbox per app; each value may
  hold several ids, space-separated; none for any client).
- condition rows, N = 0, 1, ...: `conditions-N-claim`, `conditions-N-operator` (one of
  `policy.rule_file.OPERATORS`), `conditions-N-value`, `conditions-N-types` and
  `conditions-N-issuers` (space-separated; empty for any), `conditions-N-hint`. A row whose claim
  is empty is ignored (the page always offers one empty row).

How `conditions-N-value` is read, by operator: `equals`, `contains` and `one_of` take the text as
JSON when it parses as JSON (`42`, `true`, `["a", "b"]`, `"42"` for the string), else as a string
(`doctor`), so `one_of` needs a JSON array; text that starts like an array or object (`[`, `{`)
must be JSON; `prefix`, `suffix` and `regex` take the text as it is;
`exists` ignores it. Names (scopes, claims, types, issuers, the set type) and the hint and
description are stripped of surrounding spaces; values are not.

Every error lands on the field it concerns (`RuleFormError.errors`), `""` for the form as a
whole: the rule file's reader finds the mistakes, and each is said as a sentence for the owner
(`owner_sentence`: "Choose at least one scope.", "Write the value the claim must have."), never
as the reader's words for a file ("must be a non-empty array of non-empty strings"). A value left
empty for a test that compares (equals, contains, one of, contains any) is a mistake too: `""`
(two quotes) is the empty text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .. import strict_json
from ..policy.rule_file import OPERATORS, PolicyError, parse_rule_table
from ..policy.rules import Rule
from .owner_rules import new_rule_id
from .rule_limits import Excess, RuleLimits, excesses

COVERAGES = ("this", "all", "type")
# The place the reader's messages name for a rule of the form.
_PLACE = "rule"


class RuleFormError(Exception):
    """The form cannot make a rule; `errors` maps a field name (as above) to what is wrong with
    it, for people; `""` for the form as a whole."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        super().__init__("; ".join(f"{k or 'form'}: {v}" for k, v in errors.items()))
        self.errors = dict(errors)


def rule_from_form(
    owner: str,
    resource_set_id: str,
    form: Mapping[str, Sequence[str]],
    rule_id: str | None = None,
    limits: RuleLimits | None = None,
) -> Rule:
    """A rule of `owner` from the form's fields (each a list of values, as
    `request.form.to_dict(flat=False)`); a new id when `rule_id` is None. Raises RuleFormError,
    also for a rule past `limits` (the config's; `services.owner_rules` checks them again)."""
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
    clients = list(dict.fromkeys(c for value in form.get("clients", ()) for c in value.split()))
    if clients:
        table["clients"] = clients
    coverage = one("coverage") or "this"
    if coverage == "this":
        table["resource_sets"] = {"ids": [resource_set_id]}
    elif coverage == "type":
        table["resource_sets"] = {"types": [one("coverage_type")]}
    elif coverage != "all":
        errors["coverage"] = f"must be one of {', '.join(COVERAGES)}"

    conditions: list[dict[str, Any]] = []
    rows: list[int] = []  # the form's row of each condition
    operators: dict[str, str] = {}  # "conditions-N-" -> its operator
    for row in _condition_rows(form):
        field = f"conditions-{row}-"
        claim = one(field + "claim")
        if not claim:
            continue
        entry: dict[str, Any] = {"claim": claim}
        operator = one(field + "operator")
        if operator in OPERATORS:
            operators[field] = operator
            text = one(field + "value", strip=False)
            try:
                entry[operator] = _operand(operator, text)
            except ValueError as error:
                errors.setdefault(field + "value", str(error))
                entry[operator] = text  # so that the reader does not miss the operator too
            if operator in _COMPARING and not text.strip():
                errors.setdefault(field + "value", EMPTY)
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
        raise RuleFormError(_for_owner(errors, operators)) from None
    if errors:
        raise RuleFormError(_for_owner(errors, operators))
    if limits is not None:
        found = excesses(rule, limits)
        if found:
            raise RuleFormError(limit_errors(found, rows))
    return rule


def limit_errors(found: Sequence[Excess], rows: Sequence[int] = ()) -> dict[str, str]:
    """The limits' sentences (`rule_limits`) on the form's fields: a condition's on its row
    (`rows`: the form's row of each condition), the count of rules on the form as a whole."""
    errors: dict[str, str] = {}
    for excess in found:
        name = ""
        if excess.part == "description":
            name = "description"
        elif excess.condition is not None and excess.condition < len(rows):
            part = "claim" if excess.part == "conditions" else excess.part
            name = f"conditions-{rows[excess.condition]}-{part}"
        errors.setdefault(name, excess.message)
    return errors


# What the form's own checks say before they are put for the owner.
EMPTY = "empty"
_COMPARING = ("equals", "contains", "one_of", "contains_any")
_LISTED = ("one_of", "contains_any")
_LIST_EXAMPLE = 'such as ["doctor", "nurse"]'


def _for_owner(errors: Mapping[str, str], operators: Mapping[str, str]) -> dict[str, str]:
    return {
        name: owner_sentence(name, message, operators.get(name.rpartition("-")[0] + "-"))
        for name, message in errors.items()
    }


def owner_sentence(field: str, message: str, operator: str | None = None) -> str:
    """The reader's `message` about the form's `field` (with the row's `operator`, when it has
    one) as a sentence for an owner."""
    if message == "given more than once":
        return "This field was sent more than once: reload the page and fill in the form again."
    if field == "scopes":
        return "Choose at least one scope."
    if field == "coverage":
        return "Choose which of your resource sets the rule covers."
    if field == "coverage_type":
        return "Write the type of the resource sets the rule covers."
    if field.endswith("-claim"):
        return "Write the name of the claim."
    if field.endswith("-operator"):
        if message.startswith("unknown operator"):
            return "Choose a test from the list."
        return "Choose a test."
    if field.endswith("-value"):
        return _value_sentence(message, operator)
    return message[:1].upper() + message[1:] + ("" if message.endswith(".") else ".")


def _value_sentence(message: str, operator: str | None) -> str:
    if operator in _LISTED:
        if operator == "contains_any":
            return f"Write the values, one of which the claim must hold, as a JSON list {_LIST_EXAMPLE}."
        return f"Write the values the claim may have, as a JSON list {_LIST_EXAMPLE}."
    if message.startswith("not JSON"):
        return (
            "This starts like JSON but is not JSON: correct it, or write the text in quotes,"
            ' such as "[draft]".'
        )
    if operator in ("equals", "contains"):
        return 'Write the value the claim must have ("" for empty text).'
    if operator == "prefix":
        return "Write the text the claim must start with."
    if operator == "suffix":
        return "Write the text the claim must end with."
    if operator == "regex":
        reason = message.partition("invalid RE2 pattern: ")[2]
        if reason:
            return f"This pattern cannot be used ({reason}): see the rule file's notes on RE2."
        return "Write the pattern the claim must match."
    return f"This value cannot be used: {message}."


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
        "clients": sorted(rule.clients or ()),
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


def _condition_rows(form: Mapping[str, Sequence[str]]) -> list[int]:
    return sorted({int(m[1]) for name in form if (m := _ROW_FIELD.fullmatch(name))})


def _operand(operator: str, text: str) -> Any:
    """The value of a condition from its text; ValueError for text that starts like a JSON array
    or object but is not JSON."""
    if operator == "exists":
        return True
    if operator in ("prefix", "suffix", "regex"):
        return text
    try:
        return strict_json.loads(text)
    except ValueError as error:
        if text.lstrip().startswith(("[", "{")):
            raise ValueError(f"not JSON: {error}") from None
        return text


def _value_text(operator: str, operand: Any) -> str:
    """The text `_operand` reads back as `operand`: a string as it is, unless it would read as
    other JSON (`42`, `"x"`) or starts like an array or object, then quoted."""
    if operator == "exists":
        return ""
    if operand == "":
        return '""'  # an empty value is a mistake on the form
    if isinstance(operand, str):
        if operator in ("prefix", "suffix", "regex"):
            return operand
        try:
            strict_json.loads(operand)
        except ValueError:
            if not operand.lstrip().startswith(("[", "{")):
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
    if path in (".scopes", ".description", ".clients"):
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
