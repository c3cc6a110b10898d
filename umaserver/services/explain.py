"""Explaining a decision, rule by rule: what `decide_access` would answer for a resource set, some
scopes, a client and claims. `policy explain` (the operator's command line) and the owner's
policy page both call `explain_access`, so that they say the same thing for the same input.

The caller finds the resource set and the rules (the file's, with the owner's own), and checks
who may ask; this module builds the request as the authorization request endpoint would and
returns `Decision.as_dict()` with the `redirect_required` entry's label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .. import strict_json
from ..claims.model import ClaimsError, Verifiers, read_claim_objects
from ..config import Config
from ..policy.decision import redirect_label
from ..policy.rules import RuleSet
from ..storage import Storage
from ..storage.records import ResourceSet, User
from .account_claims import account_claims
from .decision import (
    AccessRequest,
    Supplier,
    any_client,
    decide_access,
    gatherable,
    redirect_claims_of_user,
    sign_in_providers,
)


class ExplainRefused(Exception):
    """The request to explain cannot be made: `description` says why, for people; `field` names
    what was wrong: "claims" or "client"."""

    def __init__(self, description: str, field: str = "claims") -> None:
        super().__init__(description)
        self.description = description
        self.field = field


def claim_objects(text: str, what: str = "The claims") -> list[dict[str, Any]]:
    """The claim objects of a JSON text (an array of `{type, value}` objects, as in an
    authorization request); raises ExplainRefused, its description starting with `what`."""
    try:
        objects = strict_json.loads(text)
    except ValueError as error:
        raise ExplainRefused(f"{what} is not JSON: {error}") from None
    if not isinstance(objects, list) or not all(
        isinstance(o, dict) and isinstance(o.get("type"), str) and isinstance(o.get("value"), dict)
        for o in objects
    ):
        raise ExplainRefused(
            f"{what} must be a JSON array of objects with a string type and an object value."
        )
    return objects


def explain_access(
    storage: Storage,
    config: Config,
    verifiers: Verifiers,
    rules: RuleSet,
    *,
    owner: str,
    resource_set: ResourceSet,
    scopes: Sequence[str],
    objects: Sequence[Mapping[str, Any]],
    client_id: str | None,
    party: User | None,
    now: int,
) -> dict[str, Any]:
    """The decision for `owner`'s `resource_set` (owner as the rules name it), `scopes` and the
    claim `objects` pushed by `client_id` (None: a client that may push every type, with every
    issuer the rules name vouching: `any_client`), as a dict: decision, rules, need_claims,
    redirect_required (with its `label`), explanation (a verdict per rule of the owner) and
    summary. With `party`, their attributes count as claims gathered by redirect, as after they
    signed in at the requesting party claims endpoint, and their account claims count as they do
    for a request with their AAT. Raises ExplainRefused."""
    pushed_objects = [dict(o) for o in objects]
    if client_id is not None:
        found = storage.get_client(client_id)
        if found is None:
            raise ExplainRefused(f"There is no client {client_id!r}.", "client")
        supplier = Supplier.of(client_id, found.push_claim_types, verifiers)
    else:
        supplier = any_client(rules, owner, pushed_objects, verifiers, storage)
    try:
        pushed = read_claim_objects(
            pushed_objects, supplier.client_id, supplier.push_types, verifiers, now
        )
    except ClaimsError as error:
        raise ExplainRefused(error.description) from None
    claims = list(pushed.claims)
    if party is not None:
        # As after the person signed in at the requesting party claims endpoint: their attributes
        # gathered, and the client one that can send them there.
        claims.extend(redirect_claims_of_user(party, config.issuer, supplier.client_id, now))
        # As a request with their AAT: this server's word about their account.
        claims.extend(
            account_claims(storage, party.sub, config.issuer, client_id=supplier.client_id, now=now)
        )
        can_gather = gatherable(config.issuer, sign_in_providers(config.oidc_issuers), True)
        supplier = replace(supplier, can_gather=can_gather)
    decision = decide_access(
        rules,
        AccessRequest(
            owner=owner,
            resource_set=resource_set,
            scopes=tuple(scopes),
            client=supplier,
            requesting_party=party.sub if party is not None else "-",
            claims=claims,
            now=now,
        ),
    )
    answer = decision.as_dict()
    if decision.redirect is not None:
        # The `name` of the redirect_required entry the server would answer with.
        answer["redirect_required"]["label"] = redirect_label(decision.redirect)
    return answer
