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
from ..storage.per_request import storage
from ..storage.records import AccessToken, Permission, Rpt
from .bearer import PROTECTION_SCOPE, authenticate

bp = Blueprint("introspection", __name__)


def _token_parameter() -> str:
    if request.mimetype != "application/x-www-form-urlencoded":
        raise InvalidRequest(
            "Send the token as a form: Content-Type application/x-www-form-urlencoded."
        )
    form = request.form
    values = form.getlist("token")
    if len(values) != 1 or not values[0]:
        raise InvalidRequest("Send exactly one 'token' parameter.")
    for name, given in form.lists():
        if len(given) > 1:
            raise InvalidRequest(f"The parameter '{name}' is repeated.")
    return values[0]


def _rpt_answer(rpt: Rpt, permissions: list[Permission]) -> dict[str, Any]:
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


def _access_token_answer(token: AccessToken) -> dict[str, Any]:
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


@bp.post("/introspect")
def introspect() -> Response:
    pat = authenticate(PROTECTION_SCOPE)
    unverified = _token_parameter()
    store = storage()
    now = runtime().clock.now()
    answer: dict[str, Any] = {"active": False}
    found = introspect_rpt(store, now, unverified, pat.owner, pat.client_id)
    if found is not None:
        rpt, permissions = found
        if rpt.is_live(now):
            answer = _rpt_answer(rpt, permissions)
    else:
        token = find_access_token(store, unverified)
        # A PAT or an AAT is shown only to the client it was issued to.
        if (
            token is not None
            and token.client_id == pat.client_id
            and not token.revoked
            and token.expires_at > now
        ):
            answer = _access_token_answer(token)
    return json_response(answer)
