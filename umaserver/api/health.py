"""`GET /healthz` (liveness) and `GET /readyz` (readiness), for a load balancer or an orchestrator.

`/healthz` says only that the process answers: 200 `{"status": "ok"}`, touching nothing else, so
that an orchestrator restarts a process that hangs, never one whose database is away.

`/readyz` says whether this process should be sent requests now, checked afresh on every request
(nothing cached):

- the database answers: a read through this process's own connections (its pool on PostgreSQL,
  as a request would meet them), then a read and a write in a transaction that is rolled back,
  waiting at most a second (`storage.readiness_problem`; on SQLite also: the file and its folder
  keep a write bit);
- the rule file is loaded and still there (a file removed while serving means no rules);
- each configured OpenID Connect issuer's keys have been attempted once (a first fetch that
  failed is listed, and is not unready: the provider may be away for long).

200 `{"status": "ready", "checks": {...}}`; otherwise 503 in the one error shape,
`temporarily_unavailable` with `Retry-After`, its description naming every reason, with the same
`checks` and a `reasons` list beside it.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify

from ..error_responses import json_response
from ..runtime import runtime
from ..storage import readiness_problem
from ..storage.errors import StorageUnavailable
from ..storage.per_request import storage

bp = Blueprint("health", __name__)

RETRY_AFTER = "5"
# No client has this id (ids are random and never empty): the read finds nothing, yet it needs the
# database to answer it.
_NO_CLIENT = ""


@bp.get("/healthz")
def healthz() -> Response:
    return jsonify({"status": "ok"})


@bp.get("/readyz")
def readyz() -> Response:
    found = runtime()
    config = found.config
    reasons: list[str] = []
    checks: dict[str, Any] = {}

    try:
        storage().get_client(_NO_CLIENT)
    except StorageUnavailable as error:
        problem: str | None = str(error)
    else:
        problem = readiness_problem(config.database, config.postgresql)
    checks["database"] = problem or "ok"
    if problem is not None:
        reasons.append(f"the database cannot be read and written: {problem}")

    problem = found.policies.problem()
    checks["rule_file"] = problem or "ok"
    if problem is not None:
        reasons.append(problem)

    states = found.verifiers.key_sets.fetch_states()
    if states:
        checks["oidc_issuers"] = states
    waiting = [issuer for issuer, state in states.items() if state == "not attempted"]
    if waiting:
        reasons.append(f"the keys of {', '.join(waiting)} have not been fetched once yet")

    if not reasons:
        return jsonify({"status": "ready", "checks": checks})
    body = {
        "error": "temporarily_unavailable",
        "error_description": "Not ready: " + "; ".join(reasons) + ".",
        "reasons": reasons,
        "checks": checks,
    }
    return json_response(body, 503, headers={"Retry-After": RETRY_AFTER})
