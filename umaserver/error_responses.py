"""Errors have one writer: `error_response` renders `{"error": code, "error_description": text}`
as JSON with `Cache-Control: no-store` and `X-Content-Type-Options: nosniff`. Flask's own HTTP errors (404, 405, 413, ...) and unexpected
exceptions go through it too: never a traceback. JSON is the default; only a request for a page
(a route of a page blueprint, `umaserver.pages`) gets its errors as an HTML page, from the renderer
`render_pages_with` installs."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from flask import Flask, Response, current_app, has_request_context
from werkzeug.exceptions import HTTPException

from . import events
from .errors import APIError, InvalidToken, ServerError, StorageUnavailableError
from .storage.errors import StorageUnavailable

log = logging.getLogger("umaserver")


def error_response(
    status: int,
    error: str,
    description: str,
    headers: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Response:
    body = {"error": error, "error_description": description, **(extra or {})}
    return json_response(body, status, headers)


# Every API answer carries tokens or owners' data: no cache keeps it (RFC 6749 5.1), and it is JSON
# to a browser and nothing else.
_API_HEADERS = (
    ("Cache-Control", "no-store"),
    ("Pragma", "no-cache"),
    ("X-Content-Type-Options", "nosniff"),
)


def json_response(
    body: Any,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    content_type: str = "application/json",
) -> Response:
    """An API answer: `body` as compact JSON with a final newline (as Flask's jsonify writes it,
    so that answers read well in a terminal too), with the API's headers, then `headers` (each
    replacing one of the same name)."""
    listed = [("Content-Type", content_type), *_API_HEADERS]
    if headers:
        replaced = {name.lower() for name in headers}
        listed = [item for item in listed if item[0].lower() not in replaced]
        listed.extend(headers.items())
    return Response(_COMPACT.encode(body) + "\n", status, listed)


_COMPACT = json.JSONEncoder(separators=(",", ":"))


def render(error: APIError) -> Response:
    headers = error.headers
    if isinstance(error, InvalidToken) and "WWW-Authenticate" not in headers:
        # RFC 6750 3: every 401 of a bearer token names the scheme, wherever it was raised.
        headers = {**headers, "WWW-Authenticate": 'Bearer error="invalid_token"'}
    return error_response(error.status, error.error, error.description, headers, error.extra)


# Flask's own errors keep their status and useful headers (Allow) but speak our JSON.
_HTTP_CODES = {405: "unsupported_method_type", 404: "not_found", 500: "server_error"}
_KEPT_HEADERS = ("Allow", "Retry-After")


# Given a status and a description, an HTML page when the request is for a page, else None.
PageRenderer = Callable[[int, str | None], Response | None]
_PAGES = "umaserver.error_pages"


def render_pages_with(app: Flask, renderer: PageRenderer) -> None:
    app.extensions[_PAGES] = renderer


def _page(status: int, description: str | None, headers: Mapping[str, str]) -> Response | None:
    renderer: PageRenderer | None = (
        current_app.extensions.get(_PAGES) if has_request_context() else None
    )
    if renderer is None:
        return None
    try:
        page = renderer(status, description)
    except Exception:  # the page itself failed (storage, template): the JSON answer still goes
        log.exception("the error page could not be rendered")
        return None
    if page is not None:
        for name, value in headers.items():
            page.headers[name] = value
    return page


def _render_http(exc: HTTPException) -> Response:
    status = exc.code or 500
    headers = {}
    if exc.response is None:
        for name, value in exc.get_headers():
            if name in _KEPT_HEADERS:
                headers[name] = value
    page = _page(status, exc.description if status == 400 else None, headers)
    if page is not None:
        return page
    description = exc.description or exc.name
    if status == 413:
        description = "The request body is larger than this server accepts."
    return error_response(status, _HTTP_CODES.get(status, "invalid_request"), description, headers)


def _render_unexpected(exc: Exception) -> Response:
    log.exception("unexpected error")
    return _page(500, None, {}) or render(ServerError())


def _render_storage_unavailable(exc: StorageUnavailable) -> Response:
    # One line, no traceback: the cause is the storage (read-only, full, failing), not the code,
    # and a traceback per request would bury the one thing the operator must read.
    events.storage_error(str(exc))
    error = StorageUnavailableError()
    return _page(error.status, None, error.headers or {}) or render(error)


def register_error_handlers(app: Flask) -> None:
    app.register_error_handler(StorageUnavailable, _render_storage_unavailable)
    app.register_error_handler(APIError, render)
    app.register_error_handler(HTTPException, _render_http)
    app.register_error_handler(Exception, _render_unexpected)
