"""Permission tickets, each asking for one or more (resource set, scopes) pairs of one owner, and
the claims handles of the redirect profile made for them."""

from __future__ import annotations

import json
from dataclasses import replace

from . import rows as stored
from .handle import Handle
from .records import ClaimsHandle, RequestedPermission, Ticket
from .rows import Row

# A ticket with its further pairs (none for most tickets: one row with NULLs), in order.
_TICKET = (
    "SELECT t.*, m.resource_set_id AS more_set, m.scopes AS more_scopes"
    " FROM tickets AS t LEFT JOIN ticket_resources AS m ON m.ticket_digest = t.digest"
    " WHERE t.digest = ? ORDER BY m.position"
)
_OPEN_TICKETS_FOR = (
    "SELECT t.*, m.resource_set_id AS more_set, m.scopes AS more_scopes"
    " FROM tickets AS t LEFT JOIN ticket_resources AS m ON m.ticket_digest = t.digest"
    " WHERE t.state = 'open' AND (t.resource_set_id = ? OR t.digest IN"
    " (SELECT ticket_digest FROM ticket_resources WHERE resource_set_id = ?))"
    " ORDER BY t.created_at, t.rowid, m.position"
)


class Tickets(Handle):
    """Permission tickets and their claims handles."""

    def add_ticket(self, ticket: Ticket) -> None:
        insert = (
            "INSERT INTO tickets (digest, owner, client_id, resource_set_id, scopes, created_at,"
            " expires_at, requests, state, requesting_party, pairs)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        values = (
            ticket.digest,
            ticket.owner,
            ticket.client_id,
            ticket.resource_set_id,
            json.dumps(list(ticket.scopes)),
            ticket.created_at,
            ticket.expires_at,
            ticket.requests,
            ticket.state,
            ticket.requesting_party,
            1 + len(ticket.more),
        )
        if not ticket.more:  # one statement, no transaction of its own
            self._write(insert, values)
            return
        with self.transaction():
            self._write(insert, values)
            self._add_more(ticket.digest, ticket.more)

    def _add_more(self, digest: str, more: tuple[RequestedPermission, ...]) -> None:
        self._write_many(
            "INSERT INTO ticket_resources (ticket_digest, position, resource_set_id, scopes)"
            " VALUES (?, ?, ?, ?)",
            [
                (digest, position, pair.resource_set_id, json.dumps(list(pair.scopes)))
                for position, pair in enumerate(more, start=1)
            ],
        )

    def get_ticket(self, digest: str) -> Ticket | None:
        # In a transaction, the ticket is what the decision is about: racers on one ticket queue
        # here, and each reads it as the one before left it.
        rows = self._all(_TICKET, (digest,), lock="NO KEY UPDATE OF t")
        return next(iter(_tickets(rows)), None)

    def open_tickets_for(self, rs_id: str) -> list[Ticket]:
        tickets = _tickets(self._all(_OPEN_TICKETS_FOR, (rs_id, rs_id), lock="NO KEY UPDATE OF t"))
        return [ticket for ticket in tickets if ticket.state == "open"]

    def set_ticket_permissions(
        self, digest: str, permissions: tuple[RequestedPermission, ...]
    ) -> bool:
        first, *more = permissions
        with self.transaction():
            changed = self._write(
                "UPDATE tickets SET resource_set_id = ?, scopes = ?, pairs = ?"
                " WHERE digest = ? AND state = 'open'",
                (first.resource_set_id, json.dumps(list(first.scopes)), len(permissions), digest),
            )
            if changed:
                self._write("DELETE FROM ticket_resources WHERE ticket_digest = ?", (digest,))
                self._add_more(digest, tuple(more))
        return changed == 1

    def rotate_ticket(self, digest: str, new_digest: str) -> bool:
        with self.transaction():
            # The same request under a new digest: its pairs, requests, lifetime and party, and
            # the claims gathered for it; the old digest is finished, its claims handles void.
            copied = self._write(
                "INSERT INTO tickets (digest, owner, client_id, resource_set_id, scopes,"
                " created_at, expires_at, requests, state, requesting_party, pairs, asked)"
                " SELECT ?, owner, client_id, resource_set_id, scopes, created_at, expires_at,"
                " requests, 'open', requesting_party, pairs, asked FROM tickets"
                " WHERE digest = ? AND state = 'open'",
                (new_digest, digest),
            )
            if not copied:
                return False
            self._write(
                "INSERT INTO ticket_resources (ticket_digest, position, resource_set_id, scopes)"
                " SELECT ?, position, resource_set_id, scopes FROM ticket_resources"
                " WHERE ticket_digest = ?",
                (new_digest, digest),
            )
            self._write(
                "INSERT INTO ticket_requests (ticket_digest, client_id, requests)"
                " SELECT ?, client_id, requests FROM ticket_requests WHERE ticket_digest = ?",
                (new_digest, digest),
            )
            self._write(
                "UPDATE gathered_claims SET ticket_digest = ? WHERE ticket_digest = ?",
                (new_digest, digest),
            )
            self.void_claims_handles(digest)
            self._close_ticket(digest, "finished")
        return True

    def set_ticket_party(self, digest: str, party: str) -> bool:
        with self.transaction():
            row = self._one(
                "SELECT requesting_party FROM tickets WHERE digest = ? AND state = 'open'",
                (digest,),
                lock="NO KEY UPDATE",
            )
            if row is None:
                return False
            earlier = row["requesting_party"]
            if earlier is not None and earlier != party:
                self._write(
                    "UPDATE gathered_claims SET requesting_party = ?"
                    " WHERE ticket_digest = ? AND requesting_party = ?",
                    (party, digest, earlier),
                )
            self._write("UPDATE tickets SET requesting_party = ? WHERE digest = ?", (party, digest))
        return True

    def count_ticket_request(self, digest: str, client_id: str | None = None) -> int:
        count = (
            "UPDATE tickets SET requests = requests + 1 WHERE digest = ? AND state = 'open'"
            " RETURNING requests"
        )
        if client_id is None:  # one statement, no transaction of its own
            rows = self._write_returning(count, (digest,))
            return int(rows[0]["requests"]) if rows else 0
        with self.transaction():
            if not self._write_returning(count, (digest,)):
                return 0
            # The ticket's row is locked by the UPDATE above: one client's count at a time.
            mine = self._write_returning(
                "INSERT INTO ticket_requests (ticket_digest, client_id, requests) VALUES (?, ?, 1)"
                " ON CONFLICT (ticket_digest, client_id)"
                " DO UPDATE SET requests = ticket_requests.requests + 1 RETURNING requests",
                (digest, client_id),
            )
            return int(mine[0]["requests"])

    def ticket_used_by_others(self, digest: str, client_id: str) -> bool:
        row = self._one(
            "SELECT EXISTS (SELECT 1 FROM ticket_requests WHERE ticket_digest = ?"
            " AND client_id != ?) OR EXISTS (SELECT 1 FROM gathered_claims"
            " WHERE ticket_digest = ? AND client_id != ?) AS used",
            (digest, client_id, digest, client_id),
        )
        return row is not None and bool(row["used"])

    def consume_ticket(self, digest: str) -> bool:
        return self._close_ticket(digest, "granted")

    def finish_ticket(self, digest: str) -> bool:
        return self._close_ticket(digest, "finished")

    def _close_ticket(self, digest: str, state: str) -> bool:
        # One UPDATE: on PostgreSQL racers queue on the row's lock and each re-reads the row it
        # waited for (READ COMMITTED); on SQLite they queue for the database. Only the first finds
        # it open.
        return (
            self._write(
                "UPDATE tickets SET state = ? WHERE digest = ? AND state = 'open'",
                (state, digest),
            )
            == 1
        )

    def extend_ticket(self, digest: str, expires_at: int) -> bool:
        return (
            self._write(
                # Never earlier (SQLite's max(a, b) is PostgreSQL's GREATEST: CASE is both's).
                "UPDATE tickets SET expires_at = CASE WHEN expires_at < ? THEN ? ELSE expires_at"
                " END WHERE digest = ? AND state = 'open'",
                (expires_at, expires_at, digest),
            )
            == 1
        )

    def delete_tickets_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM tickets WHERE digest IN"
            " (SELECT digest FROM tickets WHERE expires_at < ? LIMIT ?)",
            (moment, limit),
        )

    # -- claims handles (the redirect profile) -------------------------------------------------

    def add_claims_handle(self, handle: ClaimsHandle) -> None:
        with self.transaction():
            self.void_claims_handles(handle.ticket_digest, handle.client_id)
            self._write(
                "INSERT INTO claims_handles (digest, ticket_digest, client_id, requesting_party,"
                " created_at, expires_at, binding_digest, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    handle.digest,
                    handle.ticket_digest,
                    handle.client_id,
                    handle.requesting_party,
                    handle.created_at,
                    handle.expires_at,
                    handle.binding_digest,
                    handle.state,
                ),
            )

    def get_claims_handle(self, digest: str) -> ClaimsHandle | None:
        row = self._one(
            "SELECT * FROM claims_handles WHERE digest = ?", (digest,), lock="NO KEY UPDATE"
        )
        if row is None:
            return None
        return ClaimsHandle(
            digest=row["digest"],
            ticket_digest=row["ticket_digest"],
            client_id=row["client_id"],
            requesting_party=row["requesting_party"],
            created_at=row["created_at"],
            expires_at=row["expires_at"],
            binding_digest=row["binding_digest"],
            state=row["state"],
        )

    def void_claims_handles(self, ticket_digest: str, client_id: str | None = None) -> int:
        query = (
            "UPDATE claims_handles SET state = 'void' WHERE ticket_digest = ? AND state = 'open'"
        )
        if client_id is None:
            return self._write(query, (ticket_digest,))
        return self._write(query + " AND client_id = ?", (ticket_digest, client_id))

    def bind_claims_handle(self, digest: str, binding_digest: str) -> bool:
        return (
            self._write(
                "UPDATE claims_handles SET binding_digest = ? WHERE digest = ?"
                " AND binding_digest IS NULL AND state = 'open'",
                (binding_digest, digest),
            )
            == 1
        )

    def use_claims_handle(self, digest: str) -> bool:
        return (
            self._write(
                "UPDATE claims_handles SET state = 'used' WHERE digest = ? AND state = 'open'",
                (digest,),
            )
            == 1
        )

    def delete_claims_handles_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM claims_handles WHERE digest IN"
            " (SELECT digest FROM claims_handles WHERE expires_at < ? LIMIT ?)",
            (moment, limit),
        )


def _tickets(rows: list[Row]) -> list[Ticket]:
    """Tickets from rows of `_TICKET` or `_OPEN_TICKETS_FOR`: a ticket's rows are together, its
    pairs in order. A ticket that reads fewer pairs than it asked for lost a set (deleted, and its
    pair with it): it has ended, and reads as finished."""
    if len(rows) == 1 and rows[0]["more_set"] is None and rows[0]["pairs"] == 1:
        return [stored.ticket(rows[0])]  # type: ignore[list-item]  # most tickets: one pair
    found: dict[str, Ticket] = {}
    pairs: dict[str, int] = {}
    for row in rows:
        digest = row["digest"]
        if digest not in found:
            ticket = stored.ticket(row)
            assert ticket is not None
            found[digest] = ticket
            pairs[digest] = row["pairs"]
        if row["more_set"] is not None:
            ticket = found[digest]
            pair = RequestedPermission(row["more_set"], tuple(json.loads(row["more_scopes"])))
            found[digest] = replace(ticket, more=(*ticket.more, pair))
    return [
        ticket
        if ticket.state != "open" or len(ticket.permissions) == pairs[digest]
        else replace(ticket, state="finished")
        for digest, ticket in found.items()
    ]
