"""UMA 2.0's resource registration and permission endpoint (Federated Authorization for UMA 2.0,
sections 3 and 4) on the 1.0 collection and `/permission`: both generations share every set, and a
ticket may ask for several (set, scopes) pairs."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from .conftest import Party, Store, make_party, stored_ticket
from .test_resource_sets import COLLECTION, PHOTO, assert_error, create


def ticket_for(http: FlaskClient, rs: Party, body: Any) -> str:
    response = http.post("/permission", json=body, headers=rs.auth)
    assert response.status_code == 201, response.json
    assert set(response.json) == {"ticket"}
    ticket: str = response.json["ticket"]
    return ticket


# -- registration ------------------------------------------------------------------------------


def test_a_2_0_description_needs_no_name_and_reads_back_with_both_scope_names(
    http: FlaskClient, rs: Party
) -> None:
    body = {
        "resource_scopes": ["view", "print"],
        "description": "Summer photos",
        "type": "https://example.com/rsets/photo",
        "icon_uri": "https://example.com/i.png",
    }
    rs_id = create(http, rs, body)
    read = http.get(f"{COLLECTION}/{rs_id}", headers=rs.auth).json
    assert read["resource_scopes"] == read["scopes"] == ["view", "print"]
    assert read["description"] == "Summer photos"
    assert "name" not in read
    assert rs_id in http.get(COLLECTION, headers=rs.auth).json


def test_a_1_0_set_reads_under_both_names_and_a_2_0_update_replaces_it(
    http: FlaskClient, rs: Party
) -> None:
    rs_id = create(http, rs)
    assert http.get(f"{COLLECTION}/{rs_id}", headers=rs.auth).json["resource_scopes"] == [
        "view",
        "print",
    ]
    updated = http.put(
        f"{COLLECTION}/{rs_id}",
        json={"name": "Photos", "resource_scopes": ["view"], "scopes": ["view"]},
        headers=rs.auth,
    )
    assert updated.status_code == 200
    read = http.get(f"{COLLECTION}/{rs_id}", headers=rs.auth).json
    assert read["scopes"] == read["resource_scopes"] == ["view"]


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"resource_scopes": ["view"], "scopes": ["print"]}, "resource_scopes"),
        ({"name": "x"}, "scopes"),
        ({"scopes": ["view"]}, "name"),
        ({"resource_scopes": []}, "resource_scopes"),
        ({"resource_scopes": ["view", 3]}, "resource_scopes[1]"),
        ({"resource_scopes": ["view"], "description": 7}, "description"),
        ({"resource_scopes": "view"}, "resource_scopes"),
    ],
)
def test_a_bad_description_is_refused_naming_the_member(
    http: FlaskClient, rs: Party, body: dict[str, Any], named: str
) -> None:
    answer = assert_error(http.post(COLLECTION, json=body, headers=rs.auth), 400, "invalid_request")
    assert named in answer["error_description"]


# -- the permission endpoint -------------------------------------------------------------------


def test_one_2_0_requested_permission_gets_a_ticket(
    http: FlaskClient, rs: Party, store: Store
) -> None:
    rs_id = create(http, rs)
    ticket = ticket_for(http, rs, {"resource_id": rs_id, "resource_scopes": ["print"]})
    found = stored_ticket(store, ticket)
    assert found is not None
    assert [(p.resource_set_id, p.scopes) for p in found.permissions] == [(rs_id, ("print",))]


def test_an_array_asks_for_several_sets_in_one_ticket(
    http: FlaskClient, rs: Party, store: Store
) -> None:
    first, second = create(http, rs), create(http, rs, {**PHOTO, "name": "Other"})
    ticket = ticket_for(
        http,
        rs,
        [
            {"resource_id": first, "resource_scopes": ["view"]},
            {"resource_id": second, "resource_scopes": ["print", "view"]},
            {"resource_id": first, "resource_scopes": ["print", "view"]},  # merged
        ],
    )
    found = stored_ticket(store, ticket)
    assert found is not None
    assert [(p.resource_set_id, p.scopes) for p in found.permissions] == [
        (first, ("view", "print")),
        (second, ("print", "view")),
    ]


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ([], 400, "invalid_request"),
        ([{"resource_id": "SET", "resource_scopes": ["view"]}] * 51, 400, "invalid_request"),
        (
            [
                {"resource_id": "SET", "resource_scopes": ["view"]},
                {"resource_set_id": "SET", "scopes": ["view"]},
            ],
            400,
            "invalid_request",
        ),
        ({"resource_id": "SET", "scopes": ["view"]}, 400, "invalid_request"),
        ([{"resource_id": "SET"}], 400, "invalid_request"),
        ([{"resource_id": "SET", "resource_scopes": []}], 400, "invalid_request"),
        (["SET"], 400, "invalid_request"),
        ({"resource_id": "no-such-set", "resource_scopes": ["view"]}, 400, "invalid_resource_id"),
        (
            [
                {"resource_id": "SET", "resource_scopes": ["view"]},
                {"resource_id": "no-such-set", "resource_scopes": ["view"]},
            ],
            400,
            "invalid_resource_id",
        ),
        ({"resource_set_id": "no-such-set", "scopes": ["view"]}, 400, "invalid_resource_set_id"),
        ([{"resource_id": "SET", "resource_scopes": ["delete"]}], 400, "invalid_scope"),
        ("SET", 400, "invalid_request"),
    ],
)
def test_permission_request_errors(
    http: FlaskClient, rs: Party, store: Store, body: Any, status: int, error: str
) -> None:
    rs_id = create(http, rs)

    def with_set(value: Any) -> Any:
        if isinstance(value, list):
            return [with_set(item) for item in value]
        if isinstance(value, dict):
            return {key: with_set(item) for key, item in value.items()}
        return rs_id if value == "SET" else value

    assert_error(http.post("/permission", json=with_set(body), headers=rs.auth), status, error)


def test_another_resource_servers_set_is_an_unknown_resource_id(
    http: FlaskClient, rs: Party, store: Store
) -> None:
    rs_id = create(http, rs)
    other = make_party(store, "alice", "uma_protection")  # alice at another resource server
    body = [{"resource_id": rs_id, "resource_scopes": ["view"]}]
    assert_error(
        http.post("/permission", json=body, headers=other.auth), 400, "invalid_resource_id"
    )


# -- what an update or a deletion does to a ticket of several pairs ----------------------------


def test_an_update_narrows_the_pair_of_its_set_and_ends_a_ticket_left_with_none(
    http: FlaskClient, rs: Party, store: Store
) -> None:
    first, second = create(http, rs), create(http, rs, {**PHOTO, "name": "Other"})
    both = ticket_for(
        http,
        rs,
        [
            {"resource_id": first, "resource_scopes": ["view"]},
            {"resource_id": second, "resource_scopes": ["view", "print"]},
        ],
    )
    only_print = ticket_for(
        http,
        rs,
        [
            {"resource_id": first, "resource_scopes": ["view"]},
            {"resource_id": second, "resource_scopes": ["print"]},
        ],
    )
    http.put(f"{COLLECTION}/{second}", json={**PHOTO, "scopes": ["view"]}, headers=rs.auth)

    narrowed = stored_ticket(store, both)
    assert narrowed is not None and narrowed.state == "open"
    assert [(p.resource_set_id, p.scopes) for p in narrowed.permissions] == [
        (first, ("view",)),
        (second, ("view",)),
    ]
    ended = stored_ticket(store, only_print)
    assert ended is not None and ended.state == "finished"


@pytest.mark.parametrize("deleted", [0, 1])
def test_deleting_any_set_of_a_ticket_ends_it(
    http: FlaskClient, rs: Party, store: Store, deleted: int
) -> None:
    sets = [create(http, rs), create(http, rs, {**PHOTO, "name": "Other"})]
    ticket = ticket_for(
        http, rs, [{"resource_id": rs_id, "resource_scopes": ["view"]} for rs_id in sets]
    )
    assert http.delete(f"{COLLECTION}/{sets[deleted]}", headers=rs.auth).status_code == 204
    found = stored_ticket(store, ticket)
    # The first pair's set takes the ticket with it; a later one leaves it finished.
    assert found is None or found.state == "finished"
