"""Keycloak's user-managed policy API on the realm face (`[keycloak] realm`):
`/realms/{realm}/authz/protection/uma-policy` and `.../uma-policy/{id}`, with a PAT of the owner
(scope `uma_protection`) at the resource server that registered the set. Each policy is an owner
rule (`services.keycloak_policies`).

Answers as Keycloak's clients (python-keycloak 7.1.1's `KeycloakUMA.policy_*`) read them:

- `POST .../uma-policy/{resource_id}`: 200 with the policy.
- `GET .../uma-policy?resource=&name=&scope=&first=&max=`: 200 with a JSON array of policies.
- `GET .../uma-policy/{policy_id}`: 200 with the policy.
- `PUT .../uma-policy/{policy_id}`: 200 with an empty body (python-keycloak's `policy_update`
  fails on a 204).
- `DELETE .../uma-policy/{policy_id}`: 204.

Another realm's name, and a set or policy of another owner or resource server, are 404; a policy
the rule form cannot express is 400 naming the member; `[policies] owner_rules = false`, or a
PAT of a client acting for itself (it has no rules of its own), 403 `access_denied`.
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from ..error_responses import json_response
from ..errors import APIError, InvalidRequest, InvalidScope, NotFound, UnsupportedMethod
from ..runtime import runtime
from ..services import keycloak_policies as policies
from ..services.owner_rules import OwnerRulesDisabled, delete_owner_rule
from ..services.rule_limits import RuleTooLarge, from_config
from ..storage.per_request import storage
from ..storage.records import AccessToken
from .bearer import PROTECTION_SCOPE, authenticate
from .json_body import read_json_object

# Registered under /realms/NAME/authz/protection (`create_app`): another realm's name is no path.
bp = Blueprint("keycloak_policies", __name__)

_ROUTED_METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE"]
_QUERY = ("resource", "name", "scope", "first", "max")


class AccessDenied(APIError):
    status = 403
    error = "access_denied"


def _owner(pat: AccessToken) -> str:
    """The PAT's owner as rules name people; 403 when it is a client acting for itself, or when
    owners' rules are off."""
    if pat.user_sub is None or pat.username is None:
        raise AccessDenied(
            "Policies are rules of a person: use a PAT the resource owner gave this client."
        )
    if not runtime().config.owner_rules:
        raise AccessDenied(str(OwnerRulesDisabled()))
    return pat.username


def _mine(pat: AccessToken, owner: str) -> list[policies.Policy]:
    assert pat.user_sub is not None
    return policies.policies_of(storage(), owner, pat.client_id, pat.user_sub)


def _one(pat: AccessToken, owner: str, policy_id: str) -> policies.Policy:
    for policy in _mine(pat, owner):
        if policy.rule.id == policy_id:
            return policy
    raise NotFound("No policy with this id is kept for this owner and resource server.")


def _refused(error: policies.PolicyRefused) -> APIError:
    if isinstance(error, policies.UnknownScope):
        return InvalidScope(str(error))
    return InvalidRequest(str(error))


@bp.route("/uma-policy", methods=_ROUTED_METHODS, provide_automatic_options=False)
def collection() -> Response:
    pat = authenticate(PROTECTION_SCOPE)
    if request.method != "GET":
        raise UnsupportedMethod(headers={"Allow": "GET"})
    owner = _owner(pat)
    for name in request.args:
        if name in _QUERY and len(request.args.getlist(name)) > 1:
            raise InvalidRequest(f"The parameter {name!r} is given more than once.")
    found = policies.query(
        _mine(pat, owner),
        resource=request.args.get("resource") or None,
        name=request.args.get("name") or None,
        scope=request.args.get("scope") or None,
        first=_count("first") or 0,
        maximum=_count("max"),
    )
    return json_response([policy.representation() for policy in found])


def _count(name: str) -> int | None:
    text = request.args.get(name)
    if text is None or text == "":
        return None
    # Keycloak's max=-1 is "all"; any other negative or non-number is a mistake.
    if name == "max" and text == "-1":
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 9:
        raise InvalidRequest(f"{name}: must be a non-negative integer.")
    return int(text)


@bp.route("/uma-policy/<item_id>", methods=_ROUTED_METHODS, provide_automatic_options=False)
def item(item_id: str) -> Response:
    pat = authenticate(PROTECTION_SCOPE)
    if request.method not in ("GET", "POST", "PUT", "DELETE"):
        raise UnsupportedMethod(headers={"Allow": "GET, POST, PUT, DELETE"})
    owner = _owner(pat)
    store = storage()
    now = runtime().clock.now()
    enabled = runtime().config.owner_rules
    if request.method == "POST":  # the path names the resource
        resource_set = store.get_resource_set(item_id, pat.owner, pat.client_id)
        if resource_set is None:
            raise NotFound(
                "No resource with this _id is registered for this owner and resource server."
            )
        body = read_json_object()
        try:
            created = policies.create(
                store,
                body,
                owner=owner,
                resource_set=resource_set,
                now=now,
                enabled=enabled,
                limits=from_config(runtime().config.limits),
            )
        except policies.PolicyRefused as error:
            raise _refused(error) from None
        except RuleTooLarge as error:
            raise InvalidRequest(str(error)) from None
        return json_response(created.representation())
    policy = _one(pat, owner, item_id)  # the path names the policy
    if request.method == "GET":
        return json_response(policy.representation())
    if request.method == "DELETE":
        if not delete_owner_rule(store, owner, policy.rule.id, now, enabled=enabled):
            raise NotFound("No policy with this id is kept for this owner and resource server.")
        return _empty(204)
    resource_set = store.get_resource_set(policy.resource_set_id, pat.owner, pat.client_id)
    assert resource_set is not None  # `_one` found the policy on it
    body = read_json_object()
    try:
        replaced = policies.update(
            store,
            policy,
            body,
            resource_set=resource_set,
            now=now,
            enabled=enabled,
            limits=from_config(runtime().config.limits),
        )
    except policies.PolicyRefused as error:
        raise _refused(error) from None
    except RuleTooLarge as error:
        raise InvalidRequest(str(error)) from None
    if not replaced:
        raise NotFound("No policy with this id is kept for this owner and resource server.")
    return _empty(200)


def _empty(status: int) -> Response:
    answer = Response(status=status)
    del answer.headers["Content-Type"]  # no content, so no type of content
    return answer
