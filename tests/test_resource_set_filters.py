"""The list of resource sets with Keycloak's filters and page: on the realm face as
python-keycloak 7.1.1's `resource_set_list_ids` asks (name, exactName=true, uri, owner, type,
scope, matchingUri=true, first, max), and on the standard face as an extension."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from .conftest import FakeClock, Party, Store, make_party
from .test_keycloak_resources import (
    COLLECTION,
    STANDARD,
    assert_error,
    create,
    realm_config,
    send,
)

SETS = {
    "holiday": {
        "name": "Holiday album",
        "type": "album",
        "uris": ["/albums/1"],
        "resource_scopes": ["view", "print"],
    },
    "notes": {"name": "holiday notes", "type": "note", "uris": ["/notes/1"], "scopes": ["read"]},
    "work": {
        "name": "Work album",
        "type": "album",
        "uris": ["/albums/2", "/albums/*"],
        "scopes": [{"name": "view"}],
    },
    "album": {"name": "Album", "type": "album", "resource_scopes": [{"name": "print"}]},
}


@pytest.fixture
def config_path(tmp_path: Path, rules_text: str) -> Path:
    return realm_config(tmp_path, rules_text)


@pytest.fixture
def made(http: FlaskClient, store: Store, rs: Party, clock: FakeClock) -> dict[str, str]:
    """SETS, alice's at her resource server, the first two in one second; and sets like them of
    bob's at the same server and of alice's at another, which her lists never hold."""
    bob = make_party(store, "bob", "uma_protection", client_id=rs.client_id)
    elsewhere = make_party(store, "alice", "uma_protection")
    ids = {}
    for n, (key, body) in enumerate(SETS.items()):
        if n > 1:
            clock.advance(1)
        ids[key] = create(http, rs, body)["_id"]
        create(http, bob, body)
        create(http, elsewhere, body)
    return ids


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, ["holiday", "notes", "work", "album"]),
        ({"name": "album"}, ["holiday", "work", "album"]),
        ({"name": "HOLIDAY"}, ["holiday", "notes"]),
        ({"name": "Album", "exactName": "true"}, ["album"]),
        ({"name": "album", "exactName": "true"}, []),
        ({"uri": "/albums/1"}, ["holiday"]),
        ({"uri": "/albums/*"}, ["work"]),
        # matchingUri is accepted and treated as false: a URI is matched as it is written.
        ({"uri": "/albums/2/photo", "matchingUri": "true"}, []),
        ({"owner": "alice"}, ["holiday", "notes", "work", "album"]),
        ({"owner": "bob"}, []),
        ({"owner": "nobody"}, []),
        ({"type": "album"}, ["holiday", "work", "album"]),
        ({"scope": "print"}, ["holiday", "album"]),
        ({"scope": "view", "type": "album", "name": "album"}, ["holiday", "work"]),
        ({"name": "o", "uri": "/notes/1", "scope": "read", "owner": "alice"}, ["notes"]),
        ({"first": 1}, ["notes", "work", "album"]),
        ({"max": 2}, ["holiday", "notes"]),
        ({"first": 1, "max": 2}, ["notes", "work"]),
        ({"max": 0}, []),
        ({"first": 4}, []),
        ({"name": "album", "first": 1, "max": 1}, ["work"]),
        # An empty value is no filter (Keycloak's reading).
        ({"name": "", "type": ""}, ["holiday", "notes", "work", "album"]),
    ],
)
@pytest.mark.parametrize("face", ["realm", "standard"])
def test_each_filter_alone_and_combined(
    http: FlaskClient,
    rs: Party,
    made: dict[str, str],
    face: str,
    query: dict[str, Any],
    expected: list[str],
) -> None:
    path = COLLECTION if face == "realm" else STANDARD
    response = send(http, "GET", path, rs, **query)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.json == [made[key] for key in expected]


def test_deep_lists_representations(http: FlaskClient, rs: Party, made: dict[str, str]) -> None:
    deep = send(http, "GET", COLLECTION, rs, deep="true", type="album", first=1)
    assert deep.status_code == 200
    assert deep.json == [
        send(http, "GET", f"{COLLECTION}/{made[key]}", rs).json for key in ("work", "album")
    ]
    assert deep.json[0]["scopes"] == [{"name": "view"}]
    # The standard face answers ids whatever it is asked.
    assert send(http, "GET", STANDARD, rs, deep="true", max=1).json == [made["holiday"]]


@pytest.mark.parametrize(
    "query",
    [
        {"first": "-1"},
        {"max": "abc"},
        {"max": "-1"},
        {"first": "1.5"},
        {"first": " 1"},
        {"max": "2147483648"},
        {"max": "9" * 5000},
        {"exactName": "yes"},
        {"deep": "1"},
        {"matchingUri": "maybe"},
        [("name", "a"), ("name", "b")],
        [("max", "1"), ("max", "2")],
    ],
)
@pytest.mark.parametrize("face", ["realm", "standard"])
def test_bad_values_are_400(http: FlaskClient, rs: Party, face: str, query: Any) -> None:
    path = COLLECTION if face == "realm" else STANDARD
    response = http.get(path, headers=rs.auth, query_string=query)
    assert_error(response, 400, "invalid_request", "parameter")


def test_paging_through_a_thousand_sets_holds_each_once(
    http: FlaskClient, rs: Party, clock: FakeClock
) -> None:
    made = []
    for n in range(1000):
        if n % 7 == 0:  # several in each second: ties come in the order of registration
            clock.advance(1)
        made.append(create(http, rs, {"name": f"Set {n}", "scopes": ["view"]})["_id"])
    for path in (COLLECTION, STANDARD):
        seen = []
        for first in range(0, 1100, 100):
            page = send(http, "GET", path, rs, first=first, max=100).json
            assert len(page) == (100 if first < 1000 else 0)
            seen += page
        assert seen == made
    assert send(http, "GET", STANDARD, rs).json == made
    assert send(http, "GET", COLLECTION, rs, name="set 99", first=1).json == made[990:1000]
