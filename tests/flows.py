"""Shared test flows and rule texts.

- The owners' rule files the tests (and `bench/run.py`) start servers with, one constant each.
- `Api`: POST/GET/DELETE a path and get a `Reply` (status, json, headers, text), with two adapters:
  `FlaskApi` over the Flask test client and `HttpApi` with `requests` against a live server's URL.
- `Flow`: a resource server of alice with her PAT, a client with an AAT, a registered resource set;
  ask for a ticket, make the authorization request with claims, get an RPT, introspect it. The same
  harness runs over either adapter.
- `wait_until`: polling with a deadline instead of a fixed sleep.

This module imports nothing of umaserver and nothing of the store (the few direct uses of the store
are in conftest.py): `bench/run.py` imports its rule text from here, and needs only `requests`.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import urlsplit

import requests
from requests.structures import CaseInsensitiveDict

if TYPE_CHECKING:
    from flask.testing import FlaskClient

# -- claim types and the parties that vouch for claims ----------------------------------------

EMPLOYEE = "urn:example:employee"  # a custom claim type a client pushes on its own word
OIDC = "claim-client-claims-oidc-1.0"
SAML = "claim-client-assertion-saml-1.0"
PHOTO_TYPE = "https://example.com/rsets/photo"  # a resource set type
IDP = "https://idp.example/saml"  # a SAML identity provider
OP = "https://accounts.example"  # an OpenID provider

# -- the owners' rule files --------------------------------------------------------------------

# alice's doctors may view any of her sets: a requesting party whose pushed employee claims say that
# its role contains "doctor". The rule file of the live walks, the benchmark and `policy explain`.
DOCTORS_MAY_VIEW = f"""
[[rules]]
id = "doctors"
owner = "alice"
scopes = ["view"]
[[rules.conditions]]
claim = "role"
contains = "doctor"
types = ["{EMPLOYEE}"]
hint = "Your role at the hospital"
"""

# The same, and alice's family may view and print (no conditions): two valid rules, for `policy check`.
DOCTORS_AND_FAMILY = (
    DOCTORS_MAY_VIEW
    + """
[[rules]]
id = "family"
owner = "alice"
scopes = ["view", "print"]
"""
)

# The same, and bob's own rule: rules of two owners, for `policy explain`.
DOCTORS_AND_BOBS_PHOTOS = (
    DOCTORS_MAY_VIEW
    + """
[[rules]]
id = "bobs-photos"
owner = "bob"
scopes = ["view"]
"""
)

# The same, and anyone may annotate alice's sets: the rule file a live server is changed to.
DOCTORS_AND_ANNOTATORS = (
    DOCTORS_MAY_VIEW
    + """
[[rules]]
id = "annotators"
owner = "alice"
scopes = ["annotate"]
"""
)

# alice's photo sets (of PHOTO_TYPE) may be viewed by doctors (employee claims, hinted), and any of
# her sets printed by colleagues (an OIDC email at example.com): the authorization request's tables.
PHOTOS_FOR_DOCTORS_AND_COLLEAGUES = f"""
[[rules]]
id = "doctors-view"
owner = "alice"
scopes = ["view"]
[rules.resource_sets]
types = ["{PHOTO_TYPE}"]
[[rules.conditions]]
claim = "role"
contains = "doctor"
types = ["{EMPLOYEE}"]
hint = "Your role at the hospital"

[[rules]]
id = "colleagues-print"
owner = "alice"
scopes = ["print"]
[[rules.conditions]]
claim = "email"
suffix = "@example.com"
types = ["{OIDC}"]
"""

# Rules that demand an identity provider's word: staff (a SAML affiliation from IDP) may view, and
# a verified example.com email (an ID token from OP) may print.
VERIFIED_STAFF_AND_EMAIL = f"""
[[rules]]
id = "staff-view"
owner = "alice"
scopes = ["view"]
[[rules.conditions]]
claim = "eduPersonAffiliation"
contains = "staff"
issuers = ["{IDP}"]
hint = "Your affiliation, from your institution"

[[rules]]
id = "verified-email-print"
owner = "alice"
scopes = ["print"]
[[rules.conditions]]
claim = "email"
suffix = "@example.com"
types = ["{OIDC}"]
issuers = ["{OP}"]
"""

# -- waiting -----------------------------------------------------------------------------------

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T], timeout: float = 10.0, interval: float = 0.05, message: str = ""
) -> T:
    """Calls `predicate` until it returns something true, and returns that; fails after `timeout`
    seconds. An exception from `predicate` (an assert) ends the wait at once."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(message or f"not true within {timeout} s: {predicate!r}")
        time.sleep(interval)


# -- HTTP, over the test client or over the network --------------------------------------------


@dataclass(frozen=True)
class Reply:
    status: int
    json: Any  # the body as JSON; None when it is not JSON
    headers: Mapping[str, str]  # case-insensitive
    text: str


class Api(Protocol):
    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply: ...

    def get(self, path: str, *, headers: Mapping[str, str] | None = None) -> Reply: ...

    def post(
        self,
        path: str,
        *,
        json: Any = None,
        data: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply: ...

    def delete(self, path: str, *, headers: Mapping[str, str] | None = None) -> Reply: ...


class _Verbs:
    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        raise NotImplementedError

    def get(self, path: str, *, headers: Mapping[str, str] | None = None) -> Reply:
        return self.request("GET", path, headers=headers)

    def post(
        self,
        path: str,
        *,
        json: Any = None,
        data: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        return self.request("POST", path, json=json, data=data, headers=headers)

    def delete(self, path: str, *, headers: Mapping[str, str] | None = None) -> Reply:
        return self.request("DELETE", path, headers=headers)


class FlaskApi(_Verbs):
    """The app in this process, through the Flask test client."""

    def __init__(self, http: FlaskClient) -> None:
        self.http = http

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        response = self.http.open(
            path, method=method, json=json, data=data, headers=dict(headers or {})
        )
        return Reply(
            response.status_code,
            response.get_json(silent=True),
            CaseInsensitiveDict(response.headers.items()),
            response.get_data(as_text=True),
        )


class HttpApi(_Verbs):
    """A live server at `url`, with `requests` (one connection per request: safe from threads)."""

    def __init__(self, url: str, timeout: float = 30) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        response = requests.request(
            method,
            self.url + path,
            json=json,
            data=data,
            headers=dict(headers or {}),
            timeout=self.timeout,
        )
        try:
            body = response.json()
        except ValueError:
            body = None
        return Reply(response.status_code, body, response.headers, response.text)


def endpoints(api: Api) -> dict[str, str]:
    """The configuration document's `*_endpoint` members, as paths on the server."""
    reply = api.get("/.well-known/uma-configuration")
    assert reply.status == 200, reply.text
    return {
        name: urlsplit(url).path
        for name, url in reply.json.items()
        if name.endswith("_endpoint") and isinstance(url, str)
    }


# -- the parties and the flow ------------------------------------------------------------------


@dataclass
class Party:
    """A client with a user and a token: a resource server with a PAT, or a client with an AAT."""

    client_id: str
    client_secret: str
    username: str
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


class Flow:
    """alice's resource server `rs` (with her PAT) has registered a resource set `rs_id`; the client
    `app` (with its AAT) asks for access to it. Every path comes from the configuration document."""

    def __init__(self, api: Api, rs: Party, app: Party, resource_set: Mapping[str, Any]) -> None:
        self.api = api
        self.rs = rs
        self.app = app
        self.endpoints = endpoints(api)
        self.rs_id = self.register(resource_set)

    def register(self, resource_set: Mapping[str, Any]) -> str:
        """A resource set of alice's, registered by `rs`; its `_id`."""
        reply = self.api.post(
            self.endpoints["resource_set_registration_endpoint"] + "/resource_set",
            json=dict(resource_set),
            headers=self.rs.auth,
        )
        assert reply.status == 201, reply.text
        rs_id: str = reply.json["_id"]
        return rs_id

    def delete_set(self, rs_id: str | None = None) -> Reply:
        path = self.endpoints["resource_set_registration_endpoint"] + "/resource_set/"
        return self.api.delete(path + (rs_id or self.rs_id), headers=self.rs.auth)

    def ticket(self, *scopes: str, rs_id: str | None = None) -> str:
        """A permission ticket for `scopes` (by default view) on the set, registered by `rs`."""
        reply = self.api.post(
            self.endpoints["permission_registration_endpoint"],
            json={"resource_set_id": rs_id or self.rs_id, "scopes": list(scopes or ["view"])},
            headers=self.rs.auth,
        )
        assert reply.status == 201, reply.text
        ticket: str = reply.json["ticket"]
        return ticket

    def new_rpt(self, party: Party | None = None) -> str:
        reply = self.api.post(self.endpoints["rpt_endpoint"], headers=(party or self.app).auth)
        assert reply.status == 200, reply.text
        rpt: str = reply.json["rpt"]
        return rpt

    def ask(
        self,
        ticket: str,
        claims: Sequence[Mapping[str, Any]] | None = None,
        *,
        rpt: str = "none-yet",
        party: Party | None = None,
    ) -> Reply:
        """The authorization request; `claims` None sends no `claims` member."""
        body: dict[str, Any] = {"rpt": rpt, "ticket": ticket}
        if claims is not None:
            body["claims"] = list(claims)
        return self.api.post(
            self.endpoints["authorization_request_endpoint"],
            json=body,
            headers=(party or self.app).auth,
        )

    def introspect(self, token: str, party: Party | None = None) -> dict[str, Any]:
        reply = self.api.post(
            self.endpoints["introspection_endpoint"],
            data={"token": token},
            headers=(party or self.rs).auth,
        )
        assert reply.status == 200, reply.text
        answer: dict[str, Any] = reply.json
        return answer


class LiveCommands(Protocol):
    """A live server: its URL, and its command line (`python -m umaserver --config ...`)."""

    url: str

    def command(self, *args: str, input: str | None = None) -> Any: ...


def live_flow(
    server: LiveCommands, resource_set: Mapping[str, Any], push_types: Sequence[str] = ()
) -> Flow:
    """A `Flow` against a live server, set up as an operator and a client would: the command line
    makes the clients and users and issues alice's PAT; the client gets its AAT from the token
    endpoint with client_credentials, acting for itself."""
    api = HttpApi(server.url)
    rs = server.command("client", "create", "--name", "Photo RS")
    pushes = [arg for kind in push_types for arg in ("--push-claims", kind)]
    app = server.command("client", "create", "--name", "Viewer", *pushes)
    server.command("user", "create", "alice")
    server.command("user", "create", "bob")
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
    token_endpoint = endpoints(api)["token_endpoint"]
    issued = requests.post(
        server.url + token_endpoint,
        data={"grant_type": "client_credentials", "scope": "uma_authorization"},
        auth=(app["client_id"], app["client_secret"]),
        timeout=5,
    )
    assert issued.status_code == 200, issued.text
    return Flow(
        api,
        Party(rs["client_id"], rs["client_secret"], "alice", pat),
        Party(app["client_id"], app["client_secret"], "", issued.json()["access_token"]),
        resource_set,
    )


# -- UMA 2.0, from its two specifications ----------------------------------------------------------

UMA_TICKET = "urn:ietf:params:oauth:grant-type:uma-ticket"


def claim_token(claims: Mapping[str, Any]) -> str:
    """A custom claim type's claim token: base64url of the JSON object of claims, unpadded."""
    return base64.urlsafe_b64encode(json.dumps(dict(claims)).encode()).decode().rstrip("=")


class Uma2Flow:
    """A UMA 2.0 resource server and client, as the specifications describe them, against `api`:
    everything is found through /.well-known/uma2-configuration (Grant 2, Federated Authorization
    2). The resource server `rs` holds a PAT; the client authenticates at the token endpoint with
    its id and secret (`client`: a Party whose token is unused)."""

    def __init__(self, api: Api, rs: Party, client: Party) -> None:
        self.api = api
        self.rs = rs
        self.client = client
        reply = api.get("/.well-known/uma2-configuration")
        assert reply.status == 200, reply.text
        self.configuration: dict[str, Any] = reply.json
        assert UMA_TICKET in self.configuration["grant_types_supported"]

    def _path(self, member: str) -> str:
        return urlsplit(str(self.configuration[member])).path

    def register(self, description: Mapping[str, Any]) -> str:
        """Federated Authorization 3.2.1: create a resource description; its `_id`."""
        reply = self.api.post(
            self._path("resource_registration_endpoint"),
            json=dict(description),
            headers=self.rs.auth,
        )
        assert reply.status == 201, reply.text
        rs_id: str = reply.json["_id"]
        return rs_id

    def read(self, rs_id: str) -> dict[str, Any]:
        reply = self.api.get(
            self._path("resource_registration_endpoint") + "/" + rs_id, headers=self.rs.auth
        )
        assert reply.status == 200, reply.text
        found: dict[str, Any] = reply.json
        return found

    def ticket(self, *requested: tuple[str, Sequence[str]]) -> str:
        """Federated Authorization 4.1: request permissions (one or several); the ticket."""
        body = [
            {"resource_id": rs_id, "resource_scopes": list(scopes)} for rs_id, scopes in requested
        ]
        reply = self.api.post(
            self._path("permission_endpoint"),
            json=body[0] if len(body) == 1 else body,
            headers=self.rs.auth,
        )
        assert reply.status == 201, reply.text
        ticket: str = reply.json["ticket"]
        return ticket

    def token(self, ticket: str, **parameters: str) -> Reply:
        """Grant 3.3.1: the client's request to the token endpoint with the uma-ticket grant."""
        basic = base64.b64encode(
            f"{self.client.client_id}:{self.client.client_secret}".encode()
        ).decode()
        return self.api.post(
            self._path("token_endpoint"),
            data={"grant_type": UMA_TICKET, "ticket": ticket, **parameters},
            headers={"Authorization": f"Basic {basic}"},
        )

    def introspect(self, token: str) -> dict[str, Any]:
        reply = self.api.post(
            self._path("introspection_endpoint"), data={"token": token}, headers=self.rs.auth
        )
        assert reply.status == 200, reply.text
        answer: dict[str, Any] = reply.json
        return answer
