"""Keycloak's user-managed policies (its Policy API, `/authz/protection/uma-policy`) as owners'
rules: a policy a resource server creates with its owner's PAT becomes one rule of that owner,
stored, evaluated and shown on the owner's page like any other (`owner_rules`).

A policy (Keycloak's UmaPermissionRepresentation) and its rule:

- `name`: kept beside the rule (`owner_rules.NAME_KEY`); `description`: the rule's description.
- the set in the path: the rule covers that set alone (by `_id`).
- `scopes`: the scopes granted, each registered on the set; empty or absent: every scope the set
  has when the policy is written.
- `users`: a condition that the account claim `username` is one of them; `roles` and `groups`: a
  condition that the account claim `roles` (`groups`) contains at least one of them
  (`contains_any`); only account claims count (`ACCOUNT_CLAIM_TYPE`), which no client can push,
  so a request they do not hold for is denied, never asked for more claims. Like every rule's
  conditions, all of them must hold (Keycloak's `decisionStrategy` UNANIMOUS, the only one taken).
- `clients`: the rule's `clients` (Keycloak names clients by client id).

A policy that names no users, roles, groups or clients would grant everyone: refused. `condition`
(a script), any other `logic`, `decisionStrategy` or `type` than ours, and any member the rule form
cannot express are refused, naming the member. What a policy reads back as also carries `id` and
`owner` (the owner's username); an update may send them back unchanged.

Plain services over storage: the blueprint (`api.keycloak_policies`) translates HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..claims.model import ACCOUNT_CLAIM_TYPE
from ..errors import echo
from ..policy.rule_file import PolicyError, parse_rule_table
from ..policy.rules import Rule
from ..storage import Storage
from ..storage.records import ResourceSet
from . import owner_rules
from .rule_limits import DEFAULT_LIMITS, RuleLimits

# The members a policy is written with, and those it reads back with too.
WRITTEN = ("name", "description", "scopes", "users", "roles", "groups", "clients")
READ_BACK = ("id", "owner")
# Members Keycloak's clients may send with the one value that means what a rule does.
FIXED = {"type": "uma", "logic": "POSITIVE", "decisionStrategy": "UNANIMOUS"}
_LISTS = ("scopes", "users", "roles", "groups", "clients")
# Which account claim, and which operator, each list of people becomes.
_PEOPLE = (("users", "username", "one_of"), ("roles", "roles", "contains_any"), ("groups", "groups", "contains_any"))  # fmt: skip
NAME_LENGTH = 200


class PolicyRefused(Exception):
    """A policy that cannot be a rule; the message names the member (400 invalid_request)."""


class UnknownScope(PolicyRefused):
    """A scope the set does not register (400 invalid_scope)."""


@dataclass(frozen=True)
class Policy:
    """One owner's rule read as a Keycloak policy, with the set it covers."""

    rule: Rule
    name: str
    resource_set_id: str

    def representation(self) -> dict[str, Any]:
        conditions = {c.claim: c for c in self.rule.conditions}
        people = {
            member: list(conditions[claim].operand) if claim in conditions else []
            for member, claim, _ in _PEOPLE
        }
        return {
            "id": self.rule.id,
            "name": self.name,
            "description": self.rule.description or "",
            "type": FIXED["type"],
            "logic": FIXED["logic"],
            "decisionStrategy": FIXED["decisionStrategy"],
            "owner": self.rule.owner,
            "scopes": list(self.rule.scopes),
            **people,
            "clients": sorted(self.rule.clients or ()),
        }


def as_policy(found: owner_rules.OwnerRule) -> Policy | None:
    """The owner's rule as a policy, when it is one this API could have written: one set by id,
    conditions only on account claims as above; None otherwise (a rule of the owner's page)."""
    rule = found.rule
    selector = rule.resource_sets
    if selector.everything or len(selector.ids) != 1 or selector.types or selector.names:
        return None
    shapes = {claim: operator for _, claim, operator in _PEOPLE}
    seen: set[str] = set()
    for condition in rule.conditions:
        if (
            shapes.get(condition.claim) != condition.operator
            or condition.claim in seen
            or condition.types != frozenset({ACCOUNT_CLAIM_TYPE})
            or condition.issuers is not None
        ):
            return None
        seen.add(condition.claim)
    if not rule.conditions and rule.clients is None:
        return None
    (rs_id,) = selector.ids
    return Policy(rule, found.name or rule.description or rule.id, rs_id)


def policy_rule(
    body: Mapping[str, Any], *, owner: str, resource_set: ResourceSet, rule_id: str
) -> tuple[Rule, str]:
    """The rule (of `owner`, id `rule_id`, covering `resource_set`) and the name of the policy
    `body`. Raises PolicyRefused naming the member."""
    for member in body:
        if member not in WRITTEN and member not in READ_BACK and member not in FIXED:
            what = "a script" if member == "condition" else "not something a rule can express"
            raise PolicyRefused(f"The member {echo(member)} is not supported: {what}.")
    for member, value in FIXED.items():
        if member in body and body[member] != value:
            raise PolicyRefused(
                f"{member}: only {value!r} is supported (every condition of a rule must hold)."
            )
    if "id" in body and body["id"] != rule_id:
        raise PolicyRefused("id: must be the id of the policy in the path.")
    if "owner" in body and body["owner"] != owner:
        raise PolicyRefused("owner: a policy belongs to the owner of its resource set.")
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise PolicyRefused("name: required, a non-empty string.")
    if len(name) > NAME_LENGTH:
        raise PolicyRefused(f"name: at most {NAME_LENGTH} characters.")
    description = body.get("description")
    if description is not None and not isinstance(description, str):
        raise PolicyRefused("description: must be a string.")
    lists = {member: _strings(body, member) for member in _LISTS}
    if not any(lists[member] for member in ("users", "roles", "groups", "clients")):
        raise PolicyRefused(
            "A policy must name users, roles, groups or clients: one naming none would grant"
            " everyone."
        )
    registered = resource_set.scopes
    for scope in lists["scopes"]:
        if scope not in registered:
            raise UnknownScope(
                f"scopes: {echo(scope)} is not a scope of the resource {echo(resource_set.id)}."
            )
    scopes = lists["scopes"] or list(registered)
    if not scopes:
        raise PolicyRefused("scopes: the resource has no scopes to grant.")
    table: dict[str, Any] = {
        "id": rule_id,
        "owner": owner,
        "scopes": scopes,
        "resource_sets": {"ids": [resource_set.id]},
    }
    if description:
        table["description"] = description
    if lists["clients"]:
        table["clients"] = lists["clients"]
    conditions = [
        {"claim": claim, operator: lists[member], "types": [ACCOUNT_CLAIM_TYPE]}
        for member, claim, operator in _PEOPLE
        if lists[member]
    ]
    if conditions:
        table["conditions"] = conditions
    try:
        return parse_rule_table(table, "policy"), name.strip()
    except PolicyError as error:  # a value the reader refuses that the checks above let by
        raise PolicyRefused("; ".join(error.errors)) from None


def _strings(body: Mapping[str, Any], member: str) -> list[str]:
    value = body.get(member)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PolicyRefused(f"{member}: must be an array of non-empty strings.")
    return list(dict.fromkeys(value))


# -- the operations ------------------------------------------------------------------------------


def policies_of(storage: Storage, owner: str, client_id: str, owner_sub: str) -> list[Policy]:
    """The owner's rules that are policies on sets this resource server registered for them,
    oldest first. Shares are not: the owner ends them on their page (Stop sharing)."""
    found = []
    sets: dict[str, bool] = {}
    shared = {share.rule_id for share in storage.shares_of(owner_sub)}
    for stored in owner_rules.owner_rules(storage, owner):
        policy = as_policy(stored)
        if policy is None or policy.rule.id in shared:
            continue
        rs_id = policy.resource_set_id
        if rs_id not in sets:
            sets[rs_id] = storage.get_resource_set(rs_id, owner_sub, client_id) is not None
        if sets[rs_id]:
            found.append(policy)
    return found


def query(
    policies: Sequence[Policy],
    *,
    resource: str | None = None,
    name: str | None = None,
    scope: str | None = None,
    first: int = 0,
    maximum: int | None = None,
) -> list[Policy]:
    """Keycloak's query: by set, by name (case-insensitive, part of it), by a scope granted;
    then `first` skipped and at most `maximum`."""
    chosen = [
        policy
        for policy in policies
        if (resource is None or policy.resource_set_id == resource)
        and (name is None or name.casefold() in policy.name.casefold())
        and (scope is None or scope in policy.rule.scopes)
    ]
    chosen = chosen[first:]
    return chosen if maximum is None else chosen[:maximum]


def create(
    storage: Storage,
    body: Mapping[str, Any],
    *,
    owner: str,
    resource_set: ResourceSet,
    now: int,
    enabled: bool,
    limits: RuleLimits = DEFAULT_LIMITS,
) -> Policy:
    """Stores the policy `body` as a new rule of `owner` on `resource_set`. Raises PolicyRefused,
    owner_rules.OwnerRulesDisabled."""
    if not enabled:
        raise owner_rules.OwnerRulesDisabled()
    if "id" in body:
        raise PolicyRefused("id: a new policy is given its id by this server.")
    rule, name = policy_rule(
        body, owner=owner, resource_set=resource_set, rule_id=owner_rules.new_rule_id()
    )
    owner_rules.add_owner_rule(storage, owner, rule, now, name=name, limits=limits)
    return Policy(rule, name, resource_set.id)


def update(
    storage: Storage,
    policy: Policy,
    body: Mapping[str, Any],
    *,
    resource_set: ResourceSet,
    now: int,
    enabled: bool,
    limits: RuleLimits = DEFAULT_LIMITS,
) -> bool:
    """Replaces `policy` (on the same set) with the policy `body`; False when it is gone. Raises
    PolicyRefused, owner_rules.OwnerRulesDisabled, RuleTooLarge (past `limits`)."""
    if not enabled:
        raise owner_rules.OwnerRulesDisabled()
    rule, name = policy_rule(
        body, owner=policy.rule.owner, resource_set=resource_set, rule_id=policy.rule.id
    )
    return owner_rules.replace_owner_rule(storage, rule.owner, rule, now, name=name, limits=limits)
