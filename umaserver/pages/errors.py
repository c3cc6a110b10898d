"""Error pages in the pages' style, for page routes only (`error_responses` asks here first)."""

from __future__ import annotations

from flask import Response, g

from .rendering import is_page_request, render

TITLES = {
    400: "The request could not be understood",
    404: "Not found",
    405: "Not allowed here",
    413: "Too large",
    429: "Too many requests",
    500: "Something went wrong",
    502: "Another server answered wrongly",
    503: "Not available right now",
}
MESSAGES = {
    404: "There is no such page on this server.",
    405: "This page cannot be used that way.",
    500: "The server could not answer this request. Try again later.",
    502: "A server this one asked on your behalf gave an answer it cannot use. Try again later.",
    503: "The server cannot answer right now. Try again in a few minutes.",
}


def render_error(status: int, description: str | None) -> Response | None:
    """The error page for `status`, or None when this request is not for a page. Our own 400s
    say what was wrong (`description`); other statuses say it in our words."""
    if not is_page_request():
        return None
    # An error page reads no storage (the error may be the storage's): the footer names the
    # person only when the session was read before the error.
    if "pages_session" not in g:
        g.pages_session = None
    message = MESSAGES.get(status) or description or "The request could not be answered."
    return render(
        "pages/error.html",
        status,
        title=TITLES.get(status, "The request could not be answered"),
        message=message,
    )
