"""Open registration limited per address (issue 27, item 10): with `[registration] open = true`,
an address registers at most `per_address_per_hour` clients in any hour (here 3); past it 429
`temporarily_unavailable` with Retry-After. Counted are registrations made, from the address after
`[server] trusted_proxies`; one with an initial access token is not. Before, 300 registrations
passed in 0.4 s. Through the Flask test client with the app's FakeClock, and a live server for
racing requests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import Flask
from flask.testing import FlaskClient

from umaserver import create_app
from umaserver.config import load_config
from umaserver.services.maintenance import prune

from .conftest import (
    FakeClock,
    LiveServer,
    Store,
    make_initial_access_token,
    open_store,
    start_server,
    stop_server,
    write_config,
)

CC = {"grant_types": ["client_credentials"]}
LIMITED = "[registration]\nopen = true\nper_address_per_hour = 3\n"


@pytest.fixture
def limited_app(tmp_path: Path, clock: FakeClock) -> Flask:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    extra = '[server]\ntrusted_proxies = ["10.0.0.1"]\n' + LIMITED
    return create_app(load_config(write_config(tmp_path, extra=extra)), clock=clock)


@pytest.fixture
def web(limited_app: Flask) -> FlaskClient:
    return limited_app.test_client()


@pytest.fixture
def limited_store(limited_app: Flask, tmp_path: Path) -> Iterator[Store]:
    store = open_store(tmp_path / "uma.db")
    yield store
    store.close()


def register(http: FlaskClient, address: str = "192.0.2.1", **kwargs: Any) -> Any:
    environ = {"REMOTE_ADDR": address}
    return http.post("/register", json=kwargs.pop("body", CC), environ_base=environ, **kwargs)


def test_an_address_registers_at_most_its_limit_in_an_hour(
    web: FlaskClient, clock: FakeClock
) -> None:
    for _ in range(3):
        assert register(web).status_code == 201
        clock.advance(600)
    refused = register(web)  # 1800 s after the first
    assert refused.status_code == 429
    assert refused.get_json()["error"] == "temporarily_unavailable"
    assert refused.headers["Retry-After"] == "1800"  # when the first leaves the hour
    assert refused.headers["Cache-Control"] == "no-store"
    assert register(web, "192.0.2.2").status_code == 201  # another address has its own
    clock.advance(1799)
    assert register(web).status_code == 429
    clock.advance(1)
    assert register(web).status_code == 201
    assert register(web).status_code == 429


def test_a_refused_registration_is_not_counted(web: FlaskClient) -> None:
    for _ in range(5):
        refused = register(web, body={"redirect_uris": ["http://example.com/cb"]})
        assert refused.status_code == 400
    for _ in range(3):
        assert register(web).status_code == 201
    assert register(web).status_code == 429


def test_the_address_a_trusted_proxy_names_is_counted(web: FlaskClient) -> None:
    for n in range(4):  # four people behind one proxy
        forwarded = {"X-Forwarded-For": f"198.51.100.{n}"}
        assert register(web, "10.0.0.1", headers=forwarded).status_code == 201
    for _ in range(3):  # an untrusted sender's header is ignored: its own address is counted
        assert register(web, "192.0.2.9", headers={"X-Forwarded-For": "1.2.3.4"}).status_code == 201
    assert register(web, "192.0.2.9", headers={"X-Forwarded-For": "5.6.7.8"}).status_code == 429


def test_registering_with_an_initial_access_token_is_not_limited(
    web: FlaskClient, limited_store: Store
) -> None:
    token = {"Authorization": f"Bearer {make_initial_access_token(limited_store)}"}
    for _ in range(3):
        assert register(web).status_code == 201
    for _ in range(5):
        assert register(web, headers=token).status_code == 201
    assert register(web).status_code == 429


def test_the_maintenance_job_forgets_old_registrations(
    web: FlaskClient, limited_store: Store, clock: FakeClock
) -> None:
    for _ in range(3):
        assert register(web).status_code == 201
    assert prune(limited_store, clock.now()).signin_failures == 0
    clock.advance(24 * 3600 + 1)
    assert prune(limited_store, clock.now()).signin_failures == 3


@pytest.mark.live
def test_racing_registrations_from_one_address_pass_the_limit_no_more(tmp_path: Path) -> None:
    server: LiveServer = start_server(tmp_path, extra_config=LIMITED, threads=8)
    try:
        racers = 12
        barrier = threading.Barrier(racers, timeout=60)

        def one(_: int) -> int:
            barrier.wait()
            return requests.post(server.url + "/register", json=CC, timeout=60).status_code

        with ThreadPoolExecutor(max_workers=racers) as pool:
            statuses = list(pool.map(one, range(racers), timeout=120))
    finally:
        stop_server(server)
    assert sorted(statuses) == [201] * 3 + [429] * (racers - 3)
