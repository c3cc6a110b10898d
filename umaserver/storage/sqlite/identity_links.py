"""Identities at external OpenID Connect providers linked to local users, in SQLite."""

from __future__ import annotations

import sqlite3

from .base import Base


class IdentityLinks(Base):
    """(issuer, subject) -> user, one user per identity."""

    def link_identity(self, issuer: str, subject: str, user_sub: str, linked_at: int) -> bool:
        # The primary key refuses a second link of one identity: no check-then-insert.
        try:
            return (
                self._write(
                    "INSERT INTO identity_links (issuer, subject, user_sub, linked_at)"
                    " VALUES (?, ?, ?, ?)",
                    (issuer, subject, user_sub, linked_at),
                )
                == 1
            )
        except sqlite3.IntegrityError:
            return False

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
        )
        return None if row is None else str(row["user_sub"])

    def links_of(self, user_sub: str) -> list[tuple[str, str]]:
        rows = self.conn.execute(
            "SELECT issuer, subject FROM identity_links WHERE user_sub = ?"
            " ORDER BY issuer, subject",
            (user_sub,),
        ).fetchall()
        return [(str(row["issuer"]), str(row["subject"])) for row in rows]
