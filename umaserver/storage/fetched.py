"""The queue and cache of URIs checked in the background, and the images kept."""

from __future__ import annotations

from .handle import Handle
from .records import FetchedImage, FetchedUri, FetchKind
from .rows import Row


def _uri(row: Row) -> FetchedUri:
    # The columns are named as the record's fields.
    return FetchedUri(**{key: row[key] for key in row.keys()})  # noqa: SIM118 (SQLite's rows)


# How deep into the due rows (oldest first) a claim looks, beside every queuer's oldest: racing
# jobs skip each other's rows within it, and a claim reads a bounded number of rows, however long
# the queue (it holds SQLite's write lock meanwhile).
CLAIM_DEPTH = 256

# Takes the fairest due rows. The candidates are the `CLAIM_DEPTH` longest due and each queuer's
# longest due (so a queuer whose rows are all newer than those is not left out); the inner query
# ranks them round-robin by who queued them; the lock is taken a level above it, on the table's
# own rows (PostgreSQL allows no lock where a window function is), before the limit: rows another
# job holds are skipped and the next taken. A row's turn is its place among its queuer's due rows
# (oldest first) plus how many of that queuer's rows are being fetched right now, so a queuer
# with fetches under way waits behind one with none; among equal turns the queuer served longest
# ago (or never) goes first, then the longest due. One registration's many URIs that never answer
# so delay another's by one fetch at most.
_CLAIM = (
    "UPDATE fetched_uris SET claimed_until = ? WHERE id IN"
    " (SELECT taken.id FROM fetched_uris AS taken JOIN"
    "  (SELECT due.id, due.next_try_at,"
    "    ROW_NUMBER() OVER (PARTITION BY due.queued_by ORDER BY due.next_try_at, due.id)"
    "    + COALESCE(leased.busy, 0) AS turn,"
    "    (SELECT COALESCE(MAX(served.checked_at), -1) FROM fetched_uris AS served"
    "     WHERE served.queued_by = due.queued_by) AS served"
    "   FROM fetched_uris AS due LEFT JOIN"
    "    (SELECT queued_by, COUNT(*) AS busy FROM fetched_uris WHERE claimed_until > ?"
    "     GROUP BY queued_by) AS leased ON leased.queued_by = due.queued_by"
    "   WHERE due.id IN"
    "    (SELECT oldest.id FROM"
    "     (SELECT id FROM fetched_uris WHERE next_try_at <= ? AND claimed_until <= ?"
    "      ORDER BY next_try_at, id LIMIT ?) AS oldest"
    "     UNION SELECT"
    "     (SELECT head.id FROM fetched_uris AS head WHERE head.queued_by = queuers.queued_by"
    "       AND head.next_try_at <= ? AND head.claimed_until <= ?"
    "      ORDER BY head.next_try_at, head.id LIMIT 1)"
    "     FROM (SELECT DISTINCT queued_by FROM fetched_uris"
    "      WHERE next_try_at <= ? AND claimed_until <= ?) AS queuers)) AS ranked"
    "  ON ranked.id = taken.id"
    "  WHERE taken.next_try_at <= ? AND taken.claimed_until <= ?"
    "  ORDER BY ranked.turn, ranked.served, ranked.next_try_at, ranked.id LIMIT ?"
    "  FOR UPDATE OF taken SKIP LOCKED)"
    " RETURNING *"
)


def _round_robin(rows: list[Row]) -> list[Row]:
    """Rows taken together, in turns: each queuer's oldest, then each one's next, ..."""
    rows = sorted(rows, key=lambda row: (row["next_try_at"], row["id"]))
    seen: dict[str, int] = {}
    turns = []
    for row in rows:
        seen[row["queued_by"]] = seen.get(row["queued_by"], 0) + 1
        turns.append((seen[row["queued_by"]], row["next_try_at"], row["id"], row))
    return [turn[-1] for turn in sorted(turns, key=lambda turn: turn[:3])]


class FetchedUris(Handle):
    def queue_uri(
        self, uri: str, kind: FetchKind, row_id: str, now: int, queued_by: str = ""
    ) -> bool:
        return (
            self._write(
                "INSERT INTO fetched_uris"
                " (id, uri, kind, status, created_at, next_try_at, queued_by)"
                " VALUES (?, ?, ?, 'pending', ?, ?, ?) ON CONFLICT (uri, kind) DO NOTHING",
                (row_id, uri, kind, now, now, queued_by),
            )
            == 1
        )

    def get_fetched_uri(self, uri: str, kind: FetchKind) -> FetchedUri | None:
        row = self._one(
            "SELECT * FROM fetched_uris WHERE uri = ? AND kind = ?",
            (uri, kind),
            lock="NO KEY UPDATE",
        )
        return None if row is None else _uri(row)

    def fetched_uri_by_id(self, row_id: str) -> FetchedUri | None:
        row = self._one("SELECT * FROM fetched_uris WHERE id = ?", (row_id,), lock="NO KEY UPDATE")
        return None if row is None else _uri(row)

    def count_due_fetches(self, now: int) -> int:
        row = self._one("SELECT COUNT(*) AS n FROM fetched_uris WHERE next_try_at <= ?", (now,))
        return int(row["n"])

    def claim_fetch_work(self, now: int, claimed_until: int, limit: int) -> list[FetchedUri]:
        # A look first: the job looks whenever it is woken, and SQLite's write lock taken for
        # nothing would make requests that write wait for it.
        if (
            self._one(
                "SELECT 1 FROM fetched_uris WHERE next_try_at <= ? AND claimed_until <= ? LIMIT 1",
                (now, now),
            )
            is None
        ):
            return []
        # One statement: SQLite's holds the database; on PostgreSQL rows another job is taking
        # right now are skipped, not waited for, and a row taken and committed meanwhile is read
        # again under its lock, and is no longer due (`_CLAIM`).
        rows = self._write_returning(
            _CLAIM,
            (claimed_until, now, now, now, CLAIM_DEPTH, now, now, now, now, now, now, limit),
        )
        return [_uri(row) for row in _round_robin(rows)]

    def _previous_image(self, row_id: str, claimed_until: int) -> tuple[bool, str | None]:
        row = self._one(
            "SELECT image_id FROM fetched_uris WHERE id = ? AND claimed_until = ?",
            (row_id, claimed_until),
            lock="NO KEY UPDATE",
        )
        return (False, None) if row is None else (True, row["image_id"])

    def record_fetch_checked(
        self,
        row_id: str,
        claimed_until: int,
        now: int,
        expires_at: int,
        *,
        name: str | None = None,
        icon_uri: str | None = None,
        content_type: str | None = None,
        image: FetchedImage | None = None,
    ) -> bool:
        with self.transaction():
            held, previous = self._previous_image(row_id, claimed_until)
            if not held:
                return False
            if image is not None:
                self._write(
                    "INSERT INTO fetched_images (id, content_type, bytes, size, fetched_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (image.id, image.content_type, image.data, image.size, image.fetched_at),
                )
            self._write(
                "UPDATE fetched_uris SET status = 'checked', name = ?, icon_uri = ?,"
                " content_type = ?, image_id = ?, reason = NULL, checked_at = ?,"
                " expires_at = ?, failures = 0, next_try_at = ?, claimed_until = 0"
                " WHERE id = ?",
                (
                    name,
                    icon_uri,
                    content_type,
                    None if image is None else image.id,
                    now,
                    expires_at,
                    expires_at,
                    row_id,
                ),
            )
            if previous is not None:
                self._write("DELETE FROM fetched_images WHERE id = ?", (previous,))
        return True

    def record_fetch_failure(
        self, row_id: str, claimed_until: int, now: int, next_try_at: int, reason: str
    ) -> bool:
        with self.transaction():
            held, previous = self._previous_image(row_id, claimed_until)
            if not held:
                return False
            self._write(
                "UPDATE fetched_uris SET status = 'failed', name = NULL, icon_uri = NULL,"
                " content_type = NULL, image_id = NULL, reason = ?, checked_at = ?,"
                " expires_at = NULL, failures = failures + 1, next_try_at = ?,"
                " claimed_until = 0 WHERE id = ?",
                (reason, now, next_try_at, row_id),
            )
            if previous is not None:
                self._write("DELETE FROM fetched_images WHERE id = ?", (previous,))
        return True

    def get_fetched_image(self, image_id: str) -> FetchedImage | None:
        row = self._one(
            "SELECT id, content_type, bytes, fetched_at FROM fetched_images WHERE id = ?",
            (image_id,),
            lock="SHARE",
        )
        if row is None:
            return None
        return FetchedImage(row["id"], row["content_type"], bytes(row["bytes"]), row["fetched_at"])
