"""Full walks against a real `python -m umaserver serve` on a free port, with a real HTTP client."""

from __future__ import annotations

import random
import socket
import threading
import time
from urllib.parse import urlsplit

import pytest
import requests

from .conftest import LiveServer

pytestmark = pytest.mark.live


def test_walk_from_client_create_to_delete(live_server: LiveServer) -> None:
    made = live_server.command("client", "create", "--name", "Photo RS")
    live_server.command("user", "create", "alice", "--claim", "email=alice@example.com")
    pat = live_server.command(
        "token",
        "issue",
        "--client",
        made["client_id"],
        "--user",
        "alice",
        "--scope",
        "uma_protection",
    )["access_token"]
    http = requests.Session()
    http.headers["Authorization"] = f"Bearer {pat}"

    config = requests.get(live_server.url + "/.well-known/uma-configuration", timeout=5).json()
    collection = config["resource_set_registration_endpoint"] + "/resource_set"
    assert collection.startswith(live_server.url)

    created = http.post(
        collection,
        json={"name": "Holiday photos", "scopes": ["view", "print"], "x-album": 7},
        timeout=5,
    )
    assert created.status_code == 201
    location = created.headers["Location"]
    assert location == f"{collection}/{created.json()['_id']}"

    assert http.get(collection, timeout=5).json() == [created.json()["_id"]]
    read = http.get(location, timeout=5).json()
    assert read["name"] == "Holiday photos" and read["x-album"] == 7

    updated = http.put(location, json={"name": "Holiday", "scopes": ["view"]}, timeout=5)
    assert updated.status_code == 200 and updated.json() == {"_id": created.json()["_id"]}
    assert http.get(location, timeout=5).json()["scopes"] == ["view"]

    deleted = http.delete(location, timeout=5)
    assert deleted.status_code == 204 and deleted.content == b""
    assert http.get(location, timeout=5).status_code == 404
    assert http.get(collection, timeout=5).json() == []

    # A client_credentials PAT from the token endpoint works the same way.
    token = requests.post(
        config["token_endpoint"],
        data={"grant_type": "client_credentials", "scope": "uma_protection"},
        auth=(made["client_id"], made["client_secret"]),
        timeout=5,
    ).json()["access_token"]
    listed = requests.get(collection, headers={"Authorization": f"Bearer {token}"}, timeout=5)
    assert listed.status_code == 200 and listed.json() == []


def test_bodies_waitress_refuses_first_are_json_too(live_server: LiveServer) -> None:
    url = live_server.url + "/rs/resource_set"
    response = requests.post(
        url, data=b"x" * (1024 * 1024 + 1), headers={"Content-Type": "application/json"}, timeout=10
    )
    assert response.status_code == 413
    assert response.headers["Content-Type"] == "application/json"
    assert response.json()["error"] == "invalid_request"

    parts = urlsplit(live_server.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=5) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n")
        chunks = []
        while chunk := sock.recv(65536):  # waitress closes after an error
            chunks.append(chunk)
        answer = b"".join(chunks).decode()
    assert answer.startswith("HTTP/1.1 400")
    assert '"error": "invalid_request"' in answer


def test_concurrent_writers_lose_nothing(live_server: LiveServer) -> None:
    made = live_server.command("client", "create", "--name", "busy RS")
    live_server.command("user", "create", "alice")
    pat = live_server.command(
        "token",
        "issue",
        "--client",
        made["client_id"],
        "--user",
        "alice",
        "--scope",
        "uma_protection",
    )["access_token"]
    collection = live_server.url + "/rs/resource_set"
    acknowledged: dict[str, int] = {}  # _id -> generation of its last acknowledged update
    lock = threading.Lock()
    failures: list[str] = []
    deadline = time.monotonic() + 3.0

    def writer(number: int) -> None:
        http = requests.Session()
        http.headers["Authorization"] = f"Bearer {pat}"
        mine: list[str] = []
        generation = 0
        rng = random.Random(number)
        while time.monotonic() < deadline:
            generation += 1
            if not mine or rng.random() < 0.4:
                answer = http.post(
                    collection,
                    json={"name": f"w{number}", "scopes": ["s"], "generation": generation},
                    timeout=30,
                )
                if answer.status_code != 201:
                    failures.append(f"create {answer.status_code} {answer.text}")
                    continue
                rs_id = answer.json()["_id"]
                mine.append(rs_id)
            else:
                rs_id = rng.choice(mine)
                answer = http.put(
                    f"{collection}/{rs_id}",
                    json={"name": f"w{number}", "scopes": ["s"], "generation": generation},
                    timeout=30,
                )
                if answer.status_code != 200:
                    failures.append(f"update {answer.status_code} {answer.text}")
                    continue
            with lock:
                acknowledged[rs_id] = generation

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    assert len(acknowledged) > 8
    http = requests.Session()
    http.headers["Authorization"] = f"Bearer {pat}"
    assert sorted(http.get(collection, timeout=10).json()) == sorted(acknowledged)
    for rs_id, generation in acknowledged.items():
        assert http.get(f"{collection}/{rs_id}", timeout=10).json()["generation"] == generation
