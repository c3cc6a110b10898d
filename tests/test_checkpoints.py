"""SQLite's write-ahead log is copied into the database file by a thread of the app's own, four
times a second, never by the commit of a request (the commit that crossed SQLite's 1,000 pages did
it, and its request waited). A commit still does it past AUTOCHECKPOINT_PAGES, the bound should
that thread fall behind. What the database file holds alone is read in SQLite's immutable mode,
which ignores the log."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from flask import Flask

from umaserver.services.database import Opener
from umaserver.services.maintenance import CheckpointJob
from umaserver.storage import StorageUnavailable
from umaserver.storage.per_request import opener
from umaserver.storage.records import User
from umaserver.storage.sqlite import AUTOCHECKPOINT_PAGES

from .conftest import FakeClock
from .flows import wait_until

# What only an SQLite file has.
pytestmark = pytest.mark.sqlite_only

# About a page each: 1,200 users are more pages than SQLite's own checkpoint waits for.
CLAIMS = {"note": "x" * 3500}


def users_in_the_file_alone(path: Path) -> int:
    """The users the database file holds without its write-ahead log."""
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM users").fetchone()[0])
    finally:
        conn.close()


def add_users(pool: Opener, count: int, prefix: str) -> None:
    handle = pool()
    try:
        for number in range(count):  # each its own transaction, as requests write
            assert handle.add_user(User(f"{prefix}{number}", f"{prefix}{number}", None, CLAIMS), 0)
    finally:
        pool.release(handle)


def pages_in_the_log(path: Path) -> int:
    """The pages the write-ahead log holds: its header, then a header and a page per frame."""
    log = path.with_name(path.name + "-wal")
    return max(log.stat().st_size - 32, 0) // (24 + 4096) if log.exists() else 0


def test_commits_leave_the_log_to_the_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "uma.db"
    pool = Opener(path, FakeClock())
    pool.prepare()
    before = users_in_the_file_alone(path)
    added = 0
    while pages_in_the_log(path) <= 1100:  # past SQLite's own 1,000
        add_users(pool, 20, f"u{added}-")
        added += 20
        assert added < 2000, "the log never held more than SQLite's own 1,000 pages"
    assert pages_in_the_log(path) < AUTOCHECKPOINT_PAGES
    assert users_in_the_file_alone(path) == before  # no commit copied the log

    checkpoint = pool.checkpoint()
    assert checkpoint is not None
    in_log, copied = checkpoint
    assert in_log == pages_in_the_log(path) and copied == in_log
    assert users_in_the_file_alone(path) == before + added
    pool.close_idle()


def test_a_commit_copies_the_log_past_the_bound(tmp_path: Path) -> None:
    """Should the thread fall behind, a commit copies the log once it passes the bound."""
    path = tmp_path / "uma.db"
    pool = Opener(path, FakeClock())
    pool.prepare()
    added = 0
    while users_in_the_file_alone(path) == 0:
        add_users(pool, 50, f"u{added}-")
        added += 50
        assert added < 5000, "no commit copied the log"
    assert pages_in_the_log(path) >= AUTOCHECKPOINT_PAGES
    pool.close_idle()


def test_no_checkpoint_before_the_database_is_prepared(tmp_path: Path) -> None:
    pool = Opener(tmp_path / "uma.db", FakeClock())
    assert pool.checkpoint() is None
    assert not (tmp_path / "uma.db").exists()  # requests prepare it, not the checkpoint


def test_a_served_app_copies_the_log_on_its_own_thread(app: Flask) -> None:
    pool = opener(app)
    assert isinstance(pool, Opener)
    # Open the whole time: the last connection to close copies the log too (the fetch and prune
    # jobs close the handles they take), and it must not be that.
    keeper = sqlite3.connect(pool.path)
    try:
        keeper.execute("SELECT COUNT(*) FROM users").fetchone()
        before = users_in_the_file_alone(pool.path)
        add_users(pool, 50, "w")
        wait_until(
            lambda: users_in_the_file_alone(pool.path) == before + 50,
            timeout=10,
            message="the app's checkpoint thread did not copy the log",
        )
    finally:
        keeper.close()


def run_job(checkpoint: Callable[[], None], calls: list[int], until: int) -> None:
    """A job of `checkpoint` at 20 ms, from its start until `calls` holds `until` calls, stopped."""
    job = CheckpointJob(checkpoint, interval=0.02)
    job.start()
    try:
        wait_until(lambda: len(calls) >= until, timeout=10, message=f"fewer than {until} runs")
    finally:
        job.stop()


def test_the_job_runs_at_its_interval_and_stops() -> None:
    runs: list[int] = []
    run_job(lambda: runs.append(1), runs, 3)
    stopped_at = len(runs)
    threading.Event().wait(0.1)
    assert len(runs) == stopped_at


def test_a_failing_checkpoint_is_said_once_and_tried_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    attempts: list[int] = []

    def checkpoint() -> None:
        attempts.append(1)
        if len(attempts) <= 3:
            raise sqlite3.OperationalError("disk I/O error")

    run_job(checkpoint, attempts, 5)
    assert caplog.text.count("checkpointing the database failed") == 1
    assert "checkpointing the database works again" in caplog.text


def test_a_storage_that_cannot_be_written_is_said_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    attempts: list[int] = []

    def checkpoint() -> None:
        attempts.append(1)
        raise StorageUnavailable("database or disk is full (SQLITE_FULL)")

    run_job(checkpoint, attempts, 3)
    [record] = [r for r in caplog.records if "checkpointing the database failed" in r.message]
    assert "SQLITE_FULL" in record.getMessage() and not record.exc_info
