"""Token introspection (RFC 7662) for resource servers, with a PAT.

An RPT answers with its permissions on the asking owner's and resource server's sets only; a PAT or
AAT is visible only to the client it was issued to, with `sub` and `username` when it was issued
for a person; anything else is `{"active": false}`.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from ..error_responses import json_response
from ..errors import InvalidRequest
from ..runtime import runtime
from ..services.accounts import find_access_token
from ..services.rpts import introspect_rpt
from ..storage import Storage
from ..storage.per_request import storage
from ..storage.records import AccessToken, Permission, Rpt
from .bearer import PROTECTION_SCOPE, authenticate

bp = Blueprint("introspection", __name__)


def token_parameter(repeatable: tuple[str, ...] = ()) -> str:
    """The one `token` of a form; 400 invalid_request otherwise, or for a parameter twice."""
    if request.mimetype != "application/x-www-form-urlencoded":
        raise InvalidRequest(
            "Send the token as a form: Content-Type application/x-www-form-urlencoded."
        )
    form = request.form
    values = form.getlist("token")
    if len(values) != 1 or not values[0]:
        raise InvalidRequest("Send exactly one 'token' parameter.")
    for name, given in form.lists():
        if len(given) > 1 and name not in repeatable:
            raise InvalidRequest(f"The parameter '{name}' is repeated.")
    return values[0]


def rpt_answer(rpt: Rpt, permissions: list[Permission]) -> dict[str, Any]:
    return {
        "active": True,
        "exp": rpt.expires_at,
        "iat": rpt.issued_at,
        "client_id": rpt.client_id,
        "permissions": [
            {
                # Each under the names of both generations: UMA 1.0's and UMA 2.0's.
                "resource_set_id": permission.resource_set_id,
                "scopes": list(permission.scopes),
                "resource_id": permission.resource_set_id,
                "resource_scopes": list(permission.scopes),
                "exp": permission.expires_at,
                "iat": permission.issued_at,
            }
            for permission in permissions
        ],
    }


def access_token_answer(token: AccessToken) -> dict[str, Any]:
    """RFC 7662 2.2's fields; `sub` (the person's opaque sub) and `username` only for a token
    issued for a person: one a client holds for itself (client_credentials) has no one to name."""
    answer: dict[str, Any] = {
        "active": True,
        "scope": token.scope,
        "client_id": token.client_id,
        "exp": token.expires_at,
        "iat": token.issued_at,
        "token_type": "Bearer",
    }
    if token.user_sub is not None:
        answer["sub"] = token.user_sub
        if token.username is not None:
            answer["username"] = token.username
    return answer


def live_token_of(store: Storage, unverified: str, client_id: str, now: int) -> AccessToken | None:
    """A live PAT or AAT issued to this client: a token is shown only to the client it was issued
    to."""
    token = find_access_token(store, unverified)
    if token is None or token.client_id != client_id or token.revoked or token.expires_at <= now:
        return None
    return token


def answer(body: dict[str, Any]) -> Response:
    return json_response(body)


@bp.post("/introspect")
def introspect() -> Response:
    pat = authenticate(PROTECTION_SCOPE)
    unverified = token_parameter()
    store = storage()
    uma = runtime()
    now = uma.clock.now()
    body: dict[str, Any] = {"active": False}
    found = introspect_rpt(store, now, unverified, pat.owner, pat.client_id, uma.rpt_keys)
    if found is not None:
        rpt, permissions = found
        if rpt.is_live(now):
            body = rpt_answer(rpt, permissions)
    else:
        token = live_token_of(store, unverified, pat.client_id, now)
        if token is not None:
            body = access_token_answer(token)
    return answer(body)
