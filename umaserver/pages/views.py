"""The pages of this package: the home page, sign-in and sign-out."""

from __future__ import annotations

import math

from flask import Blueprint, Response, abort, redirect, request
from werkzeug.wrappers import Response as BaseResponse

from ..runtime import runtime
from ..services import signin
from ..storage.per_request import storage
from . import csrf, sessions
from .rendering import render

bp = Blueprint("pages", __name__, template_folder="templates")

WRONG = "The username or the password is wrong."
MISSING = "Give your username and your password."


@bp.get("/")
def home() -> Response:
    return render("pages/home.html", user=sessions.current_user())


def _one(name: str) -> str:
    """A form field given at most once (a repeated field is a 400 page)."""
    values = request.form.getlist(name)
    if len(values) > 1:
        abort(400, description=f"The field {name} was sent more than once.")
    return values[0] if values else ""


def _next() -> str | None:
    return sessions.safe_next(request.values.get("next"))


def _go_on(next_path: str | None) -> BaseResponse:
    return redirect(runtime().config.url(next_path or "/"), 303)


@bp.get("/signin")
def signin_page() -> BaseResponse:
    # Shown to signed-in people too: signing in again (as someone else) starts a new session.
    return render("pages/signin.html", next=_next(), username="")


def _minutes(seconds: int) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    return "1 minute" if minutes == 1 else f"{minutes} minutes"


@bp.post("/signin")
def signin_form() -> BaseResponse:
    csrf.require()
    username, password = _one("username"), _one("password")
    next_path = sessions.safe_next(_one("next") or request.args.get("next"))
    if not username or not password:
        return render("pages/signin.html", 400, error=MISSING, next=next_path, username=username)
    config, now = runtime().config, runtime().clock.now()
    address = signin.client_address(
        request.remote_addr,
        request.headers.getlist("X-Forwarded-For"),
        config.server.trusted_proxies,
    )
    outcome = signin.sign_in(storage(), config.signin, now, username, password, address)
    if outcome.kind == "signed_in" and outcome.user is not None:
        sessions.sign_in(outcome.user)
        return _go_on(next_path)
    if outcome.kind == "locked":
        wait = outcome.retry_at - now
        response = render(
            "pages/signin.html",
            429,
            error=f"Too many failed sign-ins for this account. Try again in {_minutes(wait)}.",
            next=next_path,
            username=username,
        )
        response.headers["Retry-After"] = str(wait)
        return response
    return render("pages/signin.html", error=WRONG, next=next_path, username=username)


@bp.post("/signout")
def signout() -> BaseResponse:
    csrf.require()
    sessions.sign_out()
    return redirect(runtime().config.url("/"), 303)
