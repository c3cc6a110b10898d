"""Errors are values with one writer.

Each error class carries its code and status; `error_response` is the one place that renders
`{"error": code, "error_description": text}` with `Cache-Control: no-store`. Flask's own HTTP errors
(404, 405, 413, ...) and unexpected exceptions go through the same writer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from flask import Flask, Response
from werkzeug.exceptions import HTTPException

log = logging.getLogger("umaserver")


class APIError(Exception):
    status = 400
    error = "invalid_request"
    description = "The request is invalid."

    def __init__(
        self,
        description: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(description or self.description)
        if description is not None:
            self.description = description
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})


class InvalidRequest(APIError):
    pass


class NotFound(APIError):
    status = 404
    error = "not_found"
    description = "The resource set does not exist."


class UnsupportedMethod(APIError):
    status = 405
    error = "unsupported_method_type"
    description = "This method is not supported here."


class RequestTooLarge(APIError):
    status = 413
    error = "invalid_request"


class ServerError(APIError):
    status = 500
    error = "server_error"
    description = "The server met an unexpected condition."


# RFC 6750 section 3.1: token problems get the bearer errors, never an UMA code.
class InvalidToken(APIError):
    status = 401
    error = "invalid_token"
    description = "The access token is unknown, expired or revoked."


class InsufficientScope(APIError):
    status = 403
    error = "insufficient_scope"
    description = "The access token does not have the scope this endpoint needs."


class MissingToken(APIError):
    status = 401
    error = "invalid_token"
    description = "This endpoint needs a bearer access token."


def error_response(
    status: int,
    error: str,
    description: str,
    headers: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Response:
    body = {"error": error, "error_description": description, **(extra or {})}
    response = Response(json.dumps(body), status=status, mimetype="application/json")
    response.headers["Cache-Control"] = "no-store"
    response.headers["Pragma"] = "no-cache"
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def render(error: APIError) -> Response:
    return error_response(error.status, error.error, error.description, error.headers, error.extra)


# Flask's own errors keep their status and useful headers (Allow) but speak our JSON.
_HTTP_CODES = {405: "unsupported_method_type", 404: "not_found", 500: "server_error"}
_KEPT_HEADERS = ("Allow", "Retry-After")


def _render_http(exc: HTTPException) -> Response:
    status = exc.code or 500
    headers = {}
    if exc.response is None:
        for name, value in exc.get_headers():
            if name in _KEPT_HEADERS:
                headers[name] = value
    description = exc.description or exc.name
    if status == 413:
        description = "The request body is larger than this server accepts."
    return error_response(status, _HTTP_CODES.get(status, "invalid_request"), description, headers)


def _render_unexpected(exc: Exception) -> Response:
    log.exception("unexpected error")
    return render(ServerError())


def register_error_handlers(app: Flask) -> None:
    app.register_error_handler(APIError, render)
    app.register_error_handler(HTTPException, _render_http)
    app.register_error_handler(Exception, _render_unexpected)
