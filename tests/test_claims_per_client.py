"""Claims gathered for a ticket serve only the client that gathered them (issue 27, N1): the
client that pushed them, or the client the person agreed with on `/rqp_claims`. Another client's
request with the ticket is decided without them and leaves the ticket and the first client's
claims usable; two clients' pushed claims about one party do not combine; each client has its
own 10 requests and its own `[limits] claims_per_ticket`. Through HTTP (the Flask test client)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from flask.testing import FlaskClient

from umaserver import create_app, secrets_at_rest
from umaserver.config import Config, Limits

from .conftest import (
    FakeClock,
    Store,
    gathered_claims,
    make_party,
    make_person,
    make_web_client,
    stored_ticket,
)
from .flows import EMPLOYEE, FlaskApi, Flow, Party, Reply
from .pages_helpers import TOKEN, sign_in
from .test_claims_interaction import World as Uma2World
from .test_claims_interaction import back as back_from_interaction
from .test_claims_interaction import uma2_web_client

REDIRECT = "claim-client-redirect-1.0"
BACK = "https://redirect-app.test/back"
STATE = "st-42"
PASSWORD = "correct horse battery"

# alice's sets may be viewed by nurses, as this server knows its users (gathered by redirect), and
# printed by staff of the ICU, as the client says (two claims it pushes: both must hold).
RULES = f"""
[[rules]]
id = "nurses"
owner = "alice"
scopes = ["view"]
[[rules.conditions]]
claim = "role"
equals = "nurse"
types = ["{REDIRECT}"]

[[rules]]
id = "icu-staff-print"
owner = "alice"
scopes = ["print"]
[[rules.conditions]]
claim = "staff"
exists = true
types = ["{EMPLOYEE}"]
[[rules.conditions]]
claim = "dept"
equals = "icu"
types = ["{EMPLOYEE}"]
"""


@pytest.fixture
def rules_text() -> str:
    return RULES


def staff() -> dict[str, Any]:
    return {"type": EMPLOYEE, "value": {"staff": "s-17"}}


def icu() -> dict[str, Any]:
    return {"type": EMPLOYEE, "value": {"dept": "icu"}}


def status_of(reply: Reply) -> tuple[int, str]:
    """The status and the error (need_claims for the spec's answer without one)."""
    if reply.status == 403 and isinstance(reply.json, dict) and "need_claims" in reply.json:
        return reply.status, "need_claims"
    error = reply.json.get("error", "") if isinstance(reply.json, dict) else ""
    return reply.status, str(error)


class Apps:
    """alice's photo server and her set; bob's AATs at two clients: the "Redirect app" (a web
    client with a redirect URI) and "Other app", each able to push employee claims."""

    def __init__(self, http: FlaskClient, store: Store, rs: Party) -> None:
        self.http = http
        self.store = store
        self.named_id, _ = make_web_client(store, "Redirect app", [BACK])
        make_person(store, "bob", secrets_at_rest.hash_password(PASSWORD), {"role": "nurse"})
        self.named = make_party(store, "bob", "uma_authorization", client_id=self.named_id)
        self.other = make_party(store, "bob", "uma_authorization", push_types=(EMPLOYEE,))
        self.pusher = make_party(store, "bob", "uma_authorization", push_types=(EMPLOYEE,))
        self.flow = Flow(
            FlaskApi(http), rs, self.named, {"name": "Charts", "scopes": ["view", "print"]}
        )

    def share_on_the_page(self, ticket: str) -> None:
        """The named app is answered redirect_required; bob signs in on /rqp_claims, sees the
        app named, and chooses Share."""
        reply = self.flow.ask(ticket, party=self.named)
        assert status_of(reply) == (403, "need_claims"), reply.text
        [entry] = reply.json["need_claims"]
        assert entry["type"] == "redirect_required"
        link = "/rqp_claims?" + urlencode(
            {
                "scope": entry["value"],
                "redirect_uri": BACK,
                "client_id": self.named_id,
                "state": STATE,
            }
        )
        sign_in(self.http, "bob", PASSWORD)
        page = self.http.get(link)
        assert page.status_code == 200, page.text
        assert "Redirect app" in page.text
        found = TOKEN.search(page.text)
        assert found is not None
        answer = self.http.post(link, data={"csrf_token": found.group(1), "decision": "share"})
        assert answer.status_code == 302, answer.text
        back = dict(parse_qsl(urlsplit(answer.headers["Location"]).query))
        assert back == {"access": "granted", "state": STATE}


@pytest.fixture
def apps(http: FlaskClient, store: Store, rs: Party) -> Apps:
    return Apps(http, store, rs)


def test_claims_shared_on_the_page_for_one_app_do_not_grant_another_app(apps: Apps) -> None:
    # The red team's N1: after bob shares on the page naming "Redirect app", another client with
    # an AAT for bob sent the ticket and was granted (201); the named app then got invalid_ticket.
    ticket = apps.flow.ticket("view")
    apps.share_on_the_page(ticket)
    [shared] = gathered_claims(apps.store, ticket, "bob")
    assert (shared.name, shared.client_id) == ("role", apps.named_id)

    other = apps.flow.ask(ticket, party=apps.other)
    assert status_of(other) == (403, "need_claims"), other.text  # as if nothing were shared
    # ... and the ticket, and what bob shared with the named app, are as they were.
    open_ticket = stored_ticket(apps.store, ticket)
    assert open_ticket is not None and open_ticket.state == "open"
    assert gathered_claims(apps.store, ticket, "bob") == [shared]

    granted = apps.flow.ask(ticket, party=apps.named)
    assert granted.status == 201, granted.text
    seen = apps.flow.introspect(granted.json["rpt"])
    assert [(p["resource_set_id"], p["scopes"]) for p in seen["permissions"]] == [
        (apps.flow.rs_id, ["view"])
    ]


def test_another_apps_refusal_leaves_the_ticket_to_the_app_that_pushed_claims(
    apps: Apps,
) -> None:
    ticket = apps.flow.ticket("print")
    assert status_of(apps.flow.ask(ticket, [staff()], party=apps.pusher)) == (403, "need_claims")
    # The other app's word about bob fails the rule: refused, and nothing of the first app's ends.
    wrong = {"type": EMPLOYEE, "value": {"staff": "s-9", "dept": "kitchen"}}
    refused = apps.flow.ask(ticket, [wrong], party=apps.other)
    assert status_of(refused) == (403, "not_authorized_permission"), refused.text
    assert apps.flow.ask(ticket, [icu()], party=apps.pusher).status == 201


def test_two_apps_pushed_claims_about_one_party_do_not_combine(apps: Apps) -> None:
    ticket = apps.flow.ticket("print")
    first = apps.flow.ask(ticket, [staff()], party=apps.pusher)
    assert status_of(first) == (403, "need_claims"), first.text
    # The other app says the rest: with the first app's claim it would hold, but that is not its.
    second = apps.flow.ask(ticket, [icu()], party=apps.other)
    assert status_of(second) == (403, "need_claims"), second.text
    held = {(c.client_id, c.name) for c in gathered_claims(apps.store, ticket, "bob")}
    assert held == {(apps.pusher.client_id, "staff"), (apps.other.client_id, "dept")}
    # Each app's own claims still count for it.
    granted = apps.flow.ask(ticket, [icu()], party=apps.pusher)
    assert granted.status == 201, granted.text


def test_another_apps_requests_do_not_spend_the_ten_of_the_first(apps: Apps) -> None:
    ticket = apps.flow.ticket("print")
    for _ in range(4):
        assert status_of(apps.flow.ask(ticket, party=apps.pusher)) == (403, "need_claims")
    for n in range(1, 12):
        reply = apps.flow.ask(ticket, party=apps.other)
        # Its own 10th request and those after are refused; the ticket stays open for the first.
        expected = "need_claims" if n < 10 else "not_authorized_permission"
        assert status_of(reply) == (403, expected), (n, reply.text)
    counted = stored_ticket(apps.store, ticket)
    assert counted is not None and (counted.requests, counted.state) == (15, "open")
    for _ in range(5):  # the first app's 5th to 9th
        assert status_of(apps.flow.ask(ticket, party=apps.pusher)) == (403, "need_claims")
    assert apps.flow.ask(ticket, [staff(), icu()], party=apps.pusher).status == 201  # its 10th


def test_one_app_alone_still_has_ten_requests(apps: Apps) -> None:
    ticket = apps.flow.ticket("print")
    for _ in range(9):
        assert status_of(apps.flow.ask(ticket, party=apps.pusher)) == (403, "need_claims")
    last = apps.flow.ask(ticket, party=apps.pusher)
    assert status_of(last) == (403, "not_authorized_permission"), last.text
    assert status_of(apps.flow.ask(ticket, [staff(), icu()], party=apps.pusher)) == (
        400,
        "invalid_ticket",
    )


def test_claims_per_ticket_counts_each_apps_claims(
    apps: Apps, config: Config, clock: FakeClock
) -> None:
    bounded = create_app(replace(config, limits=replace(Limits(), claims_per_ticket=3)), clock)
    apps.flow.api = FlaskApi(bounded.test_client())
    ticket = apps.flow.ticket("print")
    three = {"type": EMPLOYEE, "value": {"staff": "s-17", "a": 1, "b": 2}}
    assert status_of(apps.flow.ask(ticket, [three], party=apps.pusher)) == (403, "need_claims")
    # The other app's three are its own three: not six on the ticket.
    assert status_of(apps.flow.ask(ticket, [three], party=apps.other)) == (403, "need_claims")
    over = apps.flow.ask(ticket, [icu()], party=apps.pusher)  # a fourth for the first app
    assert status_of(over) == (400, "invalid_request"), over.text
    assert "claims_per_ticket = 3" in over.json["error_description"]


def test_uma2_claims_shared_with_one_client_leave_its_ticket_when_another_sends_it(
    http: FlaskClient, store: Store, clock: FakeClock, rs: Party
) -> None:
    # The same at UMA 2.0's claims interaction endpoint: bob shares with the viewer; another
    # client sending the ticket is decided without bob's claims (need_info) and does not rotate
    # the ticket away from the viewer, whose next token request is granted.
    make_person(store, "bob", secrets_at_rest.hash_password(PASSWORD), {"role": "nurse"})
    viewer = uma2_web_client(store, ("https://viewer.test/claims?app=1",))
    other = uma2_web_client(store, ("https://other.test/claims",))
    made = http.post(
        "/rs/resource_set", json={"name": "Charts", "resource_scopes": ["view"]}, headers=rs.auth
    )
    world = Uma2World(http, store, clock, rs, viewer, made.json["_id"])
    ticket = world.need_info()
    sign_in(http, "bob", PASSWORD)
    answer = back_from_interaction(world.choose(world.link(ticket), "share"))
    assert answer["authorization_state"] == "claims_submitted"
    shared = answer["ticket"]

    status, body = world.token(other, ticket=shared)
    assert (status, body["error"]) == (403, "need_info"), body
    assert body["ticket"] == shared  # kept: rotating it would end the viewer's
    found = stored_ticket(store, shared)
    assert found is not None and found.state == "open"

    status, body = world.token(ticket=shared)
    assert status == 200, body
    assert "access_token" in body
