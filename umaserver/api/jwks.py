"""The keys that verify JWT RPTs, at /jwks (RFC 7517 5): every signing key not yet retired, the
current one first, public parts only. Cacheable for a short while (`JWKS_MAX_AGE`), so a resource
server meets a rotated key within minutes; an empty set when no key was ever made (opaque RPTs).
"""

from __future__ import annotations

import json

from flask import Blueprint, Response

from ..services.signing_keys import JWKS_MAX_AGE, public_jwks
from ..storage.per_request import storage

bp = Blueprint("jwks", __name__)


def jwks_response() -> Response:
    """The JWKS answer, for /jwks and any other route that publishes the same keys."""
    body = json.dumps(public_jwks(storage()), separators=(",", ":"))
    return Response(
        body,
        200,
        (
            ("Content-Type", "application/json"),
            ("Cache-Control", f"public, max-age={JWKS_MAX_AGE}"),
            ("X-Content-Type-Options", "nosniff"),
        ),
    )


@bp.get("/jwks")
def jwks() -> Response:
    return jwks_response()
