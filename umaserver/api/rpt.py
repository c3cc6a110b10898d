"""The RPT endpoint: a client with an AAT gets a fresh requesting party token, with no permissions.

The AAT's previous RPT is revoked. The answer is 200, like the token endpoint's (the spec does not
fix it, and UMA 1.0 clients such as pyuma accept nothing else).
"""

from __future__ import annotations

from flask import Blueprint, Response

from ..error_responses import json_response
from ..runtime import runtime
from ..services.rpts import issue_rpt
from ..storage.per_request import storage
from .bearer import AUTHORIZATION_SCOPE, authenticate

bp = Blueprint("rpt", __name__)


@bp.post("/rpt")
def rpt_endpoint() -> Response:
    aat = authenticate(AUTHORIZATION_SCOPE)
    uma = runtime()
    rpt, _ = issue_rpt(storage(), uma.clock.now(), aat, uma.rpt_key, uma.config.lifetimes.rpt)
    return json_response({"rpt": rpt})
