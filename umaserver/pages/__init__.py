"""Pages for people: server-rendered Jinja templates, usable without JavaScript, readable on a
phone. This package holds the home page (`GET /`), sign-in (`GET/POST /signin`) and sign-out
(`POST /signout`), and what other page blueprints (`/authorize`, `/account`) build on:

- `register(app, blueprint)`: registers a blueprint as pages: its answers get the page headers
  (`Content-Security-Policy` without any script, `X-Frame-Options: DENY`, `Referrer-Policy:
  no-referrer`, `nosniff`, `Cache-Control: no-store`) and its errors (400, 404, 405, 500, 503,
  whatever the method) are HTML pages in the same style; every other route keeps JSON errors.
- `render(template, status=200, form_action=(), **context)`: a page answer. Templates extend
  `pages/base.html` (blocks `title`, `main`) and have `csrf_token()`, `current_user()` and
  `page_style` in their context. `form_action` lists origins a form may lead to beyond this
  server (a POST answered by a redirect to a client: Chromium holds redirects to `form-action`).
- `csrf.token()` (templates: `<input type="hidden" name="csrf_token" value="{{ csrf_token() }}">`)
  and `csrf.require()`: call it first in every view that takes a form; a missing, repeated or
  wrong token aborts with a 400 page.
- `sessions.current_user() -> User | None`, `sessions.current_session() -> Session | None`,
  `sessions.signin_required` (a view decorator), `sessions.redirect_to_signin()` (a 303 to
  `/signin?next=<this path and query>`), `sessions.signin_url(next)`, `sessions.safe_next(text)`
  (a path of this server or None), `sessions.sign_in(user)`, `sessions.sign_out()`.

`abort(400, description=...)` in a page view shows `description` on the error page: write it
for people.
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response

from .. import error_responses
from . import csrf, navigation, sessions
from .errors import render_error
from .rendering import PAGE_BLUEPRINTS, is_page_request, page_style, render, secure
from .views import bp

__all__ = ["csrf", "init_app", "register", "render", "sessions"]


def register(app: Flask, blueprint: Blueprint) -> None:
    """Registers `blueprint` as pages (see the module)."""
    app.register_blueprint(blueprint)
    app.extensions.setdefault(PAGE_BLUEPRINTS, set()).add(blueprint.name)


def init_app(app: Flask) -> None:
    """Registers this package's pages, their template context, headers, cookies and errors."""
    register(app, bp)
    app.context_processor(
        lambda: {
            "csrf_token": csrf.token,
            "current_user": sessions.current_user,
            "page_style": page_style(),
        }
    )
    app.context_processor(navigation.context)
    app.after_request(_page_answer)
    error_responses.render_pages_with(app, render_error)


def _page_answer(response: Response) -> Response:
    """Page headers and the cookies a page queued, on a page's answer; any other answer (an
    API's: almost every request) is let through as it is."""
    if not is_page_request():
        return response
    return sessions.write_cookies(secure(response))
