"""Invitations: single-use links to shares by e-mail (issue 25), by the digest of their token."""

from __future__ import annotations

from .handle import Handle
from .people_records import Invitation
from .rows import Row

_COLUMNS = "digest, rule_id, owner, address, created_at, expires_at, used_at, used_by"


class Invitations(Handle):
    """One invitation a share at most (`rule_id` is unique); it goes with its share."""

    def add_invitation(self, invitation: Invitation) -> bool:
        # The share is read (and kept) in the statement: its owner must be the invitation's.
        added = self._write(
            f"INSERT INTO invitations ({_COLUMNS})"  # noqa: S608 - no input in the text
            " SELECT ?, rule_id, owner, ?, ?, ?, NULL, NULL FROM shares"
            " WHERE rule_id = ? AND owner = ? AND kind = 'email' FOR KEY SHARE"
            " ON CONFLICT DO NOTHING",
            (
                invitation.digest,
                invitation.address,
                invitation.created_at,
                invitation.expires_at,
                invitation.rule_id,
                invitation.owner,
            ),
        )
        return added == 1

    def get_invitation(self, digest: str) -> Invitation | None:
        row = self._one(
            f"SELECT {_COLUMNS} FROM invitations WHERE digest = ?",  # noqa: S608
            (digest,),
            lock="NO KEY UPDATE",
        )
        return None if row is None else _invitation(row)

    def invitations_of(self, owner: str) -> list[Invitation]:
        rows = self._all(
            f"SELECT {_COLUMNS} FROM invitations WHERE owner = ?"  # noqa: S608
            " ORDER BY created_at, rule_id",
            (owner,),
        )
        return [_invitation(row) for row in rows]

    def replace_invitation(
        self, owner: str, rule_id: str, digest: str, created_at: int, expires_at: int
    ) -> bool:
        return (
            self._write(
                "UPDATE invitations SET digest = ?, created_at = ?, expires_at = ?"
                " WHERE owner = ? AND rule_id = ? AND used_at IS NULL",
                (digest, created_at, expires_at, owner, rule_id),
            )
            == 1
        )

    def delete_invitation(self, owner: str, rule_id: str) -> bool:
        return (
            self._write(
                "DELETE FROM invitations WHERE owner = ? AND rule_id = ? AND used_at IS NULL",
                (owner, rule_id),
            )
            == 1
        )

    def use_invitation(self, digest: str, user_sub: str, now: int) -> Invitation | None:
        rows = self._write_returning(
            "UPDATE invitations SET used_at = ?, used_by = ?"  # noqa: S608 - no input in the text
            " WHERE digest = ? AND used_at IS NULL AND expires_at > ?"
            f" RETURNING {_COLUMNS}",
            (now, user_sub, digest, now),
        )
        return _invitation(rows[0]) if rows else None

    def delete_invitations_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM invitations WHERE digest IN (SELECT digest FROM invitations"
            " WHERE expires_at < ? OR used_at < ? LIMIT ?)",
            (moment, moment, limit),
        )


def _invitation(row: Row) -> Invitation:
    return Invitation(
        digest=str(row["digest"]),
        rule_id=str(row["rule_id"]),
        owner=str(row["owner"]),
        address=str(row["address"]),
        created_at=int(row["created_at"]),
        expires_at=int(row["expires_at"]),
        used_at=None if row["used_at"] is None else int(row["used_at"]),
        used_by=None if row["used_by"] is None else str(row["used_by"]),
    )
