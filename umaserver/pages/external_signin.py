"""Signing in at an external OpenID Connect provider: this server as the relying party of each
sign-in provider of the config (`[[oidc_issuers]]` with a `client_id`), through Authlib's Flask
client.

- `GET /rqp_claims/external/<index>?next=<path>` sends the person to provider `index` (of
  `providers()`): authorization code with PKCE S256, a fresh `state` and `nonce` kept in Flask's
  signed session cookie (its own name, `HttpOnly`, `SameSite=Lax`, `Secure` with an https issuer).
- `GET /rqp_claims/callback` (the redirect URI to register at the provider): Authlib checks the
  state and exchanges the code (with the PKCE verifier), bounded in time and size; the ID token
  is verified with this server's verifier (`claims.id_tokens.verify_id_token`, addressed to our
  `client_id` there) and its nonce compared; userinfo is read when the provider has it (its `sub`
  must match). The identity is remembered in the session; linked to a local user
  (`user link`), it signs that user in, else nobody is signed in. Then a 303 to `next`.

What the `/rqp_claims` page calls: `providers()`, `start_url(index, next_path)`,
`current_identity()`, `forget_identity()` (sign-in and sign-out forget it too).

Every failure is an error page (400 for the person's or provider's bad answers, 502 for a
provider answering what we cannot use, 503 for one we cannot reach), with one log line per outcome.
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import quote

import requests
import urllib3
from authlib.integrations.base_client import OAuthError
from flask import Blueprint, Flask, Request, abort, current_app, redirect, request, session
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface
from werkzeug.wrappers import Response as BaseResponse

from .. import strict_json
from ..claims.id_tokens import verify_id_token
from ..claims.model import ClaimsError, ClaimsUnavailable
from ..claims.oidc_discovery import (
    DiscoveryError,
    ProviderEndpoints,
)
from ..claims.oidc_issuers import OidcIssuer
from ..config import Config
from ..http_bodies import BodyError
from ..runtime import runtime
from ..services.external_identities import ExternalIdentity, bounded, person_claims
from ..storage.per_request import storage
from . import sessions
from .sign_in_providers import Providers, client_name

__all__ = [
    "ExternalIdentity",
    "SignInProvider",
    "bp",
    "current_identity",
    "forget_identity",
    "init_app",
    "providers",
    "start_url",
]

bp = Blueprint("external_signin", __name__, template_folder="templates")
log = logging.getLogger("umaserver.gathering")

CALLBACK = "/rqp_claims/callback"
COOKIE = "umaserver_rp"
_EXTENSION = "umaserver.external_signin"
# Seconds a started sign-in may take at the provider (the state's life in the session).
STATE_LIFETIME = 600


@dataclass(frozen=True)
class SignInProvider:
    """A "Sign in with ..." button: `index` for `start_url`."""

    index: int
    issuer: str
    display_name: str


def init_app(app: Flask, config: Config) -> None:
    """Registers the sign-in providers with Authlib, and the session cookie their state lives in
    (the pages' own cookies are `umaserver_session` and `umaserver_presession`)."""
    secure = config.issuer.startswith("https://")
    app.config.update(
        SESSION_COOKIE_NAME=f"__Host-{COOKIE}" if secure else COOKIE,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=secure,
        SESSION_COOKIE_PATH="/",
    )
    app.session_interface = CookieOnlyWhenSent()
    app.extensions[_EXTENSION] = Providers(app, config)


class CookieOnlyWhenSent(SecureCookieSessionInterface):
    """Flask's signed-cookie session, read only when the request brought a cookie: an API call
    (almost every request) brings none and gets an empty session without the signing serializer
    Flask would build first for each request."""

    def open_session(self, app: Flask, request: Request) -> SecureCookieSession | None:
        if "HTTP_COOKIE" not in request.environ:
            return self.session_class()
        return super().open_session(app, request)


def _providers() -> Providers:
    found: Providers = current_app.extensions[_EXTENSION]
    return found


# -- what the /rqp_claims page calls ---------------------------------------------------------


def providers() -> list[SignInProvider]:
    """The sign-in providers, for "Sign in with ..." buttons."""
    return [
        SignInProvider(index, issuer.issuer, issuer.display_name)
        for index, issuer in enumerate(_providers().issuers)
    ]


def start_url(index: int, next_path: str) -> str:
    """Where a "Sign in with ..." button leads: a sign-in at provider `index`, back to
    `next_path` (a path of this server) afterwards."""
    return runtime().config.url(f"/rqp_claims/external/{index}?next={quote(next_path, safe='/')}")


def current_identity() -> ExternalIdentity | None:
    """The identity of the latest external sign-in in this browser, or None (none, or older than
    `[sessions] absolute_timeout`). Whether it is linked to a user:
    `storage().linked_user(identity.issuer, identity.subject)`."""
    identity = ExternalIdentity.from_session(session.get(sessions.EXTERNAL_IDENTITY))
    if identity is None:
        return None
    config = runtime().config
    if runtime().clock.now() - identity.signed_at > config.sessions.absolute_timeout:
        forget_identity()
        return None
    return identity


def forget_identity() -> None:
    """Forgets the identity of the latest external sign-in in this browser."""
    sessions.forget_external_identity()


# -- the routes -----------------------------------------------------------------------------


class _Failed(Exception):
    """A sign-in that ends with an error page: `status`, words for people, a reason for the log."""

    def __init__(self, status: int, message: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.message, self.reason = status, message, reason


def _one_arg(name: str) -> str | None:
    values = request.args.getlist(name)
    if len(values) > 1:
        abort(400, description=f"The parameter {name} was sent more than once.")
    return values[0] if values else None


def _remote(index: int, issuer: OidcIssuer) -> tuple[Any, ProviderEndpoints]:
    try:
        return _providers().remote(index)
    except DiscoveryError as error:
        log.warning(
            "external sign-in outcome=unavailable issuer=%r: discovery failed: %s",
            issuer.issuer,
            error,
        )
        abort(503)


@bp.get("/rqp_claims/external/<int:index>")
def start(index: int) -> BaseResponse:
    issuers = _providers().issuers
    if index >= len(issuers):
        abort(404)
    next_path = sessions.safe_next(_one_arg("next"))
    if next_path is None:
        abort(400, description="This sign-in link is broken: it does not say where to go after.")
    issuer = issuers[index]
    remote, _ = _remote(index, issuer)
    redirect_uri = runtime().config.url(CALLBACK)
    made = remote.create_authorization_url(redirect_uri)
    # One sign-in in flight per provider in this browser: an abandoned one's state goes, so the
    # cookie stays small however often people start over.
    for key in [k for k in session if k.startswith(f"_state_{client_name(index)}_")]:
        session.pop(key)
    remote.framework.expires_in = STATE_LIFETIME
    url = made.pop("url")  # not kept in the cookie
    remote.save_authorize_data(redirect_uri=redirect_uri, next=next_path, **made)
    log.info("external sign-in outcome=started issuer=%r", issuer.issuer)
    return redirect(url, 303)


@bp.get(CALLBACK)
def callback() -> BaseResponse:
    unverified_state = _one_arg("state")
    found = _pending(unverified_state)
    if found is None:
        log.info("external sign-in outcome=refused: no sign-in of this browser has that state")
        abort(
            400,
            description="This sign-in was not started in this browser, or it is over or out of"
            " date. Start again.",
        )
    index, data = found
    issuer = _providers().issuers[index]
    try:
        identity = _finish(index, issuer, data)
    except _Failed as failed:
        log.info(
            "external sign-in outcome=failed issuer=%r status=%d: %s",
            issuer.issuer,
            failed.status,
            failed.reason,
        )
        _clear(index, unverified_state)
        _abort(failed.status, failed.message)
    user_sub = storage().linked_user(identity.issuer, identity.subject)
    user = storage().get_user(user_sub) if user_sub is not None else None
    if user is not None:
        sessions.sign_in(user)
    else:
        sessions.sign_out()
    session[sessions.EXTERNAL_IDENTITY] = identity.to_session()
    log.info(
        "external sign-in outcome=%s issuer=%r subject=%r username=%r%s",
        "linked" if user is not None else "unlinked",
        identity.issuer,
        identity.subject,
        user.username if user is not None else None,
        f" dropped_claims={list(identity.dropped)!r}" if identity.dropped else "",
    )
    return redirect(runtime().config.url(str(data["next"])), 303)


def _abort(status: int, message: str) -> NoReturn:
    abort(status, description=message)


def _pending(unverified_state: str | None) -> tuple[int, dict[str, Any]] | None:
    """The provider and the saved data of the sign-in this browser started with that state."""
    if not unverified_state or len(unverified_state) > 128:
        return None
    providers = _providers()
    for index in range(len(providers.issuers)):
        if index not in providers.endpoints:
            continue
        remote = providers.oauth.create_client(client_name(index))
        data = remote.framework.get_state_data(session, unverified_state)
        if isinstance(data, dict) and isinstance(data.get("next"), str):
            return index, data
    return None


def _clear(index: int, state: str | None) -> None:
    remote = _providers().oauth.create_client(client_name(index))
    remote.framework.clear_state_data(session, state)


def _finish(index: int, issuer: OidcIssuer, data: dict[str, Any]) -> ExternalIdentity:
    """The identity the provider vouches for; _Failed when it cannot be had."""
    name = issuer.display_name
    unverified_error = _one_arg("error")
    if unverified_error is not None:
        shown = unverified_error[:40]
        raise _Failed(
            400,
            f"The sign-in at {name} was not completed ({shown}).",
            f"the provider answered error={shown!r}",
        )
    remote, endpoints = _providers().remote(index)
    try:
        # Checks the state again and clears it (one use), and exchanges the code.
        token = remote.authorize_access_token()
    except OAuthError as error:
        raise _Failed(
            400,
            f"{name} did not accept this sign-in. Start again.",
            f"the code exchange was refused: {str(error.error)[:40]}",
        ) from error
    except (requests.Timeout, requests.ConnectionError) as error:
        raise _Failed(503, "", f"the token endpoint could not be reached: {error}") from error
    except (requests.RequestException, urllib3.exceptions.HTTPError, ValueError) as error:
        # BodyError (too large, too slow) is a ValueError, as is a body that is not JSON.
        raise _Failed(502, "", f"the token endpoint's answer is unusable: {error}") from error
    claims = _verified_id_token(issuer, token, str(data.get("nonce", "")))
    userinfo = (
        _userinfo(remote, endpoints, token, claims["sub"]) if endpoints.userinfo_endpoint else None
    )
    kept, dropped = bounded(person_claims(claims, userinfo))
    return ExternalIdentity(
        issuer.issuer, claims["sub"], name, kept, runtime().clock.now(), dropped
    )


def _verified_id_token(issuer: OidcIssuer, token: dict[str, Any], nonce: str) -> dict[str, Any]:
    config = runtime().config
    unverified = token.get("id_token")
    if unverified is None:
        raise _Failed(502, "", "the token endpoint's answer has no id_token")
    try:
        claims = verify_id_token(
            unverified,
            [issuer],
            runtime().verifiers.key_sets,
            now=runtime().clock.now(),
            skew=config.claims.clock_skew,
            max_lifetime=config.claims.id_token_max_lifetime,
            audiences=[str(issuer.client_id)],
        )
    except ClaimsUnavailable as error:
        raise _Failed(503, "", str(error)) from error
    except ClaimsError as error:
        raise _Failed(
            400, f"The answer of {issuer.display_name} could not be verified.", str(error)
        ) from error
    # OpenID Connect Core 1.0, 3.1.3.7 (11): the nonce must be the one this browser's sign-in
    # sent, or a token obtained elsewhere (injected into this browser's flow) would be believed.
    sent = claims.get("nonce")
    if not nonce or not isinstance(sent, str) or not hmac.compare_digest(sent, nonce):
        raise _Failed(
            400,
            f"The answer of {issuer.display_name} was not for this sign-in. Start again.",
            "the ID token's nonce is not the one sent",
        )
    return claims


def _userinfo(
    remote: Any, endpoints: ProviderEndpoints, token: dict[str, Any], subject: str
) -> dict[str, Any]:
    try:
        response = remote.get(endpoints.userinfo_endpoint, token=token)
    except (requests.Timeout, requests.ConnectionError) as error:
        raise _Failed(503, "", f"the userinfo endpoint could not be reached: {error}") from error
    except (
        requests.RequestException,
        urllib3.exceptions.HTTPError,
        BodyError,
        OAuthError,
    ) as error:
        raise _Failed(502, "", f"the userinfo answer is unusable: {error}") from error
    if response.status_code != 200:
        raise _Failed(502, "", f"the userinfo endpoint answered HTTP {response.status_code}")
    try:
        userinfo = strict_json.loads_object(response.content)
    except strict_json.StrictJSONError as error:
        raise _Failed(502, "", f"the userinfo answer is not a JSON object: {error}") from error
    # OpenID Connect Core 1.0, 5.3.2: the sub of userinfo must equal the ID token's, or the
    # answer may be about someone else (token substitution).
    if userinfo.get("sub") != subject:
        raise _Failed(
            400,
            "The provider's answers about you do not agree. Start again.",
            "userinfo's sub is not the ID token's",
        )
    return userinfo
