"""Deciding one authorization request against the owner's rules: grant, ask for more claims
(need_claims), or deny. The explanation (why, for every rule of the owner) is built only when asked:
`Decision.explain()`, or `Decision.as_dict()` which includes it.

Plain Python over plain data: no Flask, no database, no logging. Explanations may quote the rules
(they are shown to operators and owners) but never a claim value of the requesting party.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..claims.model import Claim
from .rules import Condition, ResourceSetRef, Rule, RuleSet


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
    """The outcome, the rules that decided it, the claims to ask for and a summary; `explain()` says
    why, rule by rule, building the reasons on its first call only."""

    outcome: Literal["grant", "need_claims", "deny"]
    rule_ids: tuple[str, ...]
    need_claims: tuple[NeededClaim, ...]
    summary: str
    _explanation: _Explanation = field(kw_only=True, repr=False, compare=False)

    def explain(self) -> tuple[RuleVerdict, ...]:
        """A verdict for every rule of the owner, in file order; built once, then the same tuple."""
        return self._explanation.verdicts()

    def as_dict(self) -> dict[str, Any]:
        return {
            "decision": self.outcome,
            "rules": list(self.rule_ids),
            "need_claims": [needed.as_dict() for needed in self.need_claims],
            "explanation": [verdict.as_dict() for verdict in self.explain()],
            "summary": self.summary,
        }


class _Explanation:
    """What `decide` keeps to explain itself later: the owner's rules, the evaluations of those that
    cover the resource set, and the request. No claim values: the checks hold only booleans."""

    __slots__ = ("_evaluations", "_owned", "_requested", "_resource_set", "_verdicts")

    def __init__(
        self,
        owned: tuple[Rule, ...],
        evaluations: Mapping[int, _Evaluation],
        resource_set: ResourceSetRef,
        requested: tuple[str, ...],
    ) -> None:
        self._owned = owned
        self._evaluations = evaluations
        self._resource_set = resource_set
        self._requested = requested
        self._verdicts: tuple[RuleVerdict, ...] | None = None

    def verdicts(self) -> tuple[RuleVerdict, ...]:
        # Two threads asking at once may both build it; they build equal tuples, and one is kept.
        if self._verdicts is None:
            self._verdicts = tuple(
                _verdict(rule, self._evaluations.get(index), self._resource_set, self._requested)
                for index, rule in enumerate(self._owned)
            )
        return self._verdicts


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
    owned = rules.rules_for(owner)
    evaluations: dict[int, _Evaluation] = {}
    for index, rule in enumerate(owned):
        if rule.resource_sets.covers(resource_set):
            evaluations[index] = _evaluate(index, rule, claims, can_supply)
    # Kept, not yet turned into reasons: the authorization endpoint never asks for them.
    explanation = _Explanation(owned, evaluations, resource_set, requested)
    covering = list(evaluations.values())
    name = resource_set.name

    def deny(summary: str) -> Decision:
        return Decision("deny", (), (), summary, _explanation=explanation)

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
            f"Granted {_scope_list(requested)} on resource set {name!r} by {by}.",
            _explanation=explanation,
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
        f"Rule {nearest.rule.id!r} could grant {_scope_list(would_grant)} on resource set"
        f" {name!r} with {count}: {names}.",
        _explanation=explanation,
    )


# How many ways of choosing one subject per issuer a rule is evaluated in at most. The service
# stores one subject per issuer per ticket, so there is one way unless claims of several people
# reach `decide` some other way.
MAX_SUBJECT_CHOICES = 64


def _evaluate(
    index: int,
    rule: Rule,
    claims: Sequence[Claim],
    can_supply: Collection[tuple[str, str]],
) -> _Evaluation:
    """Evidence speaks of one person: the conditions of one rule that name an issuer are checked
    against the claims of one subject of that issuer (an ID token's `sub`, an assertion's NameID;
    none for a client's plain word). When the claims hold the word of one issuer about several
    subjects, the rule is evaluated once per choice of subject, and holds when it holds for one."""
    named = {issuer for condition in rule.conditions for issuer in condition.issuers or ()}
    subjects: dict[str, dict[str | None, None]] = {}
    for claim in claims:
        if claim.issuer in named:
            subjects.setdefault(claim.issuer, {})[claim.subject] = None
    split = {issuer: tuple(found) for issuer, found in subjects.items() if len(found) > 1}
    best: _Evaluation | None = None
    choices = itertools.islice(itertools.product(*split.values()), MAX_SUBJECT_CHOICES)
    for choice in choices:
        chosen = dict(zip(split, choice, strict=True))
        by_name: dict[str, list[Claim]] = {}
        for claim in claims:
            if chosen.get(claim.issuer, claim.subject) == claim.subject:
                by_name.setdefault(claim.name, []).append(claim)
        evaluation = _evaluate_on(index, rule, by_name, can_supply)
        if evaluation.holds:
            return evaluation
        if best is None or _nearer(evaluation, best):
            best = evaluation
    assert best is not None  # product() yields at least one (empty) choice
    return best


def _nearer(evaluation: _Evaluation, other: _Evaluation) -> bool:
    return (not evaluation.reachable, len(evaluation.missing)) < (
        not other.reachable,
        len(other.missing),
    )


def _evaluate_on(
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
