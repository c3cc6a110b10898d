"""Authorization codes and refresh tokens: what the authorization code and refresh token grants
issue, check, consume and revoke. Codes and refresh tokens are random strings that exist only in
the return values; the store keeps their digests.

Every token issued under one authorization code (its access token, its refresh token, and the
refresh tokens and access tokens rotated after them) shares the code's `family`:

- a code is single-use: consuming it is one atomic update, in the same transaction as the tokens
  issued for it; a second exchange is refused and revokes the family (RFC 6749 4.1.2, RFC 9700 4.5);
- a refresh token is rotated on use: the old one is marked used and a new one of the same family is
  issued; a used (or revoked) refresh token that comes back revokes the family (RFC 9700 4.14.2).

Revoking an access token takes the RPTs issued under it along (as `accounts.revoke_access_token`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from .. import secrets_at_rest
from ..storage import Storage
from ..storage.records import AuthorizationCode, RefreshToken
from .accounts import store_access_token

log = logging.getLogger("umaserver.oauth")

CODE_PREFIX = "uma_ac_"
REFRESH_TOKEN_PREFIX = "uma_rt_"  # noqa: S105 - a prefix, not a secret
FAMILY_PREFIX = "fam_"
# PKCE: only S256 (RFC 9700 2.1.1: `plain` is refused). RFC 7636 4.2: 43 to 128 characters.
S256 = "S256"
CODE_CHALLENGE = re.compile(r"[A-Za-z0-9\-._~]{43,128}")


class GrantRefused(Exception):
    """The code or refresh token cannot be used (RFC 6749 5.2 `invalid_grant`); the message says
    why, for the client."""


class BadCodeChallenge(ValueError):
    """A PKCE challenge this server does not take: a method other than S256, or a malformed one."""


def code_challenge_problem(challenge: str | None, method: str | None) -> str | None:
    """Why this PKCE challenge (as an authorization request sends it) is refused; None when it is
    fine (S256 with a well-formed challenge, or no challenge and no method)."""
    if challenge is None and method is None:
        return None
    if challenge is None:
        return "code_challenge_method without code_challenge."
    if method != S256:
        return "code_challenge_method must be S256 (plain is not supported)."
    if not CODE_CHALLENGE.fullmatch(challenge):
        return "code_challenge must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~ (RFC 7636)."
    return None


def issue_code(
    storage: Storage,
    now: int,
    client_id: str,
    user_sub: str,
    redirect_uri: str,
    scope: str,
    code_challenge: str | None,
    code_challenge_method: str | None,
    lifetime: int,
) -> str:
    """A new authorization code for `user_sub` at `client_id`, bound to `redirect_uri` (exactly the
    string the authorization request carried) and `scope` (normalised: space-separated scope
    names), with a fresh family. Raises BadCodeChallenge for a challenge that is not S256.

    Whether the client must send a challenge (public clients must) is the caller's check
    (`api.code_grants.is_public`); the token endpoint checks it again."""
    problem = code_challenge_problem(code_challenge, code_challenge_method)
    if problem is not None:
        raise BadCodeChallenge(problem)
    code = secrets_at_rest.new_token(CODE_PREFIX)
    storage.add_authorization_code(
        AuthorizationCode(
            digest=secrets_at_rest.digest(code),
            client_id=client_id,
            user_sub=user_sub,
            redirect_uri=redirect_uri,
            scope=scope,
            code_challenge=code_challenge,
            code_challenge_method=code_challenge_method,
            family=secrets_at_rest.new_id(FAMILY_PREFIX),
            created_at=now,
            expires_at=now + lifetime,
        )
    )
    return code


def new_refresh_token() -> str:
    return secrets_at_rest.new_token(REFRESH_TOKEN_PREFIX)


def revoke_family(storage: Storage, family: str) -> None:
    """Revokes every access token (with its RPTs) and refresh token of the family."""
    with storage.transaction():
        for digest in storage.revoke_access_tokens_of_family(family):
            storage.revoke_rpts_of(digest)
        storage.revoke_refresh_tokens_of_family(family)


def code_to_exchange(storage: Storage, now: int, code: str, client_id: str) -> AuthorizationCode:
    """The stored code that `client_id` may exchange now; raises GrantRefused. A code that was
    used already revokes its family."""
    record = storage.get_authorization_code(secrets_at_rest.digest(code))
    if record is None or record.client_id != client_id:
        raise GrantRefused("The code is unknown, or was issued to another client.")
    if record.used:
        revoke_family(storage, record.family)
        raise GrantRefused("The code was used already; the tokens issued with it are revoked.")
    if record.expires_at <= now:
        raise GrantRefused("The code has expired.")
    return record


@dataclass(frozen=True)
class Issued:
    """What a grant hands out: an access token and, perhaps, a refresh token."""

    access_token: str
    scope: str
    access_lifetime: int
    refresh_token: str | None = None
    refresh_scope: str = ""
    refresh_lifetime: int = 0


def _store(
    storage: Storage, now: int, client_id: str, user_sub: str, family: str, issued: Issued
) -> None:
    store_access_token(
        storage,
        now,
        issued.access_token,
        client_id,
        user_sub,
        issued.scope,
        issued.access_lifetime,
        family=family,
    )
    # One line per token issued: who got what, never the token.
    log.info(
        "token issued client_id=%r user_sub=%r scope=%r refresh=%s",
        client_id,
        user_sub,
        issued.scope,
        "yes" if issued.refresh_token is not None else "no",
    )
    if issued.refresh_token is not None:
        storage.add_refresh_token(
            RefreshToken(
                digest=secrets_at_rest.digest(issued.refresh_token),
                family=family,
                client_id=client_id,
                user_sub=user_sub,
                scope=issued.refresh_scope,
                issued_at=now,
                expires_at=now + issued.refresh_lifetime,
            )
        )


def exchange_code(storage: Storage, now: int, code: AuthorizationCode, issued: Issued) -> None:
    """Consumes the code and stores what was issued for it, in one transaction; raises
    GrantRefused (and revokes the family) when another exchange consumed it first."""
    with storage.transaction():
        consumed = storage.consume_authorization_code(code.digest, now)
        if consumed:
            _store(storage, now, code.client_id, code.user_sub, code.family, issued)
    if not consumed:
        revoke_family(storage, code.family)
        raise GrantRefused("The code was used already; the tokens issued with it are revoked.")


def refresh_token_to_use(
    storage: Storage, now: int, refresh_token: str, client_id: str
) -> RefreshToken:
    """The stored refresh token that `client_id` may use now; raises GrantRefused. One that was
    used or revoked already revokes its family."""
    record = storage.get_refresh_token(secrets_at_rest.digest(refresh_token))
    if record is None or record.client_id != client_id:
        raise GrantRefused("The refresh token is unknown, or was issued to another client.")
    if record.used or record.revoked:
        revoke_family(storage, record.family)
        raise GrantRefused(
            "The refresh token was used or revoked already; the tokens issued with it are revoked."
        )
    if record.expires_at <= now:
        raise GrantRefused("The refresh token has expired.")
    return record


def rotate_refresh_token(storage: Storage, now: int, old: RefreshToken, issued: Issued) -> None:
    """Marks `old` used and stores what was issued in its place (same family), in one
    transaction; raises GrantRefused (and revokes the family) when it was used meanwhile."""
    with storage.transaction():
        used = storage.use_refresh_token(old.digest, now)
        if used:
            _store(storage, now, old.client_id, old.user_sub, old.family, issued)
    if not used:
        revoke_family(storage, old.family)
        raise GrantRefused(
            "The refresh token was used or revoked already; the tokens issued with it are revoked."
        )


def revoke_for_client(storage: Storage, token: str, client_id: str, hint: str | None) -> bool:
    """RFC 7009: revokes `token` if it is an access or refresh token, a persisted claims token
    (UMA 2.0) or an RPT (opaque or JWT), of `client_id` (the hint, "access_token" or
    "refresh_token", says where to look first). A refresh token takes its whole
    family along (RFC 7009 2.1); an access token its RPTs. False when nothing was revoked: unknown,
    another client's, or revoked already."""
    digest = secrets_at_rest.digest(token)

    def as_access_token() -> bool | None:
        found = storage.get_access_token(digest)
        if found is None:
            return None
        if found.client_id != client_id:
            return False
        with storage.transaction():
            revoked = storage.revoke_access_token(digest)
            storage.revoke_rpts_of(digest)
        return revoked

    def as_refresh_token() -> bool | None:
        found = storage.get_refresh_token(digest)
        if found is None:
            return None
        if found.client_id != client_id:
            return False
        revoked = not found.revoked
        revoke_family(storage, found.family)
        return revoked

    def as_pct() -> bool | None:
        found = storage.get_pct(digest)
        if found is None:
            return None
        return found.client_id == client_id and storage.revoke_pct(digest)

    def as_rpt() -> bool | None:
        found = storage.get_rpt(digest)
        if found is None:
            return None
        return found.client_id == client_id and storage.revoke_rpt(digest)

    order = (
        (as_refresh_token, as_access_token, as_pct, as_rpt)
        if hint == "refresh_token"
        else (as_access_token, as_refresh_token, as_pct, as_rpt)
    )
    for attempt in order:
        outcome = attempt()
        if outcome is not None:
            return outcome
    return False
