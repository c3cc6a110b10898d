"""One live RPT per AAT, whatever the concurrency (issue 27's N2 and N3), with two `python -m
umaserver serve` processes on one database, SQLite's file or PostgreSQL's, over real HTTP.

Each round takes a fresh AAT. Twenty granting authorization requests with it (each with a ticket
on a set of its own, sent with no RPT), spread over both processes, are all granted, and every
one answers the same RPT, which introspects active with all twenty permissions: no 201's
permission is left in an RPT that another request replaced, and the AAT has exactly one live RPT
in the database. Sixteen simultaneous `POST /rpt` with one AAT leave exactly one of their RPTs
live. The rounds are bounded (a race need not show in every round), sized for a 2-core machine.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import TypeVar

import psycopg
import pytest
import requests

from umaserver import secrets_at_rest

from .conftest import SECRET, LiveServer, free_port, stop_server
from .flows import DOCTORS_MAY_VIEW, EMPLOYEE, Flow, HttpApi, live_flow, wait_until
from .postgres_fixture import PostgresCluster
from .test_postgresql_processes import serve

pytestmark = pytest.mark.live

GRANT_ROUNDS = 5
GRANTS = 20
RPT_ROUNDS = 5
RPT_REQUESTS = 16
DOCTOR = [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}]
R = TypeVar("R")


class Site:
    """Two server processes on one database (`database`: an SQLite file's path or a PostgreSQL
    URL), one config."""

    def __init__(self, database: str, servers: list[LiveServer]) -> None:
        self.database = database
        self.servers = servers

    @property
    def urls(self) -> list[str]:
        return [server.url for server in self.servers]

    def live_rpts_of(self, aat: str) -> int:
        """How many live RPTs the database holds for this AAT."""
        statement = (
            "SELECT count(*) FROM rpts WHERE aat_digest = {0} AND revoked = FALSE"
            " AND expires_at > {0}"
        )
        values = (secrets_at_rest.digest(aat), int(time.time()))
        if self.database.startswith("postgresql"):
            with psycopg.connect(self.database) as conn:
                found = conn.execute(statement.format("%s"), values).fetchone()
        else:
            with closing(sqlite3.connect(self.database)) as conn:
                found = conn.execute(statement.format("?"), values).fetchone()
        assert found is not None
        return int(found[0])


@pytest.fixture(params=["sqlite", "postgresql"])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    if request.param == "postgresql":
        cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
        database = cluster.new_database()
    else:
        database = str(tmp_path / "uma.db")
    (tmp_path / "policies.toml").write_text(DOCTORS_MAY_VIEW, encoding="utf-8")
    ports = [free_port() for _ in range(2)]
    config_path = tmp_path / "config.toml"
    config_path.write_text(
        f'issuer = "http://127.0.0.1:{ports[0]}"\n'
        f'database = "{database}"\n'
        'policies = "policies.toml"\n'
        f'secret_key = "{SECRET}"\n'
        + ("[postgresql]\npool_min = 1\npool_max = 8\n" if request.param == "postgresql" else ""),
        encoding="utf-8",
    )
    servers: list[LiveServer] = []
    try:
        # One after the other: the first makes the database, the second finds it made.
        for index, port in enumerate(ports):
            log_path = tmp_path / f"server{index}.log"
            process = serve(config_path, port, log_path)
            server = LiveServer(f"http://127.0.0.1:{port}", config_path, process, log_path)
            servers.append(server)
            wait_until(partial(_answers, server), timeout=60, message="a server did not start")
        yield Site(database, servers)
    finally:
        for server in servers:
            stop_server(server)
        if request.param == "postgresql":
            cluster.drop(database)


def _answers(server: LiveServer) -> bool:
    if server.process.poll() is not None:
        raise RuntimeError(f"a server exited: {server.output()}")
    try:
        return requests.get(server.url + "/healthz", timeout=1).status_code == 200
    except (requests.ConnectionError, requests.Timeout):  # not up yet
        return False


@pytest.fixture
def flow(site: Site) -> Flow:
    """alice's X-rays, registered through the first process; a client that pushes employee
    claims."""
    return live_flow(
        site.servers[0], {"name": "X-rays", "scopes": ["view"]}, push_types=(EMPLOYEE,)
    )


def fresh_aat(site: Site, flow: Flow) -> str:
    issued = requests.post(
        site.urls[0] + flow.endpoints["token_endpoint"],
        data={"grant_type": "client_credentials", "scope": "uma_authorization"},
        auth=(flow.app.client_id, flow.app.client_secret),
        timeout=10,
    )
    assert issued.status_code == 200, issued.text
    aat: str = issued.json()["access_token"]
    return aat


def at_once(count: int, action: Callable[[int], R]) -> list[R]:
    """`action(index)` in `count` threads that start together; the results in index order."""
    start = threading.Barrier(count, timeout=30)
    results: list[R | None] = [None] * count

    def run(index: int) -> None:
        start.wait()
        results[index] = action(index)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(result is not None for result in results)
    return [result for result in results if result is not None]


def test_every_grant_of_simultaneous_requests_with_a_fresh_aat_lands_in_its_one_live_rpt(
    site: Site, flow: Flow
) -> None:
    sets = [
        flow.rs_id,
        *(flow.register({"name": f"scan {n}", "scopes": ["view"]}) for n in range(1, GRANTS)),
    ]
    path = flow.endpoints["authorization_request_endpoint"]
    bad_rounds: list[str] = []
    for round_number in range(GRANT_ROUNDS):
        aat = fresh_aat(site, flow)
        tickets = [flow.ticket("view", rs_id=rs_id) for rs_id in sets]

        def ask(index: int, aat: str = aat, tickets: list[str] = tickets) -> tuple[int, str]:
            reply = HttpApi(site.urls[index % 2]).post(
                path,
                json={"rpt": "none-yet", "ticket": tickets[index], "claims": DOCTOR},
                headers={"Authorization": f"Bearer {aat}"},
            )
            return reply.status, reply.json.get("rpt") or reply.text

        answers = at_once(GRANTS, ask)
        assert [status for status, _ in answers] == [201] * GRANTS, answers
        rpts = {rpt for _, rpt in answers}
        live = [rpt for rpt in rpts if flow.introspect(rpt)["active"]]
        held = (
            {p["resource_set_id"] for p in flow.introspect(live[0])["permissions"]}
            if len(live) == 1
            else set()
        )
        counted = site.live_rpts_of(aat)
        if (len(rpts), len(live), held, counted) != (1, 1, set(sets), 1):
            bad_rounds.append(
                f"round {round_number}: {len(rpts)} RPTs answered, {len(live)} active,"
                f" {len(set(sets) - held)} permissions missing from the live one,"
                f" {counted} live in the database"
            )
    assert bad_rounds == []


def test_simultaneous_rpt_requests_with_one_aat_leave_one_live_rpt(site: Site, flow: Flow) -> None:
    path = flow.endpoints["rpt_endpoint"]
    bad_rounds: list[str] = []
    for round_number in range(RPT_ROUNDS):
        aat = fresh_aat(site, flow)

        def new_rpt(index: int, aat: str = aat) -> tuple[int, str]:
            reply = HttpApi(site.urls[index % 2]).post(
                path, headers={"Authorization": f"Bearer {aat}"}
            )
            return reply.status, reply.json.get("rpt") or reply.text

        answers = at_once(RPT_REQUESTS, new_rpt)
        assert [status for status, _ in answers] == [200] * RPT_REQUESTS, answers
        live = [rpt for _, rpt in answers if flow.introspect(rpt)["active"]]
        counted = site.live_rpts_of(aat)
        if (len(live), counted) != (1, 1):
            bad_rounds.append(
                f"round {round_number}: {len(live)} active, {counted} live in the database"
            )
    assert bad_rounds == []
