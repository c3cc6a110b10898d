"""The keys that sign JWT RPTs: one current, the others kept to verify until they are retired."""

from __future__ import annotations

import json

from .handle import Handle
from .records import SigningKey
from .rows import Row


class SigningKeys(Handle):
    """Signing keys by kid; at most one current (a partial unique index keeps it so)."""

    def add_signing_key(self, key: SigningKey, *, replace_current: bool) -> bool:
        with self.transaction():
            if replace_current:
                self._write("UPDATE signing_keys SET is_current = FALSE WHERE is_current", ())
            # Of two processes that both found no current key, one adds it: the other's is not
            # stored (the unique index on is_current), and it reads the first one's.
            added = self._write(
                "INSERT INTO signing_keys (kid, algorithm, public_jwk, sealed_key, created_at,"
                " is_current) VALUES (?, ?, ?, ?, ?, TRUE) ON CONFLICT DO NOTHING",
                (
                    key.kid,
                    key.algorithm,
                    json.dumps(key.public_jwk),
                    key.sealed_key,
                    key.created_at,
                ),
            )
        return added == 1

    def current_signing_key(self) -> SigningKey | None:
        row = self._one("SELECT * FROM signing_keys WHERE is_current")
        return None if row is None else _signing_key(row)

    def signing_keys(self) -> list[SigningKey]:
        rows = self._all("SELECT * FROM signing_keys ORDER BY created_at, kid")
        return [_signing_key(row) for row in rows]

    def retire_signing_keys(self) -> list[str]:
        rows = self._write_returning(
            "DELETE FROM signing_keys WHERE NOT is_current RETURNING kid", ()
        )
        return sorted(str(row["kid"]) for row in rows)

    def reseal_signing_key(self, kid: str, sealed_before: str, sealed_now: str) -> bool:
        changed = self._write(
            "UPDATE signing_keys SET sealed_key = ? WHERE kid = ? AND sealed_key = ?",
            (sealed_now, kid, sealed_before),
        )
        return changed == 1


def _signing_key(row: Row) -> SigningKey:
    return SigningKey(
        kid=str(row["kid"]),
        algorithm=str(row["algorithm"]),
        public_jwk=json.loads(row["public_jwk"]),
        sealed_key=str(row["sealed_key"]),
        created_at=int(row["created_at"]),
        current=bool(row["is_current"]),
    )
