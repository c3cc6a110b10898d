"""The authorization code grant (with S256 PKCE, RFC 7636 and RFC 9700) and the refresh token
grant (rotation; a reused refresh token revokes its family), as Authlib grants over our services,
and the stored client as Authlib asks about it (`OAuthClient`)."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from authlib.common.urls import add_params_to_uri
from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import (
    AccessDeniedError,
    ClientMixin,
    InvalidGrantError,
    InvalidRequestError,
    InvalidScopeError,
    grants,
    scope_to_list,
)
from authlib.oauth2.rfc7636 import CodeChallenge, create_s256_code_challenge

from ..runtime import runtime
from ..services import grants as codes_and_refresh_tokens
from ..services.clients import LOOPBACK_HOSTS
from ..services.grants import GrantRefused, Issued
from ..storage.per_request import storage
from ..storage.records import AuthorizationCode, Client, RefreshToken
from .bearer import SCOPE_ALIASES

log = logging.getLogger("umaserver.oauth")
TOKEN_AUTH_METHODS = ("client_secret_basic", "client_secret_post")


def normalise_scope(unverified_scope: str | None) -> str:
    """The requested scopes this server offers, legacy URIs mapped to their names; raises
    InvalidScopeError when none of them is offered.

    A scope it does not offer beside one it does is left out: RFC 6749 3.3 lets the server grant
    less than asked, and the token response's `scope` then says what was granted (pyuma asks for
    `openid` beside `uma_protection`). At /token an unknown scope never gets here: the token
    endpoint refuses it first (`client_requests.check_token_scope`)."""
    requested = scope_to_list(unverified_scope) or []
    offered = {SCOPE_ALIASES[scope] for scope in requested if scope in SCOPE_ALIASES}
    if not offered:
        raise InvalidScopeError("Ask for the scope uma_protection or uma_authorization.")
    return " ".join(sorted(offered))


def is_public(client: Client) -> bool:
    """A public client (`token_endpoint_auth_method` `none`): it has no secret, authenticates by
    its client_id alone, and must use PKCE."""
    return client.is_public


def token_auth_methods(client: Client) -> tuple[str, ...]:
    """How this client authenticates at /token and /revoke."""
    return ("none",) if is_public(client) else TOKEN_AUTH_METHODS


class OAuthClient(ClientMixin):  # type: ignore[misc]
    """A stored client as Authlib asks about it: everything is read from its registered metadata
    (`Client.grant_types`, `.response_types`, `.scopes`, `.is_public`, `.redirect_uris`)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def get_client_id(self) -> str:
        return self.client.client_id

    def get_default_redirect_uri(self) -> str | None:
        return self.client.redirect_uris[0] if self.client.redirect_uris else None

    def get_allowed_scope(self, scope: str) -> str:
        """The scope asked for, when the client registered all of it; else invalid_scope."""
        normalised = normalise_scope(scope)
        if not set(normalised.split(" ")) <= set(self.client.scopes):
            raise InvalidScopeError(
                f"This client is registered for the scope {' '.join(self.client.scopes)} only."
            )
        return normalised

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        """Exact string comparison with a registered redirect URI (RFC 9700); a public client's
        loopback redirect URI may vary its port only (RFC 8252 7.3)."""
        if redirect_uri in self.client.redirect_uris:
            return True
        if not is_public(self.client):
            return False
        return any(_same_but_port(redirect_uri, known) for known in self.client.redirect_uris)

    def check_client_secret(self, client_secret: str) -> bool:
        return self.client.check_secret(client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        """A public client authenticates with `none` only; a confidential one with its secret,
        sent either way (`client_secret_basic` or `client_secret_post`: the same secret)."""
        return method in token_auth_methods(self.client)

    def check_response_type(self, response_type: str) -> bool:
        return response_type in self.client.response_types

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.client.grant_types


def _same_but_port(asked: str, registered: str) -> bool:
    """Whether `asked` is the loopback URI `registered` (http on 127.0.0.1, [::1] or localhost)
    with perhaps another port, and otherwise the very same."""
    a, r = urlsplit(asked), urlsplit(registered)
    try:
        asked_port, registered_port = a.port, r.port
    except ValueError:
        return False
    if r.scheme != "http" or r.hostname not in LOOPBACK_HOSTS or a.username is not None:
        return False

    def host(netloc: str, port: int | None) -> str:
        return netloc.rsplit(":", 1)[0] if port is not None else netloc

    return a._replace(netloc=host(a.netloc, asked_port)) == r._replace(
        netloc=host(r.netloc, registered_port)
    )


def _now() -> int:
    return int(runtime().clock.now())


class S256CodeChallenge(CodeChallenge):  # type: ignore[misc]
    """RFC 7636 with `S256` only (RFC 9700 2.1.1: `plain` refused), required for public clients,
    and enforced for confidential ones whenever the authorization request carried a challenge;
    a verifier without a challenge is refused (RFC 9700 4.8.2)."""

    SUPPORTED_CODE_CHALLENGE_METHOD = [codes_and_refresh_tokens.S256]
    DEFAULT_CODE_CHALLENGE_METHOD = codes_and_refresh_tokens.S256
    CODE_CHALLENGE_METHODS = {
        codes_and_refresh_tokens.S256: lambda verifier, challenge: (
            create_s256_code_challenge(verifier) == challenge
        )
    }

    def __init__(self) -> None:
        super().__init__(required=False)

    def validate_code_challenge(self, grant: Any, redirect_uri: str) -> None:
        """At the authorization endpoint (used by /authorize through Authlib)."""
        data = grant.request.payload.data
        problem = codes_and_refresh_tokens.code_challenge_problem(
            data.get("code_challenge"), data.get("code_challenge_method")
        )
        if problem is not None:
            raise InvalidRequestError(problem)
        client = grant.request.client
        if data.get("code_challenge") is None and is_public(client.client):
            raise InvalidRequestError("A public client must send a code_challenge (S256).")

    def validate_code_verifier(self, grant: Any, result: Any) -> None:
        code: _Code = grant.request.authorization_code
        if code.code_challenge is None and is_public(grant.request.client.client):
            raise InvalidGrantError("The code has no PKCE challenge, which a public client needs.")
        super().validate_code_verifier(grant, result)


class _Code:
    """A stored code as Authlib reads it."""

    def __init__(self, record: AuthorizationCode) -> None:
        self.record = record
        self.code_challenge = record.code_challenge
        self.code_challenge_method = record.code_challenge_method

    def get_redirect_uri(self) -> str:
        return self.record.redirect_uri

    def get_scope(self) -> str:
        return self.record.scope


class _Refresh:
    """A stored refresh token as Authlib reads it."""

    def __init__(self, record: RefreshToken) -> None:
        self.record = record

    def get_scope(self) -> str:
        return self.record.scope

    def check_client(self, client: OAuthClient) -> bool:
        return self.record.client_id == client.get_client_id()


def _issued(token: dict[str, Any], refresh_scope: str) -> Issued:
    return Issued(
        access_token=token["access_token"],
        scope=token["scope"],
        access_lifetime=int(token["expires_in"]),
        refresh_token=token.get("refresh_token"),
        refresh_scope=refresh_scope,
        refresh_lifetime=runtime().config.lifetimes.refresh_token,
    )


class AuthorizationCodeGrant(grants.AuthorizationCodeGrant):  # type: ignore[misc]
    """The code (from /authorize, by `services.grants.issue_code`) for a PAT or an AAT of its
    user, and a refresh token when the client may use that grant. The code is consumed in the
    transaction that stores the tokens; a reused one revokes them."""

    TOKEN_ENDPOINT_AUTH_METHODS = [*TOKEN_AUTH_METHODS, "none"]

    def create_authorization_response(
        self, redirect_uri: str, grant_user: Any
    ) -> tuple[int, str, list[tuple[str, str]]]:
        """At /authorize, after consent: a code for `grant_user` (a User), by `issue_code`, bound
        to the client, the redirect URI exactly as asked, the scope and the PKCE challenge."""
        if not grant_user:
            raise AccessDeniedError(
                "The person refused this application access.", redirect_uri=redirect_uri
            )
        self.request.user = grant_user
        data = self.request.payload.data
        client: OAuthClient = self.request.client
        code = codes_and_refresh_tokens.issue_code(
            storage(),
            _now(),
            client.get_client_id(),
            grant_user.sub,
            redirect_uri,
            self.request.scope,
            data.get("code_challenge"),
            data.get("code_challenge_method"),
            runtime().config.lifetimes.authorization_code,
        )
        log.info(
            "code issued client_id=%r username=%r scope=%r",
            client.get_client_id(),
            grant_user.username,
            self.request.scope,
        )
        params = [("code", code)]
        if self.request.payload.state is not None:
            params.append(("state", self.request.payload.state))
        return 302, "", [("Location", add_params_to_uri(redirect_uri, params))]

    def query_authorization_code(self, code: str, client: OAuthClient) -> _Code:
        try:
            record = codes_and_refresh_tokens.code_to_exchange(
                storage(), _now(), code, client.get_client_id()
            )
        except GrantRefused as refused:
            raise InvalidGrantError(str(refused)) from None
        return _Code(record)

    def create_token_response(self) -> tuple[int, dict[str, Any], Any]:
        client = self.request.client
        code: _Code = self.request.authorization_code
        self.request.user = code.record.user_sub
        token: dict[str, Any] = self.generate_token(
            user=code.record.user_sub,
            scope=code.record.scope,
            include_refresh_token=client.check_grant_type("refresh_token"),
        )
        try:
            codes_and_refresh_tokens.exchange_code(
                storage(), _now(), code.record, _issued(token, token["scope"])
            )
        except GrantRefused as refused:
            raise InvalidGrantError(str(refused)) from None
        return 200, token, self.TOKEN_RESPONSE_HEADER


class RefreshTokenGrant(grants.RefreshTokenGrant):  # type: ignore[misc]
    """A refresh token for a new access token and a new refresh token of the same family (the old
    one marked used); `scope` may narrow, never widen. A used one revokes the family."""

    TOKEN_ENDPOINT_AUTH_METHODS = [*TOKEN_AUTH_METHODS, "none"]
    INCLUDE_NEW_REFRESH_TOKEN = True

    def _validate_request_token(self, client: OAuthClient) -> _Refresh:
        refresh_token = self.request.form.get("refresh_token")
        if refresh_token is None:
            raise InvalidRequestError("refresh_token: missing.")
        try:
            record = codes_and_refresh_tokens.refresh_token_to_use(
                storage(), _now(), refresh_token, client.get_client_id()
            )
        except GrantRefused as refused:
            raise InvalidGrantError(str(refused)) from None
        return _Refresh(record)

    def _validate_token_scope(self, token: _Refresh) -> None:
        scope = self.request.payload.scope
        if not scope:
            return
        if not set(normalise_scope(scope).split(" ")) <= set(token.get_scope().split(" ")):
            raise InvalidScopeError(
                f"scope: ask for no more than the refresh token's scope ({token.get_scope()})."
            )

    def authenticate_user(self, refresh_token: _Refresh) -> str:
        return refresh_token.record.user_sub

    def create_token_response(self) -> tuple[int, dict[str, Any], Any]:
        old: _Refresh = self.request.refresh_token
        self.request.user = old.record.user_sub
        token: dict[str, Any] = self.issue_token(old.record.user_sub, old)
        try:
            codes_and_refresh_tokens.rotate_refresh_token(
                storage(), _now(), old.record, _issued(token, old.record.scope)
            )
        except GrantRefused as refused:
            raise InvalidGrantError(str(refused)) from None
        return 200, token, self.TOKEN_RESPONSE_HEADER


def new_refresh_token(**_: Any) -> str:
    return codes_and_refresh_tokens.new_refresh_token()


def register_grants(server: AuthorizationServer) -> None:
    """The grants of people's tokens: authorization_code (with PKCE) and refresh_token."""
    server.register_grant(AuthorizationCodeGrant, [S256CodeChallenge()])
    server.register_grant(RefreshTokenGrant)


# Authlib's errors without a description of their own get one of these.
