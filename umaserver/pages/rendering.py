"""Page responses: the templates' shared context, and the headers every page answer carries."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from importlib import resources
from typing import Any

from flask import Response, current_app, g, make_response, render_template, request
from markupsafe import Markup
from werkzeug.exceptions import HTTPException, NotFound
from werkzeug.routing import RequestRedirect

# The one style sheet, inline, allowed by its hash (no inline script anywhere: none is allowed).
STYLE = (resources.files(__package__) / "templates" / "pages" / "style.css").read_text("utf-8")
STYLE_HASH = "sha256-" + base64.b64encode(hashlib.sha256(STYLE.encode("utf-8")).digest()).decode()

PAGE_BLUEPRINTS = "umaserver.pages.blueprints"


def content_security_policy(form_action: Sequence[str] = ()) -> str:
    return "; ".join(
        [
            "default-src 'none'",
            f"style-src '{STYLE_HASH}'",
            "img-src 'self'",
            "form-action " + " ".join(["'self'", *form_action]),
            "frame-ancestors 'none'",
            "base-uri 'none'",
        ]
    )


def secure(response: Response) -> Response:
    """Sets the headers of a page answer (idempotent)."""
    response.headers["Content-Security-Policy"] = content_security_policy(
        g.get("pages_form_action", ())
    )
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = "no-store"
    response.headers["Pragma"] = "no-cache"
    return response


def render(
    template: str, status: int = 200, form_action: Sequence[str] = (), **context: Any
) -> Response:
    """The template rendered as a page answer with its headers. `form_action`: origins beyond
    this server that a form on the page may lead to (a POST whose answer redirects there)."""
    if form_action:
        g.pages_form_action = tuple(form_action)
    return secure(make_response(render_template(template, **context), status))


def is_page_request() -> bool:
    """Whether this request is for a page (a route of a page blueprint, whatever its method), so
    that its errors are HTML; the API's routes keep the JSON API's errors. A path no route
    matches is a page for a browser: a request whose `Accept` ranks text/html above
    application/json (no `Accept`, `*/*`, a tie, or JSON first: the JSON error, as API clients
    expect)."""
    names: set[str] = current_app.extensions.get(PAGE_BLUEPRINTS, set())
    blueprint = request.blueprint
    if blueprint is not None:
        return blueprint in names
    adapter = current_app.create_url_adapter(request)
    if adapter is None:
        return False
    unknown = True
    for method in ("GET", "POST"):
        try:
            endpoint, _ = adapter.match(method=method)
        except NotFound:
            continue
        except (HTTPException, RequestRedirect):
            unknown = False  # the path is a route's, for other methods
            continue
        unknown = False
        if str(endpoint).rpartition(".")[0] in names:
            return True
    return unknown and prefers_html()


def prefers_html() -> bool:
    """Whether the request's `Accept` ranks text/html strictly above application/json."""
    if "Accept" not in request.headers:
        return False
    accept = request.accept_mimetypes
    return accept.quality("text/html") > accept.quality("application/json")


def page_style() -> Markup:
    return Markup(STYLE)  # noqa: S704 - our own file, not input
