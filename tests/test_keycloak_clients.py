"""python-keycloak 7.1.1, unmodified, against a live server with `[keycloak] realm` set: Keycloak's
own client library as its users call it in their integration tests (KeycloakOpenID's token,
uma_permissions, has_uma_access and introspect; KeycloakUMA's resource, permission-ticket and
policy methods and permissions_check)."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from keycloak import KeycloakOpenID, KeycloakOpenIDConnection, KeycloakUMA
from keycloak.exceptions import KeycloakAuthenticationError, KeycloakPostError
from keycloak.uma_permissions import UMAPermission

from .conftest import LiveServer, Store, make_party, open_store, start_server, stop_server
from .flows import EMPLOYEE, PHOTO_TYPE
from .test_uma2_grant import make_uma2_client

pytestmark = pytest.mark.live

RULES = f"""
[[rules]]
id = "shared-open"
owner = "alice"
scopes = ["view"]
[rules.resource_sets]
names = ["Shared"]

[[rules]]
id = "doctors-view"
owner = "alice"
scopes = ["view", "print"]
[rules.resource_sets]
names = ["Photos"]
[[rules.conditions]]
claim = "role"
contains = "doctor"
types = ["{EMPLOYEE}"]
"""


@dataclass
class World:
    server: LiveServer
    store: Store
    rs_id: str
    rs_secret: str
    alice_pat: str
    bob: str  # bob's token at the app (a person's token)
    app_id: str
    app_secret: str
    sets: dict[str, str]

    def openid(self, client_id: str | None = None, secret: str | None = None) -> KeycloakOpenID:
        return KeycloakOpenID(
            server_url=self.server.url,
            realm_name="demo",
            client_id=client_id or self.rs_id,
            client_secret_key=secret or self.rs_secret,
        )

    def uma(self) -> KeycloakUMA:
        connection = KeycloakOpenIDConnection(
            server_url=self.server.url,
            realm_name="demo",
            client_id=self.rs_id,
            client_secret_key=self.rs_secret,
        )
        return KeycloakUMA(connection=connection)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("keycloak")
    extra = f'[keycloak]\nrealm = "demo"\nclaim_token_type = "{EMPLOYEE}"\n'
    server = start_server(folder, extra_config=extra, rules_text=RULES)
    store = open_store(_database(server))
    try:
        rs = make_party(store, "alice", "uma_protection")
        app_id, app_secret = make_uma2_client(store, "Photo app", (EMPLOYEE,))
        bob = make_party(store, "bob", "uma_authorization", client_id=app_id)
        sets = {}
        for name in ("Photos", "Shared"):
            reply = requests.post(
                f"{server.url}/rs/resource_set",
                json={"name": name, "type": PHOTO_TYPE, "resource_scopes": ["view", "print"]},
                headers=rs.auth,
                timeout=10,
            )
            assert reply.status_code == 201, reply.text
            sets[name] = reply.json()["_id"]
        yield World(
            server, store, rs.client_id, rs.client_secret, rs.token, bob.token, app_id,
            app_secret, sets,
        )  # fmt: skip
    finally:
        store.close()
        stop_server(server)


def _database(server: LiveServer) -> str | Path:
    from umaserver.config import load_config

    return load_config(server.config_path).database


def test_the_client_token_and_the_realms_documents(world: World) -> None:
    token = world.openid().token(grant_type="client_credentials")
    assert token["token_type"] == "Bearer" and token["access_token"]
    assert world.uma().uma_well_known["issuer"] == f"{world.server.url}/realms/demo"
    assert (
        world.openid()
        .well_known()["token_endpoint"]
        .endswith("/realms/demo/protocol/openid-connect/token")
    )


def test_uma_permissions_and_has_uma_access(world: World) -> None:
    openid = world.openid()
    granted = openid.uma_permissions(world.bob, permissions=["Shared#view"])
    assert granted == [{"rsid": world.sets["Shared"], "rsname": "Shared", "scopes": ["view"]}]
    assert openid.has_uma_access(world.bob, "Shared#view").is_authorized
    status = openid.has_uma_access(world.bob, "Photos#view")
    assert status.is_logged_in and not status.is_authorized
    assert not openid.has_uma_access("not-a-token", "Shared#view").is_logged_in


def test_permissions_check(world: World) -> None:
    uma = world.uma()
    assert uma.permissions_check(world.bob, [UMAPermission(resource="Shared", scope="view")])
    assert not uma.permissions_check(world.bob, [UMAPermission(resource="Shared", scope="print")])


def test_introspect_an_rpt(world: World) -> None:
    # An RPT as Keycloak's clients get one: the uma-ticket grant with the person's token.
    reply = requests.post(
        f"{world.server.url}/realms/demo/protocol/openid-connect/token",
        data={
            "grant_type": "urn:ietf:params:oauth:grant-type:uma-ticket",
            "audience": world.rs_id,
            "permission": "Shared#view",
        },
        headers={"Authorization": f"Bearer {world.bob}"},
        timeout=10,
    )
    assert reply.status_code == 200, reply.text
    rpt = reply.json()["access_token"]
    answer = world.openid().introspect(world.bob, rpt=rpt, token_type_hint="requesting_party_token")
    assert answer["active"] is True
    assert [p["resource_id"] for p in answer["permissions"]] == [world.sets["Shared"]]
    with pytest.raises(KeycloakAuthenticationError):
        world.openid(world.rs_id, "wrong secret").introspect(rpt)


def test_the_readmes_example_works_as_written(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    from .conftest import ROOT

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Instead of Keycloak in your tests", 1)[1].split("\n## ", 1)[0]
    (example,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    # Only what differs: the address, the resource server, and a set open to anyone here.
    example = example.replace("http://127.0.0.1:8080", world.server.url)
    example = example.replace('"Photos#view"', '"Shared#view"')
    exec(example, {"RS_ID": world.rs_id, "RS_SECRET": world.rs_secret, "person_token": world.bob})  # noqa: S102
    assert capsys.readouterr().out == "True\n"


def test_permission_ticket_create_with_the_resource_servers_own_token(world: World) -> None:
    uma = world.uma()  # KeycloakUMA's connection: the resource server's own token
    ticket = uma.permission_ticket_create([UMAPermission(resource="Photos", scope="view")])
    assert ticket["ticket"]
    # The ticket is for alice's Photos: bob, a doctor by the app's word, is granted it.
    reply = requests.post(
        f"{world.server.url}/realms/demo/protocol/openid-connect/token",
        data={
            "grant_type": "urn:ietf:params:oauth:grant-type:uma-ticket",
            "ticket": ticket["ticket"],
            "claim_token": base64.urlsafe_b64encode(b'{"role": ["doctor"]}').decode(),
            "claim_token_format": "urn:ietf:params:oauth:token-type:jwt",
        },
        headers={"Authorization": f"Bearer {world.bob}"},
        timeout=10,
    )
    assert reply.status_code == 200, reply.text
    with pytest.raises(KeycloakPostError):
        uma.permission_ticket_create([UMAPermission(resource="Nothing", scope="view")])
