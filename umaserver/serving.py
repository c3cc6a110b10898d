"""Serving with waitress, so that even the errors waitress answers by itself speak our JSON.

Waitress refuses some requests before the app sees them (a body over `max_request_body_size`,
malformed HTTP); its own answers are plain text. A channel class with a JSON error task keeps the
one error shape for every response.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from flask import Flask
from waitress.channel import HTTPChannel
from waitress.server import create_server
from waitress.task import ErrorTask

_CODES = {500: "server_error"}


def configure_logging() -> None:
    """Where a serving process writes its log: INFO and above to stderr, one line each.

    Decisions, rule-file reloads and key fetches are logged at INFO (never a token or a claim
    value). A host that has configured logging already keeps its own set-up.
    """
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


class JSONErrorTask(ErrorTask):  # type: ignore[misc]
    def execute(self) -> None:
        error = self.request.error
        description = (
            "The request body is larger than this server accepts."
            if error.code == 413
            else f"{error.reason}: {error.body}"
        )
        body = json.dumps(
            {"error": _CODES.get(error.code, "invalid_request"), "error_description": description}
        ).encode("utf-8")
        self.status = f"{error.code} {error.reason}"
        self.response_headers.extend(
            [
                ("Content-Type", "application/json"),
                ("Cache-Control", "no-store"),
            ]
        )
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class JSONErrorChannel(HTTPChannel):  # type: ignore[misc]
    error_task_class = JSONErrorTask


def make_server(app: Flask, max_body_bytes: int, host: str, port: int, threads: int) -> Any:
    """A waitress server for `app`; `.run()` serves, `.close()` stops, `.effective_port` tells."""
    server = create_server(
        app,
        host=host,
        port=port,
        threads=threads,
        # Waitress refuses a larger body before buffering it (to disk): answered by our JSON task.
        max_request_body_size=max_body_bytes,
        ident="umaserver",
        clear_untrusted_proxy_headers=True,
    )
    server.channel_class = JSONErrorChannel
    return server
