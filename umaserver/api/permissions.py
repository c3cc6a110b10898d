"""Permission registration: a resource server asks for a ticket for a client that wants access.

Scoped to the PAT's owner and resource server, like registration. The body is UMA 1.0's object
(`{resource_set_id, scopes}`), or UMA 2.0's (Federated Authorization 4.1): one requested permission
`{resource_id, resource_scopes}`, or a non-empty array of them, one ticket for all. The generations
are not mixed in one body.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from ..error_responses import json_response
from ..errors import InvalidRequest, InvalidResourceId, InvalidResourceSetId
from ..runtime import runtime
from ..services.registration import register_permission
from ..storage.per_request import storage
from .bearer import PROTECTION_SCOPE, authenticate
from .json_body import read_json_value
from .schemas import MAX_REQUESTED_PERMISSIONS, PermissionRequest, RequestedPermission, load

bp = Blueprint("permissions", __name__)
_v1 = PermissionRequest()
_v2 = RequestedPermission()

_V1_KEYS = ("resource_set_id", "scopes")
_V2_KEYS = ("resource_id", "resource_scopes")


@bp.post("/permission")
def permission_registration() -> Response:
    return register()


def register(*, every_owner: bool = False) -> Response:
    """The permission endpoint's work; `every_owner`: a resource server acting for itself may
    ask for the sets it registered for any owner (Keycloak's realm face)."""
    pat = authenticate(PROTECTION_SCOPE)
    body = read_json_value()
    requested, unknown_set = _requested(body)
    uma = runtime()
    ticket = register_permission(
        storage(),
        uma.clock.now(),
        pat,
        requested,
        uma.config.lifetimes.ticket,
        unknown_set=unknown_set,
        every_owner=every_owner and pat.user_sub is None,
    )
    return json_response({"ticket": ticket}, 201)


def _requested(
    body: dict[str, Any] | list[Any],
) -> tuple[list[tuple[str, list[str]]], type[InvalidResourceSetId] | type[InvalidResourceId]]:
    """The (set, scopes) pairs the body asks for, and the error an unknown set gets."""
    if isinstance(body, dict) and _generation(body, alone=True) == 1:
        loaded = load(_v1, body)
        return [(loaded["resource_set_id"], loaded["scopes"])], InvalidResourceSetId
    items = [body] if isinstance(body, dict) else body
    if not items:
        raise InvalidRequest("The array of requested permissions is empty.")
    if len(items) > MAX_REQUESTED_PERMISSIONS:
        raise InvalidRequest(
            f"At most {MAX_REQUESTED_PERMISSIONS} requested permissions in one request;"
            f" this one has {len(items)}."
        )
    requested = []
    for index, item in enumerate(items):
        where = "" if isinstance(body, dict) else f"[{index}]"
        if not isinstance(item, dict):
            raise InvalidRequest(f"{where or 'body'}: a requested permission must be an object.")
        if _generation(item) == 1:
            raise InvalidRequest(
                f"{where}: UMA 1.0's resource_set_id and scopes cannot be mixed with UMA 2.0's"
                " requested permissions; send one 1.0 object, or 2.0 objects only."
            )
        try:
            loaded = load(_v2, item)
        except InvalidRequest as error:
            raise InvalidRequest(f"{where}{'.' if where else ''}{error.description}") from None
        requested.append((loaded["resource_id"], loaded["resource_scopes"]))
    return requested, InvalidResourceId


def _generation(item: dict[str, Any], alone: bool = False) -> int:
    """1 for an object with 1.0's members, 2 for one with 2.0's; one with neither is 1.0's when it
    is the whole body (1.0's errors name what is missing), else 2.0's. 400 for one with both."""
    v1 = any(key in item for key in _V1_KEYS)
    v2 = any(key in item for key in _V2_KEYS)
    if v1 and v2:
        raise InvalidRequest(
            "A requested permission has both UMA 1.0's resource_set_id/scopes and UMA 2.0's"
            " resource_id/resource_scopes; send one or the other."
        )
    return 1 if v1 or (alone and not v2) else 2
