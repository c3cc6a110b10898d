"""Guesses at once against a live server (issue 27, N4): a sign-in is counted as a failure before
its password is checked, so that 40 wrong passwords sent together from one address check at most
`max_failures` (5) of them, on SQLite and (`UMASERVER_TEST_DATABASE=postgresql`) on PostgreSQL.
Before, the lock was read before the check and the failure written after it: 12 checks on SQLite,
19 on PostgreSQL. Each failure stored is one password checked, so the rows count the checks."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from requests.adapters import HTTPAdapter

from umaserver import secrets_at_rest
from umaserver.services.signin import failure_keys

from .conftest import LiveServer, make_person, open_store, start_server, stop_server

pytestmark = pytest.mark.live

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')
GUESSES = 40


class FromAddress(HTTPAdapter):
    """Connects from a loopback address of its own (all of 127.0.0.0/8 is the loopback on
    Linux): the server sees requests from several addresses without a proxy."""

    def __init__(self, address: str) -> None:
        self.address = address
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["source_address"] = (self.address, 0)
        super().init_poolmanager(*args, **kwargs)


def guess_at_once(server: LiveServer, addresses: list[str]) -> list[int]:
    """A wrong password for alice from each of `addresses` (loopback ones), all sent together;
    their statuses."""
    sessions = [requests.Session() for _ in addresses]
    for session, address in zip(sessions, addresses, strict=True):
        session.mount("http://", FromAddress(address))
    tokens = []
    for session in sessions:  # each guess with its own session and the form's token
        found = TOKEN.search(session.get(server.url + "/signin", timeout=30).text)
        assert found is not None
        tokens.append(found.group(1))
    barrier = threading.Barrier(len(addresses), timeout=60)

    def guess(n: int) -> int:
        barrier.wait()
        form = {"username": "alice", "password": f"wrong {n}", "csrf_token": tokens[n]}
        answer = sessions[n].post(
            server.url + "/signin",
            data=form,
            allow_redirects=False,
            timeout=120,
        )
        return answer.status_code

    with ThreadPoolExecutor(max_workers=len(addresses)) as pool:
        statuses = list(pool.map(guess, range(len(addresses)), timeout=300))
    assert set(statuses) <= {200, 429}, statuses
    return statuses


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    extra = "[signin]\naccount_max_failures = 8\n"
    live = start_server(tmp_path, extra_config=extra, threads=8)
    store = open_store(tmp_path / "uma.db")
    make_person(store, "alice", secrets_at_rest.hash_password("correct horse battery"))
    store.close()
    yield live
    stop_server(live)


def checked(server: LiveServer, key: str) -> int:
    """The failures stored under `key`: one for each password checked."""
    store = open_store(server.config_path.parent / "uma.db")
    try:
        return len(store.signin_failures_since(key, 0))
    finally:
        store.close()


def test_forty_guesses_at_once_from_one_address_check_at_most_five(server: LiveServer) -> None:
    statuses = guess_at_once(server, ["127.0.0.1"] * GUESSES)
    account, from_address = failure_keys("alice", "127.0.0.1")
    count = checked(server, from_address)
    assert count <= 5, f"{count} passwords checked"
    assert count == checked(server, account)
    # A guess that was not checked says "locked" (so may one that was, once five are counted).
    assert statuses.count(200) <= count
    assert statuses.count(429) >= GUESSES - count


def test_forty_guesses_at_once_from_forty_addresses_check_at_most_the_accounts_eight(
    server: LiveServer,
) -> None:
    statuses = guess_at_once(server, [f"127.0.0.{n + 2}" for n in range(GUESSES)])
    account, _ = failure_keys("alice", "")
    count = checked(server, account)
    assert count <= 8, f"{count} passwords checked"
    assert statuses.count(429) >= GUESSES - count
