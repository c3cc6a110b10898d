"""The queue and cache of URIs checked in the background, and the images kept, in PostgreSQL."""

from __future__ import annotations

from typing import Any

from psycopg.rows import DictRow

from ..records import FetchedImage, FetchedUri, FetchKind
from .base import Base


def _uri(row: DictRow, **changed: Any) -> FetchedUri:
    # The columns are named as the record's fields.
    return FetchedUri(**{**row, **changed})


class FetchedUris(Base):
    def queue_uri(self, uri: str, kind: FetchKind, row_id: str, now: int) -> bool:
        return (
            self._write(
                "INSERT INTO fetched_uris (id, uri, kind, status, created_at, next_try_at)"
                " VALUES (%s, %s, %s, 'pending', %s, %s) ON CONFLICT (uri, kind) DO NOTHING",
                (row_id, uri, kind, now, now),
            )
            == 1
        )

    def get_fetched_uri(self, uri: str, kind: FetchKind) -> FetchedUri | None:
        row = self._one(
            f"SELECT * FROM fetched_uris WHERE uri = %s AND kind = %s{self._lock()}", (uri, kind)
        )
        return None if row is None else _uri(row)

    def fetched_uri_by_id(self, row_id: str) -> FetchedUri | None:
        row = self._one(f"SELECT * FROM fetched_uris WHERE id = %s{self._lock()}", (row_id,))
        return None if row is None else _uri(row)

    def claim_fetch_work(self, now: int, claimed_until: int, limit: int) -> list[FetchedUri]:
        # Rows another job is taking right now are skipped, not waited for; a row taken and
        # committed meanwhile is read again under its lock, and is no longer due.
        rows = self._all(
            "UPDATE fetched_uris SET claimed_until = %s WHERE id IN"
            " (SELECT id FROM fetched_uris WHERE next_try_at <= %s AND claimed_until <= %s"
            "  ORDER BY next_try_at, id LIMIT %s FOR UPDATE SKIP LOCKED)"
            " RETURNING *",
            (claimed_until, now, now, limit),
        )
        rows.sort(key=lambda row: (row["next_try_at"], row["id"]))
        return [_uri(row) for row in rows]

    def _previous_image(self, row_id: str, claimed_until: int) -> tuple[bool, str | None]:
        row = self._one(
            "SELECT image_id FROM fetched_uris WHERE id = %s AND claimed_until = %s"
            " FOR NO KEY UPDATE",
            (row_id, claimed_until),
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
                self._execute(
                    "INSERT INTO fetched_images (id, content_type, bytes, size, fetched_at)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    (image.id, image.content_type, image.data, image.size, image.fetched_at),
                )
            self._execute(
                "UPDATE fetched_uris SET status = 'checked', name = %s, icon_uri = %s,"
                " content_type = %s, image_id = %s, reason = NULL, checked_at = %s,"
                " expires_at = %s, failures = 0, next_try_at = %s, claimed_until = 0"
                " WHERE id = %s",
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
                self._execute("DELETE FROM fetched_images WHERE id = %s", (previous,))
        return True

    def record_fetch_failure(
        self, row_id: str, claimed_until: int, now: int, next_try_at: int, reason: str
    ) -> bool:
        with self.transaction():
            held, previous = self._previous_image(row_id, claimed_until)
            if not held:
                return False
            self._execute(
                "UPDATE fetched_uris SET status = 'failed', name = NULL, icon_uri = NULL,"
                " content_type = NULL, image_id = NULL, reason = %s, checked_at = %s,"
                " expires_at = NULL, failures = failures + 1, next_try_at = %s,"
                " claimed_until = 0 WHERE id = %s",
                (reason, now, next_try_at, row_id),
            )
            if previous is not None:
                self._execute("DELETE FROM fetched_images WHERE id = %s", (previous,))
        return True

    def get_fetched_image(self, image_id: str) -> FetchedImage | None:
        row = self._one(
            "SELECT id, content_type, bytes, fetched_at FROM fetched_images WHERE id = %s"
            + self._lock("SHARE"),
            (image_id,),
        )
        if row is None:
            return None
        return FetchedImage(row["id"], row["content_type"], bytes(row["bytes"]), row["fetched_at"])
