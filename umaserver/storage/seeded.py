"""The parties seed files created, so that `seed apply --prune` removes only those."""

from __future__ import annotations

from .handle import Handle
from .people_records import SeededKind, SeededParty

# The advisory lock's key: the one the PostgreSQL migrations take (`postgresql.migrate`), so that
# a seed is never applied while the schema changes, nor two at once.
_SEEDING_LOCK = 0x756D_6173_6572_7665


class SeededParties(Handle):
    def lock_seeding(self) -> None:
        # SQLite's write transaction holds the whole database already.
        if self._dialect.row_locks:
            self._execute("SELECT pg_advisory_xact_lock(?)", (_SEEDING_LOCK,))

    def record_seeded(self, party: SeededParty, seeded_at: int) -> bool:
        return (
            self._write(
                "INSERT INTO seeded_parties (kind, party, subject, seeded_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (party.kind, party.party, party.subject, seeded_at),
            )
            == 1
        )

    def seeded_parties(self) -> list[SeededParty]:
        rows = self._all(
            "SELECT kind, party, subject FROM seeded_parties ORDER BY kind, party, subject",
            lock="UPDATE",
        )
        return [_party(row["kind"], row["party"], row["subject"]) for row in rows]

    def forget_seeded(self, party: SeededParty) -> bool:
        return (
            self._write(
                "DELETE FROM seeded_parties WHERE kind = ? AND party = ? AND subject = ?",
                (party.kind, party.party, party.subject),
            )
            == 1
        )


def _party(kind: SeededKind, party: str, subject: str) -> SeededParty:
    return SeededParty(kind, str(party), str(subject))
