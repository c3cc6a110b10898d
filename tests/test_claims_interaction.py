"""UMA 2.0's claims interaction endpoint (Grant 3.3.2) through the Flask test client: need_info with
redirect_user, the person signing in and sharing at /claims_interaction, the way back with a new
ticket, and the client's next token request; the checks before any redirect, Cancel, a second
person, and the PCT the person can withdraw. The same in a real browser:
test_browser_claims_interaction.py."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from flask.testing import FlaskClient

from umaserver import secrets_at_rest
from umaserver.services import clients

from .conftest import FakeClock, Party, Store, make_person, stored_ticket
from .pages_helpers import TOKEN, sign_in
from .test_rqp_claims import NURSES_BY_SIGNIN, PASSWORD
from .test_uma2_grant import UMA_TICKET, basic

BACK = "https://viewer.test/claims?app=1"
STATE = "st-ü &=?/ 42"


@pytest.fixture
def rules_text() -> str:
    return NURSES_BY_SIGNIN


@dataclass
class World:
    http: FlaskClient
    store: Store
    clock: FakeClock
    rs: Party
    client: tuple[str, str]
    rs_id: str

    def ticket(self) -> str:
        reply = self.http.post(
            "/permission",
            json={"resource_id": self.rs_id, "resource_scopes": ["view"]},
            headers=self.rs.auth,
        )
        assert reply.status_code == 201
        ticket: str = reply.json["ticket"]
        return ticket

    def token(self, client: tuple[str, str] | None = None, **parameters: str) -> tuple[int, Any]:
        client_id, secret = client or self.client
        reply = self.http.post(
            "/token",
            data={"grant_type": UMA_TICKET, **parameters},
            headers={"Authorization": basic(client_id, secret)},
        )
        return reply.status_code, reply.json

    def need_info(self) -> str:
        """A ticket the client was told to send the person to the endpoint with."""
        status, body = self.token(ticket=self.ticket())
        assert status == 403 and body["error"] == "need_info", body
        assert body["redirect_user"] is True and "required_claims" not in body
        ticket: str = body["ticket"]
        return ticket

    def link(self, ticket: str, **changes: str | None) -> str:
        params: dict[str, str | None] = {
            "client_id": self.client[0],
            "ticket": ticket,
            "claims_redirect_uri": BACK,
            "state": STATE,
            **changes,
        }
        return "/claims_interaction?" + urlencode(
            {k: v for k, v in params.items() if v is not None}
        )

    def choose(self, link: str, decision: str, http: FlaskClient | None = None) -> Any:
        browser = http or self.http
        page = browser.get(link)
        assert page.status_code == 200, page.text
        found = TOKEN.search(page.text)
        assert found is not None
        return browser.post(link, data={"csrf_token": found.group(1), "decision": decision})


def uma2_web_client(store: Store, claims_redirect_uris: tuple[str, ...]) -> tuple[str, str]:
    settings = clients.ClientSettings(
        name="Viewer <b>app</b>",
        grant_types=(UMA_TICKET,),
        response_types=(),
        claims_redirect_uris=claims_redirect_uris,
    )
    assert clients.settings_problem(settings) is None
    issued = clients.create_client(store, int(time.time()), settings)
    assert issued.secret is not None
    return issued.client.client_id, issued.secret


@pytest.fixture
def world(http: FlaskClient, store: Store, clock: FakeClock, rs: Party) -> World:
    for name, role in (("bob", "nurse"), ("carol", "visitor")):
        make_person(store, name, secrets_at_rest.hash_password(PASSWORD), {"role": role})
    client = uma2_web_client(store, (BACK, "https://viewer.test/other"))
    reply = http.post(
        "/rs/resource_set",
        json={"name": "Tax returns", "resource_scopes": ["view"]},
        headers=rs.auth,
    )
    return World(http, store, clock, rs, client, reply.json["_id"])


def back(response: Any) -> dict[str, str]:
    assert response.status_code == 302, response.get_data(as_text=True)
    location = response.headers["Location"]
    assert location.startswith("https://viewer.test/claims?app=1&")
    return dict(parse_qsl(urlsplit(location).query))


def test_the_person_shares_and_the_next_token_request_grants(world: World) -> None:
    ticket = world.need_info()
    sign_in(world.http, "bob", PASSWORD)
    page = world.http.get(world.link(ticket))
    assert "Tax returns" in page.text and "Viewer &lt;b&gt;app&lt;/b&gt;" in page.text
    assert 'id="kept-for-the-client"' in page.text  # the PCT, said before sharing

    answer = back(world.choose(world.link(ticket), "share"))
    assert answer["authorization_state"] == "claims_submitted" and answer["state"] == STATE
    assert answer["ticket"] != ticket
    # The old ticket stopped working; the new one carries bob's claims to the token request.
    status, body = world.token(ticket=ticket)
    assert (status, body["error"]) == (400, "invalid_grant")
    found = stored_ticket(world.store, answer["ticket"])
    assert found is not None and found.requesting_party is not None
    assert not found.requesting_party.startswith("client:")  # bob, by his sub
    status, body = world.token(ticket=answer["ticket"])
    assert status == 200, body
    assert "pct" in body


def test_the_pct_serves_later_tickets_until_the_person_withdraws_it(world: World) -> None:
    ticket = world.need_info()
    sign_in(world.http, "bob", PASSWORD)
    answer = back(world.choose(world.link(ticket), "share"))
    _, body = world.token(ticket=answer["ticket"])
    pct = body["pct"]
    status, later = world.token(ticket=world.ticket(), pct=pct)
    assert status == 200, later  # without bob

    account = world.http.get("/account")
    assert "Viewer &lt;b&gt;app&lt;/b&gt;" in account.text and 'name="pct"' in account.text
    found = TOKEN.search(account.text)
    assert found is not None
    withdrawn = world.http.post(
        "/account/pcts/withdraw",
        data={"csrf_token": found.group(1), "pct": secrets_at_rest.digest(later["pct"])},
    )
    assert withdrawn.status_code in (302, 303)
    status, body = world.token(ticket=world.ticket(), pct=later["pct"])
    assert (status, body["error"]) == (400, "invalid_grant")


def test_cancel_goes_back_with_access_denied_and_leaves_the_ticket(world: World) -> None:
    ticket = world.need_info()
    sign_in(world.http, "bob", PASSWORD)
    answer = back(world.choose(world.link(ticket), "cancel"))
    assert answer == {"app": "1", "error": "access_denied", "state": STATE}
    found = stored_ticket(world.store, ticket)
    assert found is not None and found.state == "open"


def test_a_person_whose_claims_do_not_hold_is_refused_at_the_next_request(world: World) -> None:
    ticket = world.need_info()
    sign_in(world.http, "carol", PASSWORD)
    answer = back(world.choose(world.link(ticket), "share"))
    status, body = world.token(ticket=answer["ticket"])
    assert (status, body["error"]) == (403, "request_denied")


def test_a_second_person_is_refused_for_the_same_request(world: World, app: Any) -> None:
    ticket = world.need_info()
    sign_in(world.http, "carol", PASSWORD)
    first = back(world.choose(world.link(ticket), "share"))
    other = app.test_client()
    sign_in(other, "bob", PASSWORD)
    answer = back(world.choose(world.link(first["ticket"]), "share", http=other))
    assert answer["error"] == "access_denied"


def test_arriving_extends_the_ticket(world: World) -> None:
    ticket = world.need_info()
    before = stored_ticket(world.store, ticket)
    assert before is not None
    world.clock.advance(200)  # the ticket would end at 300 s
    assert world.http.get(world.link(ticket)).status_code == 200
    after = stored_ticket(world.store, ticket)
    assert after is not None and after.expires_at == world.clock.now() + 600


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"client_id": "nobody"}, "not known"),
        ({"client_id": None}, "not known"),
        ({"claims_redirect_uri": "https://evil.test/"}, "not registered"),
        ({"claims_redirect_uri": None}, "not registered"),  # two are registered
        ({"claims_redirect_uri": BACK + "&x=1"}, "not registered"),
    ],
)
def test_no_redirect_before_the_client_and_its_uri_are_known_good(
    world: World, changes: dict[str, str | None], fragment: str
) -> None:
    ticket = world.need_info()
    page = world.http.get(world.link(ticket, **changes))
    assert page.status_code == 400 and fragment in page.text
    assert "Location" not in page.headers


def test_a_client_with_one_claims_redirect_uri_may_leave_it_out(world: World) -> None:
    world.client = uma2_web_client(world.store, (BACK,))
    ticket = world.need_info()
    assert world.http.get(world.link(ticket, claims_redirect_uri=None)).status_code == 200


def test_a_ticket_that_is_over_goes_back_with_an_error(world: World) -> None:
    answer = back(world.http.get(world.link("uma_pt_unknown")))
    assert answer == {"app": "1", "error": "invalid_request", "state": STATE}


def test_a_client_without_claims_redirect_uris_gets_request_denied(world: World) -> None:
    world.client = uma2_web_client(world.store, ())
    status, body = world.token(ticket=world.ticket())
    assert (status, body["error"]) == (403, "request_denied")


def test_repeated_parameters_are_refused(world: World) -> None:
    ticket = world.need_info()
    page = world.http.get(world.link(ticket) + "&state=again")
    assert page.status_code == 400
