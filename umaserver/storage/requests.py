"""Requests to owners (issue 25, item 3): one row a request, read by owner (pending newest
first), by party (a count of the pending), by ticket; decided once; pruned by expiry in batches.
And the owner's switch "others may ask me" (a column of `users`)."""

from __future__ import annotations

import json

from .handle import Handle
from .people_records import AccessRequest, RequestStatus
from .rows import Row

_SELECT = (
    "SELECT id, owner, resource_set_id, scopes, party, party_name, client_id, client_name,"
    " ticket_digest, status, created_at, expires_at, decided_at, approved_scopes FROM requests"
)


class Requests(Handle):
    def add_request(self, request: AccessRequest) -> None:
        self._write(
            "INSERT INTO requests (id, owner, resource_set_id, scopes, party, party_name,"
            " client_id, client_name, ticket_digest, status, created_at, expires_at, decided_at,"
            " approved_scopes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                request.id,
                request.owner,
                request.resource_set_id,
                json.dumps(list(request.scopes)),
                request.party,
                request.party_name,
                request.client_id,
                request.client_name,
                request.ticket_digest,
                request.status,
                request.created_at,
                request.expires_at,
                request.decided_at,
                None
                if request.approved_scopes is None
                else json.dumps(list(request.approved_scopes)),
            ),
        )
        if request.ticket_digest:  # Keycloak's ticketless form files requests without one
            self._write(
                "UPDATE tickets SET asked = TRUE WHERE digest = ?", (request.ticket_digest,)
            )

    def get_request(self, request_id: str) -> AccessRequest | None:
        # In a transaction, the request is what the owner answers: answers queue here.
        row = self._one(f"{_SELECT} WHERE id = ?", (request_id,), lock="NO KEY UPDATE")
        return None if row is None else _request(row)

    def request_for_ticket(self, ticket_digest: str) -> AccessRequest | None:
        row = self._one(
            f"{_SELECT} WHERE ticket_digest = ? ORDER BY created_at DESC, id LIMIT 1",
            (ticket_digest,),
            lock="NO KEY UPDATE",
        )
        return None if row is None else _request(row)

    def move_request(self, old_digest: str, new_digest: str) -> int:
        return self._write(
            "UPDATE requests SET ticket_digest = ? WHERE ticket_digest = ?",
            (new_digest, old_digest),
        )

    def requests_of(
        self, owner: str, status: RequestStatus, now: int, limit: int
    ) -> list[AccessRequest]:
        # A pending request past its wait is no longer pending: it reads as expired.
        parameters: list[object]
        if status == "pending":
            where, parameters = "status = 'pending' AND expires_at > ?", [now]
        elif status == "expired":
            where, parameters = "status = 'pending' AND expires_at <= ?", [now]
        else:
            where, parameters = "status = ?", [status]
        rows = self._all(
            f"{_SELECT} WHERE owner = ? AND {where} ORDER BY created_at DESC, id LIMIT ?",
            (owner, *parameters, limit),
        )
        return [_request(row, now) for row in rows]

    def count_pending_requests_to(self, owner: str, now: int) -> int:
        row = self._one(
            "SELECT COUNT(*) AS n FROM requests WHERE owner = ? AND status = 'pending'"
            " AND expires_at > ?",
            (owner, now),
        )
        return int(row["n"])

    def count_pending_requests_by(self, party: str, now: int) -> int:
        row = self._one(
            "SELECT COUNT(*) AS n FROM requests WHERE party = ? AND status = 'pending'"
            " AND expires_at > ?",
            (party, now),
        )
        return int(row["n"])

    def decide_request(
        self,
        request_id: str,
        status: RequestStatus,
        now: int,
        approved_scopes: tuple[str, ...] | None = None,
    ) -> bool:
        return (
            self._write(
                "UPDATE requests SET status = ?, decided_at = ?, approved_scopes = ?"
                " WHERE id = ? AND status = 'pending' AND expires_at > ?",
                (
                    status,
                    now,
                    None if approved_scopes is None else json.dumps(list(approved_scopes)),
                    request_id,
                    now,
                ),
            )
            == 1
        )

    def delete_requests_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM requests WHERE id IN"
            " (SELECT id FROM requests WHERE expires_at < ? LIMIT ?)",
            (moment, limit),
        )

    def takes_requests(self, user_sub: str) -> bool | None:
        row = self._one("SELECT takes_requests FROM users WHERE sub = ?", (user_sub,))
        if row is None or row["takes_requests"] is None:
            return None
        return bool(row["takes_requests"])

    def set_takes_requests(self, user_sub: str, value: bool | None) -> bool:
        return (
            self._write("UPDATE users SET takes_requests = ? WHERE sub = ?", (value, user_sub)) == 1
        )


def _request(row: Row, now: int | None = None) -> AccessRequest:
    status = str(row["status"])
    expires_at = int(row["expires_at"])
    if status == "pending" and now is not None and expires_at <= now:
        status = "expired"
    assert status in ("pending", "approved", "denied", "expired")
    approved = row["approved_scopes"]
    return AccessRequest(
        id=str(row["id"]),
        owner=str(row["owner"]),
        resource_set_id=str(row["resource_set_id"]),
        scopes=tuple(json.loads(row["scopes"])),
        party=str(row["party"]),
        party_name=str(row["party_name"]),
        client_id=str(row["client_id"]),
        client_name=str(row["client_name"]),
        ticket_digest=str(row["ticket_digest"]),
        status=status,  # type: ignore[arg-type]
        created_at=int(row["created_at"]),
        expires_at=expires_at,
        decided_at=None if row["decided_at"] is None else int(row["decided_at"]),
        approved_scopes=None if approved is None else tuple(json.loads(approved)),
    )
