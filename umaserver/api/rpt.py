"""The RPT endpoint: a client with an AAT gets a fresh requesting party token, with no permissions.

The AAT's previous RPT is revoked.
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify

from ..services.authorization import issue_rpt
from ..storage.sqlite import get_store
from .bearer import AUTHORIZATION_SCOPE, authenticate

bp = Blueprint("rpt", __name__)


@bp.post("/rpt")
def rpt_endpoint() -> Response:
    aat = authenticate(AUTHORIZATION_SCOPE)
    rpt, _ = issue_rpt(
        get_store(),
        aat,
        current_app.extensions["uma"].rpt_key,
        current_app.config["UMA"].lifetimes.rpt,
    )
    response = jsonify({"rpt": rpt})
    response.status_code = 201
    response.headers["Cache-Control"] = "no-store"
    return response
