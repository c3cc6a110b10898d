"""Shares: owners' rules marked as shares of one set with one person (issue 25)."""

from __future__ import annotations

import json

from . import rows as stored
from .handle import Handle
from .people_records import Share

_SELECT = (
    "SELECT rule_id, owner, resource_set_id, recipient, kind, scopes, until, created_at FROM shares"
)


class Shares(Handle):
    """Rows beside owners' rules: the rule is added and deleted by `OwnerRules`' operations, in
    the caller's transaction; deleting the rule deletes its row (the foreign key's cascade)."""

    def add_share(self, share: Share) -> bool:
        # The rule is read (and kept) in the statement: its owner must be the share's.
        added = self._write(
            "INSERT INTO shares (rule_id, owner, resource_set_id, recipient, kind, scopes, until,"
            " created_at) SELECT id, owner, ?, ?, ?, ?, ?, ? FROM owner_rules"
            " WHERE id = ? AND owner = ? FOR KEY SHARE ON CONFLICT DO NOTHING",
            (
                share.resource_set_id,
                share.recipient,
                share.kind,
                json.dumps(list(share.scopes)),
                share.until,
                share.created_at,
                share.rule_id,
                share.owner,
            ),
        )
        return added == 1

    def get_share(self, user_sub: str, rule_id: str) -> Share | None:
        row = self._one(f"{_SELECT} WHERE owner = ? AND rule_id = ?", (user_sub, rule_id))
        return None if row is None else stored.share(row)

    def shares_of(self, user_sub: str, resource_set_id: str | None = None) -> list[Share]:
        if resource_set_id is None:
            rows = self._all(f"{_SELECT} WHERE owner = ? ORDER BY created_at, rule_id", (user_sub,))
        else:
            rows = self._all(
                f"{_SELECT} WHERE owner = ? AND resource_set_id = ? ORDER BY created_at, rule_id",
                (user_sub, resource_set_id),
            )
        return [stored.share(row) for row in rows]

    def reassign_share(self, user_sub: str, rule_id: str, recipient: str, kind: str) -> bool:
        return (
            self._write(
                "UPDATE shares SET recipient = ?, kind = ? WHERE owner = ? AND rule_id = ?",
                (recipient, kind, user_sub, rule_id),
            )
            == 1
        )

    def count_shares(self, user_sub: str) -> int:
        row = self._one("SELECT COUNT(*) AS n FROM shares WHERE owner = ?", (user_sub,))
        return int(row["n"])
