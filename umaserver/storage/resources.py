"""Resource sets, permission tickets and the claims handles of tickets."""

from __future__ import annotations

import json
from typing import Any

from . import rows as stored
from .handle import Handle
from .records import ClaimsHandle, OwnedResourceSet, ResourceSet, Ticket

# In the order of creation (rowid, within a second): on SQLite, read from resource_sets_by_owner
# alone.
_LIST_RESOURCE_SETS = (
    "SELECT id FROM resource_sets WHERE owner = ? AND client_id = ? ORDER BY created_at, rowid"
)


class Resources(Handle):
    """Resource sets and the permission tickets that ask for them."""

    def add_resource_set(self, resource_set: ResourceSet, created_at: int) -> None:
        description = resource_set.description
        self._write(
            "INSERT INTO resource_sets (id, owner, client_id, name, type, description,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                resource_set.id,
                resource_set.owner,
                resource_set.client_id,
                description["name"],
                description.get("type"),
                json.dumps(description),
                created_at,
                created_at,
            ),
        )

    def get_resource_set(self, rs_id: str, owner: str, client_id: str) -> ResourceSet | None:
        # Its resource server reads a set to change it: the lock an update takes.
        return stored.resource_set(
            self._one(
                "SELECT * FROM resource_sets WHERE id = ? AND owner = ? AND client_id = ?",
                (rs_id, owner, client_id),
                lock="NO KEY UPDATE",
            )
        )

    def find_resource_set(self, rs_id: str) -> ResourceSet | None:
        # A decision reads the set it decides about: decisions on one set go on side by side,
        # and a change of the set waits for them.
        return stored.resource_set(
            self._one("SELECT * FROM resource_sets WHERE id = ?", (rs_id,), lock="SHARE")
        )

    def replace_resource_set(
        self, rs_id: str, owner: str, client_id: str, description: dict[str, Any], updated_at: int
    ) -> bool:
        return (
            self._write(
                "UPDATE resource_sets SET name = ?, type = ?, description = ?, updated_at = ?"
                " WHERE id = ? AND owner = ? AND client_id = ?",
                (
                    description["name"],
                    description.get("type"),
                    json.dumps(description),
                    updated_at,
                    rs_id,
                    owner,
                    client_id,
                ),
            )
            == 1
        )

    def delete_resource_set(self, rs_id: str, owner: str, client_id: str) -> bool:
        # Tickets, their claims and permissions go with it (ON DELETE CASCADE).
        return (
            self._write(
                "DELETE FROM resource_sets WHERE id = ? AND owner = ? AND client_id = ?",
                (rs_id, owner, client_id),
            )
            == 1
        )

    def list_resource_sets(self, owner: str, client_id: str) -> list[str]:
        return [
            str(rs_id)
            for rs_id in self._column(_LIST_RESOURCE_SETS, (owner, client_id), lock="SHARE")
        ]

    def resource_sets_of(
        self, owner: str, now: int, after: tuple[str, str] | None, limit: int
    ) -> list[OwnedResourceSet]:
        after_name, after_id = after if after is not None else ("", "")
        rows = self._all(
            # The page first, then the counts: only for the sets on it.
            "SELECT page.*, c.name AS client_name,"
            " (SELECT COUNT(*) FROM permissions p JOIN rpts r ON r.digest = p.rpt_digest"
            "  WHERE p.resource_set_id = page.id AND p.expires_at > ? AND r.revoked = FALSE"
            "  AND r.expires_at > ?) AS permissions"
            " FROM (SELECT id, name, type, client_id FROM resource_sets"
            "  WHERE owner = ? AND (NOT ? OR name > ? OR (name = ? AND id > ?))"
            "  ORDER BY name, id LIMIT ?) page"
            " JOIN clients c ON c.client_id = page.client_id"
            " ORDER BY page.name, page.id",
            (now, now, owner, after is not None, after_name, after_name, after_id, limit),
        )
        return [
            OwnedResourceSet(
                row["id"],
                row["name"],
                row["type"],
                row["client_id"],
                row["client_name"],
                int(row["permissions"]),
            )
            for row in rows
        ]

    def count_resource_sets_of(self, owner: str) -> int:
        row = self._one("SELECT COUNT(*) AS n FROM resource_sets WHERE owner = ?", (owner,))
        return int(row["n"]) if row is not None else 0

    # -- permission tickets --------------------------------------------------------------------

    def add_ticket(self, ticket: Ticket) -> None:
        self._write(
            "INSERT INTO tickets (digest, owner, client_id, resource_set_id, scopes,"
            " created_at, expires_at, requests, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                ticket.digest,
                ticket.owner,
                ticket.client_id,
                ticket.resource_set_id,
                json.dumps(list(ticket.scopes)),
                ticket.created_at,
                ticket.expires_at,
                ticket.requests,
                ticket.state,
            ),
        )

    def get_ticket(self, digest: str) -> Ticket | None:
        # In a transaction, the ticket is what the decision is about: racers on one ticket queue
        # here, and each reads it as the one before left it.
        return stored.ticket(
            self._one("SELECT * FROM tickets WHERE digest = ?", (digest,), lock="NO KEY UPDATE")
        )

    def open_tickets_for(self, rs_id: str) -> list[Ticket]:
        rows = self._all(
            "SELECT * FROM tickets WHERE resource_set_id = ? AND state = 'open'"
            " ORDER BY created_at, rowid",
            (rs_id,),
            lock="NO KEY UPDATE",
        )
        return [ticket for row in rows if (ticket := stored.ticket(row)) is not None]

    def set_ticket_scopes(self, digest: str, scopes: tuple[str, ...]) -> bool:
        return (
            self._write(
                "UPDATE tickets SET scopes = ? WHERE digest = ? AND state = 'open'",
                (json.dumps(list(scopes)), digest),
            )
            == 1
        )

    def count_ticket_request(self, digest: str) -> int:
        rows = self._write_returning(
            "UPDATE tickets SET requests = requests + 1 WHERE digest = ? AND state = 'open'"
            " RETURNING requests",
            (digest,),
        )
        return int(rows[0]["requests"]) if rows else 0

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

    # -- claims handles (the redirect profile) -------------------------------------------------

    def add_claims_handle(self, handle: ClaimsHandle) -> None:
        with self.transaction():
            self.void_claims_handles(handle.ticket_digest)
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

    def void_claims_handles(self, ticket_digest: str) -> int:
        return self._write(
            "UPDATE claims_handles SET state = 'void' WHERE ticket_digest = ? AND state = 'open'",
            (ticket_digest,),
        )

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

    def delete_tickets_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM tickets WHERE digest IN"
            " (SELECT digest FROM tickets WHERE expires_at < ? LIMIT ?)",
            (moment, limit),
        )
