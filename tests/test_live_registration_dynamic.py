"""Dynamic client registration with a plain HTTP client (`requests`) against a real server: the
operator mints an initial access token with the command line, the client finds /register in the
configuration document, registers, reads its registration (which renews its registration access
token), gets a PAT with client_credentials, and deletes itself."""

from __future__ import annotations

import requests

from .conftest import LiveServer


def test_register_read_use_and_delete_over_http(live_server: LiveServer) -> None:
    issued = live_server.command("registration-token", "issue", "--push-claims", "custom")
    document = requests.get(live_server.url + "/.well-known/uma-configuration", timeout=10).json()
    endpoint = document["dynamic_client_endpoint"]
    assert endpoint == live_server.url + "/register"

    refused = requests.post(endpoint, json={"grant_types": ["client_credentials"]}, timeout=10)
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_token"

    reply = requests.post(
        endpoint,
        json={
            "client_name": "A resource server",
            "grant_types": ["client_credentials"],
            "scope": "uma_protection",
            "uma_push_claim_types": ["custom"],
        },
        headers={"Authorization": f"Bearer {issued['initial_access_token']}"},
        timeout=10,
    )
    assert reply.status_code == 201, reply.text
    assert reply.headers["Content-Type"].startswith("application/json")
    client = reply.json()
    configuration = {"Authorization": f"Bearer {client['registration_access_token']}"}
    read = requests.get(client["registration_client_uri"], headers=configuration, timeout=10)
    assert read.status_code == 200
    assert read.json()["uma_push_claim_types"] == ["custom"]
    # Reading renewed the registration access token: the old one is done.
    old = configuration
    configuration = {"Authorization": f"Bearer {read.json()['registration_access_token']}"}
    stale = requests.get(client["registration_client_uri"], headers=old, timeout=10)
    assert stale.status_code == 401

    token = requests.post(
        document["token_endpoint"],
        data={"grant_type": "client_credentials", "scope": "uma_protection"},
        auth=(client["client_id"], client["client_secret"]),
        timeout=10,
    )
    assert token.status_code == 200, token.text
    pat = {"Authorization": f"Bearer {token.json()['access_token']}"}
    sets = document["resource_set_registration_endpoint"] + "/resource_set"
    made = requests.post(sets, json={"name": "album", "scopes": ["view"]}, headers=pat, timeout=10)
    assert made.status_code == 201

    listed = live_server.command("client", "list")
    assert [c["client_id"] for c in listed] == [client["client_id"]]

    gone = requests.delete(client["registration_client_uri"], headers=configuration, timeout=10)
    assert gone.status_code == 204
    assert requests.get(sets, headers=pat, timeout=10).status_code == 401
    assert live_server.command("client", "list") == []
