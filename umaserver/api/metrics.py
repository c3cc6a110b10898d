"""`GET /metrics`: the server's Prometheus metrics in the text format (issue 27, item 8), when
`[metrics] enabled = true` (otherwise there is no such route: 404).

Only the addresses `[metrics] allow` names may read them (others: 403), the address taken as
sign-in takes it, after `[server] trusted_proxies`: a proxy on this machine passing requests on
does not make them all local. Every request is counted by its route's rule
(`/rs/resource_set/<rs_id>`), never its raw path, so the labels stay few.

`prometheus_client` is imported only here, only when metrics are on (`import umaserver` stays
light), after `[metrics] multiprocess_dir` has set the environment that turns on its
multiprocess mode.
"""

from __future__ import annotations

import ipaddress
import os
import sys
import time
from contextvars import Token
from typing import TYPE_CHECKING

from flask import Blueprint, Flask, Response, current_app, g, request

from .. import events
from ..config import Config, ConfigError
from ..errors import APIError
from ..runtime import runtime
from ..services.signin import client_address
from ..storage.errors import StorageUnavailable
from ..storage.per_request import storage

if TYPE_CHECKING:
    from ..metrics import Metrics

bp = Blueprint("metrics", __name__)
KEY = "umaserver.metrics"
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"


class MetricsNotAllowed(APIError):
    status = 403
    error = "access_denied"
    description = "This address may not read the metrics."


def init_app(app: Flask, config: Config) -> None:
    """Counts every request of `app` and serves `/metrics`, when metrics are on."""
    settings = config.metrics
    if not settings.enabled:
        return
    folder = settings.multiprocess_dir
    if folder is not None:
        _multiprocess_mode(str(folder))
    from .. import metrics  # prometheus_client, now that its mode is set

    if folder is not None:
        metrics.empty_folder(folder)
    counting = metrics.Metrics(folder, _queue_length)
    app.extensions[KEY] = counting
    # First of the request's hooks, so that the time includes the others'.
    app.before_request_funcs.setdefault(None, []).insert(0, _started)
    app.after_request(_answered)
    app.teardown_request(_ended)
    app.register_blueprint(bp)


def _multiprocess_mode(folder: str) -> None:
    if "prometheus_client" in sys.modules and os.environ.get(MULTIPROCESS_ENV) != folder:
        # Its mode is chosen when it is first imported, for the whole process.
        raise ConfigError(
            [
                "metrics.multiprocess_dir: prometheus_client was imported before the app was"
                f" built, without {MULTIPROCESS_ENV}={folder}; build the app first, or set it"
            ]
        )
    os.environ[MULTIPROCESS_ENV] = folder


def _started() -> None:
    g.metrics_started = time.perf_counter()
    g.metrics_sink = events.current_sink.set(current_app.extensions[KEY])


def _answered(response: Response) -> Response:
    started = g.get("metrics_started")
    if started is not None:
        rule = request.url_rule
        counting: Metrics = current_app.extensions[KEY]
        counting.request(
            rule.rule if rule is not None else None,
            response.status_code,
            time.perf_counter() - started,
        )
    return response


def _ended(_error: BaseException | None) -> None:
    token: Token[events.Sink | None] | None = g.pop("metrics_sink", None)
    if token is not None:
        events.current_sink.reset(token)


def _queue_length() -> int | None:
    try:
        return storage().count_due_fetches(runtime().clock.now())
    except StorageUnavailable:  # the scrape still answers, without the gauge
        return None


@bp.get("/metrics")
def scrape() -> Response:
    config = runtime().config
    address = client_address(
        request.remote_addr,
        request.headers.getlist("X-Forwarded-For"),
        config.server.trusted_proxies,
    )
    if not _allowed(address, config.metrics.allow):
        raise MetricsNotAllowed()
    counting: Metrics = current_app.extensions[KEY]
    return Response(
        counting.scrape(),
        200,
        (
            ("Content-Type", "text/plain; version=0.0.4; charset=utf-8"),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
        ),
    )


def _allowed(address: str, allow: tuple[str, ...]) -> bool:
    try:
        found = ipaddress.ip_address(address)
    except ValueError:  # "unknown": no address to compare
        return False
    return any(found in ipaddress.ip_network(network, strict=False) for network in allow)
