"""Idle keep-alive connections against a real server (issue 27, N7): while more than half of
`connection_limit` is in use, a connection that made its request and stays silent is closed after
`idle_timeout`, so that such connections cannot keep new clients out for `channel_timeout`."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from .conftest import LiveServer, start_server, stop_server
from .flows import wait_until

pytestmark = pytest.mark.live

LIMIT = 40
REQUEST = b"GET /.well-known/uma-configuration HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    started = start_server(
        tmp_path, f"[server]\nconnection_limit = {LIMIT}\nidle_timeout = 1\nchannel_timeout = 60\n"
    )
    yield started
    stop_server(started)


def keep_alive(url: str) -> socket.socket:
    """A connection that has made one keep-alive request, read its whole answer, and stays."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    sock.sendall(REQUEST)
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return sock


def is_open(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""  # the server sends nothing unasked: b"" is its close
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


def test_idle_connections_give_way_when_over_half_the_limit_is_in_use(
    server: LiveServer,
) -> None:
    held: list[socket.socket] = []
    try:
        held += [keep_alive(server.url) for _ in range(LIMIT // 4)]
        opened = time.monotonic()
        # Below half the limit, idle connections are kept past idle_timeout (channel_timeout
        # closes them): 2.5 s later, every one is still open.
        time.sleep(max(0.0, opened + 2.5 - time.monotonic()))
        assert all(is_open(sock) for sock in held)
        held += [keep_alive(server.url) for _ in range(LIMIT - len(held))]
        began = time.monotonic()
        # Every place is held by a silent connection: a new client waits in the backlog only
        # until idle_timeout (1 s) closes them, not for channel_timeout (60 s).
        reply = requests.get(server.url + "/.well-known/uma-configuration", timeout=10)
        assert reply.status_code == 200
        assert time.monotonic() - began < 5
        wait_until(lambda: not any(is_open(sock) for sock in held), timeout=5)
    finally:
        for sock in held:
            sock.close()
    assert "while over half the connection limit was in use" in server.output()
