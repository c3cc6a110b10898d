"""Owners' rules: which claims about a requesting party grant which scopes on which resource sets.

The rule file (TOML, see policies.example.toml) is parsed once into immutable rules with the work
done up front (compiled patterns, frozensets, an index by owner); `decide` then answers one
authorization request: grant, ask for more claims (need_claims), or deny, and says why for every
rule of the owner.

Plain Python over plain data: no Flask, no database, no logging. Explanations may quote the rules
(they are shown to operators and owners) but never a claim value of the requesting party.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import Path
from typing import Any, Literal

import re2

from ..claims.model import Claim

OPERATORS = ("equals", "one_of", "contains", "prefix", "suffix", "exists", "regex")
_RULE_KEYS = ("id", "owner", "scopes", "description", "resource_sets", "conditions")
_SELECTOR_KEYS = ("all", "ids", "types", "names")
_CONDITION_KEYS = ("claim", "types", "issuers", "hint")


class PolicyError(Exception):
    """A rule file that cannot be used; `errors` holds one line per problem, each naming its place."""

    def __init__(self, errors: list[str], source: str = "<rules>") -> None:
        super().__init__("\n".join(errors))
        self.errors = list(errors)
        self.source = source


# -- the rules ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceSetRef:
    """The resource set a request is about, as its resource server registered it."""

    id: str
    name: str
    type: str | None


@dataclass(frozen=True)
class ResourceSetSelector:
    """Which of the owner's resource sets a rule covers: all of them, or those matching any listed
    id, type or name."""

    everything: bool = True
    ids: frozenset[str] = frozenset()
    types: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()
    description: str = field(default="all resource sets", compare=False)

    def covers(self, resource_set: ResourceSetRef) -> bool:
        return (
            self.everything
            or resource_set.id in self.ids
            or resource_set.name in self.names
            or (resource_set.type is not None and resource_set.type in self.types)
        )


@dataclass(frozen=True)
class Condition:
    """One test on claims named `claim`; it holds when any claim of that name from an accepted
    claim type and issuer passes `test`. Built by `parse_rules`, which checks the operand."""

    claim: str
    operator: str
    operand: Any
    test: Callable[[Any], bool] = field(repr=False, compare=False)
    # "contains 'doctor'", said of a claim: precomputed because every decision explains itself.
    description: str = field(repr=False, compare=False)
    types: frozenset[str] | None = None  # None: any claim type
    issuers: frozenset[str] | None = None  # None: any issuer
    hint: str | None = None

    def accepts(self, claim_type: str, issuer: str) -> bool:
        return (self.types is None or claim_type in self.types) and (
            self.issuers is None or issuer in self.issuers
        )

    def sources(self) -> str:
        parts = []
        if self.types is not None:
            parts.append(f"accepted types {sorted(self.types)}")
        if self.issuers is not None:
            parts.append(f"accepted issuers {sorted(self.issuers)}")
        return ", ".join(parts) or "any type and issuer accepted"


@dataclass(frozen=True)
class Rule:
    id: str
    owner: str
    scopes: tuple[str, ...]
    resource_sets: ResourceSetSelector = ResourceSetSelector()
    conditions: tuple[Condition, ...] = ()
    description: str | None = None
    grants: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "grants", frozenset(self.scopes))


class RuleSet:
    """Rules in file order, indexed by owner. Immutable, so a reload swaps the whole set."""

    __slots__ = ("_by_owner", "_rules")

    def __init__(self, rules: Iterable[Rule] = ()) -> None:
        self._rules = tuple(rules)
        by_owner: dict[str, list[Rule]] = {}
        for rule in self._rules:
            by_owner.setdefault(rule.owner, []).append(rule)
        self._by_owner = {owner: tuple(owned) for owner, owned in by_owner.items()}

    @property
    def rules(self) -> tuple[Rule, ...]:
        return self._rules

    def rules_for(self, owner: str) -> tuple[Rule, ...]:
        return self._by_owner.get(owner, ())

    def __repr__(self) -> str:
        return f"RuleSet({[rule.id for rule in self._rules]})"


# -- reading the rule file ----------------------------------------------------------------------


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
        place = f"rules[{index}]"
        rule = _read_rule(entry, place, errors)
        if rule is not None:
            rules.append(rule)
        # Checked on the raw entry, so a duplicate is named even when its rule has other errors.
        rule_id = entry.get("id") if isinstance(entry, dict) else None
        if isinstance(rule_id, str) and rule_id:
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
    return Rule(rule_id, owner, scopes, selector, tuple(conditions), description)


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
        ids=frozenset(listed.get("ids", ())),
        types=frozenset(listed.get("types", ())),
        names=frozenset(listed.get("names", ())),
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
        types=None if types is None else frozenset(types),
        issuers=None if issuers is None else frozenset(issuers),
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
    if operator == "one_of":
        if not (isinstance(operand, list) and operand and _is_json(operand)):
            errors.append(f"{place}: must be a non-empty array of JSON values")
            return None
        return _one_of(operand), f"is one of {', '.join(_show(option) for option in operand)}"
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


# -- deciding ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NeededClaim:
    """One entry of need_claims: the claim type and name to send, and a hint that never reveals
    the value a rule wants."""

    type: str
    name: str
    value: str

    def as_dict(self) -> dict[str, str]:
        return {"type": self.type, "name": self.name, "value": self.value}


@dataclass(frozen=True)
class RuleVerdict:
    id: str
    holds: bool
    reasons: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.id, "holds": self.holds, "reasons": list(self.reasons)}


@dataclass(frozen=True)
class Decision:
    outcome: Literal["grant", "need_claims", "deny"]
    rule_ids: tuple[str, ...]
    need_claims: tuple[NeededClaim, ...]
    verdicts: tuple[RuleVerdict, ...]
    summary: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "decision": self.outcome,
            "rules": list(self.rule_ids),
            "need_claims": [needed.as_dict() for needed in self.need_claims],
            "explanation": [verdict.as_dict() for verdict in self.verdicts],
            "summary": self.summary,
        }


@dataclass(frozen=True)
class _Check:
    """One condition of a covering rule against the claims given."""

    index: int
    condition: Condition
    supplied: bool  # a claim of that name from an accepted type and issuer was given
    holds: bool
    given_elsewhere: bool  # claims of that name were given, but none from an accepted source
    suppliable: bool  # some (type, issuer) this client can supply is accepted

    @property
    def missing(self) -> bool:
        return not self.supplied

    def reason(self) -> str:
        condition = self.condition
        start = f"condition {self.index} on {condition.claim!r}"
        if self.holds:
            return f"{start} holds: an accepted claim {condition.description}"
        if self.supplied:
            return f"{start} failed: no accepted claim {condition.description}"
        if self.given_elsewhere:
            said = f"a claim {condition.claim!r} was given, but not from an accepted source"
        else:
            said = f"no claim {condition.claim!r} was given"
        can = "can" if self.suppliable else "cannot"
        return f"{start} failed: {said} ({condition.sources()}); this client {can} supply one"


@dataclass(frozen=True)
class _Evaluation:
    index: int
    rule: Rule
    checks: tuple[_Check, ...]

    @property
    def holds(self) -> bool:
        return all(check.holds for check in self.checks)

    @property
    def reachable(self) -> bool:
        """Could hold once this client sends what is missing: what it sent holds (a failing value
        is final), and it can supply every missing claim."""
        return all(check.holds or (check.missing and check.suppliable) for check in self.checks)

    @property
    def missing(self) -> tuple[_Check, ...]:
        return tuple(check for check in self.checks if check.missing)


def decide(
    rules: RuleSet,
    *,
    owner: str,
    resource_set: ResourceSetRef,
    scopes: Sequence[str],
    claims: Sequence[Claim],
    can_supply: Collection[tuple[str, str]],
) -> Decision:
    """Grant when the owner's rules that cover this resource set and hold on `claims` grant every
    requested scope (all or nothing); else ask for the claims of the nearest rule this client could
    still satisfy; else deny."""
    requested = tuple(dict.fromkeys(scopes))
    by_name: dict[str, list[Claim]] = {}
    for claim in claims:
        by_name.setdefault(claim.name, []).append(claim)

    owned = rules.rules_for(owner)
    evaluations: dict[int, _Evaluation] = {}
    for index, rule in enumerate(owned):
        if rule.resource_sets.covers(resource_set):
            evaluations[index] = _evaluate(index, rule, by_name, can_supply)
    verdicts = tuple(
        _verdict(rule, evaluations.get(index), resource_set, requested)
        for index, rule in enumerate(owned)
    )
    covering = list(evaluations.values())
    name = resource_set.name

    def deny(summary: str) -> Decision:
        return Decision("deny", (), (), verdicts, summary)

    if not requested:
        return deny("Denied: no scopes were requested.")
    if not covering:
        return deny(f"Denied: no rule of {owner!r} covers resource set {name!r}.")

    holding = [evaluation for evaluation in covering if evaluation.holds]
    granted = frozenset().union(*(evaluation.rule.grants for evaluation in holding))
    uncovered = tuple(scope for scope in requested if scope not in granted)
    if not uncovered:
        deciding = tuple(e.rule.id for e in holding if e.rule.grants.intersection(requested))
        by = _rule_names(deciding)
        return Decision(
            "grant",
            deciding,
            (),
            verdicts,
            f"Granted {_scope_list(requested)} on resource set {name!r} by {by}.",
        )

    wanted = frozenset(uncovered)
    candidates = [
        evaluation
        for evaluation in covering
        if not evaluation.holds and evaluation.reachable and evaluation.rule.grants & wanted
    ]
    # All or nothing: when some scope is granted by no rule this client could still satisfy, more
    # claims cannot lead to a grant, so asking for them would only waste the ticket.
    reachable = frozenset().union(*(evaluation.rule.grants for evaluation in candidates))
    out_of_reach = tuple(scope for scope in uncovered if scope not in reachable)
    if out_of_reach:
        return deny(
            f"Denied: no rule that holds, or that this client could still satisfy, grants"
            f" {_scope_list(out_of_reach)} on resource set {name!r}."
        )
    nearest = min(
        candidates,
        key=lambda e: (not wanted <= e.rule.grants, len(e.missing), e.index),
    )
    needed = _needed_claims(nearest, can_supply)
    would_grant = tuple(scope for scope in uncovered if scope in nearest.rule.grants)
    names = ", ".join(repr(claim.name) for claim in needed)
    count = "1 more claim" if len(needed) == 1 else f"{len(needed)} more claims"
    return Decision(
        "need_claims",
        (nearest.rule.id,),
        needed,
        verdicts,
        f"Rule {nearest.rule.id!r} could grant {_scope_list(would_grant)} on resource set"
        f" {name!r} with {count}: {names}.",
    )


def _evaluate(
    index: int,
    rule: Rule,
    by_name: Mapping[str, list[Claim]],
    can_supply: Collection[tuple[str, str]],
) -> _Evaluation:
    checks = []
    for position, condition in enumerate(rule.conditions):
        named = by_name.get(condition.claim, ())
        accepted = [claim for claim in named if condition.accepts(claim.type, claim.issuer)]
        supplied = bool(accepted)
        checks.append(
            _Check(
                index=position,
                condition=condition,
                supplied=supplied,
                holds=any(condition.test(claim.value) for claim in accepted),
                given_elsewhere=bool(named) and not supplied,
                suppliable=supplied or any(condition.accepts(*pair) for pair in can_supply),
            )
        )
    return _Evaluation(index, rule, tuple(checks))


def _verdict(
    rule: Rule,
    evaluation: _Evaluation | None,
    resource_set: ResourceSetRef,
    requested: tuple[str, ...],
) -> RuleVerdict:
    if evaluation is None:
        reason = (
            f"does not cover resource set {resource_set.name!r} ({rule.resource_sets.description})"
        )
        return RuleVerdict(rule.id, False, (reason,))
    reasons = [check.reason() for check in evaluation.checks]
    holds = evaluation.holds
    if not rule.conditions:
        reasons.append("has no conditions, so it holds for anyone")
    if holds:
        granting = tuple(scope for scope in requested if scope in rule.grants)
        if granting:
            reasons.append(f"grants {_scope_list(granting)}")
        else:
            reasons.append(f"grants none of the requested scopes (only {_scope_list(rule.scopes)})")
    return RuleVerdict(rule.id, holds, tuple(reasons))


def _needed_claims(
    nearest: _Evaluation, can_supply: Collection[tuple[str, str]]
) -> tuple[NeededClaim, ...]:
    needed: dict[tuple[str, str], NeededClaim] = {}
    for check in nearest.missing:
        condition = check.condition
        claim_type = min(
            claim_type for claim_type, issuer in can_supply if condition.accepts(claim_type, issuer)
        )
        # Never the required value: the hint the owner wrote, or a generic one.
        hint = condition.hint or f"a value for {condition.claim!r}"
        needed.setdefault(
            (claim_type, condition.claim), NeededClaim(claim_type, condition.claim, hint)
        )
    return tuple(needed.values())


def _scope_list(scopes: Iterable[str]) -> str:
    return ", ".join(repr(scope) for scope in scopes)


def _rule_names(ids: Sequence[str]) -> str:
    if len(ids) == 1:
        return f"rule {ids[0]!r}"
    return f"rules {', '.join(repr(rule_id) for rule_id in ids[:-1])} and {ids[-1]!r}"
