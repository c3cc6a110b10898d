"""Authorization codes, refresh tokens, token families and consents in PostgreSQL."""

from __future__ import annotations

from psycopg.rows import DictRow

from ..records import AuthorizationCode, Consent, RefreshToken
from .base import Base

# A token's scope is space-separated names: `strpos(' ' || scope || ' ', ' ' || %s || ' ') > 0`
# matches one name in it.
_FAMILY = "family = %s"
_GRANT = "user_sub = %s AND client_id = %s AND strpos(' ' || scope || ' ', ' ' || %s || ' ') > 0"


class OAuth(Base):
    """What the authorization code and refresh token grants keep, and consents."""

    def add_authorization_code(self, code: AuthorizationCode) -> None:
        self._write(
            "INSERT INTO authorization_codes (digest, client_id, user_sub, redirect_uri, scope,"
            " code_challenge, code_challenge_method, family, created_at, expires_at, used)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
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
            f"SELECT * FROM authorization_codes WHERE digest = %s{self._lock()}", (digest,)
        )
        return None if row is None else _code(row)

    def consume_authorization_code(self, digest: str, now: int) -> bool:
        # One UPDATE: racers queue on the row's lock, and each sees the row as the one before it
        # left it (READ COMMITTED re-reads a row it waited for): only the first finds it unused.
        return (
            self._write(
                "UPDATE authorization_codes SET used = TRUE"
                " WHERE digest = %s AND NOT used AND expires_at > %s",
                (digest, now),
            )
            == 1
        )

    def delete_authorization_codes_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM authorization_codes WHERE digest IN"
            " (SELECT digest FROM authorization_codes WHERE expires_at < %s LIMIT %s)",
            (moment, limit),
        )

    # -- refresh tokens ------------------------------------------------------------------------

    def add_refresh_token(self, token: RefreshToken) -> None:
        self._write(
            "INSERT INTO refresh_tokens (digest, family, client_id, user_sub, scope, issued_at,"
            " expires_at, used, revoked) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
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
        row = self._one(f"SELECT * FROM refresh_tokens WHERE digest = %s{self._lock()}", (digest,))
        return None if row is None else _refresh_token(row)

    def use_refresh_token(self, digest: str, now: int) -> bool:
        return (
            self._write(
                "UPDATE refresh_tokens SET used = TRUE"
                " WHERE digest = %s AND NOT used AND NOT revoked AND expires_at > %s",
                (digest, now),
            )
            == 1
        )

    def revoke_refresh_token(self, digest: str) -> bool:
        return (
            self._write(
                "UPDATE refresh_tokens SET revoked = TRUE WHERE digest = %s AND NOT revoked",
                (digest,),
            )
            == 1
        )

    def delete_refresh_tokens_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM refresh_tokens WHERE digest IN"
            " (SELECT digest FROM refresh_tokens WHERE expires_at < %s LIMIT %s)",
            (moment, limit),
        )

    # -- families and grants -------------------------------------------------------------------

    def revoke_access_tokens_of_family(self, family: str) -> list[str]:
        return self._revoke_access_tokens(_FAMILY, (family,))

    def revoke_refresh_tokens_of_family(self, family: str) -> int:
        return self._write(
            f"UPDATE refresh_tokens SET revoked = TRUE WHERE {_FAMILY} AND NOT revoked", (family,)
        )

    def revoke_access_tokens_of_grant(self, user_sub: str, client_id: str, scope: str) -> list[str]:
        return self._revoke_access_tokens(_GRANT, (user_sub, client_id, scope))

    def revoke_refresh_tokens_of_grant(self, user_sub: str, client_id: str, scope: str) -> int:
        return self._write(
            f"UPDATE refresh_tokens SET revoked = TRUE WHERE {_GRANT} AND NOT revoked",
            (user_sub, client_id, scope),
        )

    def _revoke_access_tokens(self, where: str, parameters: tuple[str, ...]) -> list[str]:
        rows = self._all(
            f"UPDATE access_tokens SET revoked = TRUE WHERE {where} AND NOT revoked"
            " RETURNING digest",
            parameters,
        )
        return sorted(str(row["digest"]) for row in rows)

    # -- consents ------------------------------------------------------------------------------

    def put_consent(self, consent: Consent) -> None:
        self._write(
            "INSERT INTO consents (user_sub, client_id, scope, granted_at)"
            " VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (user_sub, client_id, scope) DO UPDATE SET granted_at ="
            " excluded.granted_at",
            (consent.user_sub, consent.client_id, consent.scope, consent.granted_at),
        )

    def has_consent(self, user_sub: str, client_id: str, scope: str) -> bool:
        row = self._one(
            "SELECT 1 FROM consents WHERE user_sub = %s AND client_id = %s AND scope = %s"
            + self._lock(),
            (user_sub, client_id, scope),
        )
        return row is not None

    def consents_of(self, user_sub: str) -> list[Consent]:
        rows = self._all(
            f"SELECT * FROM consents WHERE user_sub = %s ORDER BY client_id, scope{self._lock()}",
            (user_sub,),
        )
        return [
            Consent(row["user_sub"], row["client_id"], row["scope"], row["granted_at"])
            for row in rows
        ]

    def delete_consent(self, user_sub: str, client_id: str, scope: str) -> bool:
        return (
            self._write(
                "DELETE FROM consents WHERE user_sub = %s AND client_id = %s AND scope = %s",
                (user_sub, client_id, scope),
            )
            == 1
        )


def _code(row: DictRow) -> AuthorizationCode:
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
        used=row["used"],
    )


def _refresh_token(row: DictRow) -> RefreshToken:
    return RefreshToken(
        digest=row["digest"],
        family=row["family"],
        client_id=row["client_id"],
        user_sub=row["user_sub"],
        scope=row["scope"],
        issued_at=row["issued_at"],
        expires_at=row["expires_at"],
        used=row["used"],
        revoked=row["revoked"],
    )
