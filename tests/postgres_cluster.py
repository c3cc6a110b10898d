"""A throwaway PostgreSQL cluster, for the tests (`postgres_fixture.postgres_cluster`, once per
session) and the benchmark: `start_cluster` runs Debian's `initdb` on a temporary folder and starts
`postgres` on a unix socket in it (no TCP listener; a free port number, so that the clusters of
parallel pytest-xdist workers, one each, never share a socket name or a shared memory key), with
trust authentication; `stop_cluster` stops it and removes the folder. Plain Python (no pytest): what cannot be done raises
ClusterError, saying what to install.

`initdb` and `postgres` refuse to run as root: as root, they run as the `postgres` user (the
Debian package makes it) on a folder it owns. A fresh database for one test is `CREATE DATABASE
... TEMPLATE` of a database prepared once with the current schema: a file copy, fast.

Without the binaries, ClusterError says what to install: `make test` and `make bench` install the
Debian package `postgresql` (system-deps), and never skip what needs it.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _as_postgres(command: list[str]) -> list[str]:
    """`command` as the postgres user when we are root (initdb and postgres refuse root)."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


class ClusterError(Exception):
    """The cluster cannot be made or started; the message says why."""


# A throwaway cluster for the tests: durability buys nothing there, speed does.
FAST = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "shared_buffers": "32MB",
}


def start_cluster(
    settings: dict[str, str] | None = None, cpus: str = ""
) -> tuple[PostgresCluster, subprocess.Popen[bytes]]:
    """A running cluster with `settings` (FAST unless given), pinned to `cpus` (taskset's list)
    when given. Raises ClusterError."""
    settings = FAST if settings is None else settings
    bindir = find_bindir()
    if bindir is None:
        raise ClusterError(INSTALL)
    folder = Path(tempfile.mkdtemp(prefix="umaserver-pg-"))
    data, sockets = folder / "data", folder / "run"
    sockets.mkdir()
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(folder)
            raise ClusterError(f"{INSTALL} (there is no postgres user)") from None
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
        raise ClusterError(f"initdb failed: {initdb.stderr}")
    # No TCP listener (listen_addresses is empty), but the port names the socket file and keys
    # the shared memory: a free one, so that clusters of parallel test workers never meet.
    port = _free_port()
    log = (folder / "postgres.log").open("wb")
    options = [item for name, value in settings.items() for item in ("-c", f"{name}={value}")]
    command = [
        str(bindir / "postgres"),
        "-D",
        str(data),
        "-k",
        str(sockets),
        "-p",
        str(port),
        "-c",
        "listen_addresses=",
        *options,
    ]
    if cpus:
        command = ["taskset", "-c", cpus, *command]
    server = subprocess.Popen(_as_postgres(command), stdout=log, stderr=subprocess.STDOUT)
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
                raise ClusterError(f"postgres did not start: {output}") from None
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
