"""Persisted claims tokens (UMA 2.0) and the claims each holds."""

from __future__ import annotations

import json
from collections.abc import Iterable

from . import rows as stored
from .handle import Handle
from .records import Claim, Pct
from .rows import Row


class Pcts(Handle):
    """PCTs by digest, for the client they were issued to; their claims, each until its expiry."""

    def add_pct(self, pct: Pct, claims: Iterable[Claim]) -> None:
        with self.transaction():
            self._write(
                "INSERT INTO pcts (digest, client_id, requesting_party, user_sub, created_at,"
                " expires_at, revoked) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    pct.digest,
                    pct.client_id,
                    pct.requesting_party,
                    pct.user_sub,
                    pct.created_at,
                    pct.expires_at,
                    pct.revoked,
                ),
            )
            self._write_many(
                "INSERT INTO pct_claims (pct_digest, type, name, issuer, subject, value,"
                " client_id, gathered_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (pct_digest, type, name, issuer) DO UPDATE"
                " SET subject = excluded.subject, value = excluded.value,"
                " client_id = excluded.client_id, gathered_at = excluded.gathered_at,"
                " expires_at = excluded.expires_at",
                [
                    (
                        pct.digest,
                        claim.type,
                        claim.name,
                        claim.issuer,
                        claim.subject,
                        json.dumps(claim.value),
                        claim.client_id,
                        claim.gathered_at,
                        min(claim.expires_at or pct.expires_at, pct.expires_at),
                    )
                    for claim in claims
                ],
            )

    def get_pct(self, digest: str) -> Pct | None:
        row = self._one("SELECT * FROM pcts WHERE digest = ?", (digest,), lock="SHARE")
        return None if row is None else _pct(row)

    def pct_claims(self, digest: str, now: int) -> list[Claim]:
        rows = self._all(
            "SELECT * FROM pct_claims WHERE pct_digest = ? AND expires_at > ?"
            " ORDER BY type, name, issuer",
            (digest, now),
        )
        return [stored.claim(row) for row in rows]

    def pcts_of(self, user_sub: str) -> list[Pct]:
        rows = self._all(
            "SELECT * FROM pcts WHERE user_sub = ? ORDER BY created_at DESC, digest", (user_sub,)
        )
        return [_pct(row) for row in rows]

    def revoke_pct(self, digest: str) -> bool:
        return (
            self._write(
                "UPDATE pcts SET revoked = TRUE WHERE digest = ? AND revoked = FALSE", (digest,)
            )
            == 1
        )

    def delete_pcts_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM pcts WHERE digest IN"
            " (SELECT digest FROM pcts WHERE expires_at < ? LIMIT ?)",
            (moment, limit),
        )


def _pct(row: Row) -> Pct:
    return Pct(
        digest=row["digest"],
        client_id=row["client_id"],
        requesting_party=row["requesting_party"],
        user_sub=row["user_sub"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked=bool(row["revoked"]),
    )
