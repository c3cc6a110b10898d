"""python-keycloak 7.1.1's KeycloakUMA policy methods, unmodified, against a live server with
`[keycloak] realm` set (the world of test_keycloak_clients.py): policy_resource_create,
policy_query, policy_update and policy_delete with the owner's token, and the decision such a
policy makes through the realm's token endpoint with a person's token (account claims)."""

from __future__ import annotations

import pytest
import requests
from keycloak import KeycloakUMA
from keycloak.exceptions import KeycloakPostError

from .conftest import make_party, make_person
from .test_keycloak_clients import World, world  # noqa: F401 - the module's fixture, used here

pytestmark = pytest.mark.live


def owners_uma(world: World) -> KeycloakUMA:  # noqa: F811 - `world` the fixture's value
    """KeycloakUMA acting with alice's token (a user's token, as Keycloak's policy API needs)."""
    uma = world.uma()
    uma.connection.token = {"access_token": world.alice_pat, "expires_in": 3600}
    return uma


def granted(world: World, token: str, permission: str) -> bool:  # noqa: F811
    reply = requests.post(
        f"{world.server.url}/realms/demo/protocol/openid-connect/token",
        data={
            "grant_type": "urn:ietf:params:oauth:grant-type:uma-ticket",
            "audience": world.rs_id,
            "permission": permission,
            "response_mode": "decision",
        },
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert reply.status_code in (200, 403), reply.text
    return reply.status_code == 200 and reply.json() == {"result": True}


def test_the_policy_methods(world: World) -> None:  # noqa: F811
    uma = owners_uma(world)
    photos = world.sets["Photos"]
    made = uma.policy_resource_create(
        photos, {"name": "Bob prints", "description": "only bob", "scopes": ["print"], "users": ["bob"]}
    )  # fmt: skip
    assert (made["name"], made["scopes"], made["users"], made["owner"]) == (
        "Bob prints",
        ["print"],
        ["bob"],
        "alice",
    )
    found = uma.policy_query(resource=photos, name="bob", scope="print", first=0, maximum=10)
    assert [policy["id"] for policy in found] == [made["id"]]

    found[0]["users"] = ["carol"]
    assert uma.policy_update(found[0]["id"], found[0]) == b""
    assert uma.policy_query(resource=photos)[0]["users"] == ["carol"]

    with pytest.raises(KeycloakPostError) as refused:
        uma.policy_resource_create(photos, {"name": "x", "roles": ["r"], "condition": "true"})
    assert refused.value.response_code == 400

    assert uma.policy_delete(made["id"]) == {}
    assert uma.policy_query(resource=photos) == []


def test_a_policy_decides_by_the_persons_account(world: World) -> None:  # noqa: F811
    make_person(world.store, "erin", None, {"roles": ["editor"]})
    erin = make_party(world.store, "erin", "uma_authorization", client_id=world.app_id).token
    uma = owners_uma(world)
    assert not granted(world, erin, "Photos#print")
    made = uma.policy_resource_create(
        world.sets["Photos"], {"name": "Editors print", "scopes": ["print"], "roles": ["editor"]}
    )
    try:
        assert granted(world, erin, "Photos#print")
        assert not granted(world, world.bob, "Photos#print")  # bob has no roles
        # With a ticket too: the person's token as the grant's credential brings their account.
        for token, status in ((erin, 200), (world.bob, 403)):
            ticket = requests.post(
                f"{world.server.url}/realms/demo/authz/protection/permission",
                json=[{"resource_id": world.sets["Photos"], "resource_scopes": ["print"]}],
                headers={"Authorization": f"Bearer {world.alice_pat}"},
                timeout=10,
            ).json()["ticket"]
            reply = requests.post(
                f"{world.server.url}/realms/demo/protocol/openid-connect/token",
                data={
                    "grant_type": "urn:ietf:params:oauth:grant-type:uma-ticket",
                    "ticket": ticket,
                },
                headers={"Authorization": f"Bearer {token}"},
                timeout=10,
            )
            assert reply.status_code == status, reply.text
    finally:
        uma.policy_delete(made["id"])
