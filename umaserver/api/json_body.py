"""Reading a JSON request body at the boundary, so a bad body never reaches Werkzeug's HTML pages."""

from __future__ import annotations

from typing import Any

from flask import request

from .. import strict_json
from ..errors import InvalidRequest


def read_json_object() -> dict[str, Any]:
    """The body as a JSON object; 400 invalid_request otherwise, 413 above the size cap."""
    body = read_json_value(arrays=False)
    assert isinstance(body, dict)
    return body


def read_json_value(arrays: bool = True) -> dict[str, Any] | list[Any]:
    """The body as a JSON object, or an array when `arrays`; 400 invalid_request otherwise, 413
    above the size cap.

    The body is read strictly (`strict_json`): a repeated member, NaN, Infinity or a number too
    large for a float is refused, never stored to be written back as something that is not JSON.
    A body sent with no Content-Type header at all (as UMA 1.0 clients such as pyuma send it) is
    read as JSON when it is a JSON object; a Content-Type other than JSON is refused.
    """
    untyped = "Content-Type" not in request.headers
    if not request.is_json and not untyped:
        raise InvalidRequest(_WANT_JSON)
    raw = request.get_data(cache=True)  # raises 413 above MAX_CONTENT_LENGTH
    try:
        body = strict_json.loads(raw)
    except strict_json.StrictJSONError as error:
        raise InvalidRequest(f"The body is not valid JSON: {error}.") from None
    if isinstance(body, dict) or (arrays and isinstance(body, list)):
        return body
    if untyped:
        raise InvalidRequest(_WANT_JSON)
    raise InvalidRequest(
        "The body must be a JSON object or array." if arrays else "The body must be a JSON object."
    )


_WANT_JSON = "The body must be a JSON object, sent with Content-Type: application/json."
