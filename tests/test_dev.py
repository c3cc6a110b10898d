"""`umaserver dev` as a developer runs it: a real process, its stderr read as a person reads it,
its server asked over the network, stopped with a signal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from umaserver.cli.dev import NOT_FOR_PRODUCTION

from .conftest import ROOT, free_port
from .flows import wait_until

pytestmark = pytest.mark.live


@dataclass
class Dev:
    process: subprocess.Popen[str]
    stdout_path: Path
    stderr_path: Path
    temporary: Path  # the TMPDIR it was given: where its temporary folder goes

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8")

    def stdout(self) -> str:
        return self.stdout_path.read_text(encoding="utf-8")

    def stop(self, how: signal.Signals = signal.SIGTERM) -> int:
        self.process.send_signal(how)
        return self.process.wait(timeout=20)


@dataclass
class Runner:
    folder: Path
    started: list[Dev] = field(default_factory=list)

    def start(self, *args: str) -> Dev:
        """`python -m umaserver dev ARGS`, with a TMPDIR of its own."""
        number = len(self.started)
        temporary = self.folder / f"tmp-{number}"
        temporary.mkdir()
        out, err = self.folder / f"out-{number}.txt", self.folder / f"err-{number}.txt"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(temporary)}
        env.pop("UMASERVER_CONFIG", None)
        with out.open("w") as stdout, err.open("w") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "umaserver", "dev", *args],
                cwd=ROOT,
                env=env,
                stdout=stdout,
                stderr=stderr,
                text=True,
            )
        dev = Dev(process, out, err, temporary)
        self.started.append(dev)
        return dev

    def serving(self, *args: str) -> Dev:
        """Started, and once it has told its pages (it serves from then on)."""
        dev = self.start(*args)

        def told() -> bool:
            if dev.process.poll() is not None:
                raise AssertionError(f"dev exited {dev.process.returncode}: {dev.stderr()}")
            return "UMA 2.0 discovery" in dev.stderr()

        wait_until(told, timeout=60, message="dev did not start")
        return dev

    def ended(self, *args: str) -> Dev:
        dev = self.start(*args)
        dev.process.wait(timeout=60)
        return dev


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Runner]:
    runner = Runner(tmp_path)
    yield runner
    for dev in runner.started:
        if dev.process.poll() is None:
            dev.process.kill()
            dev.process.wait()


def issuer_of(port: int) -> str:
    answer = requests.get(f"http://127.0.0.1:{port}/.well-known/uma-configuration", timeout=10)
    assert answer.status_code == 200
    issuer: str = answer.json()["issuer"]
    return issuer


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "UMASERVER_CONFIG"}
    return subprocess.run(
        [sys.executable, "-m", "umaserver", "--config", str(config), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT])
def test_dev_serves_at_its_own_issuer_and_removes_its_database_when_stopped(
    runner: Runner, how: signal.Signals
) -> None:
    port = free_port()
    dev = runner.serving("--port", str(port))
    told = dev.stderr().splitlines()
    assert told[0] == NOT_FOR_PRODUCTION
    assert f"Serving http://127.0.0.1:{port}" in told
    assert "Seeded parties: none (give --seed FILE to have some)" in told
    assert not any("listens on" in line for line in told)  # no issuer warning: it derived it
    assert issuer_of(port) == f"http://127.0.0.1:{port}"
    # The pages it names answer.
    pages = [line.split()[-1] for line in told[told.index("Pages:") + 1 :]]
    assert f"http://127.0.0.1:{port}/signin" in pages
    for page in pages:
        assert requests.get(page, timeout=10).status_code == 200, page
    # stdout is serve's JSON line, nothing else.
    (line,) = dev.stdout().splitlines()
    assert json.loads(line)["serving"] == f"http://127.0.0.1:{port}"
    (folder,) = dev.temporary.iterdir()
    assert (folder / "umaserver.db").is_file()

    assert dev.stop(how) == 0
    assert list(dev.temporary.iterdir()) == []


def test_dev_with_a_database_keeps_it(runner: Runner, tmp_path: Path) -> None:
    database = tmp_path / "kept.db"
    dev = runner.serving("--port", str(free_port()), "--database", str(database))
    assert f"  database: {database}" in dev.stderr().splitlines()
    assert dev.stop() == 0
    assert database.is_file()
    assert list(dev.temporary.iterdir()) == []  # its config's folder went


def test_dev_writes_its_config_then_reuses_it_and_the_cli_reaches_the_same_server(
    runner: Runner, tmp_path: Path
) -> None:
    config, port = tmp_path / "local.toml", free_port()
    first = runner.serving("--config", str(config), "--port", str(port))
    written = config.read_text(encoding="utf-8")
    assert f'issuer = "http://127.0.0.1:{port}"' in written
    assert config.stat().st_mode & 0o777 == 0o600  # it holds the secret key
    assert f"  CLI:      umaserver --config {config} ..." in first.stderr().splitlines()
    # The CLI pointed at the config works on the served database.
    made = cli(config, "client", "create", "--name", "Photo server")
    assert made.returncode == 0, made.stderr
    client = json.loads(made.stdout)
    token = requests.post(
        f"http://127.0.0.1:{port}/token",
        data={"grant_type": "client_credentials", "scope": "uma_protection"},
        auth=(client["client_id"], client["client_secret"]),
        timeout=10,
    )
    assert token.status_code == 200, token.text
    assert first.stop() == 0

    # Again without --port: the file's port, the same file, a fresh temporary database.
    second = runner.serving("--config", str(config))
    assert issuer_of(port) == f"http://127.0.0.1:{port}"
    assert config.read_text(encoding="utf-8") == written
    listed = cli(config, "client", "list")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []
    assert second.stop() == 0
    assert list(first.temporary.iterdir()) == []  # the folder the config names, made again


def test_dev_refuses_a_config_that_names_another_port(runner: Runner, tmp_path: Path) -> None:
    config, port = tmp_path / "local.toml", free_port()
    runner.serving("--config", str(config), "--port", str(port)).stop()
    other = free_port()
    refused = runner.ended("--config", str(config), "--port", str(other))
    assert refused.process.returncode == 1
    told = refused.stderr().splitlines()
    assert told[0] == NOT_FOR_PRODUCTION
    assert told[1:] == [
        f"{config} says port {port} and the issuer http://127.0.0.1:{port}, not --port {other}:"
        " leave --port out to serve where it says, or give another --config (dev writes it when"
        " it is missing)."
    ]
    assert refused.stdout() == ""
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{other}/", timeout=5)


# -- with a seed ------------------------------------------------------------------------------


def test_dev_applies_the_seed_and_prints_tokens_that_work(runner: Runner) -> None:
    port = free_port()
    seed = ROOT / "umaserver" / "examples" / "seed.toml"
    dev = runner.serving("--port", str(port), "--seed", str(seed))
    told = dev.stderr().splitlines()
    assert told[0] == NOT_FOR_PRODUCTION
    parties = told[told.index("Seeded parties:") + 1 : told.index("Seeded parties:") + 5]
    assert [line.split() for line in parties] == [
        ["user", "alice"],
        ["user", "bob"],
        ["client", "photo-server"],
        ["client", "viewer"],
    ]
    tokens = {
        " ".join(line.split()[:-1]): line.split()[-1]
        for line in told
        if line.startswith(("  PAT ", "  AAT "))
    }
    # photo-server may hold PATs only, viewer AATs only (their scopes in the seed).
    assert sorted(tokens) == [
        "AAT alice via viewer",
        "AAT bob via viewer",
        "AAT viewer itself",
        "PAT alice via photo-server",
        "PAT bob via photo-server",
        "PAT photo-server itself",
    ]
    listed = requests.get(
        f"http://127.0.0.1:{port}/rs/resource_set",
        headers={"Authorization": f"Bearer {tokens['PAT alice via photo-server']}"},
        timeout=10,
    )
    assert (listed.status_code, listed.json()) == (200, [])
    rpt = requests.post(
        f"http://127.0.0.1:{port}/rpt",
        headers={"Authorization": f"Bearer {tokens['AAT bob via viewer']}"},
        timeout=10,
    )
    assert rpt.status_code in (200, 201), rpt.text
    own = requests.get(
        f"http://127.0.0.1:{port}/rs/resource_set",
        headers={"Authorization": f"Bearer {tokens['PAT photo-server itself']}"},
        timeout=10,
    )
    assert own.status_code == 200
    assert dev.stop() == 0


def test_dev_refuses_a_broken_seed_naming_the_place(runner: Runner, tmp_path: Path) -> None:
    seed = tmp_path / "seed.toml"
    seed.write_text('[[clients]]\nclient_id = "x"\nname = "X"\ncolour = "red"\n')
    refused = runner.ended("--port", str(free_port()), "--seed", str(seed))
    assert refused.process.returncode == 1
    told = refused.stderr()
    assert told.splitlines()[0] == NOT_FOR_PRODUCTION
    assert "clients[0].colour" in told
    assert list(refused.temporary.iterdir()) == []


def test_dev_stops_on_sigint_when_started_with_it_ignored(runner: Runner) -> None:
    # A shell's background job, or a test runner's worker, starts its children with SIGINT
    # ignored; dev (and serve) still stop on it.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        dev = runner.serving("--port", str(free_port()))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert dev.stop(signal.SIGINT) == 0
