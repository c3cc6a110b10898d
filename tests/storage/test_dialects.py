"""The two dialects turn the one text of a statement into their own (umaserver/storage/dialect.py):
what each says otherwise, and that each text is translated once."""

from __future__ import annotations

import pytest

from umaserver.storage.postgresql.database import PostgreSQL
from umaserver.storage.sqlite import SQLite


@pytest.mark.parametrize(
    ("text", "lock", "postgresql"),
    [
        ("SELECT * FROM t WHERE a = ? AND b = ?", None, "SELECT * FROM t WHERE a = %s AND b = %s"),
        ("SELECT * FROM t WHERE a = ?", "SHARE", "SELECT * FROM t WHERE a = %s FOR SHARE"),
        (
            "SELECT p.* FROM p WHERE p.a = ?",
            "NO KEY UPDATE OF p",
            "SELECT p.* FROM p WHERE p.a = %s FOR NO KEY UPDATE OF p",
        ),
        # A literal % is not a placeholder for psycopg.
        ("SELECT 1 WHERE a LIKE 'x%' AND b = ?", None, "SELECT 1 WHERE a LIKE 'x%%' AND b = %s"),
        # SQLite's order of insertion is PostgreSQL's seq column; a column merely ending so is not.
        (
            "SELECT id FROM t ORDER BY created_at, rowid",
            None,
            "SELECT id FROM t ORDER BY created_at, seq",
        ),
        ("SELECT t.growid FROM t", None, "SELECT t.growid FROM t"),
        (
            "SELECT u FROM users WHERE instr(u, ?) > 0",
            None,
            "SELECT u FROM users WHERE strpos(u, %s) > 0",
        ),
    ],
)
def test_postgresql_says_otherwise(text: str, lock: str | None, postgresql: str) -> None:
    assert PostgreSQL().text(text, lock) == postgresql


@pytest.mark.parametrize(
    ("text", "sqlite"),
    [
        (
            "INSERT INTO r (id, owner) SELECT ?, sub FROM users WHERE sub = ? FOR KEY SHARE"
            " ON CONFLICT DO NOTHING",
            "INSERT INTO r (id, owner) SELECT ?, sub FROM users WHERE sub = ?"
            " ON CONFLICT DO NOTHING",
        ),
        (
            "UPDATE q SET c = ? WHERE id IN (SELECT id FROM q LIMIT ? FOR UPDATE SKIP LOCKED)"
            " RETURNING *",
            "UPDATE q SET c = ? WHERE id IN (SELECT id FROM q LIMIT ?) RETURNING *",
        ),
        ("SELECT 1 FROM t WHERE d = ? FOR NO KEY UPDATE", "SELECT 1 FROM t WHERE d = ?"),
        (
            "SELECT * FROM t WHERE a = ? ORDER BY rowid",
            "SELECT * FROM t WHERE a = ? ORDER BY rowid",
        ),
    ],
)
def test_sqlite_drops_the_row_locks_its_transactions_do_not_need(text: str, sqlite: str) -> None:
    dialect = SQLite()
    assert dialect.text(text) == sqlite
    assert dialect.text(text, "SHARE") == sqlite  # a read's lock, likewise


def test_a_text_is_translated_once() -> None:
    dialect = PostgreSQL()
    calls: list[str] = []
    translate = dialect._translate

    def counted(sql: str, lock: str | None) -> str:
        calls.append(sql)
        return translate(sql, lock)

    dialect._translate = counted  # type: ignore[method-assign]
    for _ in range(3):
        assert dialect.text("SELECT ?") == "SELECT %s"
        assert dialect.text("SELECT ?", "SHARE") == "SELECT %s FOR SHARE"
    assert calls == ["SELECT ?", "SELECT ?"]
