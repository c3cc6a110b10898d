"""Notices: a person's inbox on the pages and the mail outbox, in one table (issue 25, item 4)."""

from __future__ import annotations

from .handle import Handle
from .people_records import Notice
from .rows import Row

_COLUMNS = (
    "rowid AS seq, id, user_sub, address, kind, subject, body, link, created_at, seen_at,"
    " mail_state, attempts, next_attempt_at, last_error"
)


class Notices(Handle):
    """Notices by person and time (`seq` orders those of one second), and the mail due. An
    invitation's notice carries its link, a secret the store otherwise keeps only as a digest:
    once the mail is sent (or given up on) its body and link are forgotten."""

    def add_notice(self, notice: Notice) -> None:
        self._write(
            "INSERT INTO notices (id, user_sub, address, kind, subject, body, link, created_at,"
            " seen_at, mail_state, attempts, next_attempt_at, last_error)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                notice.id,
                notice.user_sub,
                notice.address,
                notice.kind,
                notice.subject,
                notice.body,
                notice.link,
                notice.created_at,
                notice.seen_at,
                notice.mail_state,
                notice.attempts,
                notice.next_attempt_at,
                notice.last_error,
            ),
        )

    def notices_of(
        self, user_sub: str, limit: int, *, before: tuple[int, int] | None = None
    ) -> list[Notice]:
        where = "user_sub = ?"
        parameters: list[object] = [user_sub]
        if before is not None:
            where += " AND (created_at < ? OR (created_at = ? AND rowid < ?))"
            parameters += [before[0], before[0], before[1]]
        rows = self._all(
            f"SELECT {_COLUMNS} FROM notices WHERE {where}"  # noqa: S608 - no input in the text
            " ORDER BY created_at DESC, rowid DESC LIMIT ?",
            (*parameters, limit),
        )
        return [_notice(row) for row in rows]

    def count_unseen_notices(self, user_sub: str) -> int:
        row = self._one(
            "SELECT COUNT(*) AS n FROM notices WHERE user_sub = ? AND seen_at IS NULL", (user_sub,)
        )
        return int(row["n"])

    def mark_notices_seen(self, user_sub: str, now: int) -> int:
        return self._write(
            "UPDATE notices SET seen_at = ? WHERE user_sub = ? AND seen_at IS NULL"
            " AND created_at <= ?",
            (now, user_sub, now),
        )

    def claim_due_mail(self, now: int, claimed_until: int, limit: int) -> list[Notice]:
        # A look first: the sender looks every few seconds, and SQLite's write lock taken for
        # nothing would make requests that write wait for it.
        if (
            self._one(
                "SELECT 1 FROM notices WHERE mail_state = 'pending' AND next_attempt_at <= ?"
                " LIMIT 1",
                (now,),
            )
            is None
        ):
            return []
        # One statement: SQLite's holds the database; on PostgreSQL rows another process is
        # taking right now are skipped, not waited for, and a row taken and committed meanwhile
        # is read again under its lock, and is no longer due.
        rows = self._write_returning(
            "UPDATE notices SET next_attempt_at = ?, attempts = attempts + 1"  # noqa: S608
            " WHERE id IN (SELECT id FROM notices WHERE mail_state = 'pending' AND next_attempt_at <= ?"
            "  ORDER BY next_attempt_at, id LIMIT ? FOR UPDATE SKIP LOCKED)"
            f" RETURNING {_COLUMNS}",
            (claimed_until, now, limit),
        )
        found = [_notice(row) for row in rows]
        found.sort(key=lambda notice: (notice.created_at, notice.seq))
        return found

    def record_mail_sent(self, notice_id: str, attempts: int) -> bool:
        return (
            self._write(
                "UPDATE notices SET mail_state = 'sent', next_attempt_at = NULL, last_error = NULL,"
                " body = CASE WHEN kind = 'invitation' THEN '' ELSE body END,"
                " link = CASE WHEN kind = 'invitation' THEN '' ELSE link END"
                " WHERE id = ? AND mail_state = 'pending' AND attempts = ?",
                (notice_id, attempts),
            )
            == 1
        )

    def record_mail_failure(
        self, notice_id: str, attempts: int, error: str, next_attempt_at: int | None
    ) -> bool:
        state = "failed" if next_attempt_at is None else "pending"
        return (
            self._write(
                "UPDATE notices SET mail_state = ?, next_attempt_at = ?, last_error = ?,"
                " body = CASE WHEN ? = 'failed' AND kind = 'invitation' THEN '' ELSE body END,"
                " link = CASE WHEN ? = 'failed' AND kind = 'invitation' THEN '' ELSE link END"
                " WHERE id = ? AND mail_state = 'pending' AND attempts = ?",
                (state, next_attempt_at, error, state, state, notice_id, attempts),
            )
            == 1
        )

    def delete_notices_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM notices WHERE id IN (SELECT id FROM notices WHERE created_at < ?"
            " AND mail_state <> 'pending' LIMIT ?)",
            (moment, limit),
        )


def _notice(row: Row) -> Notice:
    return Notice(
        id=str(row["id"]),
        user_sub=row["user_sub"],
        address=row["address"],
        kind=row["kind"],
        subject=str(row["subject"]),
        body=str(row["body"]),
        link=str(row["link"]),
        created_at=int(row["created_at"]),
        seen_at=None if row["seen_at"] is None else int(row["seen_at"]),
        mail_state=row["mail_state"],
        attempts=int(row["attempts"]),
        next_attempt_at=None if row["next_attempt_at"] is None else int(row["next_attempt_at"]),
        last_error=row["last_error"],
        seq=int(row["seq"]),
    )
