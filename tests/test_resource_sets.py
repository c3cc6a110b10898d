"""The resource set registration API: every status of docs/design.md and every error, as tables."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask.testing import FlaskClient

from .conftest import Party, Store, make_client, make_party

COLLECTION = "/rs/resource_set"
PHOTO = {
    "name": "Photo album",
    "scopes": ["view", "print"],
    "type": "https://example.com/rsets/photo",
}


def create(http: FlaskClient, party: Party, body: Any = None) -> str:
    response = http.post(COLLECTION, json=PHOTO if body is None else body, headers=party.auth)
    assert response.status_code == 201, response.json
    rs_id: str = response.json["_id"]
    return rs_id


def assert_error(response: Any, status: int, error: str) -> dict[str, Any]:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    assert response.headers["Cache-Control"] == "no-store"
    body: dict[str, Any] = response.json
    assert body["error"] == error
    assert isinstance(body["error_description"], str) and body["error_description"]
    return body


# -- the five operations ---------------------------------------------------------------------


def test_create_answers_201_with_location_id_and_policy_uri(http: FlaskClient, rs: Party) -> None:
    response = http.post(COLLECTION, json=PHOTO, headers=rs.auth)
    assert response.status_code == 201
    body = response.json
    assert set(body) == {"_id", "user_access_policy_uri"}
    assert response.headers["Location"] == f"http://uma.test/rs/resource_set/{body['_id']}"
    assert body["user_access_policy_uri"] == f"http://uma.test/policy/resource_set/{body['_id']}"
    assert len(body["_id"]) >= 20  # opaque and random, never a counter


def test_ids_are_random_not_counters(http: FlaskClient, rs: Party) -> None:
    ids = {create(http, rs) for _ in range(5)}
    assert len(ids) == 5
    assert not any(rs_id.isdigit() for rs_id in ids)


def test_read_returns_description_id_policy_uri_and_extensions(
    http: FlaskClient, rs: Party
) -> None:
    body = {
        **PHOTO,
        "icon_uri": "https://example.com/i.png",
        "uri": "https://rs.example/a",
        "x-colour": {"deep": [1, 2]},
    }
    rs_id = create(http, rs, body)
    response = http.get(f"{COLLECTION}/{rs_id}", headers=rs.auth)
    assert response.status_code == 200
    assert response.json == {
        **body,
        "resource_scopes": body["scopes"],  # UMA 2.0's name of the same list
        "_id": rs_id,
        "user_access_policy_uri": f"http://uma.test/policy/resource_set/{rs_id}",
    }


def test_update_replaces_the_whole_description(http: FlaskClient, rs: Party) -> None:
    rs_id = create(http, rs, {**PHOTO, "x-old": True})
    response = http.put(
        f"{COLLECTION}/{rs_id}", json={"name": "Renamed", "scopes": ["view"]}, headers=rs.auth
    )
    assert response.status_code == 200
    assert response.json == {"_id": rs_id}
    read = http.get(f"{COLLECTION}/{rs_id}", headers=rs.auth).json
    assert read["name"] == "Renamed" and read["scopes"] == ["view"]
    assert "x-old" not in read and "type" not in read


def test_delete_answers_204_without_body_then_the_set_is_gone(http: FlaskClient, rs: Party) -> None:
    rs_id = create(http, rs)
    response = http.delete(f"{COLLECTION}/{rs_id}", headers=rs.auth)
    assert response.status_code == 204
    assert response.get_data() == b""
    assert "Content-Type" not in response.headers
    assert_error(http.get(f"{COLLECTION}/{rs_id}", headers=rs.auth), 404, "not_found")
    assert_error(http.delete(f"{COLLECTION}/{rs_id}", headers=rs.auth), 404, "not_found")
    assert http.get(COLLECTION, headers=rs.auth).json == []


def test_list_is_empty_array_then_ids_in_order(http: FlaskClient, rs: Party) -> None:
    response = http.get(COLLECTION, headers=rs.auth)
    assert response.status_code == 200
    assert response.json == []
    ids = [create(http, rs) for _ in range(3)]
    assert sorted(http.get(COLLECTION, headers=rs.auth).json) == sorted(ids)


def test_server_assigned_properties_in_a_body_are_ignored(http: FlaskClient, rs: Party) -> None:
    rs_id = create(http, rs, {**PHOTO, "_id": "mine", "user_access_policy_uri": "https://evil"})
    assert rs_id != "mine"
    read = http.get(f"{COLLECTION}/{rs_id}", headers=rs.auth).json
    assert read["_id"] == rs_id
    assert read["user_access_policy_uri"].startswith("http://uma.test/")


# -- statuses of the errors ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/rs/resource_set/unknown"),
        ("PUT", "/rs/resource_set/unknown"),
        ("DELETE", "/rs/resource_set/unknown"),
    ],
)
def test_unknown_id_is_not_found(http: FlaskClient, rs: Party, method: str, path: str) -> None:
    response = http.open(path, method=method, json=PHOTO, headers=rs.auth)
    assert_error(response, 404, "not_found")


@pytest.mark.parametrize(
    ("method", "on_item", "allow"),
    [
        ("PUT", False, "GET, POST"),
        ("DELETE", False, "GET, POST"),
        ("PATCH", False, "GET, POST"),
        ("HEAD", False, "GET, POST"),
        ("OPTIONS", False, "GET, POST"),
        ("TRACE", False, "GET, POST"),
        ("POST", True, "GET, PUT, DELETE"),
        ("PATCH", True, "GET, PUT, DELETE"),
        ("HEAD", True, "GET, PUT, DELETE"),
        ("OPTIONS", True, "GET, PUT, DELETE"),
        ("TRACE", True, "GET, PUT, DELETE"),
    ],
)
def test_other_methods_are_unsupported_with_allow(
    http: FlaskClient, rs: Party, method: str, on_item: bool, allow: str
) -> None:
    path = f"{COLLECTION}/{create(http, rs)}" if on_item else COLLECTION
    response = http.open(path, method=method, headers=rs.auth)
    assert response.status_code == 405
    assert response.headers["Allow"] == allow
    if method != "HEAD":  # a HEAD answer has no body by definition
        assert_error(response, 405, "unsupported_method_type")


def test_extension_method_is_refused_in_json_with_allow(http: FlaskClient, rs: Party) -> None:
    response = http.open(COLLECTION, method="PROPFIND", headers=rs.auth)
    assert_error(response, 405, "unsupported_method_type")
    assert "GET" in response.headers["Allow"]


@pytest.mark.parametrize(
    ("body", "content_type", "field"),
    [
        ("{not json", "application/json", "not valid JSON"),
        (json.dumps(PHOTO), "text/plain", "Content-Type: application/json"),
        ("", "application/json", "not valid JSON"),
        ("[1, 2]", "application/json", "JSON object"),
        ('"name"', "application/json", "JSON object"),
        ("null", "application/json", "JSON object"),
        ('{"name": "a", "name": "b", "scopes": ["v"]}', "application/json", "'name'"),
        (
            '{"name": "a", "scopes": ["v"], "x": {"k": 1, "k": 2}}',
            "application/json",
            "'k' appears",
        ),
        ('{"name": "a", "scopes": ["v"], "x": NaN}', "application/json", "NaN"),
        ('{"name": "a", "scopes": ["v"], "x": Infinity}', "application/json", "Infinity"),
        ('{"name": "a", "scopes": ["v"], "x": -Infinity}', "application/json", "-Infinity"),
        ('{"name": "a", "scopes": ["v"], "x": 1e999}', "application/json", "'1e999'"),
        (json.dumps({"scopes": ["view"]}), "application/json", "name:"),
        (json.dumps({"name": "Photo"}), "application/json", "scopes:"),
        (json.dumps({"name": 5, "scopes": ["v"]}), "application/json", "name:"),
        (json.dumps({"name": None, "scopes": ["v"]}), "application/json", "name:"),
        (json.dumps({"name": "", "scopes": ["v"]}), "application/json", "name:"),
        (json.dumps({"name": "   ", "scopes": ["v"]}), "application/json", "name:"),
        (json.dumps({"name": "a", "scopes": "view"}), "application/json", "scopes:"),
        (json.dumps({"name": "a", "scopes": []}), "application/json", "scopes:"),
        (json.dumps({"name": "a", "scopes": ["view", 3]}), "application/json", "scopes[1]:"),
        (json.dumps({"name": "a", "scopes": ["view", ""]}), "application/json", "scopes[1]:"),
        (json.dumps({**PHOTO, "icon_uri": "/icon.png"}), "application/json", "icon_uri:"),
        (json.dumps({**PHOTO, "icon_uri": "javascript:alert(1)"}), "application/json", "icon_uri:"),
        (json.dumps({**PHOTO, "icon_uri": "ftp://x.example/i"}), "application/json", "icon_uri:"),
        (json.dumps({**PHOTO, "icon_uri": 7}), "application/json", "icon_uri:"),
        (json.dumps({**PHOTO, "icon_uri": ""}), "application/json", "icon_uri:"),
        (json.dumps({**PHOTO, "type": 1}), "application/json", "type:"),
        (json.dumps({**PHOTO, "type": ""}), "application/json", "type:"),
        (json.dumps({**PHOTO, "uri": "http://[x"}), "application/json", "uri:"),
        (json.dumps({**PHOTO, "icon_uri": "https://[::1"}), "application/json", "icon_uri:"),
        (json.dumps({**PHOTO, "uri": "not a uri"}), "application/json", "uri:"),
        # A lone UTF-16 surrogate is not text: refused, naming where (json.dumps writes it so).
        (json.dumps({**PHOTO, "name": "a\ud800"}), "application/json", "name: a lone"),
        (json.dumps({**PHOTO, "type": "\udfffx"}), "application/json", "type: a lone"),
        (json.dumps({**PHOTO, "scopes": ["v", "\ud800"]}), "application/json", "scopes[1]: a"),
        (json.dumps({**PHOTO, "x-a": {"\ud800": 1}}), "application/json", "name in x-a"),
        (json.dumps({**PHOTO, "name": "a\ud800"}), None, "name: a lone"),
    ],
)
@pytest.mark.parametrize("operation", ["create", "update"])
def test_malformed_bodies_are_invalid_requests_naming_the_field(
    http: FlaskClient, rs: Party, body: str, content_type: str | None, field: str, operation: str
) -> None:
    if operation == "create":
        response = http.post(COLLECTION, data=body, content_type=content_type, headers=rs.auth)
    else:
        rs_id = create(http, rs)
        response = http.put(
            f"{COLLECTION}/{rs_id}", data=body, content_type=content_type, headers=rs.auth
        )
        # Bad input loses nothing: the registered description is unchanged.
        assert http.get(f"{COLLECTION}/{rs_id}", headers=rs.auth).json["name"] == PHOTO["name"]
    error = assert_error(response, 400, "invalid_request")
    assert field in error["error_description"]
    if operation == "create":
        assert http.get(COLLECTION, headers=rs.auth).json == []


def test_body_over_the_cap_is_413_in_json(http: FlaskClient, rs: Party) -> None:
    big = json.dumps({**PHOTO, "x-pad": "a" * (1024 * 1024)})
    response = http.post(COLLECTION, data=big, content_type="application/json", headers=rs.auth)
    assert_error(response, 413, "invalid_request")


def test_checks_run_in_order_authentication_method_existence_body(
    http: FlaskClient, rs: Party
) -> None:
    # authentication before method
    assert_error(http.patch(f"{COLLECTION}/unknown"), 401, "invalid_token")
    # method before existence
    assert_error(
        http.patch(f"{COLLECTION}/unknown", headers=rs.auth), 405, "unsupported_method_type"
    )
    # existence before body
    response = http.put(
        f"{COLLECTION}/unknown", data="{bad", headers=rs.auth, content_type="application/json"
    )
    assert_error(response, 404, "not_found")


# -- owner and resource-server isolation -----------------------------------------------------


@pytest.mark.parametrize(
    "who", ["other owner, same RS", "other owner, own RS", "same owner, other RS"]
)
def test_others_cannot_see_or_touch_a_set(
    http: FlaskClient, store: Store, rs: Party, who: str
) -> None:
    rs_id = create(http, rs)
    if who == "other owner, same RS":
        other = make_party(store, "bob", "uma_protection", client_id=rs.client_id)
    elif who == "other owner, own RS":
        other = make_party(store, "bob", "uma_protection")
    else:
        other = make_party(store, "alice", "uma_protection")
    unknown = http.get(f"{COLLECTION}/never-registered", headers=other.auth)
    for response in (
        http.get(f"{COLLECTION}/{rs_id}", headers=other.auth),
        http.put(f"{COLLECTION}/{rs_id}", json={"name": "x", "scopes": ["y"]}, headers=other.auth),
        http.delete(f"{COLLECTION}/{rs_id}", headers=other.auth),
    ):
        # Exactly the answer for an id that was never registered: nothing tells it exists.
        assert response.status_code == 404
        assert response.json == unknown.json
    assert http.get(COLLECTION, headers=other.auth).json == []
    # ... and alice's set is untouched.
    assert http.get(f"{COLLECTION}/{rs_id}", headers=rs.auth).json["name"] == PHOTO["name"]


def test_client_credentials_token_owns_its_own_sets(
    http: FlaskClient, store: Store, rs: Party
) -> None:
    client_id, secret = make_client(store, "rs2")
    token = http.post(
        "/token",
        data={"grant_type": "client_credentials", "scope": "uma_protection"},
        auth=(client_id, secret),
    ).json["access_token"]
    own = {"Authorization": f"Bearer {token}"}
    rs_id = create(http, Party(client_id, secret, "", token))
    assert http.get(COLLECTION, headers=own).json == [rs_id]
    assert http.get(COLLECTION, headers=rs.auth).json == []
