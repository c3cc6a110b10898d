"""The authorization endpoint (`GET/POST /authorize`, the UMA `user_endpoint`): the authorization
code flow through Authlib's authorization server (`api.token`), for a PAT (`uma_protection`, the
signed-in owner) or an AAT (`uma_authorization`, the signed-in requesting party).

The request is checked in this order:

1. `client_id` and `redirect_uri` (each exactly once, not oversized, a known client, a redirect
   URI registered for it: `OAuthClient.check_redirect_uri`). A failure is an error page, never a
   redirect: the redirect URI cannot be trusted.
2. Everything else (repeated or oversized parameters, `response_type`, `scope`, PKCE) by the
   checks here and Authlib's: a failure goes back to the redirect URI with `error`,
   `error_description` and `state` (RFC 6749 4.1.2.1). Scopes this server does not offer beside
   one it does are left out (RFC 6749 3.3); the code, and the token response, carry the rest.
3. Sign-in (`/signin?next=` this URL), then consent: remembered per person, client and scope; a
   consent page otherwise, whose form (CSRF token, `decision` allow or deny) posts back to the same
   URL.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from authlib.oauth2 import OAuth2Error
from flask import Blueprint, Response, abort, request
from werkzeug.wrappers import Response as BaseResponse

from ..api.bearer import AUTHORIZATION_SCOPE, PROTECTION_SCOPE
from ..api.code_grants import OAuthClient
from ..api.token import authorization_error_redirect, authorization_server
from ..runtime import runtime
from ..services import consents
from ..services.account_claims import account_values
from ..storage.per_request import storage
from ..storage.records import Client, User
from . import csrf, sessions
from .rendering import render

bp = Blueprint("authorize", __name__, template_folder="templates")
log = logging.getLogger("umaserver.consent")

# The authorization request's parameters, none of which may come twice (RFC 6749 3.1), and how
# long each may be.
LIMITS = {
    "client_id": 256,
    "redirect_uri": 2000,
    "response_type": 64,
    "scope": 512,
    "state": 1024,
    "code_challenge": 128,
    "code_challenge_method": 16,
}
MAX_QUERY = 4096

SCOPE_WORDS = {
    PROTECTION_SCOPE: "register and manage resource sets for you",
    AUTHORIZATION_SCOPE: "ask for access on your behalf",
}


def scope_words(scope: str) -> list[str]:
    """Each scope name of `scope` in words, for people."""
    return [SCOPE_WORDS.get(name, name) for name in scope.split(" ") if name]


def _checked_client() -> tuple[Client, str]:
    """The client and the redirect URI of this request, or a 400 page (never a redirect)."""
    parameters = request.args
    ids = parameters.getlist("client_id")
    if not ids:
        abort(400, description="The application did not say who it is (client_id is missing).")
    if len(ids) > 1 or len(ids[0]) > LIMITS["client_id"]:
        abort(
            400, description="The application's client_id is given more than once or is too long."
        )
    client = storage().get_client(ids[0])
    if client is None:
        abort(400, description="The application that sent you here is not known to this server.")
    uris = parameters.getlist("redirect_uri")
    if not uris:
        abort(400, description="The application did not say where to send you back (redirect_uri).")
    if len(uris) > 1 or len(uris[0]) > LIMITS["redirect_uri"]:
        abort(400, description="The redirect_uri is given more than once or is too long.")
    if not OAuthClient(client).check_redirect_uri(uris[0]):
        abort(
            400,
            description=(
                "The address the application asked to send you back to is not registered for it,"
                " so you are not sent there."
            ),
        )
    return client, uris[0]


def _parameter_problem() -> str | None:
    """Repeated or oversized parameters (after client_id and redirect_uri are known good)."""
    if len(request.query_string) > MAX_QUERY:
        return f"The authorization request is longer than {MAX_QUERY} bytes."
    for name, limit in LIMITS.items():
        values = request.args.getlist(name)
        if len(values) > 1:
            return f"The parameter {name} is given more than once (RFC 6749 3.1)."
        if values and len(values[0]) > limit:
            return f"The parameter {name} is longer than {limit} characters."
    return None


def _state() -> str | None:
    values = request.args.getlist("state")
    return values[0] if len(values) == 1 and len(values[0]) <= LIMITS["state"] else None


def _origin(uri: str) -> str:
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc}"


def _issue(grant: Any, grant_user: User | None) -> Response:
    """Authlib's answer for the grant already checked: the code (or access_denied) sent back to
    the redirect URI."""
    response: Response = authorization_server().create_authorization_response(
        grant_user=grant_user, grant=grant
    )
    return response


@bp.route("/authorize", methods=["GET", "POST"])
def authorize() -> BaseResponse:
    if request.method == "POST":
        csrf.require()
    client, redirect_uri = _checked_client()
    problem = _parameter_problem()
    if problem is not None:
        return authorization_error_redirect(redirect_uri, "invalid_request", problem, _state())
    user = sessions.current_user()
    try:
        grant = authorization_server().get_consent_grant(end_user=user)
    except OAuth2Error as error:
        return authorization_server().handle_error_response(None, error)
    if user is None:
        return sessions.redirect_to_signin()
    scope: str = grant.request.scope
    if request.method == "POST":
        decision = request.form.getlist("decision")
        if decision not in (["allow"], ["deny"]):
            abort(400, description="Choose Allow or Deny.")
        log.info(
            "consent %s client_id=%r username=%r scope=%r",
            "given" if decision == ["allow"] else "refused",
            client.client_id,
            user.username,
            scope,
        )
        if decision == ["deny"]:
            return _issue(grant, None)
        consents.remember_consent(
            storage(), int(runtime().clock.now()), user.sub, client.client_id, scope
        )
        return _issue(grant, user)
    if consents.consent_for(storage(), user.sub, client.client_id, scope):
        return _issue(grant, user)
    return render(
        "pages/consent.html",
        form_action=(_origin(redirect_uri),),
        client=client,
        client_uri=client.metadata.get("client_uri"),
        scopes=scope_words(scope),
        user=user,
        # What this server tells owners' rules about the person when the app asks for access for
        # them (account claims): said before the person allows it.
        account=account_values(user),
        action=request.full_path,
    )
