"""RPTs and permissions."""

from __future__ import annotations

import json

from . import rows as stored
from .handle import Handle
from .records import Permission, Rpt

# An RPT's permissions on the sets of one owner at one resource server: found from the RPT (a
# few), never from the owner's sets (perhaps 10^4). On SQLite, CROSS JOIN keeps permissions the
# outer loop (its planner takes it as an order, https://sqlite.org/optoverview.html#manual_control_of_query_plans_using_cross_join):
# resource_sets_by_owner holds all a join needs of the sets, which makes reading all of them look
# cheap to the planner (introspection fell to 0.22x at 10^6 sets). test_migrations.py checks it.
# PostgreSQL plans a CROSS JOIN with its condition in WHERE as any join.
_PERMISSIONS_FOR = (
    "SELECT p.* FROM permissions AS p CROSS JOIN resource_sets AS r"
    " WHERE r.id = p.resource_set_id AND p.rpt_digest = ? AND r.owner = ? AND r.client_id = ?"
    " AND p.expires_at > ? ORDER BY p.issued_at, p.resource_set_id"
)
_PERMISSIONS_FOR_ANY_OWNER = (
    "SELECT p.* FROM permissions AS p CROSS JOIN resource_sets AS r"
    " WHERE r.id = p.resource_set_id AND p.rpt_digest = ? AND r.client_id = ?"
    " AND p.expires_at > ? ORDER BY p.issued_at, p.resource_set_id"
)


class Tokens(Handle):
    """RPTs and the permissions they carry."""

    def add_rpt(self, rpt: Rpt) -> None:
        self._write(
            "INSERT INTO rpts (digest, seed, aat_digest, client_id, requesting_party,"
            " issued_at, expires_at, revoked) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rpt.digest,
                rpt.seed,
                rpt.aat_digest,
                rpt.client_id,
                rpt.requesting_party,
                rpt.issued_at,
                rpt.expires_at,
                rpt.revoked,
            ),
        )

    def get_rpt(self, digest: str) -> Rpt | None:
        return _rpt(
            self._one("SELECT * FROM rpts WHERE digest = ?", (digest,), lock="NO KEY UPDATE")
        )

    def live_rpt_of(self, aat_digest: str, now: int) -> Rpt | None:
        return _rpt(
            self._one(
                "SELECT * FROM rpts WHERE aat_digest = ? AND revoked = FALSE AND expires_at > ?"
                " ORDER BY issued_at DESC LIMIT 1",
                (aat_digest, now),
                lock="NO KEY UPDATE",
            )
        )

    def revoke_rpts_of(self, aat_digest: str) -> int:
        return self._write(
            "UPDATE rpts SET revoked = TRUE WHERE aat_digest = ? AND revoked = FALSE", (aat_digest,)
        )

    def revoke_rpt(self, digest: str) -> bool:
        return (
            self._write(
                "UPDATE rpts SET revoked = TRUE WHERE digest = ? AND revoked = FALSE", (digest,)
            )
            == 1
        )

    def delete_rpts_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM rpts WHERE digest IN"
            " (SELECT digest FROM rpts WHERE expires_at < ? LIMIT ?)",
            (moment, limit),
        )

    # -- permissions ---------------------------------------------------------------------------

    def get_permission(self, rpt_digest: str, rs_id: str) -> Permission | None:
        row = self._one(
            "SELECT * FROM permissions WHERE rpt_digest = ? AND resource_set_id = ?",
            (rpt_digest, rs_id),
            lock="NO KEY UPDATE",
        )
        return None if row is None else stored.permission(row)

    def put_permission(self, rpt_digest: str, permission: Permission) -> None:
        self._write(
            "INSERT INTO permissions (rpt_digest, resource_set_id, scopes, issued_at,"
            " expires_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (rpt_digest, resource_set_id)"
            " DO UPDATE SET scopes = excluded.scopes, issued_at = excluded.issued_at,"
            " expires_at = excluded.expires_at",
            (
                rpt_digest,
                permission.resource_set_id,
                json.dumps(list(permission.scopes)),
                permission.issued_at,
                permission.expires_at,
            ),
        )

    def permissions_of(self, rpt_digest: str, now: int) -> list[Permission]:
        rows = self._all(
            "SELECT * FROM permissions WHERE rpt_digest = ? AND expires_at > ?"
            " ORDER BY issued_at, resource_set_id",
            (rpt_digest, now),
            lock="NO KEY UPDATE",
        )
        return [stored.permission(row) for row in rows]

    def permissions_of_party(
        self, client_id: str, requesting_party: str, now: int
    ) -> list[Permission]:
        rows = self._all(
            "SELECT p.* FROM permissions AS p JOIN rpts AS r ON r.digest = p.rpt_digest"
            " WHERE r.client_id = ? AND r.requesting_party = ? AND r.revoked = FALSE"
            " AND r.expires_at > ? AND p.expires_at > ? ORDER BY p.issued_at, p.resource_set_id",
            (client_id, requesting_party, now, now),
        )
        return [stored.permission(row) for row in rows]

    def permissions_for(
        self, rpt_digest: str, owner: str | None, client_id: str, now: int
    ) -> list[Permission]:
        values: tuple[str | int, ...]
        if owner is None:
            statement, values = _PERMISSIONS_FOR_ANY_OWNER, (rpt_digest, client_id, now)
        else:
            statement, values = _PERMISSIONS_FOR, (rpt_digest, owner, client_id, now)
        rows = self._all(statement, values, lock="NO KEY UPDATE OF p")
        return [stored.permission(row) for row in rows]

    def permissions_on(self, rs_id: str) -> list[tuple[str, Permission]]:
        rows = self._all(
            "SELECT * FROM permissions WHERE resource_set_id = ? ORDER BY issued_at, rpt_digest",
            (rs_id,),
            lock="NO KEY UPDATE",
        )
        return [(str(row["rpt_digest"]), stored.permission(row)) for row in rows]

    def delete_permission(self, rpt_digest: str, rs_id: str) -> bool:
        return (
            self._write(
                "DELETE FROM permissions WHERE rpt_digest = ? AND resource_set_id = ?",
                (rpt_digest, rs_id),
            )
            == 1
        )


def _rpt(row: stored.Row | None) -> Rpt | None:
    if row is None:
        return None
    return Rpt(
        digest=row["digest"],
        seed=row["seed"],
        aat_digest=row["aat_digest"],
        client_id=row["client_id"],
        requesting_party=row["requesting_party"],
        issued_at=row["issued_at"],
        expires_at=row["expires_at"],
        revoked=bool(row["revoked"]),
    )
