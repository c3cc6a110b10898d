"""`db reset --keep-parties`: everything but users, clients and their links is forgotten, under a
running app too (the storage side, table by table, is in tests/storage/test_conformance.py)."""

from __future__ import annotations

from flask.testing import FlaskClient

from .conftest import CLI


def alices_pat(cli: CLI, client_id: str) -> str:
    issued = cli.json(
        "token", "issue", "--client", client_id, "--user", "alice", "--scope", "uma_protection"
    )
    token: str = issued["access_token"]
    return token


def test_a_reset_keeps_the_parties_and_ends_what_they_did(cli: CLI, http: FlaskClient) -> None:
    rs = cli.json("client", "create", "--name", "Photo server")
    cli.json("user", "create", "alice", "--claim", "email=alice@example.com")
    pat = alices_pat(cli, rs["client_id"])
    auth = {"Authorization": f"Bearer {pat}"}
    made = http.post("/rs/resource_set", json={"name": "Photos", "scopes": ["view"]}, headers=auth)
    assert made.status_code == 201
    users, clients = cli.json("user", "list"), cli.json("client", "list")

    refused = cli("db", "reset")
    assert refused.exit_code == 1
    assert "--keep-parties" in refused.stderr and refused.stdout == ""
    assert http.get("/rs/resource_set", headers=auth).get_json() == [made.get_json()["_id"]]

    done = cli.json("db", "reset", "--keep-parties")
    assert done["status"] == "reset"
    assert {"users", "clients", "identity_links"} <= set(done["kept"])
    assert done["forgotten"]["resource_sets"] == 1 and done["forgotten"]["access_tokens"] == 1

    # The token died with what it registered; the parties are as they were, and start again.
    assert http.get("/rs/resource_set", headers=auth).status_code == 401
    assert (cli.json("user", "list"), cli.json("client", "list")) == (users, clients)
    again = alices_pat(cli, rs["client_id"])
    listed = http.get("/rs/resource_set", headers={"Authorization": f"Bearer {again}"})
    assert (listed.status_code, listed.get_json()) == (200, [])
    # The client's secret still works: it was kept.
    own = http.post(
        "/token",
        data={"grant_type": "client_credentials", "scope": "uma_protection"},
        auth=(rs["client_id"], rs["client_secret"]),
    )
    assert own.status_code == 200, own.get_json()
