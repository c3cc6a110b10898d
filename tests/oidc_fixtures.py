"""A throwaway OpenID Connect provider for tests: keys, JWK sets, ID tokens, a JWKS server.

key = make_rsa_key("k1")
token = make_id_token(key, id_token_claims(ISSUER, "client-at-idp", now=now))
with JwksServer(jwks_of([key])) as server:
    issuer = OidcIssuer(ISSUER, ("client-at-idp",), jwks_uri=server.url)
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from joserfc import jwt
from joserfc.jwk import ECKey, Key, OKPKey, RSAKey


def make_rsa_key(kid: str, size: int = 2048) -> RSAKey:
    return RSAKey.generate_key(size, parameters={"kid": kid})


def make_ec_key(kid: str, curve: str = "P-256") -> ECKey:
    return ECKey.generate_key(curve, parameters={"kid": kid})


def make_ed25519_key(kid: str) -> OKPKey:
    return OKPKey.generate_key("Ed25519", parameters={"kid": kid})


def jwks_of(keys: list[Key]) -> dict[str, Any]:
    """The public JWK set a provider would publish for these keys."""
    return {"keys": [key.as_dict(private=False) for key in keys]}


def id_token_claims(
    iss: str,
    aud: str | list[str],
    /,
    *,
    now: int,
    sub: str = "alice",
    lifetime: int = 300,
    **extra: Any,
) -> dict[str, Any]:
    """The claims of a fresh ID token; `extra` adds or overrides members (even iss and aud)."""
    return {"iss": iss, "sub": sub, "aud": aud, "iat": now, "exp": now + lifetime, **extra}


def make_id_token(
    private_key: Key,
    claims: dict[str, Any],
    alg: str = "RS256",
    kid: str | None = "",
) -> str:
    """A signed ID token. `kid` defaults to the key's own; None leaves it out of the header."""
    header: dict[str, Any] = {"alg": alg}
    if kid == "":
        kid = private_key.kid
    if kid is not None:
        header["kid"] = kid
    return jwt.encode(header, dict(claims), private_key, algorithms=[alg])


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def raw_token(header: dict[str, Any], claims: dict[str, Any], signature: bytes = b"") -> str:
    """A JWS put together by hand, for tokens no honest library would make."""
    return ".".join(
        [
            b64url(json.dumps(header).encode()),
            b64url(json.dumps(claims).encode()),
            b64url(signature),
        ]
    )


class JwksServer:
    """A real HTTP server on 127.0.0.1 (a free port) serving a JWK set at /jwks.

    Change what it answers with `serve(...)`; `hits` counts the requests it received.
    """

    def __init__(self, jwks: dict[str, Any] | None = None) -> None:
        self._lock = threading.Lock()
        self._status = 200
        self._body = b""
        self._delay = 0.0
        self._drip = 0.0
        self._content_length = True
        self._gzip = False
        self._encoding: str | None = None
        self.hits = 0
        if jwks is not None:
            self.serve(jwks)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with server._lock:
                    server.hits += 1
                    status, body = server._status, server._body
                    delay, drip = server._delay, server._drip
                    content_length, compressed = server._content_length, server._gzip
                    encoding = server._encoding
                if delay:
                    time.sleep(delay)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                if compressed:
                    # Whatever the client asked for, as some servers do.
                    body = gzip.compress(body)
                    self.send_header("Content-Encoding", "gzip")
                elif encoding is not None:  # a body already encoded, sent as it is
                    self.send_header("Content-Encoding", encoding)
                if content_length:
                    self.send_header("Content-Length", str(len(body)))
                else:
                    self.close_connection = True
                self.end_headers()
                with contextlib.suppress(OSError):  # the client gave up (timeout, size cap)
                    if drip:
                        for index in range(len(body)):
                            self.wfile.write(body[index : index + 1])  # unbuffered: sent now
                            time.sleep(drip)
                    else:
                        self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/jwks"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def serve(
        self,
        jwks: dict[str, Any] | None = None,
        *,
        status: int = 200,
        body: bytes | None = None,
        delay: float = 0.0,
        drip: float = 0.0,
        content_length: bool = True,
        gzipped: bool = False,
        content_encoding: str | None = None,
    ) -> None:
        """Answer with this JWK set (or raw `body`), status, delay before answering, one byte of
        the body every `drip` seconds, with or without a Content-Length header (without it the
        body ends when the connection closes), gzip-compressed or not, or `body` sent as it is
        under `content_encoding`."""
        with self._lock:
            self._status = status
            self._body = body if body is not None else json.dumps(jwks).encode()
            self._delay = delay
            self._drip = drip
            self._content_length = content_length
            self._gzip = gzipped
            self._encoding = content_encoding

    def __enter__(self) -> JwksServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
