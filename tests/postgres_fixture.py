"""A throwaway PostgreSQL cluster for the tests: `postgres_cluster` (once per session) runs Debian's
`initdb` on a temporary folder and starts `postgres` on a unix socket in it (no TCP port at all),
with trust authentication; it is stopped and the folder removed when the session ends.

`initdb` and `postgres` refuse to run as root: as root, they run as the `postgres` user (the
Debian package makes it) on a folder it owns. A fresh database for one test is `CREATE DATABASE
... TEMPLATE` of a database prepared once with the current schema: a file copy, fast.

Without the binaries, the fixture fails with a sentence saying what to install: `make test`
installs the Debian package `postgresql` (system-deps), and never skips these tests.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from umaserver.storage import prepare_database

# Debian's layout: /usr/lib/postgresql/<major>/bin. 15 is Debian 12's.
BIN_GLOB = "/usr/lib/postgresql/*/bin"
INSTALL = (
    "PostgreSQL's server binaries (initdb, postgres) are not installed: install the Debian package"
    " postgresql (apt-get install postgresql, or `make system-deps`) to run the PostgreSQL tests"
)
TEMPLATE = "umaserver_template"
PREPARED_AT = 1_700_000_000


def find_bindir() -> Path | None:
    """The newest /usr/lib/postgresql/<major>/bin that has initdb and postgres."""
    found = [
        Path(path)
        for path in sorted(
            (str(p) for p in Path("/").glob(BIN_GLOB.lstrip("/"))),
            key=lambda text: int(text.split("/")[-2]) if text.split("/")[-2].isdigit() else 0,
        )
        if (Path(path) / "initdb").is_file() and (Path(path) / "postgres").is_file()
    ]
    return found[-1] if found else None


@dataclass
class PostgresCluster:
    """A running cluster: `url(name)` is a database's URL, `new_database()` a fresh one with the
    current schema (dropped by `drop` or with the cluster)."""

    folder: Path
    socket_dir: Path
    port: int
    bindir: Path
    _serial: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def url(self, database: str) -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}&port={self.port}"

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.url("postgres"), autocommit=True)

    def new_database(self, template: str = TEMPLATE) -> str:
        name = f"test_{os.getpid()}_{next(self._serial)}"
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        return self.url(name)

    def empty_database(self) -> str:
        """A database without umaserver's schema (template0)."""
        return self.new_database("template0")

    def dump(self, url: str) -> str:
        """Everything the database holds, as SQL text (pg_dump)."""
        done = subprocess.run(
            [str(self.bindir / "pg_dump"), "--data-only", "--no-owner", url],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    def drop(self, url: str) -> None:
        name = url.split("?")[0].rsplit("/", 1)[1]
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _as_postgres(command: list[str]) -> list[str]:
    """`command` as the postgres user when we are root (initdb and postgres refuse root)."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def start_cluster() -> tuple[PostgresCluster, subprocess.Popen[bytes]]:
    bindir = find_bindir()
    if bindir is None:
        pytest.fail(INSTALL, pytrace=False)
    folder = Path(tempfile.mkdtemp(prefix="umaserver-pg-"))
    data, sockets = folder / "data", folder / "run"
    sockets.mkdir()
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(folder)
            pytest.fail(f"{INSTALL} (there is no postgres user)", pytrace=False)
        for path in (folder, sockets):
            os.chown(path, user.pw_uid, user.pw_gid)
    initdb = subprocess.run(
        _as_postgres(
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "--auth=trust",
                "--username=postgres",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ]
        ),
        capture_output=True,
        text=True,
        check=False,
    )
    if initdb.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.fail(f"initdb failed: {initdb.stderr}", pytrace=False)
    port = 5432
    log = (folder / "postgres.log").open("wb")
    server = subprocess.Popen(
        _as_postgres(
            [
                str(bindir / "postgres"),
                "-D",
                str(data),
                "-k",
                str(sockets),
                "-p",
                str(port),
                "-c",
                "listen_addresses=",
                # A throwaway cluster: durability buys nothing here, speed does.
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=300",
                "-c",
                "shared_buffers=32MB",
            ]
        ),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    cluster = PostgresCluster(folder, sockets, port, bindir)
    deadline = time.monotonic() + 30
    while True:
        try:
            with cluster.admin() as conn:
                conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
            break
        except psycopg.OperationalError:
            if server.poll() is not None or time.monotonic() > deadline:
                output = (folder / "postgres.log").read_text(errors="replace")
                stop_cluster(cluster, server)
                pytest.fail(f"postgres did not start: {output}", pytrace=False)
            time.sleep(0.1)
    prepare_database(cluster.url(TEMPLATE), PREPARED_AT)
    return cluster, server


def stop_cluster(cluster: PostgresCluster, server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        server.terminate()  # smart shutdown would wait for clients: SIGTERM is "fast"
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    shutil.rmtree(cluster.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    cluster, server = start_cluster()
    try:
        yield cluster
    finally:
        stop_cluster(cluster, server)
