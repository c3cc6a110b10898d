"""Serving with waitress, so that even the errors waitress answers by itself speak our JSON, and
slow clients cannot hold the server.

Waitress refuses some requests before the app sees them (a body over `max_request_body_size`,
malformed HTTP); its own answers are plain text. A channel class with a JSON error task keeps the
one error shape for every response.

Waitress closes a connection only after `channel_timeout` seconds without a byte, so a client that
trickles a header byte a second holds its connection for ever; a few hundred of them fill the
connection limit and nobody else is answered. The channel here gives each request a deadline for
its head (request line and headers, `request_head_timeout`) and one for its body (`body_timeout`),
however the bytes trickle, and closes the connection that misses one. The check runs each time
waitress's loop asks the channel whether it wants to read: at least once a second
(`asyncore_loop_timeout`), whatever the clients do. The defence is per connection, not per
address: slow clients from one address or from many are closed alike.

An idle keep-alive connection (a request answered, no byte of the next one) is closed by
waitress after `channel_timeout` (60 s). While more than half of `connection_limit` is in use, the
channel closes it after `idle_timeout` (10 s) instead, in the same check: otherwise connections
that make one request and stay silent hold every place for a minute (issue 27, N7).

A request with both `Content-Length` and `Transfer-Encoding` is refused with 400 and its
connection closed (RFC 9112 6.1): the two framings could smuggle a second request past a proxy.
"""

from __future__ import annotations

import gc
import ipaddress
import json
import logging
import sys
import time
from typing import Any
from urllib.parse import urlsplit

from flask import Flask
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser, ParsingError
from waitress.server import create_server
from waitress.task import ErrorTask

from .config import ServerSettings
from .errors import echo
from .events import JsonFormatter

log = logging.getLogger("umaserver.serving")

_CODES = {500: "server_error"}


def configure_logging(form: str = "text") -> None:
    """Where a serving process writes its log: INFO and above to stderr, one line each: words
    (`form` "text"), or one JSON object per line ("json": `time`, `level`, `logger`, `message`
    and the fields of the event the line reports, `events.JsonFormatter`).

    Decisions, resource sets registered or deleted, rule-file reloads and key fetches are logged
    at INFO (never a token or a claim value). A host that has configured logging already keeps
    its own set-up.
    """
    configured_here = not logging.getLogger().handlers
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if configured_here and form == "json":
        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonFormatter())
    if configured_here:
        # The format above names no thread, process or source line: a record need not look them
        # up (the "Optimization" settings of the logging documentation). A token and a decision
        # each log a line; a host's own set-up, which may show them, is left as it is.
        logging.logThreads = False
        logging.logProcesses = False
        logging.logMultiprocessing = False
        logging._srcfile = None
    # psycopg's pool says at INFO every time it lends or takes back a connection: twice a request.
    logging.getLogger("psycopg.pool").setLevel(logging.WARNING)


_ANY_ADDRESS = ("0.0.0.0", "::", "")  # noqa: S104 (compared with, never bound here)


def issuer_mismatch(issuer: str, host: str | None, port: int | None) -> str | None:
    """A sentence when `serve --host/--port` (the values given on the command line, None when
    not) listens where the issuer does not point, so that clients reading the discovery document
    would go elsewhere; None when they agree, or when it cannot tell (port 0 picks a free port;
    an issuer naming a host by DNS name may be a proxy in front)."""
    address = urlsplit(issuer)
    try:
        issuer_port = address.port or (443 if address.scheme == "https" else 80)
    except ValueError:  # the config checked the issuer; nothing to compare with
        return None
    problems = []
    if port is not None and port != 0 and port != issuer_port:
        problems.append(f"port {port}, but the issuer {issuer} says port {issuer_port}")
    issuer_host = address.hostname or ""
    if (
        host is not None
        and host not in _ANY_ADDRESS
        and _is_address(host)
        and _is_address(issuer_host)
        and ipaddress.ip_address(host) != ipaddress.ip_address(issuer_host)
    ):
        problems.append(f"address {host}, but the issuer {issuer} says {issuer_host}")
    if not problems:
        return None
    return (
        f"This server listens on {' and '.join(problems)}: clients follow the issuer's URLs"
        " (the discovery document), not this one. Change `issuer` in the configuration to"
        " match, or serve where it says."
    )


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def freeze_startup_objects() -> None:
    """Called once a serving process has built its app, before it serves: the objects made so
    far (modules, the app, the parsed rule file) live as long as the process, and a full garbage
    collection would walk every one of them again, stopping every request while it does (44 ms
    with 10^4 rules: 165,000 objects). `gc.freeze` sets them aside; what requests make is
    collected as before, and freed objects, frozen or not, are freed as usual by reference
    counting. Never in tests, which build many apps in one process."""
    gc.collect()
    gc.freeze()


class JSONErrorTask(ErrorTask):  # type: ignore[misc]
    def execute(self) -> None:
        error = self.request.error
        description = (
            "The request body is larger than this server accepts."
            if error.code == 413
            # Waitress quotes the offending input in full: cut and escaped like every echo.
            else f"{error.reason}: {echo(str(error.body))}"
        )
        body = json.dumps(
            {"error": _CODES.get(error.code, "invalid_request"), "error_description": description}
        ).encode("utf-8")
        self.status = f"{error.code} {error.reason}"
        self.response_headers.extend(
            [
                ("Content-Type", "application/json"),
                ("Cache-Control", "no-store"),
                ("X-Content-Type-Options", "nosniff"),
            ]
        )
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class OneFramingParser(HTTPRequestParser):  # type: ignore[misc]
    """Waitress's parser, refusing a request framed both by Content-Length and Transfer-Encoding."""

    def parse_header(self, header_plus: bytes) -> None:
        super().parse_header(header_plus)
        # For HTTP/1.1 waitress has taken Transfer-Encoding out of the headers and set `chunked`;
        # for HTTP/1.0 it leaves the header in place and reads the body by Content-Length.
        framed_twice = self.chunked or "TRANSFER_ENCODING" in self.headers
        if framed_twice and "CONTENT_LENGTH" in self.headers:
            # The error task answers 400 and closes the connection: nothing after it is read.
            raise ParsingError("Content-Length and Transfer-Encoding must not both be sent")


class JSONErrorChannel(HTTPChannel):  # type: ignore[misc]
    """One connection: JSON errors, one framing per request, and deadlines for slow requests.

    `head_timeout` and `body_timeout` (seconds) are set on the subclass `make_server` builds.
    The head clock of the first request starts when the connection is accepted; of a later one,
    at its first byte (an idle keep-alive connection is waitress's `channel_timeout`'s business).
    While the channel is busy with a request or its answer, the next request's clocks wait.
    """

    error_task_class = JSONErrorTask
    parser_class = OneFramingParser
    head_timeout: float = ServerSettings.request_head_timeout
    body_timeout: float = ServerSettings.body_timeout
    idle_timeout: float = ServerSettings.idle_timeout
    # More open connections than this: idle ones are closed after `idle_timeout`.
    crowded_above: float = ServerSettings.connection_limit / 2

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._head_from: float | None = time.monotonic()
        self._body_from: float | None = None
        self._busy = False
        super().__init__(*args, **kwargs)

    def received(self, data: bytes) -> bool:
        before = self.request
        result: bool = super().received(data)
        request = self.request
        if request is None:  # nothing partial left: no clock runs until the next byte
            self._head_from = self._body_from = None
            return result
        now = time.monotonic()
        if request is not before:
            # A new request began in this data; the first one of a connection counts from accept.
            if before is not None or self._head_from is None:
                self._head_from = now
            self._body_from = None
        if request.headers_finished and self._body_from is None:
            self._body_from = now
        return result

    def readable(self) -> bool:
        if (
            self.requests
            or self.total_outbufs_len
            or self.will_close
            or self.close_when_flushed
            or not self.connected
        ):
            self._busy = True
            return bool(super().readable())
        now = time.monotonic()
        if self._busy:  # the clocks of a request that arrived while we were busy start now
            self._busy = False
            self._head_from = now if self._head_from is not None else None
            self._body_from = now if self._body_from is not None else None
        request = self.request
        if request is None and self._head_from is None:  # idle between requests
            if (
                len(self.server.active_channels) > self.crowded_above
                and time.time() - self.last_activity > self.idle_timeout
            ):
                return self._give_up(
                    f"idle over {self.idle_timeout:g} s while over half the connection limit"
                    " was in use"
                )
        elif request is None or not request.headers_finished:
            if self._head_from is not None and now - self._head_from > self.head_timeout:
                return self._give_up(f"its request head took over {self.head_timeout:g} s")
        elif self._body_from is not None and now - self._body_from > self.body_timeout:
            return self._give_up(f"its request body took over {self.body_timeout:g} s")
        return bool(super().readable())

    def _give_up(self, reason: str) -> bool:
        log.info("closed a connection from %s: %s", self.addr, reason)
        self._head_from = self._body_from = None
        self.will_close = True  # waitress's loop closes it when it asks `writable`
        return False


def make_server(app: Flask, max_body_bytes: int, settings: ServerSettings) -> Any:
    """A waitress server for `app`; `.run()` serves, `.close()` stops, `.effective_port` tells."""
    channel_class = type(
        "Channel",
        (JSONErrorChannel,),
        {
            "head_timeout": settings.request_head_timeout,
            "body_timeout": settings.body_timeout,
            "idle_timeout": settings.idle_timeout,
            "crowded_above": settings.connection_limit / 2,
        },
    )
    server = create_server(
        app,
        host=settings.host,
        port=settings.port,
        threads=settings.threads,
        # Waitress refuses a larger body before buffering it (to disk): answered by our JSON task.
        max_request_body_size=max_body_bytes,
        ident="umaserver",
        # Waitress trusts no proxy of its own here: it would drop X-Forwarded-For before the app
        # reads it. With [server] trusted_proxies the app believes the header only from them
        # (services.signin.client_address); without, waitress drops it as before.
        clear_untrusted_proxy_headers=not settings.trusted_proxies,
        connection_limit=settings.connection_limit,
        channel_timeout=settings.channel_timeout,
        # How often waitress looks for idle connections past channel_timeout.
        cleanup_interval=min(settings.channel_timeout, 30),
        # poll(), not select(): select() fails with descriptors past 1024.
        asyncore_use_poll=True,
    )
    server.channel_class = channel_class
    return server
