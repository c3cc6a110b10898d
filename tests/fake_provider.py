"""An OpenID Connect provider in-process, for the relying party's tests: a real HTTP server on
127.0.0.1 serving discovery, the token endpoint (checking the client's secret, the code and its
PKCE verifier) and userinfo, signing ID tokens RS256 with joserfc. A test plays the person at the
provider: `approve(params)` turns the authorization request's parameters into a code.

Knobs: `id_token_extra` (claims added to or overriding the ID token's), `userinfo` (members of
the userinfo answer, `sub` included), `token_delay` (seconds before the token endpoint answers),
`token_padding` (bytes of padding in its answer), `discovery_issuer` (the issuer the discovery
document names).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from .oidc_fixtures import id_token_claims, jwks_of, make_id_token, make_rsa_key

CLIENT_ID = "uma-at-op"
CLIENT_SECRET = "op-secret-for-uma"


class FakeProvider:
    def __init__(self) -> None:
        self.key = make_rsa_key("op-key")
        self.jwks = jwks_of([self.key])
        self.codes: dict[str, dict[str, Any]] = {}
        self.id_token_extra: dict[str, Any] = {}
        self.userinfo: dict[str, Any] | None = None
        self.token_delay = 0.0
        self.token_padding = 0
        self.discovery_issuer: str | None = None
        self.token_requests: list[dict[str, str]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    self._answer(200, provider.discovery())
                elif self.path == "/userinfo":
                    self._answer(200, provider.userinfo_answer(self.headers.get("Authorization")))
                else:
                    self._answer(404, {"error": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                status, body = provider.token(form, self.headers.get("Authorization", ""))
                if provider.token_delay:
                    time.sleep(provider.token_delay)
                self._answer(status, body)

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client gave up (timeout, size cap)
                    self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.issuer = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def config_entry(self, *, explicit: bool = True, userinfo: bool = True) -> str:
        """The `[[oidc_issuers]]` table naming this provider (its keys in `jwks_file`)."""
        text = (
            f'[[oidc_issuers]]\nissuer = "{self.issuer}"\njwks_file = "op-jwks.json"\n'
            f'client_id = "{CLIENT_ID}"\nclient_secret = "{CLIENT_SECRET}"\n'
            'display_name = "Example ID"\n'
        )
        if explicit:
            text += (
                f'authorization_endpoint = "{self.issuer}/auth"\n'
                f'token_endpoint = "{self.issuer}/token"\n'
            )
            if userinfo:
                text += f'userinfo_endpoint = "{self.issuer}/userinfo"\n'
        return text

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.discovery_issuer or self.issuer,
            "authorization_endpoint": f"{self.issuer}/auth",
            "token_endpoint": f"{self.issuer}/token",
            "userinfo_endpoint": f"{self.issuer}/userinfo",
            "jwks_uri": f"{self.issuer}/jwks",
        }

    def approve(self, params: dict[str, str], sub: str = "op-alice", **claims: Any) -> str:
        """The person signed in as `sub` and agreed: the code the provider sends back."""
        code = secrets.token_urlsafe(16)
        self.codes[code] = {"params": params, "sub": sub, "claims": claims}
        return code

    def token(self, form: dict[str, str], authorization: str) -> tuple[int, dict[str, Any]]:
        self.token_requests.append(form)
        expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        if authorization != f"Basic {expected}":
            return 401, {"error": "invalid_client"}
        grant = self.codes.pop(form.get("code", ""), None)
        if grant is None or form.get("grant_type") != "authorization_code":
            return 400, {"error": "invalid_grant"}
        params = grant["params"]
        verifier = form.get("code_verifier", "")
        challenge = (
            base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
            .rstrip(b"=")
            .decode()
        )
        if params.get("code_challenge_method") != "S256" or challenge != params.get(
            "code_challenge"
        ):
            return 400, {"error": "invalid_grant", "error_description": "PKCE"}
        if form.get("redirect_uri") != params.get("redirect_uri"):
            return 400, {"error": "invalid_grant", "error_description": "redirect_uri"}
        claims = id_token_claims(
            self.issuer,
            CLIENT_ID,
            now=int(time.time()),
            sub=grant["sub"],
            nonce=params.get("nonce"),
            auth_time=int(time.time()),
            **grant["claims"],
        )
        claims.update(self.id_token_extra)
        body: dict[str, Any] = {
            "access_token": "at-" + grant["sub"],
            "token_type": "Bearer",
            "expires_in": 300,
            "id_token": make_id_token(self.key, claims),
        }
        if self.token_padding:
            body["padding"] = "x" * self.token_padding
        return 200, body

    def userinfo_answer(self, authorization: str | None) -> dict[str, Any]:
        if not authorization or not authorization.startswith("Bearer at-"):
            return {"error": "invalid_token"}
        answer = {"sub": authorization.removeprefix("Bearer at-"), "email": "alice@op.example"}
        answer.update(self.userinfo or {})
        return answer

    def __enter__(self) -> FakeProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
