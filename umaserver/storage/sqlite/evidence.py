"""Gathered claims and assertion uses in SQLite."""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..records import (
    AssertionUse,
    Claim,
)
from .base import Base


class Evidence(Base):
    """Claims gathered for tickets, and the uses of verified assertions (replay)."""

    def record_claims(
        self, ticket_digest: str, requesting_party: str, claims: Iterable[Claim]
    ) -> None:
        with self.transaction():
            self.conn.executemany(
                "INSERT INTO gathered_claims (ticket_digest, requesting_party, type, name, issuer,"
                " subject, value, client_id, gathered_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (ticket_digest, requesting_party, type, name, issuer) DO UPDATE"
                " SET value = excluded.value, subject = excluded.subject,"
                " client_id = excluded.client_id, gathered_at = excluded.gathered_at",
                [
                    (
                        ticket_digest,
                        requesting_party,
                        claim.type,
                        claim.name,
                        claim.issuer,
                        claim.subject,
                        json.dumps(claim.value),
                        claim.client_id,
                        claim.gathered_at,
                    )
                    for claim in claims
                ],
            )

    def gathered_claims(self, ticket_digest: str, requesting_party: str) -> list[Claim]:
        rows = self.conn.execute(
            "SELECT * FROM gathered_claims WHERE ticket_digest = ? AND requesting_party = ?"
            " ORDER BY type, name, issuer",
            (ticket_digest, requesting_party),
        ).fetchall()
        return [
            Claim(
                type=row["type"],
                name=row["name"],
                value=json.loads(row["value"]),
                issuer=row["issuer"],
                client_id=row["client_id"],
                gathered_at=row["gathered_at"],
                subject=row["subject"],
            )
            for row in rows
        ]

    def forget_issuer_claims(self, ticket_digest: str, requesting_party: str, issuer: str) -> int:
        return self._write(
            "DELETE FROM gathered_claims WHERE ticket_digest = ? AND requesting_party = ?"
            " AND issuer = ?",
            (ticket_digest, requesting_party, issuer),
        )

    # -- assertion uses (replay) ---------------------------------------------------------------

    def record_assertion_use(self, use: AssertionUse, now: int) -> list[AssertionUse]:
        with self.transaction():
            rows = self.conn.execute(
                "SELECT * FROM seen_assertions WHERE issuer = ? AND assertion_id = ?"
                " AND expires_at > ?",
                (use.issuer, use.assertion_id, now),
            ).fetchall()
            # The first use of an assertion with a ticket is the one remembered.
            self.conn.execute(
                "INSERT OR IGNORE INTO seen_assertions (issuer, assertion_id, ticket_digest,"
                " requesting_party, expires_at) VALUES (?, ?, ?, ?, ?)",
                (
                    use.issuer,
                    use.assertion_id,
                    use.ticket_digest,
                    use.requesting_party,
                    use.expires_at,
                ),
            )
        return [
            AssertionUse(
                row["issuer"],
                row["assertion_id"],
                row["ticket_digest"],
                row["requesting_party"],
                row["expires_at"],
            )
            for row in rows
        ]

    def delete_assertion_uses_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM seen_assertions WHERE rowid IN"
            " (SELECT rowid FROM seen_assertions WHERE expires_at < ? LIMIT ?)",
            (moment, limit),
        )
