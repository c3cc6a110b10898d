"""The RPT endpoint: a client with an AAT gets a fresh requesting party token, with no permissions.

The AAT's previous RPT is revoked. The answer is 200, like the token endpoint's (the spec does not
fix it, and UMA 1.0 clients such as pyuma accept nothing else).

UMA 1.0.1 folded the authorization request into this endpoint: a 1.0.1 client posts its `ticket`
(and `claim_tokens`) here. Such a body is refused (400 `invalid_request`, naming the authorization
request endpoint), never answered with a new empty RPT that would revoke the client's RPT and the
permissions it carries. Any other body, or none, is ignored as before.
"""

from __future__ import annotations

from collections.abc import Container

from flask import Blueprint, Response, request

from .. import strict_json
from ..error_responses import json_response
from ..errors import InvalidRequest
from ..runtime import runtime
from ..services.rpts import issue_rpt
from ..storage.per_request import storage
from .bearer import AUTHORIZATION_SCOPE, authenticate

bp = Blueprint("rpt", __name__)

# The members of a UMA 1.0.1 authorization request that this endpoint of UMA 1.0 never takes.
AUTHORIZATION_REQUEST_MEMBERS = ("ticket", "claim_tokens")


def _members() -> Container[str]:
    """The body's member names: a form's, or a JSON object's (with any Content-Type, or none, as
    UMA 1.0 clients send it); nothing for an empty body or any other."""
    if request.mimetype == "application/x-www-form-urlencoded":
        return request.form
    raw = request.get_data(cache=True)  # raises 413 above MAX_CONTENT_LENGTH
    if not raw.strip():
        return ()
    try:
        body = strict_json.loads(raw)
    except strict_json.StrictJSONError:
        return ()
    return body if isinstance(body, dict) else ()


def _refuse_an_authorization_request() -> None:
    asked = [name for name in AUTHORIZATION_REQUEST_MEMBERS if name in _members()]
    if asked:
        raise InvalidRequest(
            f"This RPT endpoint (UMA 1.0) takes no {' or '.join(asked)}: send the authorization"
            f" request to the authorization_request_endpoint,"
            f" {runtime().config.url('/rpt_authorization')}."
        )


@bp.post("/rpt")
def rpt_endpoint() -> Response:
    aat = authenticate(AUTHORIZATION_SCOPE)
    _refuse_an_authorization_request()
    uma = runtime()
    rpt, _ = issue_rpt(
        storage(),
        uma.clock.now(),
        aat,
        uma.rpt_key,
        uma.config.lifetimes.rpt,
        jwt=uma.jwt_rpts,
        issuer=uma.config.issuer,
    )
    return json_response({"rpt": rpt})
