"""The requesting party claims endpoint (`GET/POST /rqp_claims`, advertised as
`requesting_party_claims_endpoint`): step 2 of the redirect profile, for people.

The client sends the requesting party here with `scope` (the claims handle of its
`redirect_required` entry), `redirect_uri`, `client_id` and `state`. Checked in this order, each a
400 page and never a redirect: every parameter at most once and not oversized; a known client and a
redirect URI registered for it by exact string match; a state; a live handle of this client; the
browser the handle was first opened in (`services.gathering.arrive`).

Then the person signs in (here, or at an external OpenID Connect provider: `external_signin`),
sees which client asks for what on which resource set (names from registration marked as not
verified; the owner is not shown), and chooses Share or Cancel: the form posts back to the same URL
with its CSRF token, and the answer is a `302` to `redirect_uri` with `access=granted|denied` and
the state unchanged, or `error=invalid_request|server_error` and the state.
"""

from __future__ import annotations

import logging
import secrets
from urllib.parse import urlencode, urlsplit

from flask import Blueprint, Response, abort, request
from werkzeug.wrappers import Response as BaseResponse

from ..runtime import runtime
from ..services import gathering
from ..storage.errors import StorageUnavailable
from ..storage.per_request import storage
from ..storage.records import User
from . import csrf, external_signin, sessions
from .rendering import render

bp = Blueprint("rqp_claims", __name__, template_folder="templates")
log = logging.getLogger("umaserver.gathering")

PATH = "/rqp_claims"
# The browser a handle is bound to on arrival holds this cookie's random id.
BINDING = "umaserver_rqp"
LIMITS = {"scope": 128, "client_id": 256, "redirect_uri": 2000, "state": 1024}


def _parameter(name: str) -> str:
    values = request.args.getlist(name)
    if len(values) > 1:
        abort(400, description=f"The parameter {name} is given more than once.")
    value = values[0] if values else ""
    if len(value) > LIMITS[name]:
        abort(400, description=f"The parameter {name} is longer than {LIMITS[name]} characters.")
    return value


def binding() -> str:
    """This browser's binding id (made, and set as a cookie, when it has none)."""
    name = sessions.cookie_name(BINDING)
    found = request.cookies.get(name)
    if not found or len(found) > 64:
        found = secrets.token_urlsafe(32)
        sessions.queue_cookie(name, found)
    return found


def _visit() -> gathering.Visit:
    # The client and its redirect URI first: until both are known good, nothing else is said.
    client_id, redirect_uri = _parameter("client_id"), _parameter("redirect_uri")
    try:
        gathering.check_client(storage(), client_id, redirect_uri)
        return gathering.arrive(
            storage(),
            client_id=client_id,
            redirect_uri=redirect_uri,
            state=_parameter("state"),
            handle_value=_parameter("scope"),
            binding=binding(),
            now=runtime().clock.now(),
        )
    except gathering.ArrivalRefused as refused:
        if refused.over and request.method == "POST":
            raise _Over(redirect_uri, _parameter("state")) from None
        abort(400, description=refused.description)


class _Over(Exception):
    def __init__(self, redirect_uri: str, state: str) -> None:
        super().__init__(redirect_uri)
        self.redirect_uri = redirect_uri
        self.state = state


def back_to_client(redirect_uri: str, params: dict[str, str]) -> Response:
    """A 302 to the client's (checked) redirect URI with `params` added to its query; the query it
    had is kept as it was."""
    base = redirect_uri.split("#", 1)[0]  # registered redirect URIs have no fragment
    joiner = "&" if urlsplit(base).query else ("" if base.endswith("?") else "?")
    response = Response(status=302)
    response.headers["Location"] = base + joiner + urlencode(params)
    return response


def origin(uri: str) -> str:
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc}"


def linked_identity(
    user: User | None, identity: external_signin.ExternalIdentity | None
) -> tuple[gathering.Identity | None, bool]:
    """`identity` (of this browser's last external sign-in) as a gathering source when it is
    linked to `user`; and whether it is present but linked to nobody."""
    if identity is None:
        return None, False
    linked = storage().linked_user(identity.issuer, identity.subject)
    if linked is None:
        return None, True
    if user is not None and linked == user.sub:
        return gathering.Identity(identity.issuer, identity.subject, identity.claims), False
    return None, False


@bp.get(PATH)
def rqp_claims_page() -> BaseResponse:
    return share_page(_visit())


def share_page(visit: gathering.Visit, kept_for_the_client: bool = False) -> Response:
    """The Share page for a visit (this endpoint's, or UMA 2.0's claims interaction endpoint's,
    whose claims the client then keeps in a PCT: `kept_for_the_client`): who is signed in, the
    ways to sign in, Share and Cancel, posting back to this page."""
    user = sessions.current_user()
    identity = external_signin.current_identity()
    _, unlinked = linked_identity(user, identity)
    here = request.full_path
    return render(
        "pages/rqp_claims.html",
        form_action=(origin(visit.redirect_uri),),
        visit=visit,
        kept_for_the_client=kept_for_the_client,
        user=user,
        identity=identity,
        unlinked=unlinked,
        signin_url=sessions.signin_url(here),
        providers=[
            (provider, external_signin.start_url(provider.index, here))
            for provider in external_signin.providers()
        ],
        action=here,
    )


@bp.post(PATH)
def rqp_claims_choice() -> BaseResponse:
    csrf.require()
    try:
        visit = _visit()
    except _Over as over:
        # Expired or replaced while the person signed in: the client may start again.
        return back_to_client(over.redirect_uri, {"error": "invalid_request", "state": over.state})
    decision = request.form.getlist("decision")
    if decision not in (["share"], ["cancel"]):
        abort(400, description="Choose Share or Cancel.")
    user = sessions.current_user()
    identity, unlinked = linked_identity(user, external_signin.current_identity())
    config, now = runtime().config, runtime().clock.now()
    try:
        if decision == ["cancel"] or (user is None and unlinked):
            result = gathering.cancel(
                storage(), visit, now=now, username=user.username if user else None
            )
        elif user is None:
            abort(400, description="Sign in first: nothing is shared without knowing who you are.")
        else:
            result = gathering.share(
                storage(),
                runtime().rules_for,
                visit,
                user=user,
                identity=identity,
                server_issuer=config.issuer,
                verifiers=runtime().verifiers,
                limits=config.limits,
                now=now,
            )
    except gathering.ArrivalRefused as refused:
        abort(400, description=refused.description)
    except gathering.GatheringFailed as failed:
        log.info("gathering error=%s client=%s", failed.error, visit.client.client_id)
        return back_to_client(visit.redirect_uri, {"error": failed.error, "state": visit.state})
    except StorageUnavailable:
        log.warning("gathering error=server_error client=%s", visit.client.client_id)
        return back_to_client(visit.redirect_uri, {"error": "server_error", "state": visit.state})
    return back_to_client(visit.redirect_uri, {"access": result.access, "state": visit.state})
