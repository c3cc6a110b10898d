"""Owners' own rules and the version of each owner's rules, in SQLite."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from .. import rows as stored
from ..records import StoredOwnerRule
from .base import Base

_SELECT = (
    "SELECT r.id, r.owner, u.username, r.rule, r.created_at, r.updated_at"
    " FROM owner_rules r JOIN users u ON u.sub = r.owner"
)


class OwnerRules(Base):
    """Rules by id, of one owner each; every change bumps the owner's version in its transaction."""

    def _bump(self, user_sub: str) -> None:
        self.conn.execute(
            "INSERT INTO owner_rule_versions (owner, version) VALUES (?, 1)"
            " ON CONFLICT (owner) DO UPDATE SET version = version + 1",
            (user_sub,),
        )

    def add_owner_rule(
        self, rule_id: str, user_sub: str, rule: Mapping[str, Any], created_at: int
    ) -> bool:
        with self.transaction():
            try:
                self.conn.execute(
                    "INSERT INTO owner_rules (id, owner, rule, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (rule_id, user_sub, json.dumps(rule), created_at, created_at),
                )
            except sqlite3.IntegrityError:  # the id is taken, or no such user
                return False
            self._bump(user_sub)
        return True

    def replace_owner_rule(
        self, user_sub: str, rule_id: str, rule: Mapping[str, Any], updated_at: int
    ) -> bool:
        with self.transaction():
            changed = self.conn.execute(
                "UPDATE owner_rules SET rule = ?, updated_at = ? WHERE id = ? AND owner = ?",
                (json.dumps(rule), updated_at, rule_id, user_sub),
            ).rowcount
            if changed:
                self._bump(user_sub)
        return changed == 1

    def delete_owner_rule(self, user_sub: str, rule_id: str) -> bool:
        with self.transaction():
            deleted = self.conn.execute(
                "DELETE FROM owner_rules WHERE id = ? AND owner = ?", (rule_id, user_sub)
            ).rowcount
            if deleted:
                self._bump(user_sub)
        return deleted == 1

    def owner_rules_of(self, user_sub: str) -> list[StoredOwnerRule]:
        rows = self.conn.execute(
            f"{_SELECT} WHERE r.owner = ? ORDER BY r.created_at, r.rowid", (user_sub,)
        ).fetchall()
        return [stored.owner_rule(row) for row in rows]

    def owner_rules_version(self, user_sub: str) -> int:
        row = self._one("SELECT version FROM owner_rule_versions WHERE owner = ?", (user_sub,))
        return 0 if row is None else int(row["version"])

    def all_owner_rules(self) -> list[StoredOwnerRule]:
        rows = self.conn.execute(f"{_SELECT} ORDER BY u.username, r.created_at, r.rowid").fetchall()
        return [stored.owner_rule(row) for row in rows]
