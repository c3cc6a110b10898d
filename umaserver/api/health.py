"""`GET /healthz`: whether this process can serve, for a load balancer or an orchestrator.

200 `{"status": "ok"}` when the database answers a read through the storage contract; when it
cannot be used (unreachable, refusing, another schema version), the one JSON error shape, 503
`temporarily_unavailable` with `Retry-After`, as any request would meet. Nothing else is checked:
the rule file and identity providers do not stop a process from serving.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from ..storage.per_request import storage

bp = Blueprint("health", __name__)

# No client has this id (ids are random and never empty): the read finds nothing, yet it needs the
# database to answer it.
_NO_CLIENT = ""


@bp.get("/healthz")
def healthz() -> Response:
    storage().get_client(_NO_CLIENT)
    return jsonify({"status": "ok"})
