"""Page responses: the templates' shared context, and the headers every page answer carries."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from importlib import resources
from typing import Any

from flask import Response, current_app, g, make_response, render_template, request
from markupsafe import Markup
from werkzeug.exceptions import HTTPException
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
    that its errors are HTML; everything else (and unknown paths) keeps the JSON API's errors."""
    names: set[str] = current_app.extensions.get(PAGE_BLUEPRINTS, set())
    blueprint = request.blueprint
    if blueprint is not None:
        return blueprint in names
    adapter = current_app.create_url_adapter(request)
    if adapter is None:
        return False
    for method in ("GET", "POST"):
        try:
            endpoint, _ = adapter.match(method=method)
        except (HTTPException, RequestRedirect):
            continue
        if str(endpoint).rpartition(".")[0] in names:
            return True
    return False


def page_style() -> Markup:
    return Markup(STYLE)  # noqa: S704 - our own file, not input
