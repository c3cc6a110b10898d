"""The queue and cache of URIs checked in the background, and the images kept, in SQLite."""

from __future__ import annotations

import sqlite3
from typing import Any

from ..records import FetchedImage, FetchedUri, FetchKind
from .base import Base


def _uri(row: sqlite3.Row, **changed: Any) -> FetchedUri:
    # The columns are named as the record's fields.
    return FetchedUri(**{**{key: row[key] for key in row.keys()}, **changed})  # noqa: SIM118


class FetchedUris(Base):
    def queue_uri(self, uri: str, kind: FetchKind, row_id: str, now: int) -> bool:
        return (
            self._write(
                "INSERT INTO fetched_uris (id, uri, kind, status, created_at, next_try_at)"
                " VALUES (?, ?, ?, 'pending', ?, ?) ON CONFLICT (uri, kind) DO NOTHING",
                (row_id, uri, kind, now, now),
            )
            == 1
        )

    def get_fetched_uri(self, uri: str, kind: FetchKind) -> FetchedUri | None:
        row = self._one("SELECT * FROM fetched_uris WHERE uri = ? AND kind = ?", (uri, kind))
        return None if row is None else _uri(row)

    def fetched_uri_by_id(self, row_id: str) -> FetchedUri | None:
        row = self._one("SELECT * FROM fetched_uris WHERE id = ?", (row_id,))
        return None if row is None else _uri(row)

    def claim_fetch_work(self, now: int, claimed_until: int, limit: int) -> list[FetchedUri]:
        # A look without the write lock first: the job looks whenever it is woken, and taking
        # the lock for nothing would make requests that write wait for it.
        if (
            self._one(
                "SELECT 1 FROM fetched_uris WHERE next_try_at <= ? AND claimed_until <= ? LIMIT 1",
                (now, now),
            )
            is None
        ):
            return []
        # BEGIN IMMEDIATE holds the write lock from the read on: no other handle takes the same
        # rows between this SELECT and the UPDATE.
        with self.transaction():
            rows = self.conn.execute(
                "SELECT * FROM fetched_uris"
                " WHERE next_try_at <= ? AND claimed_until <= ?"
                " ORDER BY next_try_at, id LIMIT ?",
                (now, now, limit),
            ).fetchall()
            self.conn.executemany(
                "UPDATE fetched_uris SET claimed_until = ? WHERE id = ?",
                [(claimed_until, row["id"]) for row in rows],
            )
        return [_uri(row, claimed_until=claimed_until) for row in rows]

    def _previous_image(self, row_id: str, claimed_until: int) -> tuple[bool, str | None]:
        row = self._one(
            "SELECT image_id FROM fetched_uris WHERE id = ? AND claimed_until = ?",
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
                self.conn.execute(
                    "INSERT INTO fetched_images (id, content_type, bytes, size, fetched_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (image.id, image.content_type, image.data, image.size, image.fetched_at),
                )
            self.conn.execute(
                "UPDATE fetched_uris SET status = 'checked', name = ?, icon_uri = ?,"
                " content_type = ?, image_id = ?, reason = NULL, checked_at = ?, expires_at = ?,"
                " failures = 0, next_try_at = ?, claimed_until = 0 WHERE id = ?",
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
                self.conn.execute("DELETE FROM fetched_images WHERE id = ?", (previous,))
        return True

    def record_fetch_failure(
        self, row_id: str, claimed_until: int, now: int, next_try_at: int, reason: str
    ) -> bool:
        with self.transaction():
            held, previous = self._previous_image(row_id, claimed_until)
            if not held:
                return False
            self.conn.execute(
                "UPDATE fetched_uris SET status = 'failed', name = NULL, icon_uri = NULL,"
                " content_type = NULL, image_id = NULL, reason = ?, checked_at = ?,"
                " expires_at = NULL, failures = failures + 1, next_try_at = ?,"
                " claimed_until = 0 WHERE id = ?",
                (reason, now, next_try_at, row_id),
            )
            if previous is not None:
                self.conn.execute("DELETE FROM fetched_images WHERE id = ?", (previous,))
        return True

    def get_fetched_image(self, image_id: str) -> FetchedImage | None:
        row = self._one(
            "SELECT id, content_type, bytes, fetched_at FROM fetched_images WHERE id = ?",
            (image_id,),
        )
        if row is None:
            return None
        return FetchedImage(row["id"], row["content_type"], bytes(row["bytes"]), row["fetched_at"])
