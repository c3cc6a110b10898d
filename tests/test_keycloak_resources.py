"""Keycloak's resource registration on the realm face (`[keycloak] realm`), with the bodies and
query strings python-keycloak 7.1.1's `KeycloakUMA.resource_set_*` send (JSON text with
`Content-Type: application/json` on every request; the list's parameters as
`resource_set_list_ids` builds them), over the same store as the standard `/rs/resource_set`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from umaserver import create_app
from umaserver.config import load_config

from .conftest import (
    FakeClock,
    Party,
    Store,
    make_client_party,
    make_party,
    revoke_token,
    stored_user,
    write_config,
)
from .test_authorize import World

REALM = "demo"
COLLECTION = f"/realms/{REALM}/authz/protection/resource_set"
STANDARD = "/rs/resource_set"
ALBUM = {
    "name": "Holiday album",
    "displayName": "Holiday album (2026)",
    "type": "urn:photos:resources:album",
    "uris": ["/albums/1", "/albums/1/*"],
    "resource_scopes": ["view", {"name": "print", "iconUri": "https://x.test/print.png"}],
    "icon_uri": "https://photos.test/album.png",
    "ownerManagedAccess": True,
    "attributes": {"year": ["2026"], "tags": ["beach", "family"]},
}


def realm_config(tmp_path: Path, rules_text: str) -> Path:
    """The tests' config, with the realm face for REALM."""
    (tmp_path / "policies.toml").write_text(rules_text, encoding="utf-8")
    return write_config(tmp_path, extra=f'\n[keycloak]\nrealm = "{REALM}"\n')


@pytest.fixture
def config_path(tmp_path: Path, rules_text: str) -> Path:
    return realm_config(tmp_path, rules_text)


@pytest.fixture
def server(store: Store, rs: Party) -> Party:
    """alice's resource server acting for itself: Keycloak's resource server (alice has given it
    a PAT)."""
    return make_client_party(store, rs.client_id, "uma_protection")


def send(
    http: FlaskClient, method: str, path: str, party: Party, body: Any = None, **query: Any
) -> Any:
    """A request as python-keycloak's connection makes one."""
    headers = {**party.auth, "Content-Type": "application/json"}
    data = None if body is None else json.dumps(body)
    return http.open(path, method=method, headers=headers, data=data, query_string=query)


def create(http: FlaskClient, party: Party, body: Any = None) -> dict[str, Any]:
    response = send(http, "POST", COLLECTION, party, ALBUM if body is None else body)
    assert response.status_code == 201, response.get_data(as_text=True)
    created: dict[str, Any] = response.json
    return created


def assert_error(response: Any, status: int, error: str, says: str = "") -> None:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    assert response.json["error"] == error
    assert says in response.json["error_description"]


# -- the realm's paths exist only for the configured realm ---------------------------------------


def test_without_a_realm_the_paths_do_not_exist(tmp_path: Path, store: Store, rs: Party) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "policies.toml").write_text("", encoding="utf-8")
    plain = create_app(load_config(write_config(tmp_path / "plain")), clock=FakeClock())
    assert_error(send(plain.test_client(), "GET", COLLECTION, rs), 404, "not_found")


def test_another_realm_answers_404(http: FlaskClient, rs: Party) -> None:
    other = "/realms/other/authz/protection/resource_set"
    assert_error(send(http, "GET", other, rs), 404, "not_found")
    assert_error(send(http, "POST", other, rs, ALBUM), 404, "not_found")


def test_a_pat_is_needed(http: FlaskClient, rs: Party) -> None:
    response = http.get(COLLECTION)
    assert_error(response, 401, "invalid_token")
    aat = Party(rs.client_id, "", "alice", "nonsense")
    assert_error(send(http, "GET", COLLECTION, aat), 401, "invalid_token")


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [("PATCH", COLLECTION, "GET, POST"), ("POST", f"{COLLECTION}/x", "GET, PUT, DELETE")],
)
def test_other_methods_answer_405(
    http: FlaskClient, rs: Party, method: str, path: str, allow: str
) -> None:
    response = send(http, method, path, rs, {})
    assert_error(response, 405, "unsupported_method_type")
    assert response.headers["Allow"] == allow


# -- Keycloak's representation ----------------------------------------------------------------------


def test_create_answers_201_with_keycloaks_representation(http: FlaskClient, rs: Party) -> None:
    response = send(http, "POST", COLLECTION, rs, ALBUM)
    assert response.status_code == 201
    body = response.json
    rs_id = body.pop("_id")
    assert response.headers["Location"] == f"http://uma.test{COLLECTION}/{rs_id}"
    scopes = [{"name": "view"}, {"name": "print"}]
    assert body == {
        "name": "Holiday album",
        "displayName": "Holiday album (2026)",
        "type": "urn:photos:resources:album",
        "icon_uri": "https://photos.test/album.png",
        "owner": {"id": body["owner"]["id"], "name": "alice"},
        "ownerManagedAccess": True,
        "uris": ["/albums/1", "/albums/1/*"],
        "resource_scopes": scopes,
        "scopes": scopes,
        "attributes": {"year": ["2026"], "tags": ["beach", "family"]},
    }
    read = send(http, "GET", f"{COLLECTION}/{rs_id}", rs)
    assert read.status_code == 200
    assert read.json == {"_id": rs_id, **body}


def test_a_set_of_the_realm_face_is_read_on_the_standard_face(http: FlaskClient, rs: Party) -> None:
    rs_id = create(http, rs)["_id"]
    read = http.get(f"{STANDARD}/{rs_id}", headers=rs.auth)
    assert read.status_code == 200
    body = read.json
    assert body["scopes"] == body["resource_scopes"] == ["view", "print"]
    assert body["uris"] == ALBUM["uris"] and body["attributes"] == ALBUM["attributes"]
    assert body["ownerManagedAccess"] is True and body["name"] == "Holiday album"
    assert http.get(STANDARD, headers=rs.auth).json == [rs_id]


def test_a_set_of_the_standard_face_is_read_on_the_realm_face(http: FlaskClient, rs: Party) -> None:
    standard = {
        "name": "Notes",
        "scopes": ["read", "write"],
        "type": "https://example.com/rsets/notes",
        "uri": "https://notes.test/n/1",
        "x-extension": {"kept": True},
    }
    rs_id = http.post(STANDARD, json=standard, headers=rs.auth).json["_id"]
    read = send(http, "GET", f"{COLLECTION}/{rs_id}", rs)
    assert read.status_code == 200
    scopes = [{"name": "read"}, {"name": "write"}]
    assert read.json == {
        "_id": rs_id,
        "name": "Notes",
        "type": "https://example.com/rsets/notes",
        "owner": read.json["owner"],
        "ownerManagedAccess": False,
        "uris": ["https://notes.test/n/1"],
        "resource_scopes": scopes,
        "scopes": scopes,
        "attributes": {},
    }
    assert read.json["owner"]["name"] == "alice"
    assert send(http, "GET", COLLECTION, rs).json == [rs_id]


@pytest.mark.parametrize(
    "scopes",
    [
        {"scopes": ["view", "print"]},
        {"scopes": [{"name": "view"}, {"name": "print", "id": "kc-id"}]},
        {"resource_scopes": ["view", "print", "view"]},
        {"scopes": ["view", "print"], "resource_scopes": [{"name": "view"}, "print"]},
    ],
    ids=["scopes", "scope objects", "resource_scopes once each", "both, the same"],
)
def test_scopes_as_names_or_objects_under_either_name(
    http: FlaskClient, rs: Party, scopes: dict[str, Any]
) -> None:
    created = create(http, rs, {"name": "Album", **scopes})
    assert created["resource_scopes"] == [{"name": "view"}, {"name": "print"}]


@pytest.mark.parametrize(
    ("extension", "uris"),
    [({"uris": "/one"}, ["/one"]), ({"uris": {"a": "/one"}}, []), ({"uris": ["/a", 1]}, ["/a"])],
)
def test_a_standard_sets_odd_uris_read_as_a_list_of_strings(
    http: FlaskClient, rs: Party, extension: dict[str, Any], uris: list[str]
) -> None:
    body = {"name": "Odd", "scopes": ["view"], **extension}
    rs_id = http.post(STANDARD, json=body, headers=rs.auth).json["_id"]
    assert send(http, "GET", f"{COLLECTION}/{rs_id}", rs).json["uris"] == uris


def test_a_set_without_scopes_or_uris(http: FlaskClient, rs: Party) -> None:
    created = create(http, rs, {"name": "Bare"})
    assert created["resource_scopes"] == created["uris"] == []
    assert created["attributes"] == {} and created["ownerManagedAccess"] is False


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"type": "t"}, "name"),
        ({"name": "  "}, "name"),
        ({"name": "A", "resource_scopes": [{"id": "x"}]}, "resource_scopes[0]"),
        ({"name": "A", "scopes": [7]}, "scopes[0]"),
        ({"name": "A", "scopes": ["a"], "resource_scopes": ["b"]}, "differ"),
        ({"name": "A", "uris": "/one"}, "uris"),
        ({"name": "A", "attributes": {"year": "2026"}}, "attributes"),
        ({"name": "A", "ownerManagedAccess": "perhaps"}, "ownerManagedAccess"),
        ({"name": "A", "owner": 5}, "owner"),
        ([ALBUM], ""),
    ],
)
def test_bad_representations_are_400(http: FlaskClient, rs: Party, body: Any, says: str) -> None:
    assert_error(send(http, "POST", COLLECTION, rs, body), 400, "invalid_request", says)
    assert send(http, "GET", COLLECTION, rs).json == []


def test_update_answers_204_and_replaces_the_representation(http: FlaskClient, rs: Party) -> None:
    rs_id = create(http, rs)["_id"]
    changed = {**ALBUM, "_id": rs_id, "name": "Renamed", "resource_scopes": [{"name": "view"}]}
    response = send(http, "PUT", f"{COLLECTION}/{rs_id}", rs, changed)
    assert response.status_code == 204
    assert response.get_data() == b"" and "Content-Type" not in response.headers
    read = send(http, "GET", f"{COLLECTION}/{rs_id}", rs).json
    assert read["name"] == "Renamed" and read["scopes"] == [{"name": "view"}]
    # What a read answers may be sent back as it is (its owner object, its scope objects).
    assert send(http, "PUT", f"{COLLECTION}/{rs_id}", rs, read).status_code == 204
    assert send(http, "GET", f"{COLLECTION}/{rs_id}", rs).json == read
    # The standard face keeps the standard answer.
    again = http.put(f"{STANDARD}/{rs_id}", json={"name": "Std", "scopes": ["a"]}, headers=rs.auth)
    assert again.status_code == 200 and again.json == {"_id": rs_id}


def test_delete_answers_204_then_404(http: FlaskClient, rs: Party) -> None:
    rs_id = create(http, rs)["_id"]
    response = send(http, "DELETE", f"{COLLECTION}/{rs_id}", rs)
    assert response.status_code == 204 and response.get_data() == b""
    assert_error(send(http, "GET", f"{COLLECTION}/{rs_id}", rs), 404, "not_found")
    assert_error(send(http, "DELETE", f"{COLLECTION}/{rs_id}", rs), 404, "not_found")
    assert_error(send(http, "PUT", f"{COLLECTION}/{rs_id}", rs, ALBUM), 404, "not_found")


def test_another_resource_server_or_owner_sees_nothing(
    http: FlaskClient, store: Store, rs: Party, server: Party
) -> None:
    rs_id = create(http, rs)["_id"]
    others = [
        make_party(store, "bob", "uma_protection", client_id=rs.client_id),
        make_party(store, "alice", "uma_protection"),  # alice at another resource server
    ]
    others.append(make_client_party(store, others[1].client_id, "uma_protection"))
    for other in others:
        assert_error(send(http, "GET", f"{COLLECTION}/{rs_id}", other), 404, "not_found")
        assert_error(send(http, "DELETE", f"{COLLECTION}/{rs_id}", other), 404, "not_found")
        assert send(http, "GET", COLLECTION, other).json == []
    assert send(http, "GET", f"{COLLECTION}/{rs_id}", server).status_code == 200


# -- Keycloak's owner: a resource server registering for a user ---------------------------------


@pytest.mark.parametrize("owner", ["alice", {"name": "alice"}, {"id": "alice"}, {"id": "sub"}])
def test_the_resource_server_registers_for_a_user_who_gave_it_a_pat(
    http: FlaskClient, store: Store, rs: Party, server: Party, owner: Any
) -> None:
    alice = stored_user(store, "alice")
    assert alice is not None
    if owner == {"id": "sub"}:
        owner = {"id": alice.sub}  # Keycloak's owner id: the user's
    created = create(http, server, {**ALBUM, "owner": owner})
    assert created["owner"] == {"id": alice.sub, "name": "alice"}
    rs_id = created["_id"]
    # The set is alice's: her PAT sees it on both faces, and her rules will decide about it.
    assert http.get(STANDARD, headers=rs.auth).json == [rs_id]
    assert send(http, "GET", f"{COLLECTION}/{rs_id}", rs).json == created
    # ...and the resource server, acting for itself, manages what it registered.
    assert send(http, "GET", COLLECTION, server).json == [rs_id]
    assert send(http, "GET", COLLECTION, server, owner="alice").json == [rs_id]
    assert send(http, "GET", COLLECTION, server, owner=server.client_id).json == []
    assert send(http, "GET", f"{COLLECTION}/{rs_id}", server).json == created
    update = {**ALBUM, "name": "By the server", "owner": "nobody"}  # an update keeps the owner
    assert send(http, "PUT", f"{COLLECTION}/{rs_id}", server, update).status_code == 204
    assert http.get(f"{STANDARD}/{rs_id}", headers=rs.auth).json["name"] == "By the server"
    assert send(http, "DELETE", f"{COLLECTION}/{rs_id}", server).status_code == 204
    assert http.get(STANDARD, headers=rs.auth).json == []


def test_a_revoked_pat_is_consent_taken_back(
    http: FlaskClient, store: Store, rs: Party, server: Party
) -> None:
    assert revoke_token(store, rs.token)
    response = send(http, "POST", COLLECTION, server, {**ALBUM, "owner": "alice"})
    assert_error(response, 400, "invalid_request", "owner")


def test_a_standing_consent_is_enough(http: FlaskClient, store: Store) -> None:
    # alice allows the web client uma_protection at /authorize and never exchanges the code.
    world = World(http, store)
    world.sign_in()
    assert world.decide(world.url()).status_code == 302
    server = make_client_party(store, world.app[0], "uma_protection")
    assert create(http, server, {**ALBUM, "owner": "alice"})["owner"]["name"] == "alice"
    other = make_client_party(
        store, make_party(store, "x", "uma_protection").client_id, "uma_protection"
    )
    response = send(http, "POST", COLLECTION, other, {**ALBUM, "owner": "alice"})
    assert_error(response, 400, "invalid_request", "owner")


def test_the_resource_servers_own_sets_are_its_own(
    http: FlaskClient, rs: Party, server: Party
) -> None:
    created = create(http, server)
    assert created["owner"] == {"id": server.client_id, "name": server.client_id}
    assert create(http, server, {**ALBUM, "owner": server.client_id})["owner"] == created["owner"]
    assert http.get(STANDARD, headers=rs.auth).json == []
    mine = send(http, "GET", COLLECTION, server, owner=server.client_id).json
    assert mine[0] == created["_id"] and len(mine) == 2


@pytest.mark.parametrize("owner", ["bob", "nobody-at-all", "client:someone"])
def test_no_owner_who_has_not_given_the_resource_server_a_pat(
    http: FlaskClient, store: Store, server: Party, owner: str
) -> None:
    make_party(store, "bob", "uma_protection")  # bob's PAT is for another resource server
    make_party(store, "bob", "uma_authorization", client_id=server.client_id)  # an AAT
    response = send(http, "POST", COLLECTION, server, {**ALBUM, "owner": owner})
    assert_error(response, 400, "invalid_request", "owner")
    assert "PAT" in response.json["error_description"]
    assert send(http, "GET", COLLECTION, server).json == []


def test_a_persons_pat_registers_for_that_person_alone(
    http: FlaskClient, store: Store, rs: Party
) -> None:
    make_party(store, "bob", "uma_protection", client_id=rs.client_id)
    response = send(http, "POST", COLLECTION, rs, {**ALBUM, "owner": "bob"})
    assert_error(response, 400, "invalid_request", "owner")
    assert create(http, rs, {**ALBUM, "owner": "alice"})["owner"]["name"] == "alice"
