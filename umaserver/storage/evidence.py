"""Gathered claims and assertion uses."""

from __future__ import annotations

import json
from collections.abc import Iterable

from . import rows as stored
from .handle import Handle
from .records import AssertionUse, Claim


class Evidence(Handle):
    """Claims gathered for tickets, and the uses of verified assertions (replay).

    Where rows are locked (PostgreSQL), a ticket's claims are guarded by the ticket's row: every
    write of them, and every read of them in a transaction, locks that row first, so the claims a
    decision read are the claims it recorded beside (a decision locks its ticket first too). What
    a read did not find cannot be locked otherwise. SQLite's transaction holds the database."""

    def _lock_ticket(self, ticket_digest: str) -> None:
        if self._dialect.row_locks:
            self._execute(
                "SELECT 1 FROM tickets WHERE digest = ? FOR NO KEY UPDATE", (ticket_digest,)
            )

    def record_claims(
        self, ticket_digest: str, requesting_party: str, claims: Iterable[Claim]
    ) -> None:
        rows = [
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
                claim.expires_at,
            )
            for claim in claims
        ]
        with self.transaction():
            self._lock_ticket(ticket_digest)
            self._write_many(
                "INSERT INTO gathered_claims (ticket_digest, requesting_party, type, name, issuer,"
                " subject, value, client_id, gathered_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (ticket_digest, requesting_party, type, name, issuer, client_id)"
                " DO UPDATE SET value = excluded.value, subject = excluded.subject,"
                " gathered_at = excluded.gathered_at, expires_at = excluded.expires_at",
                rows,
            )

    def gathered_claims(
        self, ticket_digest: str, requesting_party: str, client_id: str | None = None
    ) -> list[Claim]:
        if self._transaction_open:
            self._lock_ticket(ticket_digest)
        query = "SELECT * FROM gathered_claims WHERE ticket_digest = ? AND requesting_party = ?"
        values: tuple[str, ...] = (ticket_digest, requesting_party)
        if client_id is not None:
            query += " AND client_id = ?"
            values += (client_id,)
        rows = self._all(query + " ORDER BY type, name, issuer, client_id", values)
        return [stored.claim(row) for row in rows]

    def forget_issuer_claims(
        self, ticket_digest: str, requesting_party: str, issuer: str, client_id: str | None = None
    ) -> int:
        query = (
            "DELETE FROM gathered_claims WHERE ticket_digest = ? AND requesting_party = ?"
            " AND issuer = ?"
        )
        values: tuple[str, ...] = (ticket_digest, requesting_party, issuer)
        if client_id is not None:
            query += " AND client_id = ?"
            values += (client_id,)
        with self.transaction():
            self._lock_ticket(ticket_digest)
            return self._write(query, values)

    # -- assertion uses (replay) ---------------------------------------------------------------

    def record_assertion_use(self, use: AssertionUse, now: int) -> list[AssertionUse]:
        with self.transaction():
            if self._dialect.row_locks:
                # The uses of one assertion are taken one transaction at a time: a lock on the
                # (issuer, ID), which holds whether or not a row exists yet, until the transaction
                # ends. Each statement of READ COMMITTED then sees the uses committed before it.
                # (SQLite's transaction holds the database.)
                self._execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))",
                    (f"seen_assertions\n{use.issuer}\n{use.assertion_id}",),
                )
            rows = self._all(
                "SELECT * FROM seen_assertions WHERE issuer = ? AND assertion_id = ?"
                " AND expires_at > ?",
                (use.issuer, use.assertion_id, now),
            )
            # The first use of an assertion with a ticket is the one remembered.
            self._write(
                "INSERT INTO seen_assertions (issuer, assertion_id, ticket_digest,"
                " requesting_party, expires_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
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
            "DELETE FROM seen_assertions WHERE (issuer, assertion_id, ticket_digest) IN"
            " (SELECT issuer, assertion_id, ticket_digest FROM seen_assertions"
            " WHERE expires_at < ? LIMIT ?)",
            (moment, limit),
        )
