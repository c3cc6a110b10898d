"""UMA 2.0's claims interaction endpoint (`GET/POST /claims_interaction`, advertised as
`claims_interaction_endpoint`, Grant section 3.3.2): the redirect profile's sign-in and Share
page for a person a client sends after `need_info` with `redirect_user`.

The client sends `client_id`, `ticket`, `claims_redirect_uri` (one of its registered claims
redirect URIs; it may be left out when it has exactly one) and `state`. Checked in this order,
each a 400 page and never a redirect: every parameter at most once and not oversized; a known
client and a claims redirect URI registered for it; then the ticket (an error back to the client).
The person signs in (here or at an external provider), sees which client asks for what on which
sets, and that what they share stays with that client for later requests (a PCT they can withdraw
on /account), and chooses Share or Cancel (CSRF-protected, posted back to the same URL). Share
answers `302 claims_redirect_uri?authorization_state=claims_submitted&ticket=NEW&state=...`;
Cancel `error=access_denied&state=...` (`services.claims_interaction`).
"""

from __future__ import annotations

import logging

from flask import Blueprint, Response, abort, request
from werkzeug.wrappers import Response as BaseResponse

from ..runtime import runtime
from ..services import claims_interaction
from ..services.gathering import ArrivalRefused, GatheringFailed, Visit
from ..storage.errors import StorageUnavailable
from ..storage.per_request import storage
from . import csrf, external_signin, sessions
from .rqp_claims import back_to_client, binding, linked_identity, share_page

bp = Blueprint("claims_interaction", __name__, template_folder="templates")
log = logging.getLogger("umaserver.gathering")

PATH = "/claims_interaction"
LIMITS = {"ticket": 256, "client_id": 256, "claims_redirect_uri": 2000, "state": 1024}


def _parameter(name: str) -> str:
    values = request.args.getlist(name)
    if len(values) > 1:
        abort(400, description=f"The parameter {name} is given more than once.")
    value = values[0] if values else ""
    if len(value) > LIMITS[name]:
        abort(400, description=f"The parameter {name} is longer than {LIMITS[name]} characters.")
    return value


def _back(redirect_uri: str, state: str, params: dict[str, str]) -> Response:
    return back_to_client(redirect_uri, {**params, **({"state": state} if state else {})})


def _visit() -> Visit | Response:
    """The checked visit, or (for a ticket that is over) the answer sending the person back."""
    client_id, uri = _parameter("client_id"), _parameter("claims_redirect_uri")
    state, redirect_uri = _parameter("state"), ""
    try:
        # The client and its claims redirect URI first: until both are known good, nothing else
        # is said.
        _, redirect_uri = claims_interaction.check_client(storage(), client_id, uri)
        return claims_interaction.arrive(
            storage(),
            client_id=client_id,
            claims_redirect_uri=uri,
            state=state,
            ticket_value=_parameter("ticket"),
            binding=binding(),
            now=runtime().clock.now(),
            lifetime=runtime().config.lifetimes.claims_handle,
        )
    except ArrivalRefused as refused:
        if not refused.over:
            abort(400, description=refused.description)
        return _back(redirect_uri, state, {"error": "invalid_request"})


@bp.get(PATH)
def claims_interaction_page() -> BaseResponse:
    visit = _visit()
    if isinstance(visit, Response):
        return visit
    return share_page(visit, kept_for_the_client=True)


@bp.post(PATH)
def claims_interaction_choice() -> BaseResponse:
    csrf.require()
    visit = _visit()
    if isinstance(visit, Response):
        return visit
    decision = request.form.getlist("decision")
    if decision not in (["share"], ["cancel"]):
        abort(400, description="Choose Share or Cancel.")
    user = sessions.current_user()
    identity, unlinked = linked_identity(user, external_signin.current_identity())
    config, now = runtime().config, runtime().clock.now()
    try:
        if decision == ["cancel"] or (user is None and unlinked):
            shared = claims_interaction.cancel(
                storage(), visit, now=now, username=user.username if user else None
            )
        elif user is None:
            abort(400, description="Sign in first: nothing is shared without knowing who you are.")
        else:
            shared = claims_interaction.share(
                storage(),
                runtime().rules_for,
                visit,
                user=user,
                identity=identity,
                server_issuer=config.issuer,
                limits=config.limits,
                now=now,
            )
    except ArrivalRefused as refused:
        abort(400, description=refused.description)
    except GatheringFailed as failed:
        log.info("claims interaction error=%s client=%s", failed.error, visit.client.client_id)
        return _back(visit.redirect_uri, visit.state, {"error": failed.error})
    except StorageUnavailable:
        log.warning("claims interaction error=server_error client=%s", visit.client.client_id)
        return _back(visit.redirect_uri, visit.state, {"error": "server_error"})
    if shared.outcome == "access_denied":
        return _back(visit.redirect_uri, visit.state, {"error": "access_denied"})
    assert shared.ticket is not None
    return _back(
        visit.redirect_uri,
        visit.state,
        {"authorization_state": "claims_submitted", "ticket": shared.ticket},
    )
