"""The resource set registration API: exactly the spec's five operations.

Every operation is scoped to the PAT's owner and the resource server the PAT was issued to; checks run
in the order authentication, method, existence, body.
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from ..error_responses import json_response
from ..errors import NotFound, UnsupportedMethod
from ..fetching import running
from ..fetching.queue import resource_set_uris
from ..runtime import runtime
from ..services.registration import (
    create_resource_set,
    delete_resource_set,
    list_resource_sets,
    replace_resource_set,
)
from ..storage.per_request import storage
from ..storage.records import AccessToken
from .bearer import PROTECTION_SCOPE, authenticate
from .json_body import read_json_object
from .resource_set_filters import read_list_request
from .schemas import ResourceSetDescription, load

bp = Blueprint("resource_sets", __name__, url_prefix="/rs")

# Listed so that HEAD, OPTIONS and the rest reach the view, which authenticates before it refuses.
_ROUTED_METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE"]
_description_schema = ResourceSetDescription()


def policy_uri(rs_id: str) -> str:
    """The owner's page for this set's policy (`pages.policy`: who may do what, for the signed-in
    owner only)."""
    return runtime().config.url(f"/policy/resource_set/{rs_id}")


def _not_found() -> NotFound:
    # Another owner's or another resource server's set answers exactly like an unknown one.
    return NotFound(
        "No resource set with this _id is registered for this owner and resource server."
    )


@bp.route("/resource_set", methods=_ROUTED_METHODS, provide_automatic_options=False)
def collection() -> Response:
    pat = authenticate(PROTECTION_SCOPE)
    if request.method == "GET":
        if not request.query_string:  # the plain list, as the spec has it
            return json_response(storage().list_resource_sets(pat.owner, pat.client_id))
        # Keycloak's filters and page, as an extension (`deep` is the realm face's alone).
        asked = read_list_request(request.args)
        return json_response(list_resource_sets(storage(), pat, asked.query, asked.owner))
    if request.method == "POST":
        return _create(pat)
    raise UnsupportedMethod(headers={"Allow": "GET, POST"})


def _create(pat: AccessToken) -> Response:
    description = load(_description_schema, read_json_object())
    created = create_resource_set(storage(), runtime().clock.now(), pat, description)
    if resource_set_uris(description):
        running.wake()  # its scope descriptions and icon were queued: check them soon
    # The set's URL is this collection's (the request's own path) and its id (URL-safe), as
    # url_for would build it, without building it through the URL map.
    location = runtime().config.url(f"{request.script_root}{request.path}/{created.id}")
    return json_response(
        {"_id": created.id, "user_access_policy_uri": policy_uri(created.id)},
        201,
        {"Location": location},
    )


@bp.route("/resource_set/<rs_id>", methods=_ROUTED_METHODS, provide_automatic_options=False)
def item(rs_id: str) -> Response:
    pat = authenticate(PROTECTION_SCOPE)
    if request.method not in ("GET", "PUT", "DELETE"):
        raise UnsupportedMethod(headers={"Allow": "GET, PUT, DELETE"})
    store = storage()
    if request.method == "DELETE":
        if not delete_resource_set(store, pat, rs_id):
            raise _not_found()
        deleted = Response(status=204)
        del deleted.headers["Content-Type"]  # no content, so no type of content
        return deleted
    existing = store.get_resource_set(rs_id, pat.owner, pat.client_id)
    if existing is None:
        raise _not_found()
    if request.method == "GET":
        # Its scopes under both names: 1.0's `scopes` and 2.0's `resource_scopes`.
        body = {
            **existing.description,
            "resource_scopes": list(existing.scopes),
            "_id": existing.id,
            "user_access_policy_uri": policy_uri(rs_id),
        }
        return json_response(body)
    description = load(_description_schema, read_json_object())
    if not replace_resource_set(store, runtime().clock.now(), pat, rs_id, description):
        raise _not_found()  # deleted between the read and the write
    if resource_set_uris(description):
        running.wake()
    return json_response({"_id": rs_id})
