"""HTTP framing against a real server: a request framed twice (Content-Length and
Transfer-Encoding) is refused and its connection closed, so nothing can be smuggled behind it."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from .conftest import LiveServer, start_server, stop_server

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    started = start_server(tmp_path_factory.mktemp("http"))
    yield started
    stop_server(started)


def exchange(server: LiveServer, raw: bytes, timeout: float = 5.0) -> tuple[bytes, bool]:
    """Sends `raw` on one connection; what came back, and whether the server closed it."""
    parts = urlsplit(server.url)
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        sock.sendall(raw)
        received = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                return received, False
            except ConnectionResetError:
                return received, True
            if not chunk:
                return received, True
            received += chunk
        return received, False


SECOND = b"GET /.well-known/uma-configuration HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.mark.parametrize(
    "head",
    [
        # chunked says the body is empty; Content-Length says 5 bytes: "0\r\n\r\n".
        b"POST /rs/resource_set HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /rs/resource_set HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        b"Content-Length: 0\r\n\r\n0\r\n\r\n",
        b"POST /rs/resource_set HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ],
    ids=["cl-then-te", "te-then-cl", "http-1.0"],
)
def test_a_request_framed_twice_is_refused_and_nothing_behind_it_is_served(
    server: LiveServer, head: bytes
) -> None:
    received, closed = exchange(server, head + SECOND)
    assert closed
    assert received.count(b"HTTP/1.") == 1, received
    status_line, _, rest = received.partition(b"\r\n")
    assert status_line.split(b" ")[1] == b"400"
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert b"Content-Type: application/json" in headers
    assert json.loads(body)["error"] == "invalid_request"


def test_one_framing_keeps_the_connection_and_serves_the_next_request(server: LiveServer) -> None:
    chunked = (
        b"POST /rs/resource_set HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        b"Content-Type: application/json\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
    )
    last = SECOND.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
    received, closed = exchange(server, chunked + last)
    assert closed
    # Both answered on one connection: 401 (no PAT), then the configuration document.
    assert received.count(b"HTTP/1.1 ") == 2, received
    assert received.startswith(b"HTTP/1.1 401")
    assert b"HTTP/1.1 200" in received


@pytest.mark.parametrize(
    "raw",
    [
        b"get" + b"a" * 200_000 + b" / HTTP/1.1\r\nHost: x\r\n\r\n",  # a malformed method
        b"GET / HTTP/1.1\r\n " + b"\x1b[31m" * 20_000 + b"\r\n\r\n",  # a folded first header
    ],
    ids=["long-method", "escapes-in-a-header"],
)
def test_what_waitress_refuses_is_answered_in_our_shape_with_a_short_escaped_echo(
    server: LiveServer, raw: bytes
) -> None:
    received, _ = exchange(server, raw)
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"400", head  # waitress answers a request it cannot read as 1.0
    assert b"X-Content-Type-Options: nosniff" in head
    answer = json.loads(body)
    assert answer["error"] == "invalid_request"
    assert len(answer["error_description"]) < 200  # the input is cut to 64 characters
    assert "\x1b" not in answer["error_description"]
