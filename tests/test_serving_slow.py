"""Slow clients against a real server: connections that trickle a request head a byte at a time,
all from 127.0.0.1, neither starve other requests nor stay open past `request_head_timeout`."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from .conftest import LiveServer, start_server, stop_server
from .flows import wait_until

pytestmark = pytest.mark.live

SLOW = 150
TICK = 0.5  # seconds between two bytes of each slow connection


class Tricklers:
    """`count` connections that each send a request line, then one header byte every TICK and
    never finish; records when the server closed each one."""

    def __init__(self, url: str, count: int) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None
        self.sockets: list[socket.socket] = []
        for _ in range(count):
            sock = socket.create_connection((parts.hostname, parts.port), timeout=5)
            sock.setblocking(False)
            sock.send(b"GET /.well-known/uma-configuration HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            self.sockets.append(sock)
        self.started = time.monotonic()
        self.closed_at: dict[int, float] = {}
        self.rounds = 0  # how many times every open connection has been sent a byte
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _closed(self, index: int) -> None:
        self.closed_at.setdefault(index, time.monotonic() - self.started)

    def _run(self) -> None:
        while not self.stop.wait(TICK):
            open_ones = [i for i in range(len(self.sockets)) if i not in self.closed_at]
            for i in open_ones:
                try:
                    self.sockets[i].send(b"a")
                except BlockingIOError:
                    pass  # the server is not reading it yet (still in the listen backlog)
                except OSError:
                    self._closed(i)
            readable, _, _ = select.select(
                [self.sockets[i] for i in open_ones if i not in self.closed_at], [], [], 0
            )
            for sock in readable:
                index = self.sockets.index(sock)
                try:
                    if not sock.recv(4096):
                        self._closed(index)
                except OSError:
                    self._closed(index)
            self.rounds += 1

    def open_count(self) -> int:
        return len(self.sockets) - len(self.closed_at)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        for sock in self.sockets:
            sock.close()


@contextmanager
def tricklers(url: str, count: int) -> Iterator[Tricklers]:
    made = Tricklers(url, count)
    try:
        yield made
    finally:
        made.close()


def timed_get(url: str) -> float:
    began = time.monotonic()
    response = requests.get(url + "/.well-known/uma-configuration", timeout=15)
    assert response.status_code == 200
    return time.monotonic() - began


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    started = start_server(tmp_path, "[server]\nrequest_head_timeout = 3\nbody_timeout = 2\n")
    yield started
    stop_server(started)


def test_slow_connections_are_held_without_starving_others(server: LiveServer) -> None:
    with tricklers(server.url, SLOW) as slow:
        wait_until(lambda: slow.rounds >= 2, message="the slow connections never trickled")
        assert timed_get(server.url) < 3
        assert slow.open_count() == SLOW  # held, not closed: they are still within their time

        # Each is closed once its head has taken longer than request_head_timeout (3 s), however
        # often it sends a byte; the waitress default would have kept them for ever.
        deadline = time.monotonic() + 10
        while slow.open_count() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert slow.open_count() == 0
        closed = sorted(slow.closed_at.values())
        assert closed[0] >= 2.5 and closed[-1] < 3 + 3
    assert timed_get(server.url) < 3
    assert "its request head took over 3 s" in server.output()


def test_more_slow_connections_than_the_limit_delay_others_only_until_their_deadline(
    tmp_path: Path,
) -> None:
    server = start_server(tmp_path, "[server]\nrequest_head_timeout = 2\nconnection_limit = 100\n")
    try:
        with tricklers(server.url, SLOW) as slow:
            wait_until(lambda: slow.rounds >= 1, message="the slow connections never trickled")
            # 100 slow ones hold every connection the server takes; the rest and this request
            # wait in the listen backlog until the first ones miss their 2 s.
            assert timed_get(server.url) < 2 + 3
    finally:
        stop_server(server)


def test_a_connection_that_sends_nothing_is_closed_too(server: LiveServer) -> None:
    parts = urlsplit(server.url)
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=8) as sock:
        began = time.monotonic()
        assert sock.recv(1) == b""
        assert 3 <= time.monotonic() - began < 3 + 2.5


def test_a_body_that_trickles_is_closed_after_body_timeout(server: LiveServer) -> None:
    parts = urlsplit(server.url)
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=1) as sock:
        sock.sendall(
            b"POST /rs/resource_set HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{"
        )
        began = time.monotonic()
        closed_after = None
        while time.monotonic() - began < 8:
            try:
                sock.send(b" ")
                if sock.recv(1) == b"":
                    closed_after = time.monotonic() - began
                    break
            except TimeoutError:
                continue  # nothing to read yet: send another byte
            except OSError:
                closed_after = time.monotonic() - began
                break
        assert closed_after is not None and 2 <= closed_after < 2 + 2.5
