"""The one home of the authorization decision.

`decide_access` takes the rules and what a request is about (owner, resource set, scopes, the client and what it
can supply, what this server could gather by redirecting its requesting party, the requesting
party, the claims gathered) and returns the policy engine's `Decision`,
whose explanation is built only when asked. The authorization request endpoint, `policy explain`
and the owner's pages all call it; nothing else assembles a decision. The rules are those of the
owner the request is about: the rule file's and the owner's own (`RulesFor`,
`owner_rules.effective_rules`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..claims.model import (
    ACCOUNT_CLAIM_TYPE,
    OIDC_TYPE,
    REDIRECT_TYPE,
    SAML_TYPE,
    Verifiers,
    suppliable,
)
from ..claims.oidc_issuers import OidcIssuer
from ..policy.decision import Decision, NeededClaim, RedirectNeed, decide
from ..policy.rules import ResourceSetRef, RuleSet
from ..storage import Storage
from ..storage.records import Claim, RequestedPermission, ResourceSet, User

# The rules that decide about one owner's sets, given the owner as rules name owners (a username,
# or client:<client_id>), read through this storage handle (in the caller's transaction, if any):
# `Runtime.rules_for` in the server, `owner_rules.effective_rules` over a file's rules elsewhere.
RulesFor = Callable[[Storage, str], RuleSet]


@dataclass(frozen=True)
class Supplier:
    """The client a decision supposes: its id (the issuer of its plain claims), the claim types it
    may push, the (claim type, issuer) pairs it can supply, and the (REDIRECT_TYPE, issuer) pairs
    this server could gather by redirecting its requesting party to sign in here (see
    `gatherable`; empty when no person is behind the request)."""

    client_id: str
    push_types: tuple[str, ...]
    can_supply: frozenset[tuple[str, str]]
    can_gather: frozenset[tuple[str, str]] = frozenset()

    @classmethod
    def of(
        cls,
        client_id: str,
        push_types: Collection[str],
        verifiers: Verifiers,
        can_gather: frozenset[tuple[str, str]] = frozenset(),
    ) -> Supplier:
        return cls(
            client_id, tuple(push_types), suppliable(client_id, push_types, verifiers), can_gather
        )


def gatherable(
    server_issuer: str, provider_issuers: Iterable[str], has_person: bool
) -> frozenset[tuple[str, str]]:
    """The (claim type, issuer) pairs this server can gather by redirecting a request's requesting
    party: a local user's attributes (this server's issuer) and the sign-in providers' claims, when
    a person is behind the request's AAT; nothing for a client acting for itself
    (client_credentials)."""
    if not has_person:
        return frozenset()
    issuers = {server_issuer, *provider_issuers}
    return frozenset((REDIRECT_TYPE, issuer) for issuer in issuers)


def sign_in_providers(oidc_issuers: Iterable[OidcIssuer]) -> dict[str, str]:
    """The configured OpenID Connect providers a requesting party can sign in at (those with a
    `client_id` of ours there), by issuer: the name shown for each."""
    return {
        provider.issuer: provider.display_name for provider in oidc_issuers if provider.signs_in
    }


def redirect_claims_of_user(
    user: User, server_issuer: str, client_id: str, now: int
) -> tuple[Claim, ...]:
    """A local user's attributes as claims this server gathered from them by redirect: this
    server vouches for them, about the user's `sub`."""
    return tuple(
        Claim(
            REDIRECT_TYPE,
            name,
            value,
            issuer=server_issuer,
            client_id=client_id,
            gathered_at=now,
            subject=user.sub,
        )
        for name, value in user.claims.items()
    )


@dataclass(frozen=True)
class AccessRequest:
    owner: str  # as the rules name owners: a username, or client:<client_id>
    resource_set: ResourceSet
    scopes: tuple[str, ...]
    client: Supplier
    requesting_party: str
    claims: Sequence[Claim]
    # The current time, for rules with an end (a share's `until`); None: such rules hold for no one.
    now: int | None = None


def decide_access(rules: RuleSet, request: AccessRequest) -> Decision:
    resource_set = request.resource_set
    return decide(
        rules,
        owner=request.owner,
        resource_set=ResourceSetRef(
            id=resource_set.id, name=resource_set.name, type=resource_set.description.get("type")
        ),
        scopes=request.scopes,
        claims=request.claims,
        can_supply=request.client.can_supply,
        can_gather=request.client.can_gather,
        # `any_client` stands for no client in particular: a rule listing clients is not for it.
        client_id=None if request.client.client_id == ANY_CLIENT_ID else request.client.client_id,
        now=request.now,
    )


@dataclass(frozen=True)
class TicketDecision:
    """The decision on every (set, scopes) pair of a ticket: grant when each pair is granted, deny
    when any pair can never be, else the claims to ask for (the pairs' needs, each claim once) or a
    redirect of the requesting party (when no pair needs a claim the client can push). No partial
    grants."""

    outcome: Literal["grant", "need_claims", "deny"]
    pairs: tuple[tuple[ResourceSet, tuple[str, ...], Decision], ...]
    need_claims: tuple[NeededClaim, ...] = ()
    redirect: RedirectNeed | None = None
    # Some pair needs claims the requesting party could share by signing in here, now or once the
    # claims to push are in (UMA 2.0's `redirect_user`).
    gathers: bool = False

    @property
    def rule_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(i for _, _, decision in self.pairs for i in decision.rule_ids))

    def granted(self) -> tuple[RequestedPermission, ...]:
        """The pairs as granted: each with the end of the rules that granted it (`ends_at`), so
        that its permission ends with a share that ends."""
        return tuple(
            RequestedPermission(rs.id, scopes, decision.ends_at)
            for rs, scopes, decision in self.pairs
        )


class MissingResourceSet(Exception):
    """A pair of the ticket names a set that is gone (its ticket should have ended with it)."""


def decide_ticket(
    storage: Storage,
    rules: RuleSet,
    owner: str,
    permissions: Sequence[RequestedPermission],
    client: Supplier,
    requesting_party: str,
    claims: Sequence[Claim],
    now: int | None = None,
) -> TicketDecision:
    """`decide_access` for each pair of a ticket (the sets read through `storage`), combined;
    `now` as `AccessRequest.now`."""
    pairs = []
    for pair in permissions:
        resource_set = storage.find_resource_set(pair.resource_set_id)
        if resource_set is None:
            raise MissingResourceSet(pair.resource_set_id)
        decision = decide_access(
            rules,
            AccessRequest(owner, resource_set, pair.scopes, client, requesting_party, claims, now),
        )
        pairs.append((resource_set, pair.scopes, decision))
    if len(pairs) == 1:  # most tickets: the pair's decision is the ticket's
        gathers = decision.redirect is not None or decision.redirect_later is not None
        return TicketDecision(
            decision.outcome, tuple(pairs), decision.need_claims, decision.redirect, gathers
        )
    decisions = [decision for _, _, decision in pairs]
    if all(decision.outcome == "grant" for decision in decisions):
        return TicketDecision("grant", tuple(pairs))
    if any(decision.outcome == "deny" for decision in decisions):
        return TicketDecision("deny", tuple(pairs))
    needed = tuple(
        {(claim.type, claim.name): claim for d in decisions for claim in d.need_claims}.values()
    )
    redirects = [d.redirect for d in decisions if d.redirect is not None]
    gathers = any(d.redirect is not None or d.redirect_later is not None for d in decisions)
    if needed or not redirects:
        return TicketDecision("need_claims", tuple(pairs), needed, gathers=gathers)
    redirect = RedirectNeed(
        tuple(dict.fromkeys(i for r in redirects for i in r.rule_ids)),
        tuple(dict.fromkeys(name for r in redirects for name in r.claims)),
        tuple(sorted({issuer for r in redirects for issuer in r.issuers})),
    )
    return TicketDecision("need_claims", tuple(pairs), redirect=redirect, gathers=True)


def owner_name(storage: Storage, owner: str) -> str:
    """An owner as the rules name it: the username, or `client:<client_id>` as stored."""
    return storage.get_username(owner) or owner


ANY_CLIENT_ID = "-"


def any_client(
    rules: RuleSet,
    owner: str,
    claim_objects: Sequence[dict[str, Any]],
    verifiers: Verifiers,
    storage: Storage,
) -> Supplier:
    """A client that may push anything, for a decision asked about without one: every claim type
    the claim objects and the owner's rules name, on its own word, as a registered client the rules
    name as issuer would for plain types, and from the configured identity providers for
    verified ones."""
    conditions = [c for rule in rules.rules_for(owner) for c in rule.conditions]
    named = [
        OIDC_TYPE,
        *(o["type"] for o in claim_objects),
        *(t for c in conditions for t in c.types or ()),
    ]
    # Claims of the redirect profile are gathered by this server, account claims vouched for by
    # it: neither is ever pushed.
    types = tuple(dict.fromkeys(t for t in named if t not in (REDIRECT_TYPE, ACCOUNT_CLAIM_TYPE)))
    pairs = set(suppliable(ANY_CLIENT_ID, types, verifiers))
    for condition in conditions:
        plain = [
            t
            for t in condition.types or types
            if t not in (SAML_TYPE, OIDC_TYPE, REDIRECT_TYPE, ACCOUNT_CLAIM_TYPE)
        ]
        clients = [i for i in condition.issuers or () if storage.get_client(i) is not None]
        pairs.update(itertools.product(plain, clients if condition.issuers else (ANY_CLIENT_ID,)))
    return Supplier(ANY_CLIENT_ID, types, frozenset(pairs))
