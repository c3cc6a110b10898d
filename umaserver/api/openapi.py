"""The OpenAPI 3.1 document of the JSON API at /openapi.json (advertised nowhere else).

The document is a static file shipped in the package, `openapi.json` beside this module; only
`servers` is filled in per request, from the configured issuer. Cached publicly, like the
configuration document.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

from flask import Blueprint, Response, jsonify

from ..runtime import runtime

bp = Blueprint("openapi", __name__)


@cache
def _document_text() -> str:
    return files("umaserver.api").joinpath("openapi.json").read_text(encoding="utf-8")


def document() -> dict[str, Any]:
    """A fresh copy of the document, with `servers` naming this server's issuer."""
    loaded: dict[str, Any] = json.loads(_document_text())
    loaded["servers"] = [{"url": runtime().config.issuer}]
    return loaded


@bp.get("/openapi.json")
def openapi_document() -> Response:
    response = jsonify(document())
    response.headers["Cache-Control"] = "public, max-age=3600"
    return response
