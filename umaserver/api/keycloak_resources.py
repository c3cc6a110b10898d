"""Keycloak's resource registration, on the realm face (`[keycloak] realm`):
`/realms/NAME/authz/protection/resource_set` and `/resource_set/<id>`, with a PAT, over the same
services and store as the standard `/rs/resource_set`: a set registered on either face is read,
changed and listed on both.

Keycloak's answers where they differ from the standard ones: a set is Keycloak's representation
(`keycloak_resource_schema`); create answers 201 with it, read 200, update and delete 204 with
no body; the list takes Keycloak's filters and page (`resource_set_filters`), and `deep=true`
answers representations instead of ids.

A resource server acting for itself (a PAT of its own, client_credentials) is Keycloak's resource
server: it may register a set for a user who has given it a PAT (Keycloak's `owner`), and it
reads, changes and lists every set it registered, whoever owns it. A person's PAT sees that
person's sets, as on the standard face.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from ..error_responses import json_response
from ..errors import NotFound, UnsupportedMethod
from ..fetching import running
from ..fetching.queue import resource_set_uris
from ..runtime import runtime
from ..services.registration import (
    create_resource_set,
    delete_resource_set,
    find_registered_set,
    list_resource_sets,
    registering_for,
    replace_resource_set,
)
from ..storage.per_request import storage
from ..storage.records import AccessToken, ResourceSet
from .bearer import PROTECTION_SCOPE, authenticate
from .json_body import read_json_object
from .keycloak_resource_schema import load_resource, representation
from .resource_set_filters import read_list_request

bp = Blueprint("keycloak_resources", __name__)

# Listed so that HEAD, OPTIONS and the rest reach the view, which authenticates before it refuses.
_ROUTED_METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE"]


def _not_found() -> NotFound:
    # Another owner's or another resource server's set answers exactly like an unknown one.
    return NotFound("No resource set with this _id is registered for this resource server.")


def _every_owner(pat: AccessToken) -> bool:
    # Keycloak's resource server, acting for itself, manages every set it registered.
    return pat.user_sub is None


def _no_content() -> Response:
    answer = Response(status=204)
    del answer.headers["Content-Type"]  # no content, so no type of content
    return answer


@bp.route("/resource_set", methods=_ROUTED_METHODS, provide_automatic_options=False)
def collection() -> Response:
    pat = authenticate(PROTECTION_SCOPE)
    if request.method == "GET":
        return _list(pat)
    if request.method == "POST":
        return _create(pat)
    raise UnsupportedMethod(headers={"Allow": "GET, POST"})


def _list(pat: AccessToken) -> Response:
    asked = read_list_request(request.args)
    store = storage()
    every_owner = _every_owner(pat)
    ids = list_resource_sets(store, pat, asked.query, asked.owner, every_owner=every_owner)
    if not asked.deep:
        return json_response(ids)
    found = (find_registered_set(store, pat, rs_id, every_owner=every_owner) for rs_id in ids)
    # A set deleted since the list was read is left out.
    return json_response([_represent(*pair) for pair in found if pair is not None])


def _create(pat: AccessToken) -> Response:
    description, owner_name = load_resource(read_json_object())
    store = storage()
    registrant = pat if owner_name is None else registering_for(store, pat, owner_name)
    created = create_resource_set(store, runtime().clock.now(), registrant, description)
    if resource_set_uris(description):
        running.wake()  # its scope descriptions and icon were queued: check them soon
    location = runtime().config.url(f"{request.script_root}{request.path}/{created.id}")
    return json_response(_represent(created, registrant), 201, {"Location": location})


@bp.route("/resource_set/<rs_id>", methods=_ROUTED_METHODS, provide_automatic_options=False)
def item(rs_id: str) -> Response:
    pat = authenticate(PROTECTION_SCOPE)
    if request.method not in ("GET", "PUT", "DELETE"):
        raise UnsupportedMethod(headers={"Allow": "GET, PUT, DELETE"})
    store = storage()
    found = find_registered_set(store, pat, rs_id, every_owner=_every_owner(pat))
    if found is None:
        raise _not_found()
    existing, owners_pat = found
    if request.method == "GET":
        return json_response(_represent(existing, owners_pat))
    if request.method == "DELETE":
        if not delete_resource_set(store, owners_pat, rs_id):
            raise _not_found()  # deleted since it was read
        return _no_content()
    # An update replaces the representation; its owner stays (Keycloak's ignores `owner` too).
    description, _owner = load_resource(read_json_object())
    if not replace_resource_set(store, runtime().clock.now(), owners_pat, rs_id, description):
        raise _not_found()
    if resource_set_uris(description):
        running.wake()
    return _no_content()


def _represent(resource_set: ResourceSet, owners_pat: AccessToken) -> dict[str, Any]:
    """Keycloak's representation, with the owner as the owner's PAT names it: a user's sub and
    username, or the resource server's own client id."""
    if owners_pat.user_sub is None:
        return representation(resource_set, owners_pat.client_id, owners_pat.client_id)
    name = owners_pat.username or owners_pat.user_sub
    return representation(resource_set, owners_pat.user_sub, name)
