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

import pytest
import requests

from umaserver import secrets_at_rest
from umaserver.services.signin import failure_keys

from .conftest import LiveServer, make_person, open_store, start_server, stop_server

pytestmark = pytest.mark.live

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')
GUESSES = 40


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    live = start_server(tmp_path, threads=8)
    yield live
    stop_server(live)


def test_forty_guesses_at_once_check_at_most_five_passwords(
    server: LiveServer, tmp_path: Path
) -> None:
    store = open_store(tmp_path / "uma.db")
    make_person(store, "alice", secrets_at_rest.hash_password("correct horse battery"))
    sessions = [requests.Session() for _ in range(GUESSES)]
    tokens = []
    for session in sessions:  # each guess with its own session and the form's token
        found = TOKEN.search(session.get(server.url + "/signin", timeout=30).text)
        assert found is not None
        tokens.append(found.group(1))
    barrier = threading.Barrier(GUESSES, timeout=60)

    def guess(n: int) -> int:
        barrier.wait()
        form = {"username": "alice", "password": f"wrong {n}", "csrf_token": tokens[n]}
        answer = sessions[n].post(
            server.url + "/signin", data=form, allow_redirects=False, timeout=120
        )
        return answer.status_code

    with ThreadPoolExecutor(max_workers=GUESSES) as pool:
        statuses = list(pool.map(guess, range(GUESSES), timeout=300))
    assert set(statuses) <= {200, 429}, statuses
    account, from_address = failure_keys("alice", "127.0.0.1")
    checked = len(store.signin_failures_since(from_address, 0))
    assert checked <= 5, f"{checked} passwords checked"
    assert checked == len(store.signin_failures_since(account, 0))
    # A guess that was not checked says "locked" (so may one that was, once five are counted).
    assert statuses.count(200) <= checked
    assert statuses.count(429) >= GUESSES - checked
    store.close()
