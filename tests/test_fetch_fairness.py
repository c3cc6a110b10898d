"""The fetch job's workers (issue 27, N5): `[fetch] concurrency` fetches at once, due URIs taken
round-robin by the registration that queued them, so a set whose 60 scope URIs never answer holds
another registration's icon back by about one fetch timeout, not 60. Here the app's own job runs
on its threads, against a loopback listener that accepts connections and never answers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from umaserver.config import Config
from umaserver.fetching import running
from umaserver.fetching.fetcher import Fetcher
from umaserver.fetching.job import FetchJob
from umaserver.pages.untrusted import image_src
from umaserver.storage import Storage

from .conftest import (
    FakeClock,
    Party,
    Store,
    make_initial_access_token,
    make_party,
    open_store,
    write_config,
)
from .fake_web import PNG, FakeWeb, Route

TIMEOUT = 0.5  # seconds a fetch of the silent listener takes to fail
SLACK = 2.0  # seconds for everything else, on a busy 2-core machine


class SilentListener:
    """Accepts TCP connections on 127.0.0.1 and never answers: each fetch waits for its timeout."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted.append(conn)  # held open, never read from nor written to

    def __enter__(self) -> SilentListener:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._thread.join(5)
        for conn in self.accepted:
            conn.close()
        self.sock.close()


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    extra = "[fetch]\nallow_loopback = true\ntimeout = 1\nmax_bytes = 4096\nconcurrency = 4\n"
    return write_config(tmp_path, extra=extra)


@pytest.fixture
def job(app: Flask) -> Iterator[FetchJob]:
    """The app's fetch job, its workers running, each fetch bounded by `TIMEOUT`."""
    found = running.fetch_job(app)
    found.fetcher = Fetcher(TIMEOUT, 4096, True)
    yield found
    found.stop()


@pytest.fixture
def silent() -> Iterator[SilentListener]:
    with SilentListener() as started:
        yield started


@pytest.fixture
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as started:
        yield started


def register_set(http: FlaskClient, party: Party, scopes: list[str], **extra: str) -> None:
    answer = http.post(
        "/rs/resource_set", json={"name": "Set", "scopes": scopes, **extra}, headers=party.auth
    )
    assert answer.status_code == 201, answer.text


def test_a_set_of_silent_scope_uris_holds_another_sets_icon_back_one_timeout_at_most(
    app: Flask,
    http: FlaskClient,
    store: Store,
    clock: FakeClock,
    job: FetchJob,
    silent: SilentListener,
    web: FakeWeb,
) -> None:
    web.routes["/icon.png"] = Route(body=PNG, content_type="image/png")
    icon = web.url("/icon.png")
    register_set(
        http,
        make_party(store, "alice", "uma_protection"),
        [silent.url(f"/scope/{n}") for n in range(60)],
    )
    # The job's workers are on the silent set's URIs now.
    deadline = time.monotonic() + SLACK
    while len(silent.accepted) < 4:
        assert time.monotonic() < deadline, "the job did not start on the silent set"
        time.sleep(0.01)
    started = time.monotonic()
    register_set(http, make_party(store, "bob", "uma_protection"), ["read"], icon_uri=icon)
    with app.test_request_context("/"):
        while image_src(icon) is None:
            waited = time.monotonic() - started
            assert waited < TIMEOUT + SLACK, f"the icon was not checked after {waited:.1f} s"
            time.sleep(0.02)
    # Checked before the silent set's URIs were all tried: fairly, not merely fast (those due
    # count the four being fetched).
    assert store.count_due_fetches(clock.now()) > 4


def test_each_queued_uri_names_the_set_or_client_that_queued_it(
    app: Flask, http: FlaskClient, store: Store, web: FakeWeb
) -> None:
    job = running.fetch_job(app)
    job.stop()  # the test steps the job itself
    web.routes["/read.json"] = Route(
        body=f'{{"name": "Read", "icon_uri": "{web.url("/read.png")}"}}'.encode(),
        content_type="application/json",
    )
    answer = http.post(
        "/rs/resource_set",
        json={"name": "Set", "scopes": [web.url("/read.json")], "icon_uri": web.url("/set.png")},
        headers=make_party(store, "alice", "uma_protection").auth,
    )
    rs_id = answer.get_json()["_id"]
    registered = http.post(
        "/register",
        json={"grant_types": ["client_credentials"], "logo_uri": web.url("/logo.png")},
        headers={"Authorization": f"Bearer {make_initial_access_token(store)}"},
    )
    client_id = registered.get_json()["client_id"]
    assert job.run_once() == 3
    # The icon the scope description names is queued in the set's name too.
    expected = {
        ("/read.json", "scope"): f"set:{rs_id}",
        ("/set.png", "image"): f"set:{rs_id}",
        ("/logo.png", "image"): f"client:{client_id}",
        ("/read.png", "image"): f"set:{rs_id}",
    }
    for (path, kind), queued_by in expected.items():
        row = store.get_fetched_uri(web.url(path), kind)  # type: ignore[arg-type]
        assert row is not None and row.queued_by == queued_by, (path, row)


class CountingOpener:
    """Opens handles on the test's database and counts those open now."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.open = 0
        self._lock = threading.Lock()

    def __call__(self) -> Storage:
        handle = open_store(self.config.database)
        with self._lock:
            self.open += 1
        closing = handle.close

        def close() -> None:
            with self._lock:
                self.open -= 1
            closing()

        handle.close = close  # type: ignore[method-assign]
        return handle


def test_workers_hold_no_database_handle_while_they_wait_for_a_server(
    config: Config, store: Store, clock: FakeClock, silent: SilentListener
) -> None:
    opener = CountingOpener(config)
    settings = replace(config.fetch, concurrency=2)
    job = FetchJob(opener, clock, settings, Fetcher(5, 4096, True))
    for n in range(2):
        store.queue_uri(silent.url(f"/scope/{n}"), "scope", f"row-{n}", clock.now(), "set:a")
    job.start()
    try:
        deadline = time.monotonic() + SLACK
        while len(silent.accepted) < 2:
            assert time.monotonic() < deadline, "the job did not start fetching"
            time.sleep(0.01)
        # Both workers are waiting for the silent server, and neither holds a pool's connection
        # (PostgreSQL) or the database file (SQLite) meanwhile.
        assert opener.open == 0
    finally:
        for conn in silent.accepted:  # the fetches end now, not after their 5 s
            conn.close()
        job.stop()


def test_stopping_the_job_ends_every_worker(app: Flask) -> None:
    job = running.fetch_job(app)
    workers = list(job._threads)
    assert len(workers) == 4
    assert all(worker.is_alive() for worker in workers)
    job.stop()
    assert not any(worker.is_alive() for worker in workers)
