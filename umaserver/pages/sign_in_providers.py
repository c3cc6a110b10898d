"""The sign-in providers' OpenID Connect clients (Authlib's Flask client), one per
`[[oidc_issuers]]` with a `client_id`: each registered once its endpoints are known (at start
when the config gives them, else at first use by bounded discovery, tried again at most every
DISCOVERY_RETRY seconds), every answer of a provider read whole within the configured time and
size and never following a redirect. `external_signin` runs the sign-in with them.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any

import requests
from authlib.integrations.flask_client import FlaskOAuth2App, OAuth
from authlib.integrations.requests_client import OAuth2Session
from flask import Flask

from ..claims.oidc_discovery import (
    DiscoveryError,
    ProviderEndpoints,
    configured_endpoints,
    discover,
)
from ..config import Config
from ..http_bodies import read_body

log = logging.getLogger("umaserver.gathering")

# After a failed discovery, seconds before the next request tries again (instead of waiting on
# an unreachable provider each time).
DISCOVERY_RETRY = 30


class _BoundedSession(OAuth2Session):  # type: ignore[misc]
    """Authlib's requests session, every answer read whole within `default_timeout` seconds and
    `max_bytes` bytes (a timeout alone bounds each socket read, not the body), never following
    a redirect."""

    def __init__(self, *args: Any, max_bytes: int = 65536, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_bytes = max_bytes
        self.headers["Accept-Encoding"] = "identity"

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs["stream"] = True
        kwargs["allow_redirects"] = False
        response: requests.Response = super().request(method, url, *args, **kwargs)
        try:
            content = read_body(response, self.default_timeout, self.max_bytes)
        finally:
            response.close()
        response._content = content
        response._content_consumed = True  # type: ignore[attr-defined]
        return response


class _ProviderApp(FlaskOAuth2App):  # type: ignore[misc]
    client_cls = _BoundedSession

    def parse_id_token(self, *args: Any, **kwargs: Any) -> None:
        # The ID token is verified by this server's own verifier, with the keys it keeps fresh
        # in the background (Authlib's would fetch them inside the request, unbounded).
        return None


class Providers:
    """The sign-in providers of one app, each registered with Authlib once its endpoints are
    known (at start when given, else at first use by bounded discovery)."""

    def __init__(self, app: Flask, config: Config) -> None:
        self.oauth = OAuth(app)
        self.config = config
        self.issuers = [issuer for issuer in config.oidc_issuers if issuer.signs_in]
        self.endpoints: dict[int, ProviderEndpoints] = {}
        self.failed_at: dict[int, float] = {}
        self.lock = threading.Lock()
        for index, issuer in enumerate(self.issuers):
            endpoints = configured_endpoints(issuer)
            if endpoints is not None:
                self._register(index, endpoints)

    def _register(self, index: int, endpoints: ProviderEndpoints) -> None:
        issuer = self.issuers[index]
        self.oauth.register(
            client_name(index),
            client_cls=_ProviderApp,
            client_id=issuer.client_id,
            client_secret=issuer.client_secret,
            authorize_url=endpoints.authorization_endpoint,
            access_token_url=endpoints.token_endpoint,
            client_kwargs={
                "scope": " ".join(issuer.scopes),
                "code_challenge_method": "S256",
                "token_endpoint_auth_method": "client_secret_basic",
                "default_timeout": self.config.claims.provider_timeout,
                "max_bytes": self.config.claims.provider_max_bytes,
            },
        )
        self.endpoints[index] = endpoints

    def remote(self, index: int) -> tuple[Any, ProviderEndpoints]:
        """The Authlib app of provider `index` with its endpoints; DiscoveryError when they
        cannot be had now."""
        with self.lock:
            if index in self.endpoints:
                return self.oauth.create_client(client_name(index)), self.endpoints[index]
            if time.monotonic() - self.failed_at.get(index, -math.inf) < DISCOVERY_RETRY:
                raise DiscoveryError("it failed a moment ago")
        issuer = self.issuers[index]
        claims = self.config.claims
        try:
            endpoints = discover(issuer, claims.provider_timeout, claims.provider_max_bytes)
        except DiscoveryError:
            with self.lock:
                self.failed_at[index] = time.monotonic()
            raise
        with self.lock:
            if index not in self.endpoints:
                self._register(index, endpoints)
                log.info("sign-in provider %r discovered", issuer.issuer)
            return self.oauth.create_client(client_name(index)), self.endpoints[index]


def client_name(index: int) -> str:
    return f"provider{index}"
