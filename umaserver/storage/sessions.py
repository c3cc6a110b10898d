"""People's sessions on the pages and their failed sign-ins."""

from __future__ import annotations

from .handle import Handle
from .records import Session


class Sessions(Handle):
    """Sessions (by the digest of their cookie's id) and failed sign-ins (by the caller's key)."""

    def add_session(self, session: Session) -> None:
        self._write(
            "INSERT INTO sessions (digest, user_sub, csrf_secret, created_at, last_seen_at,"
            " expires_at) VALUES (?, ?, ?, ?, ?, ?)",
            (
                session.digest,
                session.user_sub,
                session.csrf_secret,
                session.created_at,
                session.last_seen_at,
                session.expires_at,
            ),
        )

    def get_session(self, digest: str) -> Session | None:
        row = self._one("SELECT * FROM sessions WHERE digest = ?", (digest,), lock="NO KEY UPDATE")
        if row is None:
            return None
        return Session(
            digest=row["digest"],
            user_sub=row["user_sub"],
            csrf_secret=row["csrf_secret"],
            created_at=row["created_at"],
            last_seen_at=row["last_seen_at"],
            expires_at=row["expires_at"],
        )

    def touch_session(self, digest: str, last_seen_at: int, expires_at: int) -> bool:
        return (
            self._write(
                "UPDATE sessions SET last_seen_at = ?, expires_at = ? WHERE digest = ?",
                (last_seen_at, expires_at, digest),
            )
            == 1
        )

    def delete_session(self, digest: str) -> bool:
        return self._write("DELETE FROM sessions WHERE digest = ?", (digest,)) == 1

    def delete_sessions_of(self, user_sub: str) -> int:
        return self._write("DELETE FROM sessions WHERE user_sub = ?", (user_sub,))

    def delete_sessions_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM sessions WHERE digest IN"
            " (SELECT digest FROM sessions WHERE expires_at < ? LIMIT ?)",
            (moment, limit),
        )

    # -- failed sign-ins -----------------------------------------------------------------------

    def hold_signin_key(self, key: str) -> None:
        if self._dialect.row_locks:
            # A lock on the key, which holds whether or not a row exists yet, until the
            # transaction ends: the count of its rows and the row added after it are then one
            # step for every process (READ COMMITTED alone lets two count the same rows). SQLite's
            # transaction holds the database.
            self._execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (f"signin_failures\n{key}",)
            )

    def record_signin_failure(self, key: str, failed_at: int) -> None:
        self._write("INSERT INTO signin_failures (key, failed_at) VALUES (?, ?)", (key, failed_at))

    def signin_failures_since(self, key: str, moment: int) -> list[int]:
        rows = self._all(
            "SELECT failed_at FROM signin_failures WHERE key = ? AND failed_at >= ?"
            " ORDER BY failed_at",
            (key, moment),
            lock="NO KEY UPDATE",
        )
        return [int(row["failed_at"]) for row in rows]

    def clear_signin_failures(self, key: str) -> int:
        return self._write("DELETE FROM signin_failures WHERE key = ?", (key,))

    def clear_signin_failures_under(self, prefix: str) -> int:
        return self._write(
            "DELETE FROM signin_failures WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
        )

    def delete_signin_failures_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM signin_failures WHERE rowid IN"
            " (SELECT rowid FROM signin_failures WHERE failed_at < ? LIMIT ?)",
            (moment, limit),
        )
