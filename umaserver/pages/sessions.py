"""The session cookie of the pages, and who is signed in.

The cookie holds a random id whose SHA-256 digest names a row of `sessions`
(`umaserver.services.sessions`). It is `HttpOnly`, `SameSite=Lax`, `Path=/`, and with an https
issuer `Secure` and named with the `__Host-` prefix. Before sign-in a pre-session cookie (same
flags) binds the CSRF tokens of the forms; sign-in drops it and any earlier session, and sets a
new id (rotation).
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable
from typing import Any, TypeVar, cast
from urllib.parse import quote, urlsplit

from flask import Response, g, redirect, request, session
from werkzeug.wrappers import Response as BaseResponse

from ..runtime import runtime
from ..services import sessions as session_service
from ..storage.per_request import storage
from ..storage.records import Session, User

F = TypeVar("F", bound=Callable[..., Any])

SESSION = "umaserver_session"
PRESESSION = "umaserver_presession"
MAX_NEXT_LENGTH = 2048
# In Flask's signed session cookie: the identity of the latest sign-in at an external provider
# (`external_signin`). A sign-in here or a sign-out forgets it, so that it never speaks for
# someone other than who is signed in.
EXTERNAL_IDENTITY = "external_identity"
_UNSET = object()


def secure_cookies() -> bool:
    return runtime().config.issuer.startswith("https://")


def cookie_name(base: str) -> str:
    """`__Host-` makes the browser refuse the cookie unless Secure, Path=/ and without Domain."""
    return f"__Host-{base}" if secure_cookies() else base


def _queue(name: str, value: str | None) -> None:
    """Sets (or, with None, clears) a cookie on this request's answer (see `write_cookies`)."""
    queued: dict[str, str | None] = g.setdefault("pages_cookies", {})
    queued[name] = value


def write_cookies(response: Response) -> Response:
    """The app's after_request: writes the cookies the request queued."""
    for name, value in g.get("pages_cookies", {}).items():
        if value is None:
            response.delete_cookie(
                name, path="/", secure=secure_cookies(), httponly=True, samesite="Lax"
            )
        else:
            response.set_cookie(
                name, value, path="/", secure=secure_cookies(), httponly=True, samesite="Lax"
            )
    return response


def current_session() -> Session | None:
    """The live session of this request (its idle time restarted), or None; read once."""
    found = g.get("pages_session", _UNSET)
    if found is _UNSET:
        found = None
        unverified_id = request.cookies.get(cookie_name(SESSION))
        if unverified_id:
            config = runtime().config
            found = session_service.resume_session(
                storage(), unverified_id, runtime().clock.now(), config.sessions
            )
            if found is None:
                _queue(cookie_name(SESSION), None)
        g.pages_session = found
    return cast("Session | None", found)


def current_user() -> User | None:
    """The signed-in person, or None."""
    session = current_session()
    return None if session is None else storage().get_user(session.user_sub)


def presession_id() -> str:
    """The pre-session id of this browser (made, and queued as a cookie, when it has none)."""
    found = g.get("pages_presession") or request.cookies.get(cookie_name(PRESESSION))
    if not found:
        found = secrets.token_urlsafe(32)
        _queue(cookie_name(PRESESSION), found)
    g.pages_presession = found
    return str(found)


def sign_in(user: User) -> Session:
    """Starts a session of `user` under a new id: an earlier session of this browser ends and the
    pre-session cookie is dropped."""
    old = request.cookies.get(cookie_name(SESSION))
    if old:
        session_service.end_session(storage(), old)
    session_id, started = session_service.start_session(
        storage(), user.sub, runtime().clock.now(), runtime().config.sessions
    )
    _queue(cookie_name(SESSION), session_id)
    if request.cookies.get(cookie_name(PRESESSION)):
        _queue(cookie_name(PRESESSION), None)
    g.pages_session = started
    g.pages_presession = None
    forget_external_identity()
    return started


def sign_out() -> None:
    """Ends this browser's session (the row and the cookie)."""
    unverified_id = request.cookies.get(cookie_name(SESSION))
    if unverified_id:
        session_service.end_session(storage(), unverified_id)
    _queue(cookie_name(SESSION), None)
    g.pages_session = None
    forget_external_identity()


def forget_external_identity() -> None:
    """Forgets the identity of the latest sign-in at an external provider in this browser."""
    session.pop(EXTERNAL_IDENTITY, None)


def safe_next(unverified: str | None) -> str | None:
    """`unverified` when it is a path of this server (one leading `/`, no backslash, no control
    character, no scheme or host), else None: never a way to send people elsewhere."""
    if not unverified or len(unverified) > MAX_NEXT_LENGTH:
        return None
    if not unverified.startswith("/") or unverified.startswith("//"):
        return None
    if "\\" in unverified or any(ord(c) < 0x20 or ord(c) == 0x7F for c in unverified):
        return None
    parts = urlsplit(unverified)
    if parts.scheme or parts.netloc:
        return None
    return unverified


def signin_url(next_path: str | None = None) -> str:
    """The sign-in page's URL, coming back to `next_path` (a path of this server) afterwards."""
    url = runtime().config.url("/signin")
    target = safe_next(next_path)
    return url if target is None else f"{url}?next={quote(target, safe='/')}"


def redirect_to_signin() -> BaseResponse:
    """A 303 to the sign-in page, coming back to this request's path and query afterwards."""
    here = request.full_path if request.query_string else request.path
    return redirect(signin_url(here), 303)


def signin_required(view: F) -> F:
    """A view decorator: people who are not signed in go to the sign-in page first."""

    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if current_user() is None:
            return redirect_to_signin()
        return view(*args, **kwargs)

    return cast(F, wrapped)


def queue_cookie(name: str, value: str | None) -> None:
    """Sets (or, with None, clears) a cookie of the pages (same flags as the session's) on this
    request's answer."""
    _queue(name, value)
