"""Fixtures: `app`, `http` (the Flask test client: "client" means the OAuth client here), `cli`
(the command line against the same config file), `store`, and `live_server` (a real
`python -m umaserver serve` on a free port)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner
from flask import Flask
from flask.testing import FlaskClient

from umaserver import create_app, secrets_at_rest
from umaserver.cli import main as cli_main
from umaserver.config import Config, load_config
from umaserver.services import accounts
from umaserver.storage import Storage, open_storage
from umaserver.storage.records import Client, Rpt, Ticket, User

ROOT = Path(__file__).resolve().parent.parent
SECRET = "test-secret-key-that-is-long-enough-0123456789"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def write_config(folder: Path, issuer: str = "http://uma.test", extra: str = "") -> Path:
    path = folder / "config.toml"
    path.write_text(
        f'issuer = "{issuer}"\n'
        'database = "uma.db"\n'
        'policies = "policies.toml"\n'
        f'secret_key = "{SECRET}"\n' + extra,
        encoding="utf-8",
    )
    return path


@pytest.fixture
def rules_text() -> str:
    """The owners' rule file the app starts with; a test module overrides this fixture."""
    return ""


@pytest.fixture
def config_path(tmp_path: Path, rules_text: str) -> Path:
    (tmp_path / "policies.toml").write_text(rules_text, encoding="utf-8")
    return write_config(tmp_path)


@pytest.fixture
def config(config_path: Path) -> Config:
    return load_config(config_path)


class FakeClock:
    """The app's clock in tests: starts at the real time and moves only when told."""

    def __init__(self, now: int | None = None) -> None:
        self.moment = int(time.time()) if now is None else now

    def now(self) -> int:
        return self.moment

    def advance(self, seconds: int) -> None:
        self.moment += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def app(config: Config, clock: FakeClock) -> Flask:
    app = create_app(config, clock=clock)
    app.config["TESTING"] = True
    return app


@pytest.fixture
def http(app: Flask) -> FlaskClient:
    return app.test_client()


class Store:
    """A storage handle for tests, with the few steps tests take beside HTTP (making clients,
    users and tokens through the services, and finding tokens by their value)."""

    def __init__(self, storage: Storage, clock: FakeClock) -> None:
        self.storage = storage
        self.clock = clock

    def close(self) -> None:
        self.storage.close()

    def create_client(
        self, name: str, redirect_uris: list[str], push_types: list[str]
    ) -> tuple[Client, str]:
        return accounts.create_client(
            self.storage, self.clock.now(), name, redirect_uris, push_types
        )

    def create_user(
        self, username: str, password_hash: str | None, claims: dict[str, Any]
    ) -> User | None:
        return accounts.create_user(self.storage, self.clock.now(), username, password_hash, claims)

    def create_access_token(
        self, token: str, client_id: str, user_sub: str | None, scope: str, lifetime: int
    ) -> None:
        accounts.store_access_token(
            self.storage, self.clock.now(), token, client_id, user_sub, scope, lifetime
        )

    def revoke_access_token(self, token: str) -> bool:
        return accounts.revoke_access_token(self.storage, token)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.storage, name)  # the contract's own operations

    def get_rpt(self, rpt: str) -> Rpt | None:
        return self.storage.get_rpt(secrets_at_rest.digest(rpt))

    def get_ticket(self, ticket: str) -> Ticket | None:
        return self.storage.get_ticket(secrets_at_rest.digest(ticket))

    @property
    def conn(self) -> Any:
        return self.storage.conn  # type: ignore[attr-defined]


@pytest.fixture
def store(app: Flask, config: Config, clock: FakeClock) -> Iterator[Store]:
    opened = Store(open_storage(config.database), clock)
    yield opened
    opened.close()


@dataclass
class Party:
    """A client with a user and a token: a resource server with a PAT, or a client with an AAT."""

    client_id: str
    client_secret: str
    username: str
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def make_party(
    store: Store,
    username: str,
    scope: str,
    client_id: str | None = None,
    push_types: tuple[str, ...] = (),
) -> Party:
    secret = ""
    if client_id is None:
        made, secret = store.create_client(f"client of {username}", [], list(push_types))
        client_id = made.client_id
    user = store.get_user_by_username(username) or store.create_user(username, None, {})
    assert user is not None
    token = f"uma_at_test_{username}_{client_id}_{scope}_{time.monotonic_ns()}"
    store.create_access_token(token, client_id, user.sub, scope, 3600)
    return Party(client_id, secret, username, token)


@pytest.fixture
def rs(store: Store) -> Party:
    """Resource server of alice, holding her PAT."""
    return make_party(store, "alice", "uma_protection")


class CLI:
    def __init__(self, config_path: Path) -> None:
        self.config_path = config_path
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None) -> Any:
        result = self.runner.invoke(
            cli_main,
            ["--config", str(self.config_path), *args],
            input=input,
            catch_exceptions=False,
        )
        return result

    def json(self, *args: str, input: str | None = None) -> Any:
        result = self(*args, input=input)
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)


@pytest.fixture
def cli(config_path: Path) -> CLI:
    return CLI(config_path)


@dataclass
class LiveServer:
    url: str
    config_path: Path
    process: subprocess.Popen[str]
    log_path: Path  # what the server wrote on stdout and stderr

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def command(self, *args: str, input: str | None = None) -> Any:
        """Runs `python -m umaserver --config ... ARGS` as a separate process; returns its JSON."""
        done = subprocess.run(
            [sys.executable, "-m", "umaserver", "--config", str(self.config_path), *args],
            input=input,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


def start_server(
    folder: Path, extra_config: str = "", threads: int = 8, rules_text: str = ""
) -> LiveServer:
    (folder / "policies.toml").write_text(rules_text, encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config_path = write_config(folder, issuer=url, extra=extra_config)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log_path = folder / "server.log"
    # A file, not a pipe: a pipe nobody reads would stall a server that logs a lot.
    log = log_path.open("w", encoding="utf-8")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "umaserver",
            "--config",
            str(config_path),
            "serve",
            "--port",
            str(port),
            "--threads",
            str(threads),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    log.close()  # the server has its own copy
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited: {log_path.read_text(encoding='utf-8')}")
        try:
            requests.get(url + "/.well-known/uma-configuration", timeout=1)
            break
        except requests.ConnectionError:
            time.sleep(0.05)
    else:
        process.kill()
        raise RuntimeError("server did not start")
    return LiveServer(url, config_path, process, log_path)


def stop_server(server: LiveServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@pytest.fixture
def live_server(tmp_path: Path, rules_text: str) -> Iterator[LiveServer]:
    server = start_server(tmp_path, rules_text=rules_text)
    yield server
    stop_server(server)
