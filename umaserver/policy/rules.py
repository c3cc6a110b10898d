"""The rule model: owners' rules, which claims about a requesting party grant which scopes on which
resource sets.

Immutable values, built by `rule_file.parse_rules` with the work done up front (compiled patterns,
frozensets, an index by owner) and read by `decision.decide`. Plain Python over plain data: no
Flask, no database, no logging.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


@functools.lru_cache(maxsize=4096)
def _shared_set(values: tuple[str, ...]) -> frozenset[str]:
    return frozenset(values)


def shared_set(values: Iterable[str]) -> frozenset[str]:
    """`frozenset(values)`, one object for every rule that lists the same strings: a file of 10^4
    rules holds some 6 small sets per rule, mostly the same few (216 bytes each when not shared)."""
    return _shared_set(tuple(values))


@dataclass(frozen=True, slots=True)
class ResourceSetRef:
    """The resource set a request is about, as its resource server registered it."""

    id: str
    name: str | None  # a 2.0 registration may give none
    type: str | None


@dataclass(frozen=True, slots=True)
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
            or (resource_set.name is not None and resource_set.name in self.names)
            or (resource_set.type is not None and resource_set.type in self.types)
        )


@dataclass(frozen=True, slots=True)
class Condition:
    """One test on claims named `claim`; it holds when any claim of that name from an accepted
    claim type and issuer passes `test`. Built by `rule_file.parse_rules`, which checks the operand."""

    claim: str
    operator: str
    operand: Any
    test: Callable[[Any], bool] = field(repr=False, compare=False)
    # "contains 'doctor'", said of a claim: precomputed so that explaining a decision only formats.
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


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    owner: str
    scopes: tuple[str, ...]
    resource_sets: ResourceSetSelector = ResourceSetSelector()
    conditions: tuple[Condition, ...] = ()
    description: str | None = None
    # The acting clients (by client id) the rule holds for; None: any client.
    clients: frozenset[str] | None = None
    # When the rule ends (epoch seconds; a share's `until`): from then on it holds for no one.
    # None: never. A decision is given the current time to compare (`decision.decide`'s `now`).
    until: int | None = None
    grants: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "grants", shared_set(self.scopes))

    def allows(self, client_id: str | None) -> bool:
        """Whether the rule may hold for a request whose acting client is `client_id` (None: no
        client named, as when a decision is explained for any client)."""
        return self.clients is None or (client_id is not None and client_id in self.clients)

    def ended(self, now: int | None) -> bool:
        """Whether the rule has ended at `now`; a rule with an end has, when no time is given."""
        return self.until is not None and (now is None or now >= self.until)


class _Coverage:
    """Which of one owner's rules (by position) cover which resource sets: those covering every
    set, and those naming a set by id, type or name. A decision looks up the few rules covering
    the set asked about instead of trying each of the owner's rules (an owner may have 10^4)."""

    __slots__ = ("_by_id", "_by_name", "_by_type", "_everything")

    def __init__(self, owned: tuple[Rule, ...]) -> None:
        self._everything: list[int] = []
        self._by_id: dict[str, list[int]] = {}
        self._by_type: dict[str, list[int]] = {}
        self._by_name: dict[str, list[int]] = {}
        for index, rule in enumerate(owned):
            selector = rule.resource_sets
            if selector.everything:
                self._everything.append(index)
                continue
            for key, table in (
                (selector.ids, self._by_id),
                (selector.types, self._by_type),
                (selector.names, self._by_name),
            ):
                for value in key:
                    table.setdefault(value, []).append(index)

    def covering(self, resource_set: ResourceSetRef) -> list[int]:
        found = set(self._everything)
        found.update(self._by_id.get(resource_set.id, ()))
        if resource_set.name is not None:
            found.update(self._by_name.get(resource_set.name, ()))
        if resource_set.type is not None:
            found.update(self._by_type.get(resource_set.type, ()))
        return sorted(found)


class RuleSet:
    """Rules in file order, indexed by owner, and per owner by what they cover. Immutable, so a
    reload swaps the whole set."""

    __slots__ = ("_by_owner", "_coverage", "_reading", "_rules")

    def __init__(self, rules: Iterable[Rule] = ()) -> None:
        self._rules = tuple(rules)
        self._reading: dict[tuple[str, str], bool] = {}
        by_owner: dict[str, list[Rule]] = {}
        for rule in self._rules:
            by_owner.setdefault(rule.owner, []).append(rule)
        self._by_owner = {owner: tuple(owned) for owner, owned in by_owner.items()}
        self._coverage = {owner: _Coverage(owned) for owner, owned in self._by_owner.items()}

    def covering(self, owner: str, resource_set: ResourceSetRef) -> list[int]:
        """The positions in `rules_for(owner)` of the rules that cover `resource_set`, in order
        (the same as trying `covers` on each, without trying each)."""
        coverage = self._coverage.get(owner)
        return coverage.covering(resource_set) if coverage is not None else []

    @property
    def rules(self) -> tuple[Rule, ...]:
        return self._rules

    def rules_for(self, owner: str) -> tuple[Rule, ...]:
        return self._by_owner.get(owner, ())

    def reads_type(self, owner: str, claim_type: str) -> bool:
        """Whether some rule of `owner` has a condition that accepts claims of `claim_type` (one
        that names no types accepts any): when none does, such claims cannot matter to a decision
        about the owner's sets. Found once per owner and type."""
        key = (owner, claim_type)
        found = self._reading.get(key)
        if found is None:
            found = any(
                condition.types is None or claim_type in condition.types
                for rule in self.rules_for(owner)
                for condition in rule.conditions
            )
            self._reading[key] = found
        return found

    def __repr__(self) -> str:
        return f"RuleSet({[rule.id for rule in self._rules]})"
