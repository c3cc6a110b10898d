"""Faults of the storage and of the process, against a real server.

- The database's file system remounted read-only, then writable again; the database file made
  read-only (the server running as nobody), then its mode restored; a full disk, then space freed: writes answer 503 `temporarily_unavailable` with `Retry-After: 5` and one log line each (no
  traceback), and the server recovers by itself, without a restart.
- `serve` on a database it cannot write logs one ERROR and serves; `init` exits 1 with a sentence.
- SIGKILL during 8 concurrent writers: after a restart every acknowledged write is there and
  `PRAGMA integrity_check` says ok.

Tests run as root, which ignores file modes: the storage is a small tmpfs mounted for the test (the
database file is reached through a symbolic link into it), remounted read-only or filled up, or the
server runs as the user nobody (setpriv) and the file's mode is changed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from .conftest import ROOT, LiveServer, start_server, stop_server
from .flows import wait_until

# What only an SQLite file has: its mode, the file system holding it.
pytestmark = [pytest.mark.live, pytest.mark.sqlite_only]


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, check=False)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 8 MiB tmpfs at tmp_path/disk; tmp_path/uma.db (the database start_server configures)
    links into it."""
    mounted = tmp_path / "disk"
    mounted.mkdir()
    done = _mount("-t", "tmpfs", "-o", "size=8m,mode=0755", "tmpfs", str(mounted))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root in a mount namespace): {done.stderr}")
    (tmp_path / "uma.db").symlink_to(mounted / "uma.db")
    try:
        yield mounted
    finally:
        subprocess.run(["umount", "-l", str(mounted)], check=False)


def remount(disk: Path, mode: str) -> None:
    """Remounts `disk` ro or rw; a file open for writing makes ro wait (the server's per-request
    connections are closed between requests). Up to 30 s: a wait for the server to let go of its
    files, which on a machine busy with parallel tests took longer than 10 s once."""
    deadline = time.monotonic() + 30
    while True:
        done = _mount("-o", f"remount,{mode}", str(disk))
        if done.returncode == 0:
            return
        assert time.monotonic() < deadline, done.stderr
        time.sleep(0.1)


@contextlib.contextmanager
def full(disk: Path) -> Iterator[None]:
    """Fills `disk` to the last byte, and frees it again."""
    filler = disk / "filler"
    # Unbuffered: a write the disk cannot take leaves nothing behind for close() to flush (which
    # would raise ENOSPC again, whenever the free space is not a multiple of the chunk).
    with filler.open("wb", buffering=0) as out:
        chunk = b"\0" * 65536
        while True:
            try:
                out.write(chunk)
            except OSError as error:
                assert error.errno == errno.ENOSPC
                break
    # Top up what is left of the last 64 KiB, in small chunks.
    with contextlib.suppress(OSError), filler.open("ab", buffering=0) as out:
        for _ in range(64):
            out.write(b"\0" * 1024)
    try:
        yield
    finally:
        filler.unlink()


def pat_of(server: LiveServer) -> requests.Session:
    made = server.command("client", "create", "--name", "RS")
    server.command("user", "create", "alice")
    token = server.command(
        "token",
        "issue",
        "--client",
        made["client_id"],
        "--user",
        "alice",
        "--scope",
        "uma_protection",
    )["access_token"]
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    return session


def create(server: LiveServer, http: requests.Session, name: str) -> requests.Response:
    return http.post(
        server.url + "/rs/resource_set", json={"name": name, "scopes": ["view"]}, timeout=20
    )


def assert_unavailable(response: requests.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"] == "5"
    assert response.json()["error"] == "temporarily_unavailable"


def unavailable_lines(server: LiveServer) -> list[str]:
    return [line for line in server.output().splitlines() if "cannot be used right now" in line]


@pytest.fixture
def server_on_disk(tmp_path: Path, disk: Path) -> Iterator[LiveServer]:
    server = start_server(tmp_path)
    yield server
    stop_server(server)


def test_read_only_storage_answers_503_and_recovers_when_writable_again(
    server_on_disk: LiveServer, disk: Path
) -> None:
    server = server_on_disk
    http = pat_of(server)
    before = create(server, http, "before")
    assert before.status_code == 201

    remount(disk, "ro")
    for attempt in range(3):
        assert_unavailable(create(server, http, f"while read-only {attempt}"))
    lines = unavailable_lines(server)
    assert len(lines) == 3 and all("ERROR" in line for line in lines), lines
    assert "Traceback" not in server.output()

    remount(disk, "rw")
    after = create(server, http, "after")
    assert after.status_code == 201
    listed = http.get(server.url + "/rs/resource_set", timeout=10).json()
    assert sorted(listed) == sorted([before.json()["_id"], after.json()["_id"]])


def test_a_full_disk_answers_503_and_recovers_when_space_is_freed(
    server_on_disk: LiveServer, disk: Path
) -> None:
    server = server_on_disk
    http = pat_of(server)
    assert create(server, http, "before").status_code == 201
    created, refused = 1, 0
    with full(disk):
        # A commit may still fit in the space the write-ahead log has already (the log starts
        # over whenever the checkpoint thread has copied it into the database file): every
        # answer is a success or a 503, until the space left is gone.
        for attempt in range(50):
            answer = create(server, http, f"while full {attempt}" + "x" * 2000)
            if answer.status_code == 201:
                created += 1
                continue
            assert_unavailable(answer)
            refused += 1
            if refused == 3:
                break
    assert refused == 3
    assert len(unavailable_lines(server)) == 3
    assert "Traceback" not in server.output()
    assert create(server, http, "after").status_code == 201
    listed = http.get(server.url + "/rs/resource_set", timeout=10).json()
    assert len(listed) == created + 1


def test_serve_says_at_start_it_cannot_write_and_init_refuses(tmp_path: Path, disk: Path) -> None:
    first = start_server(tmp_path)  # creates the database
    http = pat_of(first)
    stop_server(first)
    # An open connection keeps the database's -wal and -shm files, so that it can still be read.
    reader = sqlite3.connect(tmp_path / "uma.db")
    reader.execute("SELECT 1 FROM schema_migrations").fetchall()
    server: LiveServer | None = None
    try:
        with full(disk):
            server = start_server(tmp_path)
            errors = [line for line in server.output().splitlines() if " ERROR " in line]
            assert len(errors) == 1, server.output()
            assert "cannot be written" in errors[0] and "bytes free" in errors[0]

            init = subprocess.run(
                [sys.executable, "-m", "umaserver", "--config", str(server.config_path), "init"],
                capture_output=True,
                text=True,
                cwd=ROOT,
                timeout=60,
                check=False,
            )
            assert init.returncode == 1
            assert init.stdout == ""
            assert init.stderr.startswith(f"The database {disk / 'uma.db'} cannot be written:")
            assert "Traceback" not in init.stderr

            assert_unavailable(create(server, http, "while full" + "x" * 2000))
        # Space freed: the same server writes again, without a restart.
        assert create(server, http, "after").status_code == 201
        assert "Traceback" not in server.output()
    finally:
        reader.close()
        if server is not None:
            stop_server(server)


def test_serve_on_storage_it_cannot_open_says_so_once_serves_503_and_recovers(
    tmp_path: Path, disk: Path
) -> None:
    remount(disk, "ro")  # no database yet, and none can be made
    server = start_server(tmp_path)
    try:
        errors = [line for line in server.output().splitlines() if " ERROR " in line]
        assert len(errors) == 1 and "cannot be opened" in errors[0], server.output()
        anyone = requests.get(
            server.url + "/rs/resource_set",
            headers={"Authorization": "Bearer uma_at_x"},
            timeout=10,
        )
        assert_unavailable(anyone)
        remount(disk, "rw")
        # The first request after the storage can be used prepares the database: no restart.
        again = requests.get(
            server.url + "/rs/resource_set",
            headers={"Authorization": "Bearer uma_at_x"},
            timeout=10,
        )
        assert again.status_code == 401, again.text
        assert (disk / "uma.db").exists()
        http = pat_of(server)
        assert create(server, http, "after").status_code == 201
        assert "Traceback" not in server.output()
    finally:
        stop_server(server)


WRITERS = 8


def test_sigkill_during_concurrent_writes_loses_no_acknowledged_write(tmp_path: Path) -> None:
    server = start_server(tmp_path)
    http = pat_of(server)
    acknowledged: list[list[str]] = [[] for _ in range(WRITERS)]
    stop = threading.Event()

    def writer(index: int) -> None:
        session = requests.Session()
        session.headers.update(http.headers)
        for n in range(10_000):
            if stop.is_set():
                return
            try:
                response = create(server, session, f"writer {index} set {n}")
            except requests.RequestException:
                return  # the server is gone
            if response.status_code == 201:
                acknowledged[index].append(response.json()["_id"])

    threads = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    # Kill it in the middle of the writing, once a few writes of each writer may have landed.
    wait_until(
        lambda: sum(len(ids) for ids in acknowledged) >= 3 * WRITERS,
        timeout=30,
        message="too few writes acknowledged",
    )
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(timeout=10)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    written = [rs_id for ids in acknowledged for rs_id in ids]
    assert len(written) >= WRITERS, "too few writes before the kill to show anything"

    with contextlib.closing(sqlite3.connect(tmp_path / "uma.db")) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    again = start_server(tmp_path)
    try:
        listed = set(http.get(again.url + "/rs/resource_set", timeout=10).json())
        assert set(written) <= listed
        for rs_id in written[:: max(1, len(written) // 20)]:
            assert http.get(f"{again.url}/rs/resource_set/{rs_id}", timeout=10).status_code == 200
    finally:
        stop_server(again)


@pytest.fixture
def nobody_folder() -> Iterator[Path]:
    """A folder the user nobody can write (pytest's own tmp_path is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="umaserver-nobody-"))
    os.chown(folder, pwd.getpwnam("nobody").pw_uid, -1)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_read_only_database_file_is_written_again_once_its_mode_is_restored(
    nobody_folder: Path,
) -> None:
    """The file mode, not the file system: the server runs as nobody, for whom modes count."""
    probe = subprocess.run(
        [
            "setpriv",
            "--reuid=nobody",
            f"--regid={pwd.getpwnam('nobody').pw_gid}",
            "--init-groups",
            "true",
        ],
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip("setpriv cannot switch to the user nobody here")
    database = nobody_folder / "uma.db"
    server = start_server(nobody_folder, as_user="nobody")
    try:
        http = pat_of(server)
        assert create(server, http, "before").status_code == 201
        database.chmod(0o444)
        assert_unavailable(create(server, http, "while read-only"))
    finally:
        stop_server(server)

    # Started on a database it cannot write: one ERROR, and it serves.
    server = start_server(nobody_folder, as_user="nobody")
    try:
        errors = [line for line in server.output().splitlines() if " ERROR " in line]
        assert len(errors) == 1 and "cannot be written" in errors[0], server.output()
        assert_unavailable(create(server, http, "still read-only"))
        database.chmod(0o644)
        # Mode restored: written again, without a restart.
        assert create(server, http, "after").status_code == 201
        assert len(http.get(server.url + "/rs/resource_set", timeout=10).json()) == 2
        assert "Traceback" not in server.output()
    finally:
        stop_server(server)
