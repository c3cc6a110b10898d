"""Reading the rule file: the TOML (see policies.example.toml) is checked, every error reported at
once with its place, and turned into a RuleSet whose operators are built once.

One rule is checked by the same code wherever it comes from: a `[[rules]]` table of the file, or an
owner's own rule kept in the database as the same table in JSON (`parse_rule_table`, and
`rule_table` for the way back). Ids starting with `OWNER_RULE_PREFIX` are the owners' rules': the
file may not use them, so the two never collide."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Mapping
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

import re2

from .rules import Condition, ResourceSetSelector, Rule, RuleSet, shared_set

OPERATORS = (
    "equals",
    "one_of",
    "contains",
    "contains_any",
    "prefix",
    "suffix",
    "exists",
    "regex",
)
_RULE_KEYS = (
    "id",
    "owner",
    "scopes",
    "description",
    "clients",
    "resource_sets",
    "conditions",
    "until",
)
_SELECTOR_KEYS = ("all", "ids", "types", "names")
_CONDITION_KEYS = ("claim", "types", "issuers", "hint")
# The ids of owners' own rules (made on their policy pages) start with this; a file's never do.
OWNER_RULE_PREFIX = "o-"


class PolicyError(Exception):
    """A rule file that cannot be used; `errors` holds one line per problem, each naming its place."""

    def __init__(self, errors: list[str], source: str = "<rules>") -> None:
        super().__init__("\n".join(errors))
        self.errors = list(errors)
        self.source = source


def load_rules(path: Path) -> RuleSet:
    """The rules of the file at `path`; a missing file means no rules. Raises PolicyError."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return RuleSet()
    except OSError as error:
        raise PolicyError([f"cannot read the file: {error.strerror or error}"], str(path)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PolicyError([f"byte {error.start}: not UTF-8 text"], str(path)) from None
    del raw  # not held while the text is parsed
    return parse_rules(text, str(path))


def parse_rules(text: str, source: str = "<rules>") -> RuleSet:
    """Parse and check a rule file, reporting every error at once. Raises PolicyError."""
    errors: list[str] = []
    try:
        data = tomllib.loads(text)
        rules = _read_file(data, errors)
    except tomllib.TOMLDecodeError as error:
        raise PolicyError([_syntax_error(error)], source) from None
    except RecursionError:
        raise PolicyError(["invalid TOML: values are nested too deeply"], source) from None
    if errors:
        raise PolicyError(errors, source)
    return RuleSet(rules)


def parse_rule_table(table: Any, place: str = "rule") -> Rule:
    """One rule from its table (a `[[rules]]` table of the file, or the same in JSON), checked as
    the file's rules are: every error at once, each named by its place (`place`, then the key),
    with the file's messages. Raises PolicyError."""
    errors: list[str] = []
    try:
        rule = _read_rule(table, place, errors)
    except RecursionError:
        raise PolicyError([f"{place}: values are nested too deeply"]) from None
    if errors or rule is None:
        raise PolicyError(errors or [f"{place}: not a rule"])
    return rule


def rule_table(rule: Rule) -> dict[str, Any]:
    """The table of the rule file that `parse_rule_table` reads back as `rule` (sets as sorted
    arrays; keys left out where the file may leave them out)."""
    table: dict[str, Any] = {"id": rule.id, "owner": rule.owner, "scopes": list(rule.scopes)}
    if rule.description is not None:
        table["description"] = rule.description
    if rule.clients is not None:
        table["clients"] = sorted(rule.clients)
    if rule.until is not None:
        table["until"] = rule.until
    selector = rule.resource_sets
    if not selector.everything:
        table["resource_sets"] = {
            key: sorted(values)
            for key, values in (
                ("ids", selector.ids),
                ("types", selector.types),
                ("names", selector.names),
            )
            if values
        }
    conditions = []
    for condition in rule.conditions:
        entry: dict[str, Any] = {"claim": condition.claim, condition.operator: condition.operand}
        if condition.types is not None:
            entry["types"] = sorted(condition.types)
        if condition.issuers is not None:
            entry["issuers"] = sorted(condition.issuers)
        if condition.hint is not None:
            entry["hint"] = condition.hint
        conditions.append(entry)
    if conditions:
        table["conditions"] = conditions
    return table


def _syntax_error(error: tomllib.TOMLDecodeError) -> str:
    # tomllib (3.11) only puts the position into its message: "Invalid value (at line 2, column 5)",
    # "Unterminated string (at end of document)"; moved to the front like every other place.
    found = re.fullmatch(
        r"(.*) \(at (line \d+, column \d+|end of document)\)", str(error), re.DOTALL
    )
    if found is None:
        return f"invalid TOML: {error}"
    message, position = found.groups()
    return f"{position}: invalid TOML: {message}"


def _read_file(data: Mapping[str, Any], errors: list[str]) -> list[Rule]:
    for key in data:
        if key != "rules":
            errors.append(f"top level: unknown key {key!r}")
    entries = data.get("rules", [])
    if not isinstance(entries, list):
        errors.append("rules: must be an array of tables ([[rules]])")
        return []
    rules: list[Rule] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        # Each table is dropped once read: a file of 10^4 rules does not hold its whole parsed
        # document and all its rules in memory at once (the server's peak RSS).
        entries[index] = None
        place = f"rules[{index}]"
        rule = _read_rule(entry, place, errors)
        if rule is not None:
            rules.append(rule)
        # Checked on the raw entry, so a duplicate is named even when its rule has other errors.
        rule_id = entry.get("id") if isinstance(entry, dict) else None
        if isinstance(rule_id, str) and rule_id:
            if rule_id.startswith(OWNER_RULE_PREFIX):
                errors.append(
                    f"{place}.id: ids starting with {OWNER_RULE_PREFIX!r} are kept for owners'"
                    f" own rules (made on their policy pages); choose another id than {rule_id!r}"
                )
            if rule_id in seen:
                errors.append(f"{place}.id: duplicate id {rule_id!r}")
            seen.add(rule_id)
    return rules


def _read_rule(entry: Any, place: str, errors: list[str]) -> Rule | None:
    if not isinstance(entry, dict):
        errors.append(f"{place}: must be a table")
        return None
    before = len(errors)
    _unknown_keys(entry, _RULE_KEYS, place, errors)
    for key in ("id", "owner", "scopes"):
        if key not in entry:
            errors.append(f"{place}: missing {key!r}")
    rule_id = _string(entry, "id", place, errors)
    owner = _string(entry, "owner", place, errors)
    scopes = _strings(entry, "scopes", place, errors)
    description = entry.get("description")
    if description is not None and not isinstance(description, str):
        errors.append(f"{place}.description: must be a string")
    clients = _strings(entry, "clients", place, errors)
    until = entry.get("until")
    if until is not None and (type(until) is not int or until < 0):
        errors.append(f"{place}.until: must be a time (seconds since 1970, a whole number >= 0)")
    selector = ResourceSetSelector()
    if "resource_sets" in entry:
        selector = _read_selector(entry["resource_sets"], f"{place}.resource_sets", errors)
    conditions: list[Condition] = []
    found = entry.get("conditions", [])
    if not isinstance(found, list):
        errors.append(f"{place}.conditions: must be an array of tables ([[rules.conditions]])")
    else:
        for index, item in enumerate(found):
            condition = _read_condition(item, f"{place}.conditions[{index}]", errors)
            if condition is not None:
                conditions.append(condition)
    if rule_id is None or owner is None or scopes is None or len(errors) > before:
        return None
    return Rule(
        rule_id,
        owner,
        scopes,
        selector,
        tuple(conditions),
        description,
        None if clients is None else shared_set(clients),
        until,
    )


def _read_selector(table: Any, place: str, errors: list[str]) -> ResourceSetSelector:
    if not isinstance(table, dict):
        errors.append(f"{place}: must be a table")
        return ResourceSetSelector()
    before = len(errors)
    _unknown_keys(table, _SELECTOR_KEYS, place, errors)
    everything = table.get("all", False)
    if not isinstance(everything, bool):
        errors.append(f"{place}.all: must be true or false")
        everything = False
    chosen = {key: _strings(table, key, place, errors) for key in ("ids", "types", "names")}
    listed = {key: values for key, values in chosen.items() if values is not None}
    if everything and listed:
        errors.append(f"{place}: 'all = true' cannot be combined with ids, types or names")
    elif not everything and not listed and len(errors) == before:
        # An empty table is more likely a mistake than a wish to cover everything.
        errors.append(f"{place}: name the sets with ids, types or names, or set all = true")
    if everything:
        return ResourceSetSelector()
    return ResourceSetSelector(
        everything=False,
        ids=shared_set(listed.get("ids", ())),
        types=shared_set(listed.get("types", ())),
        names=shared_set(listed.get("names", ())),
        description=", ".join(f"{key} {list(values)}" for key, values in listed.items()),
    )


def _read_condition(table: Any, place: str, errors: list[str]) -> Condition | None:
    if not isinstance(table, dict):
        errors.append(f"{place}: must be a table")
        return None
    before = len(errors)
    unknown = [key for key in table if key not in OPERATORS and key not in _CONDITION_KEYS]
    for key in unknown:
        errors.append(f"{place}: unknown operator {key!r}")
    if "claim" not in table:
        errors.append(f"{place}: missing 'claim'")
    claim = _string(table, "claim", place, errors)
    types = _strings(table, "types", place, errors)
    issuers = _strings(table, "issuers", place, errors)
    hint = _string(table, "hint", place, errors)
    operators = [key for key in table if key in OPERATORS]
    if len(operators) > 1:
        named = ", ".join(repr(key) for key in operators)
        errors.append(f"{place}: more than one operator ({named}); a condition has exactly one")
    elif not operators and not unknown:
        errors.append(f"{place}: missing an operator, one of {', '.join(OPERATORS)}")
    tested = None
    if len(operators) == 1:
        tested = _operator(operators[0], table[operators[0]], f"{place}.{operators[0]}", errors)
    if claim is None or tested is None or len(errors) > before:
        return None
    operator = operators[0]
    test, description = tested
    return Condition(
        claim=claim,
        operator=operator,
        operand=table[operator],
        types=None if types is None else shared_set(types),
        issuers=None if issuers is None else shared_set(issuers),
        hint=hint,
        test=test,
        description=description,
    )


def _operator(
    operator: str, operand: Any, place: str, errors: list[str]
) -> tuple[Callable[[Any], bool], str] | None:
    """The operator's test, built once, and how it reads after "a claim"."""
    if operator in ("equals", "contains"):
        if not _is_json(operand):
            errors.append(f"{place}: must be a JSON value (quote dates and times as strings)")
            return None
        if operator == "equals":
            return (lambda value: _same(value, operand)), f"equals {_show(operand)}"
        return _contains(operand), f"contains {_show(operand)}"
    if operator in ("one_of", "contains_any"):
        if not (isinstance(operand, list) and operand and _is_json(operand)):
            errors.append(f"{place}: must be a non-empty array of JSON values")
            return None
        listed = ", ".join(_show(option) for option in operand)
        if operator == "contains_any":
            return _contains_any(operand), f"contains at least one of {listed}"
        return _one_of(operand), f"is one of {listed}"
    if operator in ("prefix", "suffix"):
        if not (isinstance(operand, str) and operand):
            errors.append(f"{place}: must be a non-empty string")
            return None
        if operator == "prefix":
            return (
                lambda value: isinstance(value, str) and value.startswith(operand)
            ), f"starts with {operand!r}"
        return (
            lambda value: isinstance(value, str) and value.endswith(operand)
        ), f"ends with {operand!r}"
    if operator == "exists":
        if operand is not True:
            # A requesting party can always withhold a claim, so absence proves nothing.
            errors.append(f"{place}: must be true (a condition cannot require a claim's absence)")
            return None
        return (lambda value: True), "exists"
    if not (isinstance(operand, str) and operand):
        errors.append(f"{place}: must be a non-empty string")
        return None
    try:
        pattern = re2.compile(operand, _RE2_OPTIONS)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        errors.append(f"{place}: invalid RE2 pattern: {reason}")
        return None
    return _full_match(pattern), f"fully matches the pattern {operand!r}"


# RE2 runs in time linear in the input, so no pattern in the file can make a request hang; its
# memory bound (8 MiB) makes an oversized pattern a file error rather than a slow request.
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.never_capture = True


def _full_match(pattern: Any) -> Callable[[Any], bool]:
    def test(value: Any) -> bool:
        if not isinstance(value, str):
            return False
        try:
            return pattern.fullmatch(value) is not None
        except UnicodeEncodeError:  # a lone surrogate from JSON: not text RE2 can read
            return False

    return test


def _contains(wanted: Any) -> Callable[[Any], bool]:
    def test(value: Any) -> bool:
        if isinstance(value, list | tuple):
            return any(_same(item, wanted) for item in value)
        # One value is a list of one: a SAML attribute with a single value arrives as that value,
        # with several as an array, and a rule should not care how many the party happens to have.
        return _same(value, wanted)

    return test


def _contains_any(options: list[Any]) -> Callable[[Any], bool]:
    """Holds when the claim (a list, or one value read as a list of one, as `contains`) has an
    item equal to one of `options`: Keycloak's roles and groups."""
    one_of = _one_of(options)

    def test(value: Any) -> bool:
        if isinstance(value, list | tuple):
            return any(one_of(item) for item in value)
        return one_of(value)

    return test


def _one_of(options: list[Any]) -> Callable[[Any], bool]:
    strings = frozenset(option for option in options if isinstance(option, str))
    others = tuple(option for option in options if not isinstance(option, str))

    def test(value: Any) -> bool:
        if isinstance(value, str):
            return value in strings
        return any(_same(value, option) for option in others)

    return test


def _same(value: Any, expected: Any) -> bool:
    """Strict JSON equality (true is not 1, "1" is not 1; 1 and 1.0 are one number). It walks only
    as deep as `expected`, which comes from the rule file, however deep the claim value is."""
    if isinstance(expected, bool) or expected is None:
        return value is expected
    if isinstance(expected, int | float):
        return isinstance(value, int | float) and not isinstance(value, bool) and value == expected
    if isinstance(expected, str):
        return isinstance(value, str) and value == expected
    if isinstance(expected, list):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(expected)
            and all(_same(v, e) for v, e in zip(value, expected, strict=True))
        )
    if isinstance(expected, dict):
        return (
            isinstance(value, dict)
            and value.keys() == expected.keys()
            and all(_same(value[key], e) for key, e in expected.items())
        )
    return False


def _is_json(value: Any) -> bool:
    """TOML values are JSON values, except dates and times."""
    if isinstance(value, datetime | date | time):
        return False
    if isinstance(value, list):
        return all(_is_json(item) for item in value)
    if isinstance(value, dict):
        return all(_is_json(item) for item in value.values())
    return True


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _unknown_keys(
    table: Mapping[str, Any], known: tuple[str, ...], place: str, errors: list[str]
) -> None:
    for key in table:
        if key not in known:
            errors.append(f"{place}: unknown key {key!r}")


def _string(table: Mapping[str, Any], key: str, place: str, errors: list[str]) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, str) and value:
        return value
    errors.append(f"{place}.{key}: must be a non-empty string")
    return None


def _strings(
    table: Mapping[str, Any], key: str, place: str, errors: list[str]
) -> tuple[str, ...] | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    errors.append(f"{place}.{key}: must be a non-empty array of non-empty strings")
    return None
