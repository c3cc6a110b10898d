"""Token introspection (RFC 7662) for resource servers, with a PAT.

An RPT answers with its permissions on the asking owner's and resource server's sets only; a PAT or
AAT is visible only to the client it was issued to; anything else is `{"active": false}`.
"""

from __future__ import annotations

import time
from typing import Any

from flask import Blueprint, Response, jsonify, request

from ..errors import InvalidRequest
from ..storage.sqlite import get_store
from .bearer import PROTECTION_SCOPE, authenticate

bp = Blueprint("introspection", __name__)


def _token_parameter() -> str:
    if request.mimetype != "application/x-www-form-urlencoded":
        raise InvalidRequest(
            "Send the token as a form: Content-Type application/x-www-form-urlencoded."
        )
    values = request.form.getlist("token")
    if len(values) != 1 or not values[0]:
        raise InvalidRequest("Send exactly one 'token' parameter.")
    for name in request.form:
        if len(request.form.getlist(name)) > 1:
            raise InvalidRequest(f"The parameter '{name}' is repeated.")
    return values[0]


@bp.post("/introspect")
def introspect() -> Response:
    pat = authenticate(PROTECTION_SCOPE)
    unverified = _token_parameter()
    store = get_store()
    now = time.time()
    answer: dict[str, Any] = {"active": False}
    rpt = store.get_rpt(unverified)
    if rpt is not None:
        if rpt.is_live(now):
            answer = {
                "active": True,
                "exp": rpt.expires_at,
                "iat": rpt.issued_at,
                "client_id": rpt.client_id,
                "permissions": [
                    {
                        "resource_set_id": permission.resource_set_id,
                        "scopes": list(permission.scopes),
                        "exp": permission.expires_at,
                    }
                    for permission in store.permissions_for(rpt, pat.owner, pat.client_id)
                ],
            }
    else:
        token = store.get_access_token(unverified)
        if (
            token is not None
            and token.client_id == pat.client_id
            and not token.revoked
            and token.expires_at > now
        ):
            answer = {
                "active": True,
                "scope": token.scope,
                "client_id": token.client_id,
                "exp": token.expires_at,
                "iat": token.issued_at,
                "token_type": "Bearer",
            }
    response = jsonify(answer)
    response.headers["Cache-Control"] = "no-store"
    return response
