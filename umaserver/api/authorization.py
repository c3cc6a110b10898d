"""The authorization request endpoint: HTTP in, `request_authorization` decides, HTTP out."""

from __future__ import annotations

from flask import Blueprint, Response

from ..error_responses import json_response
from ..errors import NotAuthorized, RequestSubmitted, ServerError
from ..runtime import runtime
from ..services import notices
from ..services.authorization import request_authorization
from ..services.decision import sign_in_providers
from ..storage.per_request import storage
from .bearer import AUTHORIZATION_SCOPE, authenticate
from .json_body import read_json_object
from .schemas import AuthorizationRequest, load

bp = Blueprint("authorization", __name__)
_schema = AuthorizationRequest()


@bp.post("/rpt_authorization")
def authorization_request() -> Response:
    aat = authenticate(AUTHORIZATION_SCOPE)
    body = load(_schema, read_json_object())
    store = storage()
    client = store.get_client(aat.client_id)
    if client is None:  # the AAT outlived its client's row: cannot happen with foreign keys on
        raise ServerError()
    uma = runtime()
    outcome = request_authorization(
        store,
        uma.rules_for,
        now=uma.clock.now(),
        aat=aat,
        client=client,
        verifiers=uma.verifiers,
        unverified_rpt=body["rpt"],
        unverified_ticket=body["ticket"],
        claim_objects=body.get("claims", []),
        lifetimes=uma.config.lifetimes,
        rpt_keys=uma.rpt_keys,
        limits=uma.config.limits,
        server_issuer=uma.config.issuer,
        sign_in_providers=sign_in_providers(uma.config.oidc_issuers),
        jwt=uma.jwt_rpts,
        submit_request=body.get("submit_request", False),
        sharing=uma.config.sharing,
        outbox=notices.Outbox.of(uma.config),
    )
    if outcome.kind == "request_submitted":
        raise RequestSubmitted(extra={"interval": outcome.interval})
    if outcome.kind == "grant":
        # The spec's success answer: 201, Content-Type application/json;charset=UTF-8.
        return json_response(
            {"rpt": outcome.rpt}, 201, content_type="application/json;charset=UTF-8"
        )
    if outcome.kind == "need_claims":
        # Not an error: exactly the spec's shape, with no `error` member, so that a client that
        # takes any `error` for a refusal cannot misread it (docs/design.md, "Errors").
        return json_response(
            {"need_claims": [needed.as_dict() for needed in outcome.need_claims]}, 403
        )
    raise NotAuthorized(outcome.reason)
