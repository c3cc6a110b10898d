"""The safe fetcher (`umaserver.fetching.fetcher`): which addresses it refuses (through an
injected resolver: no traffic ever goes to a private range, and no connection is even tried), and
how it treats redirects, large and slow answers from a real server on loopback (`fake_web`)."""

from __future__ import annotations

import datetime
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from umaserver.fetching import addresses
from umaserver.fetching.fetcher import Fetcher, FetchError, connect_tcp, target

from .fake_web import PNG, FakeWeb, Route


class RecordingConnect:
    """A connect function that records every call and connects to nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def __call__(self, address: str, port: int, timeout: float) -> socket.socket:
        self.calls.append((address, port))
        raise ConnectionRefusedError("the test connects nowhere")


REFUSED = [
    ("10.0.0.1", "private"),
    ("172.16.5.4", "private"),
    ("192.168.1.1", "private"),
    ("127.0.0.1", "loopback"),
    ("127.255.0.9", "loopback"),
    ("169.254.169.254", "link-local"),  # cloud metadata
    ("100.64.0.1", "CGNAT"),
    ("100.127.255.254", "CGNAT"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("0.0.0.0", "unspecified"),  # noqa: S104
    ("0.1.2.3", "private"),  # "this network"
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),  # broadcast
    ("192.0.2.1", "private"),  # documentation
    ("198.18.0.1", "private"),  # benchmarking
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fe80::1", "link-local"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("ff02::1", "multicast"),
    ("fec0::1", "site-local"),
    ("2001:db8::1", "private"),  # documentation
    ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
    ("::ffff:10.1.2.3", "private"),
    ("::ffff:169.254.169.254", "link-local"),
    ("::ffff:100.64.0.1", "CGNAT"),
    ("::127.0.0.1", "loopback"),  # IPv4-compatible
    ("::10.0.0.1", "private"),
    ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
    ("2002:a9fe:a9fe::1", "link-local"),  # 6to4 of 169.254.169.254
    ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
    ("64:ff9b::7f00:1", "loopback"),
    ("64:ff9b:1::1", "NAT64"),  # local-use NAT64
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
]


@pytest.mark.parametrize(("address", "why"), REFUSED)
def test_a_name_resolving_to_a_refused_address_is_never_connected_to(
    address: str, why: str
) -> None:
    connect = RecordingConnect()
    fetcher = Fetcher(5, 1000, resolver=lambda host: [address], connect=connect)
    with pytest.raises(FetchError) as refused:
        fetcher.fetch("http://scopes.example/read", "application/json")
    assert why in str(refused.value)
    assert address.split("::")[0] in str(refused.value) or "carries" in str(refused.value)
    assert connect.calls == []


@pytest.mark.parametrize(("address", "why"), REFUSED)
def test_a_refused_address_written_in_the_uri_is_never_connected_to(address: str, why: str) -> None:
    connect = RecordingConnect()
    resolved: list[str] = []
    fetcher = Fetcher(5, 1000, resolver=lambda host: resolved or [], connect=connect)
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(FetchError, match=why):
        fetcher.fetch(f"https://{host}:8443/x", "application/json")
    assert connect.calls == []


def test_one_refused_address_among_public_ones_refuses_the_name() -> None:
    connect = RecordingConnect()
    fetcher = Fetcher(5, 1000, resolver=lambda host: ["93.184.215.14", "10.0.0.7"], connect=connect)
    with pytest.raises(FetchError, match=r"10\.0\.0\.7: it is a private address"):
        fetcher.fetch("http://mixed.example/", "text/html")
    assert connect.calls == []


@pytest.mark.parametrize(
    "address", ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "::ffff:8.8.8.8"]
)
def test_public_addresses_are_connected_to_as_resolved(address: str) -> None:
    connect = RecordingConnect()
    fetcher = Fetcher(5, 1000, resolver=lambda host: [address], connect=connect)
    with pytest.raises(FetchError, match="no connection"):
        fetcher.fetch("http://public.example:8080/", "text/html")
    assert connect.calls == [(address, 8080)]


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("10.0.0.1", False),
        ("192.168.0.1", False),
        ("169.254.1.1", False),
        ("::ffff:127.0.0.1", False),
        ("0.0.0.0", False),  # noqa: S104
    ],
)
def test_allow_loopback_allows_loopback_and_nothing_else(address: str, allowed: bool) -> None:
    parsed = addresses.parse(address)
    assert parsed is not None
    assert (addresses.refusal(parsed, allow_loopback=True) is None) is allowed
    assert addresses.refusal(parsed) is not None


def test_the_resolver_is_asked_once_and_the_checked_address_is_the_one_connected_to() -> None:
    asked: list[str] = []

    def resolver(host: str) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"] if len(asked) == 1 else ["10.0.0.1"]  # rebinding after the check

    with FakeWeb() as web:
        web.routes["/a"] = Route(body=b"hello", content_type="text/plain")
        connected: list[str] = []

        def connect(address: str, port: int, timeout: float) -> socket.socket:
            connected.append(address)
            return connect_tcp(address, port, timeout)

        fetcher = Fetcher(5, 1000, True, resolver=resolver, connect=connect)
        fetched = fetcher.fetch(f"http://scopes.example:{web.port}/a", "*/*")
        assert fetched.body == b"hello" and fetched.address == "127.0.0.1"
        assert asked == ["scopes.example"] and connected == ["127.0.0.1"]
        # The request names the host of the URI, not the address.
        assert web.requests[0][1]["Host"] == f"scopes.example:{web.port}"


@pytest.mark.parametrize(
    ("uri", "why"),
    [
        ("ftp://files.example/x", "only http and https"),
        ("file:///etc/passwd", "only http and https"),
        ("javascript:alert(1)", "only http and https"),
        ("http://user:pw@files.example/x", "user information"),
        ("http:///nohost", "no host"),
        ("http://files.example:99999/", "cannot be read"),
        ("http://files.example/a b", "spaces"),
        ("http://files.example/" + "a" * 2100, "longer than"),
    ],
)
def test_uris_that_are_not_fetched(uri: str, why: str) -> None:
    with pytest.raises(FetchError, match=why):
        target(uri)


def test_default_ports_and_any_port() -> None:
    assert target("https://a.example/p?q=1#frag").port == 443
    assert target("https://a.example/p?q=1#frag").path == "/p?q=1"
    assert target("http://A.Example").port == 80
    assert target("http://A.Example").host == "a.example"
    assert target("http://a.example:8080/").host_header == "a.example:8080"
    assert target("http://[::1]:8080/").host_header == "[::1]:8080"


@pytest.fixture
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as started:
        yield started


def loopback(timeout: float = 5, max_bytes: int = 1000) -> Fetcher:
    fetcher = Fetcher(1, max_bytes, allow_loopback=True)
    fetcher.timeout = timeout  # below the config's 1 s, to keep the tests quick
    return fetcher


def test_an_image_is_fetched(web: FakeWeb) -> None:
    web.routes["/i.png"] = Route(body=PNG, content_type="image/png")
    fetched = loopback().fetch(web.url("/i.png"), "image/png")
    assert (fetched.body, fetched.content_type) == (PNG, "image/png")
    assert web.requests[0][1]["Accept-Encoding"] == "identity"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_a_failure_and_not_followed(web: FakeWeb, status: int) -> None:
    web.routes["/moved"] = Route(status=status, headers={"Location": web.url("/there")})
    web.routes["/there"] = Route(body=b"{}")
    with pytest.raises(FetchError, match=f"redirect \\(HTTP {status}\\)"):
        loopback().fetch(web.url("/moved"), "*/*")
    assert web.paths_asked() == ["/moved"]


def test_an_error_status_is_a_failure(web: FakeWeb) -> None:
    with pytest.raises(FetchError, match="HTTP 404"):
        loopback().fetch(web.url("/nothing"), "*/*")


def test_an_oversized_body_is_refused_on_its_declared_length(web: FakeWeb) -> None:
    web.routes["/big"] = Route(body=b"x" * 5000)
    with pytest.raises(FetchError, match="larger than 1000 bytes"):
        loopback().fetch(web.url("/big"), "*/*")


def test_an_oversized_body_without_a_length_is_cut_off_while_reading(web: FakeWeb) -> None:
    web.routes["/big"] = Route(body=b"x" * 50_000, declare_length=False)
    with pytest.raises(FetchError, match="larger than 1000 bytes"):
        loopback().fetch(web.url("/big"), "*/*")


def test_a_compressed_body_is_refused(web: FakeWeb) -> None:
    web.routes["/gz"] = Route(body=b"\x1f\x8b", headers={"Content-Encoding": "gzip"})
    with pytest.raises(FetchError, match="encoded as 'gzip'"):
        loopback().fetch(web.url("/gz"), "*/*")


def test_a_server_that_never_answers_is_cut_off_at_the_deadline(web: FakeWeb) -> None:
    web.routes["/hang"] = Route(hang=True)
    started = time.monotonic()
    with pytest.raises(FetchError, match=r"within 0\.3 s"):
        loopback(timeout=0.3).fetch(web.url("/hang"), "*/*")
    assert time.monotonic() - started < 1.5


def test_a_dripping_body_is_cut_off_at_the_deadline(web: FakeWeb) -> None:
    # Each byte comes well within any per-read timeout; the whole never comes within the deadline.
    web.routes["/drip"] = Route(body=b"x" * 200, drip=0.02)
    started = time.monotonic()
    with pytest.raises(FetchError, match=r"within 0\.3 s"):
        loopback(timeout=0.3).fetch(web.url("/drip"), "*/*")
    assert time.monotonic() - started < 1.5


def test_without_allow_loopback_the_loopback_server_is_never_asked(web: FakeWeb) -> None:
    web.routes["/a"] = Route(body=b"{}")
    with pytest.raises(FetchError, match="loopback"):
        Fetcher(1, 1000).fetch(web.url("/a"), "*/*")
    assert web.requests == []


def _certificate(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for `name` and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.mark.parametrize(("served_as", "works"), [("scopes.test", True), ("other.test", False)])
def test_https_to_the_checked_address_checks_the_certificate_for_the_uri_host(
    web: FakeWeb, tmp_path: Path, served_as: str, works: bool
) -> None:
    cert_path, key_path = _certificate(tmp_path, served_as)
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(cert_path, key_path)
    web.server.socket = server_side.wrap_socket(web.server.socket, server_side=True)
    web.routes["/read.json"] = Route(body=b'{"name": "Read"}', content_type="application/json")
    trusting = ssl.create_default_context(cafile=str(cert_path))
    fetcher = Fetcher(
        2, 1000, True, resolver=lambda host: ["127.0.0.1"], connect=connect_tcp, tls=trusting
    )
    uri = f"https://scopes.test:{web.port}/read.json"
    if works:
        assert fetcher.fetch(uri, "application/json").body == b'{"name": "Read"}'
        assert web.requests[0][1]["Host"] == f"scopes.test:{web.port}"
    else:
        with pytest.raises(FetchError, match="certificate"):
            fetcher.fetch(uri, "application/json")
        assert web.requests == []
