"""Reading a JSON request body at the boundary, so a bad body never reaches Werkzeug's HTML pages."""

from __future__ import annotations

import json
from typing import Any

from flask import request

from ..errors import InvalidRequest


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        # A repeated member is read differently by different parsers: refuse it.
        if key in result:
            raise InvalidRequest(f"The member '{key}' appears more than once in the body.")
        result[key] = value
    return result


def read_json_object() -> dict[str, Any]:
    """The body as a JSON object; 400 invalid_request otherwise, 413 above the size cap."""
    if not request.is_json:
        raise InvalidRequest("The body must be JSON, sent with Content-Type: application/json.")
    raw = request.get_data(cache=True)  # raises 413 above MAX_CONTENT_LENGTH
    try:
        body = json.loads(raw, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError):
        raise InvalidRequest("The body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise InvalidRequest("The body must be a JSON object.")
    return body
