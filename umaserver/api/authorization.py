"""The authorization request endpoint: HTTP in, `request_authorization` decides, HTTP out."""

from __future__ import annotations

import json

from flask import Blueprint, Response, current_app

from ..errors import NeedClaims, NotAuthorized, ServerError
from ..services.authorization import request_authorization
from ..storage.sqlite import get_store
from .bearer import AUTHORIZATION_SCOPE, authenticate
from .json_body import read_json_object
from .schemas import AuthorizationRequest, load

bp = Blueprint("authorization", __name__)
_schema = AuthorizationRequest()


@bp.post("/rpt_authorization")
def authorization_request() -> Response:
    aat = authenticate(AUTHORIZATION_SCOPE)
    body = load(_schema, read_json_object())
    store = get_store()
    client = store.get_client(aat.client_id)
    if client is None:  # the AAT outlived its client's row: cannot happen with foreign keys on
        raise ServerError()
    uma = current_app.extensions["uma"]
    result = request_authorization(
        store,
        uma.policies.rules,
        uma.verifiers,
        aat=aat,
        client=client,
        unverified_rpt=body["rpt"],
        unverified_ticket=body["ticket"],
        claim_objects=body.get("claims", []),
        lifetimes=current_app.config["UMA"].lifetimes,
        rpt_key=uma.rpt_key,
    )
    decision = result.decision
    if result.rpt is not None:
        # The spec's success answer: 201, Content-Type application/json;charset=UTF-8.
        return Response(
            json.dumps({"rpt": result.rpt}) + "\n",
            status=201,
            content_type="application/json;charset=UTF-8",
            headers={"Cache-Control": "no-store", "Pragma": "no-cache"},
        )
    if result.out_of_requests:
        raise NotAuthorized(
            "This ticket has had all its requests; ask the resource server for a new one."
        )
    if decision.outcome == "need_claims":
        raise NeedClaims(
            "Send the claims listed in need_claims with the same ticket.",
            extra={"need_claims": [needed.as_dict() for needed in decision.need_claims]},
        )
    raise NotAuthorized()
