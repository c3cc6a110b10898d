"""umaserver as a pytest plugin: a real authorization server for your own test suite.

Installed with the package, the plugin loads in every pytest run (entry point `pytest11`;
`-p no:umaserver` turns it off). It starts nothing until a test asks for one of its fixtures:

* `uma_server` (session scope; under pytest-xdist, once per worker): a real `umaserver dev`
  process on a free port, its database and config in a temporary folder, the seed file of the ini
  option `uma_seed` applied. It has `url` (the issuer), `configuration` (the parsed
  `/.well-known/uma-configuration`), `pat(user, client)`, `aat(user, client)`,
  `ticket(pat, resource_set_id, scopes)`, `apply_seed(path)` and `cli(*args)` (the JSON a command
  prints, run against the same config).
* `uma_client`: a small HTTP helper bound to the server (`get`, `post`, `put`, `delete`).
* `uma_reset` (function scope): `umaserver db reset --keep-parties` before the test: every
  resource set, token, ticket and rule is forgotten; users, clients and links stay.
* The marker `uma_seed(path)` applies a seed file to the running server before that test.

This module imports only the standard library and pytest, never the app: the server runs in a
process of its own, as users run it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

# How long the server may take to answer /healthz after it starts (it starts in under a second on
# an idle machine; a loaded CI machine is given more).
START_TIMEOUT = 60.0
COMMAND_TIMEOUT = 120.0


class UmaServerError(Exception):
    """The server did not start, or a command against it failed: the message says what it
    printed."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Response:
    """What the server answered: `status`, `headers` (lowercased names), `body` (bytes)."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def request(
    method: str,
    url: str,
    *,
    json_body: Any = None,
    form: Mapping[str, str] | None = None,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> Response:
    """One HTTP request; redirects are answered, not followed; an error status is a Response."""
    sent = dict(headers or {})
    data = None
    if json_body is not None:
        data = json.dumps(json_body).encode()
        sent.setdefault("Content-Type", "application/json")
    elif form is not None:
        data = urllib.parse.urlencode(form).encode()
        sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    prepared = urllib.request.Request(url, data=data, headers=sent, method=method)  # noqa: S310
    try:
        with _OPENER.open(prepared, timeout=timeout) as answer:
            return Response(answer.status, _lower(answer.headers), answer.read())
    except urllib.error.HTTPError as answer:
        with answer:
            return Response(answer.code, _lower(answer.headers), answer.read())


def _lower(headers: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


@dataclass
class UmaServer:
    """A running `umaserver dev` process (the `uma_server` fixture)."""

    url: str
    config_path: Path
    log_path: Path
    process: subprocess.Popen[bytes] = field(repr=False)

    @cached_property
    def configuration(self) -> dict[str, Any]:
        answer = request("GET", self.url + "/.well-known/uma-configuration")
        if answer.status != 200:
            raise UmaServerError(f"/.well-known/uma-configuration answered {answer.status}")
        document: dict[str, Any] = answer.json()
        return document

    def output(self) -> str:
        """What the server printed so far (its stderr and stdout)."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def cli(self, *args: str, input: str | None = None) -> Any:
        """`umaserver --config <this server's config> ARGS`, in a process of its own: the JSON
        it printed. A failed command raises UmaServerError with what it wrote."""
        done = subprocess.run(  # noqa: S603  (our own interpreter and package)
            [sys.executable, "-m", "umaserver", "--config", str(self.config_path), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
        if done.returncode != 0:
            raise UmaServerError(
                f"umaserver {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}"
            )
        return json.loads(done.stdout) if done.stdout.strip() else None

    def _token(self, user: str, client: str, scope: str) -> str:
        issued = self.cli("token", "issue", "--client", client, "--user", user, "--scope", scope)
        token: str = issued["access_token"]
        return token

    def pat(self, user: str, client: str) -> str:
        """A PAT (uma_protection) for `user` through the resource server `client`."""
        return self._token(user, client, "uma_protection")

    def aat(self, user: str, client: str) -> str:
        """An AAT (uma_authorization) for `user` through the client `client`."""
        return self._token(user, client, "uma_authorization")

    def ticket(self, pat: str, resource_set_id: str, scopes: Sequence[str]) -> str:
        """A permission ticket, as a resource server asks for one with its PAT."""
        answer = request(
            "POST",
            self.url + "/permission",
            json_body={"resource_set_id": resource_set_id, "scopes": list(scopes)},
            token=pat,
        )
        if answer.status != 201:
            raise UmaServerError(f"/permission answered {answer.status}: {answer.text}")
        ticket: str = answer.json()["ticket"]
        return ticket

    def apply_seed(self, path: str | os.PathLike[str]) -> Any:
        """`umaserver seed apply PATH`: its report."""
        return self.cli("seed", "apply", str(path))

    def reset(self) -> Any:
        """`umaserver db reset --keep-parties`."""
        return self.cli("db", "reset", "--keep-parties")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)


@dataclass(frozen=True)
class UmaClient:
    """HTTP to the `uma_server` (the `uma_client` fixture): paths are relative to its URL."""

    server: UmaServer

    def _url(self, path: str) -> str:
        return path if "://" in path else self.server.url + path

    def get(self, path: str, **options: Any) -> Response:
        return request("GET", self._url(path), **options)

    def post(self, path: str, **options: Any) -> Response:
        return request("POST", self._url(path), **options)

    def put(self, path: str, **options: Any) -> Response:
        return request("PUT", self._url(path), **options)

    def delete(self, path: str, **options: Any) -> Response:
        return request("DELETE", self._url(path), **options)


def start(folder: Path, seed: Path | None = None) -> UmaServer:
    """`umaserver dev` on a free port, with its config, database and output in `folder`; returns
    once it answers /healthz."""
    port = _free_port()
    config_path = folder / "umaserver.toml"
    log_path = folder / "server.log"
    command = [
        sys.executable,
        "-m",
        "umaserver",
        "dev",
        "--port",
        str(port),
        "--config",
        str(config_path),
        "--database",
        str(folder / "umaserver.db"),
    ]
    if seed is not None:
        command += ["--seed", str(seed)]
    with log_path.open("wb") as log:  # a file, not a pipe nobody reads
        process = subprocess.Popen(  # noqa: S603  (our own interpreter and package)
            command, stdout=log, stderr=subprocess.STDOUT, cwd=folder
        )
    server = UmaServer(f"http://127.0.0.1:{port}", config_path, log_path, process)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            raise UmaServerError(f"umaserver dev exited ({process.returncode}):\n{server.output()}")
        try:
            if request("GET", server.url + "/healthz", timeout=2).status == 200:
                return server
        except OSError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise UmaServerError(f"umaserver dev did not answer in time:\n{server.output()}")
        time.sleep(0.05)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "uma_seed",
        "A seed file applied when the uma_server fixture starts (relative to the rootdir).",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "uma_seed(path): a seed file applied to the running uma_server before this test"
        " (relative to the rootdir).",
    )


def _in_rootdir(config: pytest.Config, path: str | os.PathLike[str]) -> Path:
    return Path(config.rootpath, path)


@pytest.fixture(scope="session")
def uma_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[UmaServer]:
    """A real umaserver for the session (one per xdist worker)."""
    seed_option = str(request.config.getini("uma_seed") or "")
    seed = _in_rootdir(request.config, seed_option) if seed_option else None
    server = start(tmp_path_factory.mktemp("umaserver"), seed)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def uma_client(uma_server: UmaServer) -> UmaClient:
    return UmaClient(uma_server)


@pytest.fixture
def uma_reset(uma_server: UmaServer) -> UmaServer:
    """Forgets everything but users, clients and links before the test."""
    uma_server.reset()
    return uma_server


@pytest.fixture(autouse=True)
def _uma_seed_marker(request: pytest.FixtureRequest) -> None:
    marker = request.node.get_closest_marker("uma_seed")
    if marker is None:
        return
    if len(marker.args) != 1:
        raise pytest.UsageError("uma_seed takes one argument: the seed file's path")
    server: UmaServer = request.getfixturevalue("uma_server")
    server.apply_seed(_in_rootdir(request.config, marker.args[0]))
