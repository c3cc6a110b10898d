"""The opener's pool of storage handles: a request's handle is given back at its end and serves a
later request, never one in the middle of a transaction, never more than the pool holds, and a
handle whose connection met an unavailable storage is replaced, not kept."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from umaserver.services.database import Opener
from umaserver.storage import Storage
from umaserver.storage.per_request import opener
from umaserver.storage.sqlite import writer_queue

from .conftest import FakeClock

# What only an SQLite file has: its mode, its file system, SQLite's opener.
pytestmark = pytest.mark.sqlite_only


def test_a_handle_given_back_serves_the_next_unit_of_work(tmp_path: Path) -> None:
    pool = Opener(tmp_path / "pool.db", FakeClock(), pool_size=2)
    first = pool()
    pool.release(first)
    assert pool() is first


def test_a_handle_in_a_transaction_or_closed_is_not_kept(tmp_path: Path) -> None:
    pool = Opener(tmp_path / "pool.db", FakeClock(), pool_size=2)
    busy = pool()
    busy.conn.execute("BEGIN")  # type: ignore[attr-defined]  # a unit of work never ended
    pool.release(busy)  # closed: a pool must never hand out a transaction in progress
    closed = pool()
    closed.close()
    pool.release(closed)
    fresh = pool()
    assert fresh is not busy and fresh is not closed
    assert busy.reusable() is False


def test_the_pool_keeps_at_most_its_size(tmp_path: Path) -> None:
    pool = Opener(tmp_path / "pool.db", FakeClock(), pool_size=2)
    handles = [pool(), pool(), pool()]
    for handle in handles:
        pool.release(handle)
    assert handles[2].reusable() is False  # the third was closed
    assert {id(pool()), id(pool())} == {id(handles[0]), id(handles[1])}
    pool.close_idle()


def test_requests_reuse_the_pooled_handle(app: Flask, http: FlaskClient) -> None:
    handles = opener(app)
    assert isinstance(handles, Opener)
    http.get("/.well-known/uma-configuration")
    assert http.post("/rpt", headers={"Authorization": "Bearer nope"}).status_code == 401
    kept = list(handles._idle)
    assert len(kept) == 1
    assert http.post("/rpt", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert handles._idle == kept  # the same handle went out and came back


def test_a_pooled_handle_serves_only_the_file_it_opened(tmp_path: Path) -> None:
    """A database file replaced under the server (a backup restored) or made read-only is not
    written through a connection opened before: the pooled handle is closed, a new one opened."""
    path = tmp_path / "pool.db"
    pool = Opener(path, FakeClock(), pool_size=2)
    first = pool()
    pool.release(first)
    assert pool() is first
    pool.release(first)

    path.chmod(0o444)
    second = pool()
    assert second is not first and first.reusable() is False
    path.chmod(0o644)
    pool.release(second)

    copy = tmp_path / "restored.db"
    shutil.copy(path, copy)
    copy.replace(path)  # a new file (inode) under the same name
    third = pool()
    assert third is not second and second.reusable() is False
    pool.release(third)
    pool.close_idle()


def test_writers_of_one_file_take_turns_in_one_queue(tmp_path: Path) -> None:
    """SQLite writers of this process queue on one lock per database file (not on SQLite's busy
    handler, which sleeps); a transaction that fails gives its turn back."""
    path = tmp_path / "queue.db"
    pool = Opener(path, FakeClock())
    first, second = pool(), pool()
    other = Opener(tmp_path / "other.db", FakeClock())()
    queue = writer_queue(path.resolve())
    assert first.conn.writers is queue and second.conn.writers is queue  # type: ignore[attr-defined]
    assert other.conn.writers is not queue  # type: ignore[attr-defined]

    with pytest.raises(RuntimeError), first.transaction():
        raise RuntimeError("a failed unit of work")
    done: list[bool] = []
    worker = threading.Thread(target=lambda: done.append(_write_once(second)))
    worker.start()
    worker.join(timeout=10)
    assert done == [True]  # the failed transaction gave its turn back

    with first.transaction():
        waiting = threading.Thread(target=lambda: done.append(_write_once(second)))
        waiting.start()
        waiting.join(timeout=0.2)
        assert waiting.is_alive()  # in the queue while the first transaction is open
    waiting.join(timeout=10)
    assert done == [True, True]
    for handle in (first, second, other):
        handle.close()


def _write_once(handle: Storage) -> bool:
    with handle.transaction():
        handle.set_registration_digest("nobody", None)
    return True
