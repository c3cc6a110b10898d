"""CSRF tokens on every form: an HMAC (key from `secret_key`) of the session's `csrf_secret`, or,
before sign-in, of the pre-session cookie's id. `token()` for templates (`{{ csrf_token() }}`),
`require()` at the top of every view that takes a form: a missing or wrong token is a 400 page.
Tokens are made under the first of `secret_keys` and accepted under any listed one, so a form
rendered before a rotation still goes through, and one rendered under a removed key does not."""

from __future__ import annotations

import hashlib
import hmac

from flask import abort, request

from ..runtime import runtime
from . import sessions

FIELD = "csrf_token"
FAILED = (
    "This form was not sent from this server's page, or the page is out of date. Go back, reload"
    " the page and try again."
)


def _token_for(binding: str, key: bytes) -> str:
    return hmac.new(key, binding.encode("utf-8"), hashlib.sha256).hexdigest()


def _binding() -> str:
    session = sessions.current_session()
    if session is not None:
        return "session:" + session.csrf_secret
    return "presession:" + sessions.presession_id()


def token() -> str:
    """The CSRF token of this browser's forms."""
    return _token_for(_binding(), runtime().csrf_keys[0])


def require() -> None:
    """Aborts with 400 unless the form carries exactly one token, and the right one."""
    sent = request.form.getlist(FIELD)
    if len(sent) != 1:
        abort(400, description=FAILED)
    session = sessions.current_session()
    if session is not None:
        binding = "session:" + session.csrf_secret
    else:
        presession = request.cookies.get(sessions.cookie_name(sessions.PRESESSION))
        if not presession:
            abort(400, description=FAILED)
        binding = "presession:" + presession
    unverified = sent[0].encode("utf-8")
    if not any(
        hmac.compare_digest(unverified, _token_for(binding, key).encode("utf-8"))
        for key in runtime().csrf_keys
    ):
        abort(400, description=FAILED)
