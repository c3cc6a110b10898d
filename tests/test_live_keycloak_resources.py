"""python-keycloak 7.1.1's `KeycloakUMA.resource_set_*`, unmodified, against a live server with
`[keycloak] realm`: the resource server's own token (client_credentials) registers a set for
alice, who has given it a PAT, then reads, updates, lists with every filter, and deletes it. The
client finds the endpoint in the realm's discovery document, as it does against Keycloak."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from keycloak import KeycloakOpenIDConnection, KeycloakUMA

from .conftest import LiveServer, start_server, stop_server

pytestmark = pytest.mark.live

REALM = "demo"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    live = start_server(tmp_path, extra_config=f'\n[keycloak]\nrealm = "{REALM}"\n')
    yield live
    stop_server(live)


def uma_with(server: LiveServer, client: dict[str, str], access_token: str) -> KeycloakUMA:
    connection = KeycloakOpenIDConnection(
        server_url=server.url,
        realm_name=REALM,
        client_id=client["client_id"],
        client_secret_key=client["client_secret"],
        token={"access_token": access_token, "expires_in": 3600},
    )
    return KeycloakUMA(connection)


def test_python_keycloaks_resource_set_methods(server: LiveServer) -> None:
    rs = server.command("client", "create", "--name", "Photo RS")
    server.command("user", "create", "alice")
    pat = server.command(
        "token",
        "issue",
        "--client",
        rs["client_id"],
        "--user",
        "alice",
        "--scope",
        "uma_protection",
    )["access_token"]
    issued = requests.post(
        server.url + "/token",
        data={"grant_type": "client_credentials", "scope": "uma_protection"},
        auth=(rs["client_id"], rs["client_secret"]),
        timeout=5,
    )
    assert issued.status_code == 200, issued.text
    as_server = uma_with(server, rs, issued.json()["access_token"])
    as_alice = uma_with(server, rs, pat)

    album: dict[str, Any] = {
        "name": "Holiday album",
        "type": "urn:photos:resources:album",
        "uris": ["/albums/1"],
        "scopes": [{"name": "view"}, {"name": "print"}],
        "ownerManagedAccess": True,
        "attributes": {"year": ["2026"]},
        "owner": "alice",
    }
    created = as_server.resource_set_create(album)
    rs_id = created["_id"]
    assert created["owner"]["name"] == "alice"
    assert created["resource_scopes"] == [{"name": "view"}, {"name": "print"}]
    notes = as_server.resource_set_create({"name": "Notes", "resource_scopes": ["read"]})
    assert as_server.resource_set_read(rs_id) == created
    assert as_alice.resource_set_read(rs_id) == created  # alice's set, her PAT sees it

    assert as_server.resource_set_update(rs_id, {**album, "name": "Album 2026"}) == {}
    assert as_server.resource_set_read(rs_id)["name"] == "Album 2026"

    everything = [rs_id, notes["_id"]]
    assert as_server.resource_set_list_ids() == everything
    assert as_alice.resource_set_list_ids() == [rs_id]
    assert as_server.resource_set_list_ids(name="album") == [rs_id]
    assert as_server.resource_set_list_ids(name="Notes", exact_name=True) == [notes["_id"]]
    assert as_server.resource_set_list_ids(name="notes", exact_name=True) == []
    assert as_server.resource_set_list_ids(uri="/albums/1", matchingUri=True) == [rs_id]
    assert as_server.resource_set_list_ids(owner="alice") == [rs_id]
    assert as_server.resource_set_list_ids(owner=rs["client_id"]) == [notes["_id"]]
    assert as_server.resource_set_list_ids(resource_type="urn:photos:resources:album") == [rs_id]
    assert as_server.resource_set_list_ids(scope="read") == [notes["_id"]]
    assert as_server.resource_set_list_ids(first=1) == [notes["_id"]]
    assert as_server.resource_set_list_ids(maximum=1) == [rs_id]
    assert as_server.resource_set_list_ids(maximum=0) == []
    assert [found["_id"] for found in as_server.resource_set_list()] == everything

    assert as_server.resource_set_delete(rs_id) == {}
    assert as_server.resource_set_list_ids() == [notes["_id"]]
    assert as_alice.resource_set_list_ids() == []
