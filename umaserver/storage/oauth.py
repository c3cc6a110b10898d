"""Authorization codes, refresh tokens, token families and consents."""

from __future__ import annotations

from .handle import Handle
from .records import AuthorizationCode, Consent, RefreshToken
from .rows import Row

# A family is the code grant tokens came from, with its refreshes. A grant is what one user gave
# one client for one scope; a token's scope is space-separated names:
# `instr(' ' || scope || ' ', ' ' || ? || ' ') > 0` matches one name in it.
_REVOKE_FAMILY_ACCESS_TOKENS = (
    "UPDATE access_tokens SET revoked = TRUE WHERE family = ? AND revoked = FALSE RETURNING digest"
)
_REVOKE_FAMILY_REFRESH_TOKENS = (
    "UPDATE refresh_tokens SET revoked = TRUE WHERE family = ? AND revoked = FALSE"
)
_REVOKE_GRANT_ACCESS_TOKENS = (
    "UPDATE access_tokens SET revoked = TRUE WHERE user_sub = ? AND client_id = ?"
    " AND instr(' ' || scope || ' ', ' ' || ? || ' ') > 0 AND revoked = FALSE RETURNING digest"
)
_REVOKE_GRANT_REFRESH_TOKENS = (
    "UPDATE refresh_tokens SET revoked = TRUE WHERE user_sub = ? AND client_id = ?"
    " AND instr(' ' || scope || ' ', ' ' || ? || ' ') > 0 AND revoked = FALSE"
)


class OAuth(Handle):
    """What the authorization code and refresh token grants keep, and consents."""

    def add_authorization_code(self, code: AuthorizationCode) -> None:
        self._write(
            "INSERT INTO authorization_codes (digest, client_id, user_sub, redirect_uri, scope,"
            " code_challenge, code_challenge_method, family, created_at, expires_at, used)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                code.digest,
                code.client_id,
                code.user_sub,
                code.redirect_uri,
                code.scope,
                code.code_challenge,
                code.code_challenge_method,
                code.family,
                code.created_at,
                code.expires_at,
                code.used,
            ),
        )

    def get_authorization_code(self, digest: str) -> AuthorizationCode | None:
        row = self._one(
            "SELECT * FROM authorization_codes WHERE digest = ?", (digest,), lock="NO KEY UPDATE"
        )
        return None if row is None else _code(row)

    def consume_authorization_code(self, digest: str, now: int) -> bool:
        # One UPDATE: racers queue on the row's lock, and each sees the row as the one before it
        # left it (READ COMMITTED re-reads a row it waited for): only the first finds it unused.
        return (
            self._write(
                "UPDATE authorization_codes SET used = TRUE"
                " WHERE digest = ? AND used = FALSE AND expires_at > ?",
                (digest, now),
            )
            == 1
        )

    def delete_authorization_codes_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM authorization_codes WHERE digest IN"
            " (SELECT digest FROM authorization_codes WHERE expires_at < ? LIMIT ?)",
            (moment, limit),
        )

    # -- refresh tokens ------------------------------------------------------------------------

    def add_refresh_token(self, token: RefreshToken) -> None:
        self._write(
            "INSERT INTO refresh_tokens (digest, family, client_id, user_sub, scope, issued_at,"
            " expires_at, used, revoked) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                token.digest,
                token.family,
                token.client_id,
                token.user_sub,
                token.scope,
                token.issued_at,
                token.expires_at,
                token.used,
                token.revoked,
            ),
        )

    def get_refresh_token(self, digest: str) -> RefreshToken | None:
        row = self._one(
            "SELECT * FROM refresh_tokens WHERE digest = ?", (digest,), lock="NO KEY UPDATE"
        )
        return None if row is None else _refresh_token(row)

    def use_refresh_token(self, digest: str, now: int) -> bool:
        return (
            self._write(
                "UPDATE refresh_tokens SET used = TRUE"
                " WHERE digest = ? AND used = FALSE AND revoked = FALSE AND expires_at > ?",
                (digest, now),
            )
            == 1
        )

    def revoke_refresh_token(self, digest: str) -> bool:
        return (
            self._write(
                "UPDATE refresh_tokens SET revoked = TRUE WHERE digest = ? AND revoked = FALSE",
                (digest,),
            )
            == 1
        )

    def delete_refresh_tokens_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM refresh_tokens WHERE digest IN"
            " (SELECT digest FROM refresh_tokens WHERE expires_at < ? LIMIT ?)",
            (moment, limit),
        )

    # -- families and grants -------------------------------------------------------------------

    def revoke_access_tokens_of_family(self, family: str) -> list[str]:
        return self._revoke_access_tokens(_REVOKE_FAMILY_ACCESS_TOKENS, (family,))

    def revoke_refresh_tokens_of_family(self, family: str) -> int:
        return self._write(_REVOKE_FAMILY_REFRESH_TOKENS, (family,))

    def revoke_access_tokens_of_grant(self, user_sub: str, client_id: str, scope: str) -> list[str]:
        return self._revoke_access_tokens(_REVOKE_GRANT_ACCESS_TOKENS, (user_sub, client_id, scope))

    def revoke_refresh_tokens_of_grant(self, user_sub: str, client_id: str, scope: str) -> int:
        return self._write(_REVOKE_GRANT_REFRESH_TOKENS, (user_sub, client_id, scope))

    def _revoke_access_tokens(self, statement: str, parameters: tuple[str, ...]) -> list[str]:
        rows = self._write_returning(statement, parameters)
        return sorted(str(row["digest"]) for row in rows)

    # -- consents ------------------------------------------------------------------------------

    def put_consent(self, consent: Consent) -> None:
        self._write(
            "INSERT INTO consents (user_sub, client_id, scope, granted_at)"
            " VALUES (?, ?, ?, ?)"
            " ON CONFLICT (user_sub, client_id, scope) DO UPDATE SET granted_at ="
            " excluded.granted_at",
            (consent.user_sub, consent.client_id, consent.scope, consent.granted_at),
        )

    def has_consent(self, user_sub: str, client_id: str, scope: str) -> bool:
        row = self._one(
            "SELECT 1 FROM consents WHERE user_sub = ? AND client_id = ? AND scope = ?",
            (user_sub, client_id, scope),
            lock="NO KEY UPDATE",
        )
        return row is not None

    def consents_of(self, user_sub: str) -> list[Consent]:
        rows = self._all(
            "SELECT * FROM consents WHERE user_sub = ? ORDER BY client_id, scope",
            (user_sub,),
            lock="NO KEY UPDATE",
        )
        return [
            Consent(row["user_sub"], row["client_id"], row["scope"], row["granted_at"])
            for row in rows
        ]

    def delete_consent(self, user_sub: str, client_id: str, scope: str) -> bool:
        return (
            self._write(
                "DELETE FROM consents WHERE user_sub = ? AND client_id = ? AND scope = ?",
                (user_sub, client_id, scope),
            )
            == 1
        )


def _code(row: Row) -> AuthorizationCode:
    return AuthorizationCode(
        digest=row["digest"],
        client_id=row["client_id"],
        user_sub=row["user_sub"],
        redirect_uri=row["redirect_uri"],
        scope=row["scope"],
        code_challenge=row["code_challenge"],
        code_challenge_method=row["code_challenge_method"],
        family=row["family"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        used=bool(row["used"]),
    )


def _refresh_token(row: Row) -> RefreshToken:
    return RefreshToken(
        digest=row["digest"],
        family=row["family"],
        client_id=row["client_id"],
        user_sub=row["user_sub"],
        scope=row["scope"],
        issued_at=row["issued_at"],
        expires_at=row["expires_at"],
        used=bool(row["used"]),
        revoked=bool(row["revoked"]),
    )
