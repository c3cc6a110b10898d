"""The RPT endpoint: a client with an AAT gets a fresh requesting party token, with no permissions.

The AAT's previous RPT is revoked.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

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
    response = jsonify({"rpt": rpt})
    response.status_code = 201
    return response
