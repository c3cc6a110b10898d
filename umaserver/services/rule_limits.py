"""How large an owner's own rules may be (`[limits] owner_rules_per_owner`, `conditions_per_rule`,
`rule_value_bytes`; issue 27, N6).

`services.owner_rules` checks every rule it stores against these, whichever way it came (the
policy page, Keycloak's policy API), so that no path stores more than the server means to keep and
show. A refusal (`RuleTooLarge`) names each excess with where it is (`Excess`): the page puts each
sentence next to its field, an API joins them into one `invalid_request` description. Shares are
rules too but have their own count (`[limits] shares_per_owner`); their values are names and
e-mail addresses, checked where they are made.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..config import Limits
from ..policy.rules import Rule


@dataclass(frozen=True)
class RuleLimits:
    rules_per_owner: int = 200
    conditions_per_rule: int = 20
    value_bytes: int = 1024


# The config's defaults: for callers without a config (tests, tools).
DEFAULT_LIMITS = RuleLimits()


def from_config(limits: Limits) -> RuleLimits:
    return RuleLimits(
        limits.owner_rules_per_owner, limits.conditions_per_rule, limits.rule_value_bytes
    )


@dataclass(frozen=True)
class Excess:
    """One thing past a limit: `part` is `rules` (the owner has as many as allowed),
    `conditions` (at `condition`, the first one too many), `description`, `name`, or a
    condition's `value` or `hint` (at `condition`, its index in the rule's conditions)."""

    part: str
    message: str
    condition: int | None = None


class RuleTooLarge(Exception):
    """The rule is refused and nothing is stored; `excesses` says where and why, for people."""

    def __init__(self, excesses: list[Excess]) -> None:
        super().__init__(" ".join(excess.message for excess in excesses))
        self.excesses = tuple(excesses)


def too_many_rules(limits: RuleLimits) -> RuleTooLarge:
    return RuleTooLarge(
        [
            Excess(
                "rules",
                f"You have {limits.rules_per_owner:,} rules of your own already, as many as this"
                " server keeps for one person: delete one, or widen one to cover more.",
            )
        ]
    )


def _bytes(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def _too_long(what: str, size: int, limits: RuleLimits) -> str:
    return (
        f"This {what} is {size:,} bytes long; at most {limits.value_bytes:,} are kept: shorten it."
    )


def excesses(rule: Rule, limits: RuleLimits, name: str | None = None) -> list[Excess]:
    """What of `rule` (with its `name`, if it has one) is past `limits`; empty when nothing."""
    found: list[Excess] = []
    for what, text in (("description", rule.description), ("name", name)):
        if text is not None and (size := _bytes(text)) > limits.value_bytes:
            found.append(Excess(what, _too_long(what, size, limits)))
    for index, condition in enumerate(rule.conditions):
        if index == limits.conditions_per_rule:
            found.append(
                Excess(
                    "conditions",
                    f"A rule has at most {limits.conditions_per_rule:,} conditions: remove"
                    " this one and those after it, or make a second rule.",
                    index,
                )
            )
        if condition.operator != "exists":
            size = _bytes(condition.operand)
            if size > limits.value_bytes:
                found.append(Excess("value", _too_long("value", size, limits), index))
        if condition.hint is not None and (size := _bytes(condition.hint)) > limits.value_bytes:
            found.append(Excess("hint", _too_long("hint", size, limits), index))
    return found


def check(rule: Rule, limits: RuleLimits, name: str | None = None) -> None:
    """Raises RuleTooLarge when `rule` is past `limits`."""
    found = excesses(rule, limits, name)
    if found:
        raise RuleTooLarge(found)
