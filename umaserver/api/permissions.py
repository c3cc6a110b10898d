"""Permission registration: a resource server asks for a ticket for a client that wants access.

Scoped to the PAT's owner and resource server, like registration.
"""

from __future__ import annotations

from flask import Blueprint, Response

from ..error_responses import json_response
from ..runtime import runtime
from ..services.registration import register_permission
from ..storage.per_request import storage
from .bearer import PROTECTION_SCOPE, authenticate
from .json_body import read_json_object
from .schemas import PermissionRequest, load

bp = Blueprint("permissions", __name__)
_schema = PermissionRequest()


@bp.post("/permission")
def permission_registration() -> Response:
    pat = authenticate(PROTECTION_SCOPE)
    body = load(_schema, read_json_object())
    uma = runtime()
    ticket = register_permission(
        storage(),
        uma.clock.now(),
        pat,
        body["resource_set_id"],
        body["scopes"],
        uma.config.lifetimes.ticket,
    )
    return json_response({"ticket": ticket}, 201)
