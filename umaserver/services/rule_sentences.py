"""A rule said as a sentence for its owner (issue 25, item 6): "People whose employee claims say
their role contains 'doctor' may view and print", "bob may view until 28 Nov 2026", "Anyone may
view through the app Viewer". Never Python lists, ids or operator names.

`rule_sentence(rule, ...)` builds it from the rule's conditions, scopes, coverage, clients and
end; the caller names scopes and clients (`scope_label`, `client_label`: the pages show a scope's
registered name and a client's name). `condition_clause` is one condition ("their role contains
'doctor'"), `source_phrase` where its claims come from ("employee claims"). Plain text: the
templates escape it."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from ..claims.model import ACCOUNT_CLAIM_TYPE, OIDC_TYPE, REDIRECT_TYPE, SAML_TYPE
from ..policy.rules import Condition, ResourceSetSelector, Rule

DAY = 86400

_KNOWN_TYPES = {
    ACCOUNT_CLAIM_TYPE: "account here",
    OIDC_TYPE: "OpenID Connect claims",
    SAML_TYPE: "SAML assertion",
    REDIRECT_TYPE: "sign-in here",
}


def value_text(value: Any) -> str:
    """A value as the owner reads it: text in single quotes, anything else as JSON."""
    if isinstance(value, str):
        return "'" + value + "'"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def words(items: Sequence[str], last: str = "and") -> str:
    """`a`, `a and b`, `a, b and c` (or `or`)."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {last} " + items[-1]


def _short_type(claim_type: str) -> str:
    """A claim type URI by its last part: `https://example.com/claims/employee` -> `employee`."""
    known = _KNOWN_TYPES.get(claim_type)
    if known is not None:
        return known
    tail = claim_type.rstrip("/#:").rsplit("/", 1)[-1].rsplit(":", 1)[-1].rsplit("#", 1)[-1]
    return (tail or claim_type) + " claims"


def source_phrase(condition: Condition) -> str:
    """Where the condition's claims come from, as the subject of "say": "employee claims",
    "account here", "claims" (any type), "employee claims vouched for by https://idp"."""
    if condition.types is None:
        phrase = "claims"
    else:
        phrase = words(sorted(_short_type(t) for t in condition.types), "or")
    if condition.issuers is not None:
        phrase += " vouched for by " + words(sorted(condition.issuers), "or")
    return phrase


def condition_clause(condition: Condition) -> str:
    """The test of one condition, said of the person: "their role contains 'doctor'"."""
    claim, operand = condition.claim, condition.operand
    if condition.operator == "equals":
        return f"their {claim} is {value_text(operand)}"
    if condition.operator == "one_of":
        return f"their {claim} is {words([value_text(v) for v in operand], 'or')}"
    if condition.operator == "contains":
        return f"their {claim} contains {value_text(operand)}"
    if condition.operator == "contains_any":
        return f"their {claim} contains {words([value_text(v) for v in operand], 'or')}"
    if condition.operator == "prefix":
        return f"their {claim} starts with {value_text(operand)}"
    if condition.operator == "suffix":
        return f"their {claim} ends with {value_text(operand)}"
    if condition.operator == "exists":
        return f"they have a {claim}"
    if condition.operator == "regex":
        return f"their {claim} matches the pattern {value_text(operand)}"
    return f"their {claim} {condition.description}"  # an operator added later


def _says(source: str) -> str:
    # "account here says", "employee claims say": the verb agrees with the source.
    singular = source.split(" vouched for by ")[0].endswith(("here", "assertion"))
    return f"{source} {'says' if singular else 'say'}"


def person_named(rule: Rule) -> str | None:
    """The one person a rule names by this server's word about their account (a share's rule):
    the username or the verified e-mail address; None for any other rule."""
    if len(rule.conditions) != 1:
        return None
    (only,) = rule.conditions
    if (
        only.types == frozenset({ACCOUNT_CLAIM_TYPE})
        and only.issuers is None
        and only.operator == "equals"
        and only.claim in ("username", "email")
        and isinstance(only.operand, str)
    ):
        return only.operand
    return None


def who(rule: Rule) -> str:
    """Whom the rule is for: "Anyone", "bob", or "People whose ... say ..." (conditions from
    the same source share one "whose")."""
    named = person_named(rule)
    if named is not None:
        return named
    if not rule.conditions:
        return "Anyone"
    grouped: dict[str, list[str]] = {}
    for condition in rule.conditions:
        grouped.setdefault(source_phrase(condition), []).append(condition_clause(condition))
    parts = [f"whose {_says(source)} {words(clauses)}" for source, clauses in grouped.items()]
    return "People " + " and ".join(parts)


def coverage(selector: ResourceSetSelector, set_id: str | None) -> str:
    """Which sets, said after "may view": "" (only the set of the page), " on all your resource
    sets", " on this resource set and your resource sets of type 'photo'"."""
    if selector.everything:
        return " on all your resource sets"
    parts = []
    ids = set(selector.ids)
    if set_id is not None and set_id in ids:
        ids.discard(set_id)
        if not ids and not selector.types and not selector.names:
            return ""
        parts.append("this resource set")
    if ids:
        parts.append("1 other resource set" if len(ids) == 1 else f"{len(ids)} other resource sets")
    if selector.types:
        listed = words([value_text(t) for t in sorted(selector.types)], "or")
        parts.append(f"your resource sets of type {listed}")
    if selector.names:
        listed = words([value_text(n) for n in sorted(selector.names)], "or")
        parts.append(f"your resource sets named {listed}")
    return " on " + words(parts)


def until_text(until: int) -> str:
    """When a rule ends, said after "until": its last day when it ends at midnight UTC (a
    share's `until`), else the minute it ends."""
    if until % DAY == 0:
        day = datetime.fromtimestamp(until - 1, UTC)
        return f"{day.day} {day:%b %Y}"
    moment = datetime.fromtimestamp(until, UTC)
    return f"{moment.day} {moment:%b %Y %H:%M} UTC"


def rule_sentence(
    rule: Rule,
    *,
    set_id: str | None = None,
    scope_label: Callable[[str], str] = str,
    client_label: Callable[[str], str] = str,
) -> str:
    """The rule as one sentence; `set_id`: the set of the page it is shown on (a rule covering
    only that set says nothing of coverage)."""
    sentence = f"{who(rule)} may {words([scope_label(s) for s in rule.scopes])}"
    sentence += coverage(rule.resource_sets, set_id)
    if rule.clients:
        apps = [client_label(c) for c in sorted(rule.clients)]
        sentence += f" through the app{'s' if len(apps) > 1 else ''} {words(apps, 'or')}"
    if rule.until is not None:
        sentence += f" until {until_text(rule.until)}"
    return sentence + "."
