"""Permission registration: a resource server asks for a ticket for a client that wants access.

Scoped to the PAT's owner and resource server, like registration.
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify

from ..errors import InvalidResourceSetId, InvalidScope
from ..storage.sqlite import get_store
from .bearer import PROTECTION_SCOPE, authenticate
from .json_body import read_json_object
from .schemas import PermissionRequest, load

bp = Blueprint("permissions", __name__)
_schema = PermissionRequest()


@bp.post("/permission")
def register_permission() -> Response:
    pat = authenticate(PROTECTION_SCOPE)
    request = load(_schema, read_json_object())
    store = get_store()
    resource_set = store.get_resource_set(request["resource_set_id"], pat.owner, pat.client_id)
    if resource_set is None:
        raise InvalidResourceSetId()
    registered = set(resource_set.description["scopes"])
    unknown = [scope for scope in request["scopes"] if scope not in registered]
    if unknown:
        raise InvalidScope(f"The scope {unknown[0]!r} is not registered on this resource set.")
    ticket = store.create_ticket(
        pat.owner,
        pat.client_id,
        resource_set.id,
        list(dict.fromkeys(request["scopes"])),
        current_app.config["UMA"].lifetimes.ticket,
    )
    response = jsonify({"ticket": ticket})
    response.status_code = 201
    response.headers["Cache-Control"] = "no-store"
    return response
