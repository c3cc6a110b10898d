"""Deciding one authorization request against the owner's rules: grant, ask for more claims
(need_claims: claims the client pushes, or one redirect of the requesting party to this server's
claims endpoint), or deny. The explanation (why, for every rule of the owner) is built only when asked:
`Decision.explain()`, or `Decision.as_dict()` which includes it.

Plain Python over plain data: no Flask, no database, no logging. Explanations may quote the rules
(they are shown to operators and owners) but never a claim value of the requesting party.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from ..claims.model import OIDC_TYPE, REDIRECT_TYPE, SAML_TYPE
from ..storage.records import Claim
from .evaluation import Check, Evaluation, evaluate
from .rules import Condition, ResourceSetRef, Rule, RuleSet

# Claim types whose claims a third party vouches for (an ID token, a SAML assertion): a need_claims
# entry of one of these says whose word is wanted.
VERIFIED_TYPES = frozenset({SAML_TYPE, OIDC_TYPE})


@dataclass(frozen=True)
class NeededClaim:
    """One entry of need_claims: the claim type and name to send, and a hint that never reveals
    the value a rule wants. `issuers`, for a verified type when the rule demands an issuer: the
    accepted issuers this client can supply claims of that type from."""

    type: str
    name: str
    value: str
    issuers: tuple[str, ...] = ()
    # For UMA 2.0's required_claims (not part of 1.0's entry): the claim types the claim can come
    # in (the condition's, else those of the client's it accepts) and the issuers the rule names.
    types: tuple[str, ...] = field(default=(), compare=False)
    named_issuers: tuple[str, ...] = field(default=(), compare=False)

    def as_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": self.type, "name": self.name, "value": self.value}
        if self.issuers:
            entry["issuers"] = list(self.issuers)
        return entry


@dataclass(frozen=True)
class RedirectNeed:
    """The nearest rules can grant only with claims the requesting party shares by signing in at
    this server (the redirect profile): which rules, the claim names to gather, and the issuers
    whose word the rules accept for them among those this server can gather from (sorted). The
    service turns it into the one `redirect_required` entry, with a handle of its own as `value`
    and `redirect_label` as `name`."""

    rule_ids: tuple[str, ...]
    claims: tuple[str, ...]
    issuers: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "rules": list(self.rule_ids),
            "claims": list(self.claims),
            "issuers": list(self.issuers),
        }


def redirect_label(need: RedirectNeed) -> str:
    """A human-readable `name` for the `redirect_required` entry: which claims the requesting party
    is asked to share, e.g. "Sign in to share your 'email'". It names the claims, never a value a
    rule wants, nor where the person will sign in: the spec keeps the choice of claims source from
    the client (the sign-in page itself offers every provider)."""
    return f"Sign in to share your {_both([repr(name) for name in need.claims])}"


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
    # With outcome need_claims: the requesting party must be redirected to share claims by signing
    # in here; then `need_claims` is empty (a redirect_required entry is never mixed with others).
    redirect: RedirectNeed | None = field(default=None, kw_only=True)
    # With outcome need_claims and claims to push first: what the requesting party could then
    # share by signing in here (UMA 2.0 says so at once: `redirect_user`).
    redirect_later: RedirectNeed | None = field(default=None, kw_only=True)
    # With outcome grant: when the grant ends because the rules that made it end (`Rule.until`,
    # a share's last day), which a permission made of it must not outlive; None: no end.
    ends_at: int | None = field(default=None, kw_only=True)

    def explain(self) -> tuple[RuleVerdict, ...]:
        """A verdict for every rule of the owner, in file order; built once, then the same tuple."""
        return self._explanation.verdicts()

    def as_dict(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "decision": self.outcome,
            "rules": list(self.rule_ids),
            "need_claims": [needed.as_dict() for needed in self.need_claims],
        }
        if self.redirect is not None:
            answer["redirect_required"] = self.redirect.as_dict()
        answer["explanation"] = [verdict.as_dict() for verdict in self.explain()]
        answer["summary"] = self.summary
        return answer


class _Explanation:
    """What `decide` keeps to explain itself later: the owner's rules, the evaluations of those that
    cover the resource set, and the request. No claim values: the checks hold only booleans."""

    __slots__ = (
        "_client_id",
        "_evaluations",
        "_owned",
        "_requested",
        "_resource_set",
        "_verdicts",
    )

    def __init__(
        self,
        owned: tuple[Rule, ...],
        evaluations: Mapping[int, Evaluation],
        resource_set: ResourceSetRef,
        requested: tuple[str, ...],
        client_id: str | None = None,
    ) -> None:
        self._client_id = client_id
        self._owned = owned
        self._evaluations = evaluations
        self._resource_set = resource_set
        self._requested = requested
        self._verdicts: tuple[RuleVerdict, ...] | None = None

    def verdicts(self) -> tuple[RuleVerdict, ...]:
        # Two threads asking at once may both build it; they build equal tuples, and one is kept.
        if self._verdicts is None:
            self._verdicts = tuple(
                _verdict(
                    rule,
                    self._evaluations.get(index),
                    self._resource_set,
                    self._requested,
                    self._client_id,
                )
                for index, rule in enumerate(self._owned)
            )
        return self._verdicts


def decide(
    rules: RuleSet,
    *,
    owner: str,
    resource_set: ResourceSetRef,
    scopes: Sequence[str],
    claims: Sequence[Claim],
    can_supply: Collection[tuple[str, str]],
    can_gather: Collection[tuple[str, str]] = (),
    client_id: str | None = None,
    now: int | None = None,
) -> Decision:
    """Grant when the owner's rules that cover this resource set and hold on `claims` grant every
    requested scope (all or nothing); else, when every scope not granted yet has a rule that could
    still grant it, ask for the claims those rules miss; else deny.

    A missing claim can come from the client (some (claim type, issuer) of `can_supply` is
    accepted) or from the requesting party, redirected to sign in here (some pair of `can_gather`:
    (REDIRECT_TYPE, this server's issuer or a sign-in provider's); empty when no person is behind
    the request). For each scope not granted yet the nearest rule that could grant it is chosen
    (`_nearest_rules`), and the claims they miss are asked for together, once per claim type and
    name. Of those, the ones the client can push are asked for first; only when none is left does
    the decision ask for a redirect (`Decision.redirect`).

    `client_id` is the acting client (None: none named): a rule that lists `clients` holds only
    for those, and no claim makes it hold for another.

    `now` is the current time, for rules with an end (`Rule.until`): a rule that has ended covers
    nothing (and one with an end covers nothing when no time is given)."""
    requested = tuple(dict.fromkeys(scopes))
    owned = rules.rules_for(owner)
    evaluations: dict[int, Evaluation] = {}
    for index in rules.covering(owner, resource_set):
        if owned[index].ended(now):
            continue
        evaluations[index] = evaluate(
            index, owned[index], claims, can_supply, can_gather, client_id
        )
    # Kept, not yet turned into reasons: the authorization endpoint never asks for them.
    explanation = _Explanation(owned, evaluations, resource_set, requested, client_id)
    covering = list(evaluations.values())
    name = resource_set.name or resource_set.id  # a 2.0 registration may give no name

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
            ends_at=_grant_end(holding, requested),
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
    nearest = _nearest_rules(candidates, uncovered)
    rule_ids = tuple(evaluation.rule.id for evaluation in nearest)
    could = _both(
        [
            f"rule {e.rule.id!r} could grant {_scope_list(s for s in uncovered if s in e.rule.grants)}"
            for e in nearest
        ]
    )
    could = f"{could[0].upper()}{could[1:]} on resource set {name!r}"
    missing = [check for evaluation in nearest for check in evaluation.missing]
    pushed = tuple(check for check in missing if check.pushable)
    gathered = tuple(check for check in missing if not check.pushable)
    later = _redirect_need(rule_ids, gathered, can_gather)
    if not pushed:
        assert later is not None  # every missing check is pushable or gatherable
        count = _count(len(later.claims), "more claim")
        return Decision(
            "need_claims",
            rule_ids,
            (),
            f"{could} with {count} this client cannot supply:"
            f" {_both([repr(n) for n in later.claims])}; the requesting party can share"
            f" {'it' if len(later.claims) == 1 else 'them'} by signing in here (accepted issuers"
            f" {list(later.issuers)}).",
            _explanation=explanation,
            redirect=later,
        )
    needed = _needed_claims(pushed, can_supply)
    names = ", ".join(repr(claim.name) for claim in needed)
    then = ""
    if later is not None:
        then = (
            f"; then the requesting party can share {_both([repr(n) for n in later.claims])}"
            " by signing in here"
        )
    return Decision(
        "need_claims",
        rule_ids,
        needed,
        f"{could} with {_count(len(needed), 'more claim')}: {names}{then}.",
        _explanation=explanation,
        redirect_later=later,
    )


def _grant_end(holding: Sequence[Evaluation], requested: Sequence[str]) -> int | None:
    """When a grant of `requested` by the `holding` rules ends: each scope lasts as long as the
    last-ending rule that grants it (forever when one has no end), and the grant as long as its
    first-ending scope. None: no end (most grants: no holding rule has one)."""
    if all(evaluation.rule.until is None for evaluation in holding):
        return None
    ends: list[int] = []
    for scope in requested:
        granting = [e.rule.until for e in holding if scope in e.rule.grants]
        if granting and None not in granting:
            ends.append(max(end for end in granting if end is not None))
    return min(ends) if ends else None


def _nearest_rules(
    candidates: Sequence[Evaluation], uncovered: Sequence[str]
) -> tuple[Evaluation, ...]:
    """For each scope not granted yet (in the order asked), the nearest candidate that grants it:
    the fewest missing conditions, then one the client can satisfy by pushing alone, then one that
    grants more of those scopes, then file order. A chosen rule whose scopes the other chosen ones
    grant as well is then left out (the one missing most first): its claims would not bring the
    grant any nearer. Each scope has a candidate (the caller denied otherwise)."""
    if len(candidates) == 1:  # the common case: one rule could grant them all
        return (candidates[0],)
    wanted = frozenset(uncovered)
    chosen: dict[int, Evaluation] = {}
    for scope in uncovered:
        nearest = min(
            (evaluation for evaluation in candidates if scope in evaluation.rule.grants),
            key=lambda e: (
                len(e.missing),
                not e.by_pushing_alone,
                -len(e.rule.grants & wanted),
                e.index,
            ),
        )
        chosen.setdefault(nearest.index, nearest)
    kept = list(chosen.values())
    for evaluation in sorted(kept, key=lambda e: (-len(e.missing), -e.index)):
        others = [e.rule.grants for e in kept if e is not evaluation]
        if others and wanted <= frozenset().union(*others):
            kept.remove(evaluation)
    return tuple(kept)


def _verdict(
    rule: Rule,
    evaluation: Evaluation | None,
    resource_set: ResourceSetRef,
    requested: tuple[str, ...],
    client_id: str | None = None,
) -> RuleVerdict:
    if evaluation is None and rule.until is not None and rule.resource_sets.covers(resource_set):
        ended = datetime.fromtimestamp(rule.until, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return RuleVerdict(rule.id, False, (f"ended at {ended}",))
    if evaluation is None:
        reason = (
            f"does not cover resource set {resource_set.name or resource_set.id!r}"
            f" ({rule.resource_sets.description})"
        )
        return RuleVerdict(rule.id, False, (reason,))
    reasons = []
    if not evaluation.client_allowed:
        assert rule.clients is not None
        listed = ", ".join(repr(client) for client in sorted(rule.clients))
        acting = (
            f"the acting client {client_id!r} is not one of them"
            if client_id is not None
            else "no acting client was named"
        )
        reasons.append(f"holds only for the clients {listed}: {acting}")
    reasons.extend(check.reason() for check in evaluation.checks)
    holds = evaluation.holds
    if not rule.conditions and evaluation.client_allowed:
        anyone = "anyone" if rule.clients is None else "anyone through the clients it lists"
        reasons.append(f"has no conditions, so it holds for {anyone}")
    if holds:
        granting = tuple(scope for scope in requested if scope in rule.grants)
        if granting:
            reasons.append(f"grants {_scope_list(granting)}")
        else:
            reasons.append(f"grants none of the requested scopes (only {_scope_list(rule.scopes)})")
    return RuleVerdict(rule.id, holds, tuple(reasons))


def _needed_claims(
    missing: Iterable[Check], can_supply: Collection[tuple[str, str]]
) -> tuple[NeededClaim, ...]:
    """The need_claims entries for missing checks the client can push: one per claim type and
    name, the type the first (in sorted order) the client can supply that the condition accepts.
    For a verified type, when a condition demands issuers, `issuers` lists those this client can
    supply that every condition on the entry accepts (else those the first accepts)."""
    groups: dict[tuple[str, str], list[Condition]] = {}
    for check in missing:
        condition = check.condition
        claim_type = min(
            claim_type for claim_type, issuer in can_supply if condition.accepts(claim_type, issuer)
        )
        groups.setdefault((claim_type, condition.claim), []).append(condition)
    needed = []
    for (claim_type, name), conditions in groups.items():
        issuers: tuple[str, ...] = ()
        if claim_type in VERIFIED_TYPES and any(c.issuers is not None for c in conditions):
            offered = sorted(issuer for t, issuer in can_supply if t == claim_type)
            issuers = tuple(i for i in offered if all(c.accepts(claim_type, i) for c in conditions))
            if not issuers:
                issuers = tuple(i for i in offered if conditions[0].accepts(claim_type, i))
        # Never the required value: the hint the owner wrote, or a generic one naming whose word
        # is wanted.
        written = next((c.hint for c in conditions if c.hint), None)
        vouched = f" vouched for by {_either(issuers)}" if issuers else ""
        hint = written or f"a value for {name!r}{vouched}"
        needed.append(
            NeededClaim(
                claim_type,
                name,
                hint,
                issuers,
                types=_accepted_types(conditions, can_supply),
                named_issuers=tuple(
                    sorted({i for c in conditions if c.issuers is not None for i in c.issuers})
                ),
            )
        )
    return tuple(needed)


def _accepted_types(
    conditions: Sequence[Condition], can_supply: Collection[tuple[str, str]]
) -> tuple[str, ...]:
    """The claim types a claim the conditions ask for can come in: those every condition names
    (or the first's, when they name none in common); for conditions that name none, the types
    this client can push that they accept. Never the redirect profile's (no client sends it)."""
    each = [
        set(c.types) if c.types is not None else {t for t, i in can_supply if c.accepts(t, i)}
        for c in conditions
    ]
    common = set.intersection(*each) or each[0]
    return tuple(sorted(common - {REDIRECT_TYPE}))


def _redirect_need(
    rule_ids: tuple[str, ...], gathered: Sequence[Check], can_gather: Collection[tuple[str, str]]
) -> RedirectNeed | None:
    """What the requesting party could share by signing in here for these missing checks (each
    gatherable) of the rules `rule_ids`, or None when there are none."""
    if not gathered:
        return None
    names = tuple(dict.fromkeys(check.condition.claim for check in gathered))
    issuers = sorted(
        {
            issuer
            for check in gathered
            for claim_type, issuer in can_gather
            if check.condition.accepts(claim_type, issuer)
        }
    )
    return RedirectNeed(rule_ids, names, tuple(issuers))


def _count(number: int, what: str) -> str:
    return f"1 {what}" if number == 1 else f"{number} {what}s"


def _either(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} or {items[-1]}"


def _both(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def _scope_list(scopes: Iterable[str]) -> str:
    return ", ".join(repr(scope) for scope in scopes)


def _rule_names(ids: Sequence[str]) -> str:
    if len(ids) == 1:
        return f"rule {ids[0]!r}"
    return f"rules {', '.join(repr(rule_id) for rule_id in ids[:-1])} and {ids[-1]!r}"
