"""Owners' own rules and the version of each owner's rules,."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from . import rows as stored
from .handle import Handle
from .records import StoredOwnerRule

_SELECT = (
    "SELECT r.id, r.owner, u.username, r.rule, r.created_at, r.updated_at"
    " FROM owner_rules r JOIN users u ON u.sub = r.owner"
)
_RULES_OF = f"{_SELECT} WHERE r.owner = ? ORDER BY r.created_at, r.rowid"
_ALL_RULES = f"{_SELECT} ORDER BY u.username, r.created_at, r.rowid"


class OwnerRules(Handle):
    """Rules by id, of one owner each; every change bumps the owner's version in its transaction."""

    def _bump(self, user_sub: str) -> None:
        self._write(
            "INSERT INTO owner_rule_versions (owner, version) VALUES (?, 1)"
            " ON CONFLICT (owner) DO UPDATE SET version = owner_rule_versions.version + 1",
            (user_sub,),
        )

    def add_owner_rule(
        self, rule_id: str, user_sub: str, rule: Mapping[str, Any], created_at: int
    ) -> bool:
        with self.transaction():
            # The user is read (and kept) in the statement, the id's conflict skipped: no error
            # ends a caller's transaction.
            added = self._write(
                "INSERT INTO owner_rules (id, owner, rule, created_at, updated_at)"
                " SELECT ?, sub, ?, ?, ? FROM users WHERE sub = ? FOR KEY SHARE"
                " ON CONFLICT DO NOTHING",
                (rule_id, json.dumps(rule), created_at, created_at, user_sub),
            )
            if added:
                self._bump(user_sub)
        return added == 1

    def replace_owner_rule(
        self, user_sub: str, rule_id: str, rule: Mapping[str, Any], updated_at: int
    ) -> bool:
        with self.transaction():
            changed = self._write(
                "UPDATE owner_rules SET rule = ?, updated_at = ? WHERE id = ? AND owner = ?",
                (json.dumps(rule), updated_at, rule_id, user_sub),
            )
            if changed:
                self._bump(user_sub)
        return changed == 1

    def delete_owner_rule(self, user_sub: str, rule_id: str) -> bool:
        with self.transaction():
            deleted = self._write(
                "DELETE FROM owner_rules WHERE id = ? AND owner = ?", (rule_id, user_sub)
            )
            if deleted:
                self._bump(user_sub)
        return deleted == 1

    def owner_rules_of(self, user_sub: str) -> list[StoredOwnerRule]:
        rows = self._all(_RULES_OF, (user_sub,), lock="SHARE OF r")
        return [stored.owner_rule(row) for row in rows]

    def owner_rules_version(self, user_sub: str) -> int:
        row = self._one(
            "SELECT version FROM owner_rule_versions WHERE owner = ?", (user_sub,), lock="SHARE"
        )
        return 0 if row is None else int(row["version"])

    def all_owner_rules(self) -> list[StoredOwnerRule]:
        rows = self._all(_ALL_RULES, lock="SHARE OF r")
        return [stored.owner_rule(row) for row in rows]
