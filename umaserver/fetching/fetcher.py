"""Fetching a URI that someone registered, safely: the one way this server reads such content.

`Fetcher.fetch(uri)`:
1. Takes http and https URIs only, of at most `MAX_URI_LENGTH` characters, without user
   information; any port (the address check below is what keeps us off internal services; scope
   descriptions and icons are served on other ports than 80 and 443 often enough).
2. Resolves the host itself (the injectable `resolver`: host -> addresses, by default
   `socket.getaddrinfo`), and refuses the URI when any address it resolves to is refused by
   `addresses.refusal` (private, loopback, link-local, CGNAT, multicast, ...): a name that points
   at a private address among public ones is not one to trust.
3. Connects to a checked address itself (the injectable `connect`), never by name again, so the
   answer of a second DNS lookup cannot swap the address checked for another. https is TLS over
   that connection with SNI and the certificate checked for the host name of the URI; the `Host`
   header names it too.
4. Follows no redirect: a 3xx is a failure, as is anything but 200, or a compressed body.
5. Bounds the whole exchange (connection, TLS, headers and body) by one deadline, `timeout`
   seconds from the start (a watchdog shuts the socket when it passes: a server dripping its
   answer byte by byte cannot hold us), and the body by `max_bytes`, on the declared length and
   on the bytes as they come.

Name resolution is bounded by the system resolver's own timeouts. Plain Python: no Flask here.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from urllib.parse import urlsplit

from . import addresses

MAX_URI_LENGTH = 2048
USER_AGENT = "umaserver (checking a URI registered with it)"

#: host -> the addresses it resolves to, as text.
Resolver = Callable[[str], list[str]]
#: (address, port, timeout) -> a connected socket.
Connector = Callable[[str, int, float], socket.socket]


class FetchError(Exception):
    """The URI was not fetched; the message says why, in words for logs and pages."""


@dataclass(frozen=True)
class Target:
    """What a URI asks for: scheme, host (lower case, no brackets), port, and the request path."""

    scheme: str
    host: str
    port: int
    path: str

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


@dataclass(frozen=True)
class Fetched:
    """A 200 answer: the address it came from, its media type (lower case, without parameters;
    "" when it named none), and its body (empty when the body was not asked for)."""

    uri: str
    address: str
    content_type: str
    body: bytes


def target(uri: str) -> Target:
    """The parts of an http(s) URI this server may fetch; FetchError otherwise."""
    if len(uri) > MAX_URI_LENGTH:
        raise FetchError(f"the URI is longer than {MAX_URI_LENGTH} characters")
    if any(ord(char) <= 0x20 or ord(char) == 0x7F for char in uri):
        raise FetchError("the URI has spaces or control characters")
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError as error:
        raise FetchError(f"the URI cannot be read: {error}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise FetchError("only http and https URIs are fetched")
    if "@" in parts.netloc:
        raise FetchError("the URI has user information")
    host = parts.hostname or ""
    if not host or "%" in host:
        raise FetchError("the URI has no host name this server can use")
    try:
        host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise FetchError("the host name is not a valid internationalised name") from None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(scheme, host, port or (443 if scheme == "https" else 80), path)


def system_resolver(host: str) -> list[str]:
    """The host's addresses, from the system's resolver."""
    found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in found))


def connect_tcp(address: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection to `address` (an IP address, so no name is looked up)."""
    return socket.create_connection((address, port), timeout=timeout)


class _Watchdog:
    """Shuts the socket it watches when the deadline passes, so any read blocked on it ends."""

    def __init__(self, seconds: float) -> None:
        self.sock: socket.socket | None = None
        self.fired = False
        self._timer = threading.Timer(max(0.0, seconds), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        if self.sock is not None:
            with suppress(OSError):
                # The plain socket's shutdown, also under TLS: no TLS close alert is wanted.
                socket.socket.shutdown(self.sock, socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


class Fetcher:
    """Fetches registered URIs with the rules of the module."""

    def __init__(
        self,
        timeout: float,
        max_bytes: int,
        allow_loopback: bool = False,
        *,
        resolver: Resolver = system_resolver,
        connect: Connector = connect_tcp,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.allow_loopback = allow_loopback
        self._resolver = resolver
        self._connect = connect
        self._tls = tls

    def checked_addresses(self, found: Target) -> list[str]:
        """The addresses of the target's host, each one checked; FetchError when any is refused."""
        literal = addresses.parse(found.host)
        if literal is not None:
            listed = [str(literal)]
        else:
            try:
                listed = list(self._resolver(found.host))
            except (OSError, UnicodeError) as error:
                raise FetchError(f"the host {found.host} cannot be resolved: {error}") from None
        if not listed:
            raise FetchError(f"the host {found.host} has no address")
        for text in listed:
            address = addresses.parse(text)
            if address is None:
                raise FetchError(f"the host {found.host} resolves to {text!r}, not an address")
            reason = addresses.refusal(address, self.allow_loopback)
            if reason is not None:
                raise FetchError(f"the host {found.host} resolves to {address}: {reason}")
        return listed

    def fetch(self, uri: str, accept: str, *, read_body: bool = True) -> Fetched:
        """The 200 answer to a GET of `uri`; FetchError for anything else (see the module).
        Without `read_body`, only the status and headers are read."""
        deadline = time.monotonic() + self.timeout
        found = target(uri)
        listed = self.checked_addresses(found)
        watchdog = _Watchdog(deadline - time.monotonic())
        sock: socket.socket | None = None
        try:
            address, sock = self._connected(listed, found.port, deadline)
            watchdog.sock = sock
            if found.scheme == "https":
                sock = self._tls_context().wrap_socket(sock, server_hostname=found.host)
                watchdog.sock = sock
            media_type, body = self._exchange(sock, found, accept, deadline, read_body)
            if watchdog.fired:  # the socket was shut under a read: what came may be cut short
                raise FetchError(f"no whole answer within {self.timeout} s")
            return Fetched(uri, address, media_type, body)
        except FetchError:
            if watchdog.fired:  # the socket was shut under a read: say why it ended
                raise FetchError(f"no whole answer within {self.timeout} s") from None
            raise
        except (OSError, http.client.HTTPException, ValueError) as error:
            if watchdog.fired or time.monotonic() > deadline:
                raise FetchError(f"no whole answer within {self.timeout} s") from None
            raise FetchError(f"the exchange failed: {error or type(error).__name__}") from None
        finally:
            watchdog.cancel()
            if sock is not None:
                sock.close()

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    def _connected(
        self, listed: list[str], port: int, deadline: float
    ) -> tuple[str, socket.socket]:
        failures = []
        for address in listed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                return address, self._connect(address, port, remaining)
            except OSError as error:
                failures.append(f"{address}: {error}")
        raise FetchError("no connection: " + ("; ".join(failures) or "out of time"))

    def _exchange(
        self, sock: socket.socket, found: Target, accept: str, deadline: float, read_body: bool
    ) -> tuple[str, bytes]:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        conn = http.client.HTTPConnection(found.host, found.port)
        conn.sock = sock  # ours, connected to the checked address: http.client never connects
        conn.putrequest("GET", found.path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", found.host_header)
        conn.putheader("Accept", accept)
        conn.putheader("Accept-Encoding", "identity")
        conn.putheader("User-Agent", USER_AGENT)
        conn.putheader("Connection", "close")
        conn.endheaders()
        response = conn.getresponse()
        if 300 <= response.status < 400:
            raise FetchError(f"the server answered with a redirect (HTTP {response.status})")
        if response.status != 200:
            raise FetchError(f"the server answered HTTP {response.status}")
        encoding = (response.getheader("Content-Encoding") or "identity").strip().lower()
        if encoding != "identity":
            raise FetchError(f"the body is encoded as {encoding!r}")
        media_type = (response.getheader("Content-Type") or "").split(";")[0].strip().lower()
        if not read_body:
            return media_type, b""
        length = (response.getheader("Content-Length") or "").strip()
        if length.isdigit() and int(length) > self.max_bytes:
            raise FetchError(f"the body is larger than {self.max_bytes} bytes")
        body = bytearray()
        while True:
            if time.monotonic() > deadline:
                raise FetchError(f"no whole answer within {self.timeout} s")
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = response.read1(8192)
            if not chunk:
                if length.isdigit() and len(body) != int(length):
                    raise FetchError("the body ends before its declared length")
                return media_type, bytes(body)
            body += chunk
            if len(body) > self.max_bytes:
                raise FetchError(f"the body is larger than {self.max_bytes} bytes")
