"""The person's own page (`/account`): the consents they gave, each with a form to withdraw it
(which revokes the tokens issued under it: `services.consents.withdraw_consent`), and the claims
they shared that a client keeps for its later requests (UMA 2.0 PCTs), each withdrawn the same
way (`services.pcts.withdraw`). And the owner's switch "Let people ask me for access" (issue 25:
`services.owner_requests`), `POST /account/requests`."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from flask import Blueprint, abort, redirect, request
from werkzeug.wrappers import Response as BaseResponse

from ..runtime import runtime
from ..services import consents, owner_requests, pcts
from ..storage.per_request import storage
from . import csrf, sessions
from .authorize import SCOPE_WORDS
from .rendering import render

bp = Blueprint("account", __name__, template_folder="templates")
log = logging.getLogger("umaserver.consent")


def _when(moment: int) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M UTC")


@bp.get("/account")
@sessions.signin_required
def account() -> BaseResponse:
    user = sessions.current_user()
    assert user is not None
    rows = []
    for consent in consents.consents_of(storage(), user.sub):
        client = storage().get_client(consent.client_id)
        rows.append(
            {
                "client_id": consent.client_id,
                "client_name": client.name if client is not None else consent.client_id,
                "scope": consent.scope,
                "words": SCOPE_WORDS.get(consent.scope, consent.scope),
                "when": _when(consent.granted_at),
            }
        )
    kept = [
        {
            "digest": found.digest,
            "client_name": found.client_name,
            "claims": ", ".join(found.claims) or "nothing",
            "when": _when(found.created_at),
            "until": _when(found.expires_at),
        }
        for found in pcts.kept_claims(storage(), user.sub, runtime().clock.now())
    ]
    sharing = runtime().config.sharing
    return render(
        "pages/account.html",
        user=user,
        consents=rows,
        kept=kept,
        server_takes=sharing.requests,
        takes=owner_requests.takes_requests(storage(), user.sub, sharing),
    )


def _one(name: str) -> str:
    values = request.form.getlist(name)
    if len(values) != 1 or not values[0] or len(values[0]) > 256:
        abort(400, description="This form is incomplete. Go back, reload the page and try again.")
    return values[0]


@bp.post("/account/withdraw")
@sessions.signin_required
def withdraw() -> BaseResponse:
    csrf.require()
    user = sessions.current_user()
    assert user is not None
    client_id, scope = _one("client_id"), _one("scope")
    if consents.withdraw_consent(storage(), user.sub, client_id, scope):
        log.info(
            "consent withdrawn client_id=%r username=%r scope=%r", client_id, user.username, scope
        )
    return redirect(runtime().config.url("/account"), 303)


@bp.post("/account/pcts/withdraw")
@sessions.signin_required
def withdraw_pct() -> BaseResponse:
    csrf.require()
    user = sessions.current_user()
    assert user is not None
    if pcts.withdraw(storage(), user.sub, _one("pct")):
        log.info("shared claims withdrawn username=%r", user.username)
    return redirect(runtime().config.url("/account"), 303)


@bp.post("/account/requests")
@sessions.signin_required
def takes_requests() -> BaseResponse:
    """The switch: the checkbox `takes_requests` ticked (value "yes") or not."""
    csrf.require()
    user = sessions.current_user()
    assert user is not None
    sent = request.form.getlist("takes_requests")
    if len(sent) > 1 or (sent and sent[0] != "yes"):
        abort(400, description="This form is incomplete. Go back, reload the page and try again.")
    storage().set_takes_requests(user.sub, bool(sent))
    log.info("requests %s username=%r", "on" if sent else "off", user.username)
    return redirect(runtime().config.url("/account") + "#requests", 303)
