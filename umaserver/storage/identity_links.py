"""Identities at external OpenID Connect providers linked to local users."""

from __future__ import annotations

from .handle import Handle


class IdentityLinks(Handle):
    """(issuer, subject) -> user, one user per identity."""

    def link_identity(self, issuer: str, subject: str, user_sub: str, linked_at: int) -> bool:
        # The primary key refuses a second link of one identity: no check-then-insert. The user
        # is read (and kept) in the same statement: no foreign key error ends a caller's
        # transaction.
        return (
            self._write(
                "INSERT INTO identity_links (issuer, subject, user_sub, linked_at)"
                " SELECT ?, ?, sub, ? FROM users WHERE sub = ? FOR KEY SHARE"
                " ON CONFLICT DO NOTHING",
                (issuer, subject, linked_at, user_sub),
            )
            == 1
        )

    def unlink_identity(self, issuer: str, subject: str) -> bool:
        return (
            self._write(
                "DELETE FROM identity_links WHERE issuer = ? AND subject = ?", (issuer, subject)
            )
            == 1
        )

    def linked_user(self, issuer: str, subject: str) -> str | None:
        row = self._one(
            "SELECT user_sub FROM identity_links WHERE issuer = ? AND subject = ?",
            (issuer, subject),
            lock="NO KEY UPDATE",
        )
        return None if row is None else str(row["user_sub"])

    def links_of(self, user_sub: str) -> list[tuple[str, str]]:
        rows = self._all(
            "SELECT issuer, subject FROM identity_links WHERE user_sub = ? ORDER BY issuer, subject",
            (user_sub,),
            lock="NO KEY UPDATE",
        )
        return [(str(row["issuer"]), str(row["subject"])) for row in rows]
