"""Fixtures: `app`, `http` (the Flask test client: "client" means the OAuth client here), `cli`
(the command line against the same config file), `store`, and `live_server` (a real
`python -m umaserver serve` on a free port; a test that uses it is marked `live`).

The database of every config the tests write (`write_config`) is `uma.db` beside it (SQLite), or,
with `UMASERVER_TEST_DATABASE=postgresql`, a fresh database of the session's throwaway PostgreSQL
cluster (`postgres_fixture.py`): one per folder, dropped at the end of the test that made it.
Tests of what only an SQLite file has (its file mode, a full disk, the SQLite opener's pool) are
marked `sqlite_only` and deselected then.

Every direct use of the store by the tests goes through the functions of the section "Direct uses
of the store" below: reading what HTTP cannot, and making parties without the command line, through
the services and the storage contract (never SQL). Time moves with the app's `clock` (a
`FakeClock`), never by writing to tables. Test modules take the `Store` type from here too.
"""

from __future__ import annotations

import functools
import gc
import itertools
import json
import os
import pwd
import random
import re
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import requests
from click.testing import CliRunner
from flask import Flask
from flask.testing import FlaskClient

from umaserver import create_app, secrets_at_rest
from umaserver.cli import main as cli_main
from umaserver.config import Config, load_config
from umaserver.services import accounts, clients
from umaserver.storage import Storage as Store
from umaserver.storage import open_storage, prepare_database

from .flows import Party, wait_until
from .postgres_fixture import (
    PostgresCluster,
    postgres_cluster,  # noqa: F401  (a fixture, for every test module)
)

if TYPE_CHECKING:
    from umaserver.storage.records import Claim, Client, Permission, Rpt, Ticket, User

__all__ = ["Party", "Store"]  # re-exported: test modules take them from here

ROOT = Path(__file__).resolve().parent.parent
SECRET = "test-secret-key-that-is-long-enough-0123456789"


# free_port's ports: below Linux's ephemeral range (32768-60999), where bind(("", 0)) and every
# outgoing connection take theirs, in a block of PORT_BLOCK per pytest-xdist worker.
PORT_BASE = 12000
PORT_BLOCK = 2000
PORT_BLOCKS = 10  # 12000-31999
_port_turn = itertools.count(random.randrange(PORT_BLOCK))


def free_port() -> int:
    """A loopback port that nothing listens on, for a process the test starts (which binds it a
    moment later). Not one the system hands out (no connection of any test takes it meanwhile), and
    from a block of ports of this worker's own, taken in turn: parallel workers never pick the
    same one, and two calls of one worker differ."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    first = PORT_BASE + (int(worker) if worker.isdigit() else 0) % PORT_BLOCKS * PORT_BLOCK
    for _ in range(PORT_BLOCK):
        port = first + next(_port_turn) % PORT_BLOCK
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use (or lingering): the next one
            return port
    raise AssertionError(f"no free port in {first}-{first + PORT_BLOCK - 1}")


# `sqlite` (the default) or `postgresql`: the database of the configs the tests write.
TEST_DATABASE = os.environ.get("UMASERVER_TEST_DATABASE", "sqlite")
assert TEST_DATABASE in ("sqlite", "postgresql"), f"UMASERVER_TEST_DATABASE={TEST_DATABASE!r}"
ON_POSTGRESQL = TEST_DATABASE == "postgresql"


class PostgresDatabases:
    """With UMASERVER_TEST_DATABASE=postgresql: the database of each folder a config is written
    in, made on first use from the cluster's prepared template."""

    cluster: PostgresCluster | None = None
    by_folder: dict[Path, str] = {}

    @classmethod
    def of(cls, folder: Path) -> str:
        assert cls.cluster is not None, "the postgres_databases fixture has not started"
        folder = folder.resolve()
        if folder not in cls.by_folder:
            cls.by_folder[folder] = cls.cluster.new_database()
        return cls.by_folder[folder]

    @classmethod
    def standing_for(cls, database: Path | str) -> Path | str:
        """What a test names `uma.db` of a folder (as an SQLite run has it) is that folder's
        PostgreSQL database."""
        if ON_POSTGRESQL and isinstance(database, Path) and database.name == "uma.db":
            return cls.of(database.parent)
        return database


def test_database(folder: Path) -> str:
    """What `database` says in a config written in `folder`."""
    return PostgresDatabases.of(folder) if ON_POSTGRESQL else "uma.db"


def write_config(folder: Path, issuer: str = "http://uma.test", extra: str = "") -> Path:
    """A config of `folder`, naming its policies.toml (written empty, no rules, unless the test
    wrote one: a rule file the config names must exist)."""
    rules = folder / "policies.toml"
    if not rules.exists():
        rules.write_text("", encoding="utf-8")
    path = folder / "config.toml"
    # A test's app keeps no idle connection: its database is dropped when the test ends.
    pool = "\n[postgresql]\npool_min = 0\n" if ON_POSTGRESQL else ""
    path.write_text(
        f'issuer = "{issuer}"\n'
        f'database = "{test_database(folder)}"\n'
        'policies = "policies.toml"\n'
        f'secret_key = "{SECRET}"\n' + extra + pool,
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="session", autouse=ON_POSTGRESQL)
def postgres_databases(request: pytest.FixtureRequest) -> Iterator[None]:
    PostgresDatabases.cluster = request.getfixturevalue("postgres_cluster")
    yield
    PostgresDatabases.cluster = None


@pytest.fixture(autouse=ON_POSTGRESQL)
def drop_test_databases(request: pytest.FixtureRequest) -> Iterator[None]:
    """Drops the databases the test made (those of wider fixtures, made before, go with the
    cluster)."""
    before = set(PostgresDatabases.by_folder)
    yield
    cluster = PostgresDatabases.cluster
    made = set(PostgresDatabases.by_folder) - before
    if made:
        # The test's apps are gone: collecting them ends their jobs and pools (weakref.finalize)
        # before their databases go.
        gc.collect()
    for folder in made:
        url = PostgresDatabases.by_folder.pop(folder)
        if cluster is not None:
            cluster.drop(url)


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


@pytest.fixture
def store(app: Flask, config: Config) -> Iterator[Store]:
    opened = open_store(config.database)
    yield opened
    opened.close()


# -- Direct uses of the store --------------------------------------------------------------------
# The only functions of the tests that call the store's methods or run SQL on its connection.

# A test party's token outlives any move of the clock a test makes (a day and a bit, at most).
PARTY_TOKEN_LIFETIME = 30 * 24 * 3600


def open_store(database: Path | str) -> Store:
    """A storage handle on `database`, its schema created (or upgraded) first. (Only the schema:
    tests make states the server's own preparation would refuse, such as a clashing name.)"""
    database = PostgresDatabases.standing_for(database)
    prepare_database(database, int(time.time()))
    return open_storage(database)


def make_client(store: Store, name: str, push_types: tuple[str, ...] = ()) -> tuple[str, str]:
    """A registered client, as `client create` makes one without redirect URIs (it acts for
    itself with client_credentials): its client_id and secret."""
    settings = clients.ClientSettings(
        name=name,
        grant_types=("client_credentials",),
        response_types=(),
        push_claim_types=tuple(push_types),
    )
    assert clients.settings_problem(settings) is None
    issued = clients.create_client(store, int(time.time()), settings)
    assert issued.secret is not None
    return issued.client.client_id, issued.secret


def make_party(
    store: Store,
    username: str,
    scope: str,
    client_id: str | None = None,
    push_types: tuple[str, ...] = (),
) -> Party:
    """A token of `scope` for `username` (made if new) at `client_id` (or a new client)."""
    secret = ""
    if client_id is None:
        client_id, secret = make_client(store, f"client of {username}", push_types)
    now = int(time.time())
    user = store.get_user_by_username(username) or accounts.create_user(
        store, now, username, None, {}
    )
    assert user is not None
    token = accounts.new_access_token()
    accounts.store_access_token(store, now, token, client_id, user.sub, scope, PARTY_TOKEN_LIFETIME)
    return Party(client_id, secret, username, token)


def make_client_party(store: Store, client_id: str, scope: str) -> Party:
    """A token of `scope` for `client_id` acting for itself, as client_credentials issues one (no
    person behind it)."""
    token = accounts.new_access_token()
    accounts.store_access_token(
        store, int(time.time()), token, client_id, None, scope, PARTY_TOKEN_LIFETIME
    )
    return Party(client_id, "", "", token)


def make_web_client(
    store: Store, name: str, redirect_uris: list[str], public: bool = False
) -> tuple[str, str]:
    """A client with redirect URIs, for the authorization code flow: its client_id and secret
    ("" for a public client, which has no secret: `token_endpoint_auth_method` `none`)."""
    settings = clients.ClientSettings(
        name=name,
        redirect_uris=tuple(redirect_uris),
        # As `client create --redirect-uri` makes one: a confidential client may also act for
        # itself (client_credentials); a public one may not.
        grant_types=("authorization_code", "refresh_token")
        + (() if public else ("client_credentials",)),
        token_endpoint_auth_method="none" if public else "client_secret_basic",
    )
    assert clients.settings_problem(settings) is None
    issued = clients.create_client(store, int(time.time()), settings)
    return issued.client.client_id, issued.secret or ""


def make_user(store: Store, username: str) -> User:
    """A user without a password (made if new)."""
    user = store.get_user_by_username(username) or accounts.create_user(
        store, int(time.time()), username, None, {}
    )
    assert user is not None
    return user


def make_initial_access_token(
    store: Store, push_types: tuple[str, ...] = (), lifetime: int = 3600, now: int | None = None
) -> str:
    """An initial access token for /register, as `registration-token issue` mints one (`now`: the
    moment of the app's clock, when a test moves that clock past the token's expiry)."""
    issued = int(time.time()) if now is None else now
    return clients.issue_initial_access_token(store, issued, push_types, lifetime)


def make_person(
    store: Store, username: str, password_hash: str | None, claims: dict[str, Any] | None = None
) -> User:
    """A local user with this password hash (an argon2id one, or an old scrypt one), and these
    attributes (`user create --claim`)."""
    made = accounts.create_user(store, int(time.time()), username, password_hash, claims or {})
    assert made is not None
    return made


def revoke_token(store: Store, token: str) -> bool:
    """Revokes a PAT or an AAT, as `token revoke` does; whether it was live."""
    return accounts.revoke_access_token(store, token)


def stored_client(store: Store, client_id: str) -> Client | None:
    return store.get_client(client_id)


def stored_user(store: Store, username: str) -> User | None:
    return store.get_user_by_username(username)


def stored_ticket(store: Store, ticket: str) -> Ticket | None:
    return store.get_ticket(secrets_at_rest.digest(ticket))


def stored_rpt(store: Store, rpt: str) -> Rpt | None:
    return store.get_rpt(secrets_at_rest.digest(rpt))


def stored_permissions(store: Store, rpt: str) -> list[Permission]:
    """Every permission the store still holds for `rpt`, expired or not."""
    return store.permissions_of(secrets_at_rest.digest(rpt), 0)


def gathered_claims(store: Store, ticket: str, username: str) -> list[Claim]:
    """The claims gathered with `ticket` for the requesting party `username`."""
    user = store.get_user_by_username(username)
    assert user is not None
    return store.gathered_claims(secrets_at_rest.digest(ticket), user.sub)


def dump_database(database: Path | str) -> str:
    """Everything the database holds, as SQL text: to show what is not stored in the clear."""
    database = PostgresDatabases.standing_for(database)
    if isinstance(database, str) and database.startswith("postgresql://"):
        assert PostgresDatabases.cluster is not None
        return PostgresDatabases.cluster.dump(database)
    # Read-only: a wrong path fails here instead of creating an empty file that holds no secret.
    uri = Path(database).resolve().as_uri() + "?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as conn:
        return "\n".join(conn.iterdump())


# -- Parties -----------------------------------------------------------------------------------


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
    folder: Path,
    extra_config: str = "",
    threads: int = 8,
    rules_text: str = "",
    as_user: str | None = None,
) -> LiveServer:
    """`as_user`: run the server as that user (setpriv), so that file modes hold even for root.
    It keeps one capability, reading and searching any file (`dac_read_search`), so that it can
    run the code of a checkout only root may read (a `mktemp -d` clone is 0700); writing is still
    held to the file modes."""
    (folder / "policies.toml").write_text(rules_text, encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config_path = write_config(folder, issuer=url, extra=extra_config)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log_path = folder / "server.log"
    # A file, not a pipe: a pipe nobody reads would stall a server that logs a lot.
    log = log_path.open("w", encoding="utf-8")
    run_as = []
    if as_user is not None:
        run_as = [
            "setpriv",
            f"--reuid={as_user}",
            f"--regid={pwd.getpwnam(as_user).pw_gid}",
            "--init-groups",
            "--inh-caps=+dac_read_search",
            "--ambient-caps=+dac_read_search",
        ]
    process = subprocess.Popen(
        [
            *run_as,
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

    def answers() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"server exited: {log_path.read_text(encoding='utf-8')}")
        try:
            requests.get(url + "/.well-known/uma-configuration", timeout=1)
        except requests.ConnectionError:
            return False
        return True

    try:
        wait_until(answers, timeout=30, message="server did not start")
    except AssertionError:
        process.kill()
        process.wait()
        raise
    return LiveServer(url, config_path, process, log_path)


def stop_server(server: LiveServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


# Fixtures that start a process beside the test: a test that uses one is `live`.
PROCESS_FIXTURES = frozenset({"live_server", "postgres_cluster"})


def starts_a_process(item: pytest.Item) -> bool:
    """Whether `item` uses a fixture of PROCESS_FIXTURES, or is the `postgres` case of the storage
    conformance suite (which takes the cluster with getfixturevalue)."""
    if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and callspec.params.get("store_factory") == "postgres"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that starts a process beside it (a real server, the PostgreSQL cluster) is `live`:
    `pytest -m "not live"` (`make check`) leaves it out. On PostgreSQL, the tests of what only an
    SQLite file has (`sqlite_only`) are deselected."""
    for item in items:
        if starts_a_process(item):
            item.add_marker(pytest.mark.live)
    if ON_POSTGRESQL:
        sqlite_only = [item for item in items if item.get_closest_marker("sqlite_only")]
        if sqlite_only:
            config.hook.pytest_deselected(items=sqlite_only)
            items[:] = [item for item in items if item not in sqlite_only]


# -- Parallel workers (pytest-xdist) -----------------------------------------------------------

# A module that defines a fixture wider than one test (a server and a browser for the module, keys
# made once), or imports from a module that does (the OpenID provider of oidc_provider_fixture.py,
# another test module's fixture). Not conftest.py's or postgres_fixture.py's: their session
# fixtures are the worker's, whichever module asks.
WIDE_FIXTURE = re.compile(r'scope="(module|session)"')
IMPORT_FROM = re.compile(r"^from (?:\.|tests\.)(\w+) import", re.MULTILINE)


@functools.cache
def shares_a_module_fixture(module: str) -> bool:
    path = ROOT / module
    if path.name in ("conftest.py", "postgres_fixture.py") or not path.is_file():
        return False
    text = path.read_text(encoding="utf-8")
    return bool(WIDE_FIXTURE.search(text)) or any(
        shares_a_module_fixture(f"tests/{name}.py") for name in IMPORT_FROM.findall(text)
    )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` (`make unit`): every test is a unit of work of its own, except that the
    tests of a module sharing a fixture of its own go to one worker together, which sets it up
    once. (pytest-xdist's own xdist_group marks do not reach its scheduler under pytest 9.2, which
    no longer reads the node id xdist rewrites; this groups by module instead.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if shares_a_module_fixture(module) else nodeid

    return ModuleGroups(config, log)


# -- The browser tests' screens ---------------------------------------------------------------


@pytest.fixture(params=["desktop", "phone"])
def screen(request: pytest.FixtureRequest) -> str:
    """A browser test that takes `browser` (and defines none of its own) runs on each screen of
    tests/browser.py's SCREENS: 1280x800 and a phone's 390x844."""
    return str(request.param)


@pytest.fixture
def browser(screen: str, tmp_path: Path) -> Iterator[Any]:
    from .browser import screen_driver  # selenium only for the tests that drive a browser

    driver = screen_driver(tmp_path / "profile", screen)
    yield driver
    driver.quit()


@pytest.fixture
def live_server(tmp_path: Path, rules_text: str) -> Iterator[LiveServer]:
    server = start_server(tmp_path, rules_text=rules_text)
    yield server
    stop_server(server)


# -- Owners' rules: direct uses of the store -----------------------------------------------------


def store_owner_rule_as_is(
    store: Store, username: str, rule_id: str, table: dict[str, Any]
) -> bool:
    """Stores a rule of `username` unchecked: as one stored before the rule reader changed."""
    user = store.get_user_by_username(username)
    assert user is not None
    return store.add_owner_rule(rule_id, user.sub, table, int(time.time()))


def owner_rules_version(store: Store, username: str) -> int:
    user = store.get_user_by_username(username)
    assert user is not None
    return store.owner_rules_version(user.sub)
