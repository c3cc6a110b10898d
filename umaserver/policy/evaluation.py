"""One rule of an owner evaluated on the claims of a request: each condition checked against the
claims of an accepted type and issuer, with whether the client could push, or the requesting party
share by signing in here, what is missing (`policy.decision` decides from the evaluations).

Plain Python over plain data; a check holds only booleans, never a claim value.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ..claims.model import REDIRECT_TYPE
from ..storage.records import Claim
from .rules import Condition, Rule


@dataclass(frozen=True)
class Check:
    """One condition of a covering rule against the claims given."""

    index: int
    condition: Condition
    supplied: bool  # a claim of that name from an accepted type and issuer was given
    holds: bool
    given_elsewhere: bool  # claims of that name were given, but none from an accepted source
    pushable: bool  # some (type, issuer) this client can supply is accepted
    gatherable: bool  # some (type, issuer) this server can gather by redirect is accepted
    # The accepted claims were shared by the requesting party on signing in here (all of those
    # that hold, when it holds; some of those given, when it fails).
    shared: bool = False

    @property
    def missing(self) -> bool:
        return not self.supplied

    @property
    def suppliable(self) -> bool:
        return self.supplied or self.pushable or self.gatherable

    def reason(self) -> str:
        condition = self.condition
        # Numbered from 1, as the owner's form and pages number conditions.
        start = f"condition {self.index + 1} on {condition.claim!r}"
        if self.holds:
            by = " (shared by the requesting party on signing in here)" if self.shared else ""
            return f"{start} holds: an accepted claim {condition.description}{by}"
        if self.supplied:
            among = (
                " (the claims the requesting party shared on signing in here included)"
                if self.shared
                else ""
            )
            return f"{start} failed: no accepted claim {condition.description}{among}"
        if self.given_elsewhere:
            said = f"a claim {condition.claim!r} was given, but not from an accepted source"
        else:
            said = f"no claim {condition.claim!r} was given"
        can = "can" if self.pushable else "cannot"
        if self.gatherable:
            also = " also" if self.pushable else ""
            can += f" supply one; the requesting party can{also} share one by signing in here"
        else:
            can += " supply one"
        return f"{start} failed: {said} ({condition.sources()}); this client {can}"


@dataclass(frozen=True)
class Evaluation:
    index: int
    rule: Rule
    checks: tuple[Check, ...]
    # The acting client is one the rule holds for (`Rule.clients`); when not, no claim helps.
    client_allowed: bool = True

    @property
    def holds(self) -> bool:
        return self.client_allowed and all(check.holds for check in self.checks)

    @property
    def reachable(self) -> bool:
        """Could hold once this client sends what is missing: the rule holds for this client,
        what it sent holds (a failing value is final), and it can supply every missing claim."""
        return self.client_allowed and all(
            check.holds or (check.missing and check.suppliable) for check in self.checks
        )

    @property
    def missing(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if check.missing)

    @property
    def by_pushing_alone(self) -> bool:
        """The client can push every missing claim: no redirect of the requesting party needed."""
        return all(check.pushable for check in self.missing)


# How many ways of choosing one subject per issuer a rule is evaluated in at most. The service
# stores one subject per issuer per ticket, so there is one way unless claims of several people
# reach `decide` some other way.
MAX_SUBJECT_CHOICES = 64


def evaluate(
    index: int,
    rule: Rule,
    claims: Sequence[Claim],
    can_supply: Collection[tuple[str, str]],
    can_gather: Collection[tuple[str, str]],
    client_id: str | None = None,
) -> Evaluation:
    """`client_id`: the acting client (None: none named), for the rule's `clients`.

    Evidence speaks of one person: the conditions of one rule that name an issuer are checked
    against the claims of one subject of that issuer (an ID token's `sub`, an assertion's NameID;
    none for a client's plain word). When the claims hold the word of one issuer about several
    subjects, the rule is evaluated once per choice of subject, and holds when it holds for one."""
    named = {issuer for condition in rule.conditions for issuer in condition.issuers or ()}
    subjects: dict[str, dict[str | None, None]] = {}
    for claim in claims:
        if claim.issuer in named:
            subjects.setdefault(claim.issuer, {})[claim.subject] = None
    split = {issuer: tuple(found) for issuer, found in subjects.items() if len(found) > 1}
    best: Evaluation | None = None
    choices = itertools.islice(itertools.product(*split.values()), MAX_SUBJECT_CHOICES)
    for choice in choices:
        chosen = dict(zip(split, choice, strict=True))
        by_name: dict[str, list[Claim]] = {}
        for claim in claims:
            if chosen.get(claim.issuer, claim.subject) == claim.subject:
                by_name.setdefault(claim.name, []).append(claim)
        evaluation = _evaluate_on(index, rule, by_name, can_supply, can_gather, client_id)
        if evaluation.holds:
            return evaluation
        if best is None or _nearer(evaluation, best):
            best = evaluation
    assert best is not None  # product() yields at least one (empty) choice
    return best


def _nearer(evaluation: Evaluation, other: Evaluation) -> bool:
    return (not evaluation.reachable, len(evaluation.missing)) < (
        not other.reachable,
        len(other.missing),
    )


def _evaluate_on(
    index: int,
    rule: Rule,
    by_name: Mapping[str, list[Claim]],
    can_supply: Collection[tuple[str, str]],
    can_gather: Collection[tuple[str, str]],
    client_id: str | None,
) -> Evaluation:
    checks = []
    for position, condition in enumerate(rule.conditions):
        named = by_name.get(condition.claim, ())
        accepted = [claim for claim in named if condition.accepts(claim.type, claim.issuer)]
        supplied = bool(accepted)
        holding = [claim for claim in accepted if condition.test(claim.value)]
        shared = (
            all(claim.type == REDIRECT_TYPE for claim in holding)
            if holding
            else any(claim.type == REDIRECT_TYPE for claim in accepted)
        )
        checks.append(
            Check(
                index=position,
                condition=condition,
                supplied=supplied,
                holds=bool(holding),
                given_elsewhere=bool(named) and not supplied,
                pushable=any(condition.accepts(*pair) for pair in can_supply),
                gatherable=any(condition.accepts(*pair) for pair in can_gather),
                shared=shared,
            )
        )
    return Evaluation(index, rule, tuple(checks), rule.allows(client_id))
