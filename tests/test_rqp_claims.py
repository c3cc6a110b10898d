"""The redirect claims profile through the Flask test client: `redirect_required`, the requesting
party claims endpoint (`/rqp_claims`) with its bad inputs, the way back to the client, and the
client's next authorization request. The same in a real browser: test_browser_rqp_claims.py."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from flask.testing import FlaskClient

from umaserver import secrets_at_rest
from umaserver.services.owner_rule_form import rule_from_form
from umaserver.services.owner_rules import add_owner_rule

from .conftest import (
    FakeClock,
    Store,
    gathered_claims,
    make_client_party,
    make_party,
    make_person,
    make_web_client,
    stored_ticket,
)
from .flows import EMPLOYEE, FlaskApi, Flow, Party
from .pages_helpers import TOKEN, sign_in

REDIRECT = "claim-client-redirect-1.0"
BACK = "https://viewer.test/back?app=1"  # a redirect URI with a query of its own
STATE = "st-ü &=?/ 42"  # returned unchanged, whatever it holds

# alice's sets may be viewed by nurses, as this server knows its users (gathered by redirect), and
# printed by anyone whose client pushes an employee claim (to see which entry wins).
NURSES_BY_SIGNIN = f"""
[[rules]]
id = "nurses"
owner = "alice"
scopes = ["view"]
[[rules.conditions]]
claim = "role"
equals = "nurse"
types = ["{REDIRECT}"]

[[rules]]
id = "employees-print"
owner = "alice"
scopes = ["print"]
[[rules.conditions]]
claim = "staff"
exists = true
types = ["{EMPLOYEE}"]
"""


@pytest.fixture
def rules_text() -> str:
    return NURSES_BY_SIGNIN


@dataclass
class World:
    http: FlaskClient
    store: Store
    clock: FakeClock
    flow: Flow
    client_id: str
    people: dict[str, Party]

    def redirect_entry(self, ticket: str, party: str = "bob") -> dict[str, Any]:
        reply = self.flow.ask(ticket, party=self.people[party])
        assert reply.status == 403, reply.text
        assert list(reply.json) == ["need_claims"], reply.json
        [entry] = reply.json["need_claims"]
        assert entry["type"] == "redirect_required"
        return dict(entry)

    def link(self, handle: str, **changes: str | None) -> str:
        params = {
            "scope": handle,
            "redirect_uri": BACK,
            "client_id": self.client_id,
            "state": STATE,
        }
        params.update(changes)  # type: ignore[arg-type]
        return "/rqp_claims?" + urlencode({k: v for k, v in params.items() if v is not None})

    def choose(self, link: str, decision: str, http: FlaskClient | None = None) -> Any:
        browser = http or self.http
        page = browser.get(link)
        assert page.status_code == 200, page.text
        found = TOKEN.search(page.text)
        assert found is not None
        return browser.post(link, data={"csrf_token": found.group(1), "decision": decision})


PASSWORD = "correct horse battery"


@pytest.fixture
def world(http: FlaskClient, store: Store, clock: FakeClock, rs: Party) -> World:
    client_id, _ = make_web_client(store, "Viewer <b>app</b>", [BACK, "https://viewer.test/other"])
    people = {}
    for name, role in (("bob", "nurse"), ("carol", "visitor"), ("mallory", "visitor")):
        make_person(
            store, name, secrets_at_rest.hash_password(PASSWORD), {"role": role, "secret": "x"}
        )
        people[name] = make_party(store, name, "uma_authorization", client_id=client_id)
    flow = Flow(
        FlaskApi(http),
        rs,
        people["bob"],
        {"name": "Tax <i>returns</i>", "scopes": ["view", "print"]},
    )
    return World(http, store, clock, flow, client_id, people)


def back(reply: Any) -> dict[str, str]:
    """The query a 302 to BACK added, checking that BACK's own query is kept."""
    assert reply.status_code == 302, reply.text
    location = reply.headers["Location"]
    assert location.startswith(BACK + "&"), location
    query = dict(parse_qsl(urlsplit(location).query))
    assert query.pop("app") == "1"
    return query


# -- the walk ----------------------------------------------------------------------------------


def test_redirect_required_then_sign_in_share_and_the_next_request_is_granted(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    ticket = world.flow.ticket("view")
    entry = world.redirect_entry(ticket)
    assert set(entry) == {"type", "name", "value"}
    # A label naming the claim: never the wanted value, nor where the person will sign in.
    assert entry["name"] == "Sign in to share your 'role'"
    link = world.link(entry["value"])

    page = world.http.get(link)
    assert page.status_code == 200
    assert 'id="signin-local"' in page.text and 'id="share"' not in page.text
    assert "Viewer &lt;b&gt;app&lt;/b&gt;" in page.text  # untrusted names escaped
    assert "not verified" in page.text and "alice" not in page.text  # the owner is not shown

    signed_in = sign_in(world.http, "bob", PASSWORD, next_path=link)
    assert signed_in.status_code == 303
    assert signed_in.headers["Location"].endswith(link)
    with caplog.at_level(logging.INFO, logger="umaserver.gathering"):
        answer = world.choose(link, "share")
    assert back(answer) == {"access": "granted", "state": STATE}
    assert "gathering access=granted" in caplog.text
    assert world.http.get(link).status_code == 400  # used now: an error page

    [claim] = gathered_claims(world.store, ticket, "bob")
    assert (claim.type, claim.name, claim.value) == (REDIRECT, "role", "nurse")
    assert claim.issuer == "http://uma.test" and claim.subject is not None  # its provenance
    granted = world.flow.ask(ticket, party=world.people["bob"])
    assert granted.status == 201, granted.text
    permissions = world.flow.introspect(granted.json["rpt"])["permissions"]
    assert [(p["resource_set_id"], p["scopes"]) for p in permissions] == [
        (world.flow.rs_id, ["view"])
    ]


def test_a_ticket_of_several_sets_lists_every_set_and_one_share_grants_them_all(
    world: World,
) -> None:
    second = world.flow.register({"name": "Letters <b>2025</b>", "scopes": ["view"]})
    reply = world.flow.api.post(
        "/permission",
        json=[
            {"resource_id": world.flow.rs_id, "resource_scopes": ["view"]},
            {"resource_id": second, "resource_scopes": ["view"]},
        ],
        headers=world.flow.rs.auth,
    )
    ticket = reply.json["ticket"]
    link = world.link(world.redirect_entry(ticket)["value"])
    sign_in(world.http, "bob", PASSWORD)
    page = world.http.get(link)
    assert 'id="requested"' in page.text
    assert "Tax &lt;i&gt;returns&lt;/i&gt;" in page.text
    assert "Letters &lt;b&gt;2025&lt;/b&gt;" in page.text
    assert back(world.choose(link, "share")) == {"access": "granted", "state": STATE}
    granted = world.flow.ask(ticket, party=world.people["bob"])
    assert granted.status == 201, granted.text
    seen = world.flow.introspect(granted.json["rpt"])
    assert {p["resource_set_id"] for p in seen["permissions"]} == {world.flow.rs_id, second}


def test_the_page_lets_the_form_lead_back_to_the_client(world: World) -> None:
    link = world.link(world.redirect_entry(world.flow.ticket("view"))["value"])
    sign_in(world.http, "bob", PASSWORD)
    page = world.http.get(link)
    assert "form-action 'self' https://viewer.test" in page.headers["Content-Security-Policy"]
    assert 'id="switch-account"' in page.text and "bob" in page.text


def test_claims_that_fail_come_back_denied_and_finish_the_ticket(world: World) -> None:
    ticket = world.flow.ticket("view")
    link = world.link(world.redirect_entry(ticket, "carol")["value"])
    sign_in(world.http, "carol", PASSWORD)
    assert back(world.choose(link, "share")) == {"access": "denied", "state": STATE}
    assert stored_ticket(world.store, ticket).state == "finished"  # type: ignore[union-attr]
    again = world.flow.ask(ticket, party=world.people["carol"])
    assert again.status == 400 and again.json["error"] == "invalid_ticket"


def test_cancel_comes_back_denied_with_or_without_signing_in(world: World) -> None:
    for signed_in in (False, True):
        ticket = world.flow.ticket("view")
        link = world.link(world.redirect_entry(ticket)["value"])
        if signed_in:
            sign_in(world.http, "bob", PASSWORD)
        assert back(world.choose(link, "cancel")) == {"access": "denied", "state": STATE}
        assert gathered_claims(world.store, ticket, "bob") == []
        assert stored_ticket(world.store, ticket).state == "finished"  # type: ignore[union-attr]


def test_fixation_another_person_following_the_link_grants_nothing(world: World) -> None:
    # mallory's client asks; she sends the link to bob (a nurse), who is signed in and shares.
    ticket = world.flow.ticket("view")
    link = world.link(world.redirect_entry(ticket, "mallory")["value"])
    sign_in(world.http, "bob", PASSWORD)
    assert back(world.choose(link, "share")) == {"access": "denied", "state": STATE}
    assert gathered_claims(world.store, ticket, "bob") == []
    assert gathered_claims(world.store, ticket, "mallory") == []
    after = world.flow.ask(ticket, party=world.people["mallory"])
    assert after.status != 201
    assert after.json["error"] == "invalid_ticket"


def test_an_aat_without_a_person_is_never_offered_a_redirect(world: World, store: Store) -> None:
    robot = make_client_party(store, world.client_id, "uma_authorization")
    reply = world.flow.ask(world.flow.ticket("view"), party=robot)
    assert reply.status == 403 and reply.json["error"] == "not_authorized_permission"


def test_a_pushed_redirect_claim_is_refused_and_says_to_redirect(world: World) -> None:
    reply = world.flow.ask(
        world.flow.ticket("view"), [{"type": REDIRECT, "value": {"role": "nurse"}}]
    )
    assert reply.status == 400 and reply.json["error"] == "invalid_request"
    assert "redirect" in reply.json["error_description"]


def test_the_configuration_document_advertises_the_endpoint_and_profile(world: World) -> None:
    document = world.http.get("/.well-known/uma-configuration").get_json()
    assert document["requesting_party_claims_endpoint"] == "http://uma.test/rqp_claims"
    assert REDIRECT in document["claim_profiles_supported"]


# -- handles -----------------------------------------------------------------------------------


def test_a_new_request_on_the_ticket_voids_the_old_handle(world: World) -> None:
    ticket = world.flow.ticket("view")
    old = world.redirect_entry(ticket)["value"]
    new = world.redirect_entry(ticket)["value"]
    assert old != new
    assert world.http.get(world.link(old)).status_code == 400
    assert world.http.get(world.link(new)).status_code == 200


def test_the_ticket_lives_while_its_handle_does(world: World) -> None:
    ticket = world.flow.ticket("view")  # [lifetimes] ticket = 300, claims_handle = 600
    link = world.link(world.redirect_entry(ticket)["value"])
    world.clock.advance(500)
    sign_in(world.http, "bob", PASSWORD)
    assert back(world.choose(link, "share"))["access"] == "granted"
    assert world.flow.ask(ticket, party=world.people["bob"]).status == 201


def test_a_handle_that_expires_while_the_person_signs_in_goes_back_with_an_error(
    world: World,
) -> None:
    link = world.link(world.redirect_entry(world.flow.ticket("view"))["value"])
    page = world.http.get(link)
    token = TOKEN.search(page.text)
    assert token is not None
    sign_in(world.http, "bob", PASSWORD)
    page = world.http.get(link)
    token = TOKEN.search(page.text)
    assert token is not None
    world.clock.advance(601)
    answer = world.http.post(link, data={"csrf_token": token.group(1), "decision": "share"})
    assert back(answer) == {"error": "invalid_request", "state": STATE}


def test_each_request_counts_toward_the_tickets_ten(world: World) -> None:
    ticket = world.flow.ticket("view")
    for _ in range(9):
        world.redirect_entry(ticket)
    last = world.flow.ask(ticket, party=world.people["bob"])
    assert last.status == 403 and last.json["error"] == "not_authorized_permission"


# -- bad inputs: an error page, never a redirect, nothing used up -------------------------------


def _other_client(world: World) -> str:
    other, _ = make_web_client(world.store, "Other", ["https://other.test/cb"])
    return other


BAD_ARRIVALS: list[tuple[str, Any]] = [
    ("unknown client_id", lambda w, h: w.link(h, client_id="no-such-client")),
    ("missing client_id", lambda w, h: w.link(h, client_id=None)),
    ("redirect_uri not registered", lambda w, h: w.link(h, redirect_uri="https://evil.test/cb")),
    ("redirect_uri not exact", lambda w, h: w.link(h, redirect_uri="https://viewer.test/back")),
    ("redirect_uri with a case change", lambda w, h: w.link(h, redirect_uri=BACK.upper())),
    ("missing redirect_uri", lambda w, h: w.link(h, redirect_uri=None)),
    ("missing state", lambda w, h: w.link(h, state=None)),
    ("empty state", lambda w, h: w.link(h, state="")),
    ("missing handle", lambda w, h: w.link(h, scope=None)),
    ("unknown handle", lambda w, h: w.link("nope" + h)),
    (
        "handle of another client",
        lambda w, h: w.link(h, client_id=_other_client(w), redirect_uri="https://other.test/cb"),
    ),
    ("repeated parameter", lambda w, h: w.link(h) + "&state=again"),
    ("oversized state", lambda w, h: w.link(h, state="s" * 1025)),
    ("oversized handle", lambda w, h: w.link("h" * 200)),
]


@pytest.mark.parametrize(("case", "make_link"), BAD_ARRIVALS, ids=[c for c, _ in BAD_ARRIVALS])
def test_bad_arrivals_get_an_error_page_and_no_redirect(
    world: World, case: str, make_link: Any
) -> None:
    handle = world.redirect_entry(world.flow.ticket("view"))["value"]
    sign_in(world.http, "bob", PASSWORD)
    page = world.http.get(make_link(world, handle))
    assert page.status_code == 400, (case, page.text)
    assert "Location" not in page.headers
    assert page.mimetype == "text/html"
    # Nothing was used up: the good link still works.
    assert world.http.get(world.link(handle)).status_code == 200


def test_a_used_handle_gets_an_error_page(world: World) -> None:
    link = world.link(world.redirect_entry(world.flow.ticket("view"))["value"])
    sign_in(world.http, "bob", PASSWORD)
    world.choose(link, "share")
    page = world.http.get(link)
    assert page.status_code == 400 and "used already" in page.text
    assert "Location" not in page.headers


def test_an_expired_handle_gets_an_error_page(world: World) -> None:
    link = world.link(world.redirect_entry(world.flow.ticket("view"))["value"])
    world.clock.advance(601)
    page = world.http.get(link)
    assert page.status_code == 400 and "expired" in page.text


def test_a_handle_opened_in_another_browser_gets_an_error_page(world: World, app: Any) -> None:
    link = world.link(world.redirect_entry(world.flow.ticket("view"))["value"])
    assert world.http.get(link).status_code == 200
    other = app.test_client()
    page = other.get(link)
    assert page.status_code == 400 and "another browser" in page.text


@pytest.mark.parametrize("token", [None, "wrong", "twice"])
def test_a_form_without_its_csrf_token_is_refused_and_nothing_is_used(
    world: World, token: str | None
) -> None:
    ticket = world.flow.ticket("view")
    link = world.link(world.redirect_entry(ticket)["value"])
    sign_in(world.http, "bob", PASSWORD)
    page = world.http.get(link)
    good = TOKEN.search(page.text)
    assert good is not None
    form: dict[str, Any] = {"decision": "share"}
    if token == "wrong":
        form["csrf_token"] = "x" + good.group(1)
    elif token == "twice":
        form["csrf_token"] = [good.group(1), good.group(1)]
    answer = world.http.post(link, data=form)
    assert answer.status_code == 400 and "Location" not in answer.headers
    assert gathered_claims(world.store, ticket, "bob") == []
    assert back(world.choose(link, "share"))["access"] == "granted"


def test_share_without_signing_in_is_refused(world: World) -> None:
    link = world.link(world.redirect_entry(world.flow.ticket("view"))["value"])
    answer = world.choose(link, "share")
    assert answer.status_code == 400 and "Sign in first" in answer.text


@pytest.mark.parametrize("decision", [None, "maybe", "share,cancel"])
def test_a_form_without_one_decision_is_refused(world: World, decision: str | None) -> None:
    link = world.link(world.redirect_entry(world.flow.ticket("view"))["value"])
    sign_in(world.http, "bob", PASSWORD)
    page = world.http.get(link)
    token = TOKEN.search(page.text)
    assert token is not None
    form: dict[str, Any] = {"csrf_token": token.group(1)}
    if decision is not None:
        form["decision"] = decision.split(",")
    assert world.http.post(link, data=form).status_code == 400


def test_storage_failing_at_the_choice_goes_back_with_server_error(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from umaserver.services import gathering
    from umaserver.storage.errors import StorageUnavailable

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise StorageUnavailable("disk I/O error")

    link = world.link(world.redirect_entry(world.flow.ticket("view"))["value"])
    sign_in(world.http, "bob", PASSWORD)
    monkeypatch.setattr(gathering, "share", unavailable)
    assert back(world.choose(link, "share")) == {"error": "server_error", "state": STATE}


def test_an_owners_rule_gathers_what_it_names_by_redirect(world: World) -> None:
    """Only alice's own rule names `secret` (gathered by redirect) and grants print: /rqp_claims
    gathers it and decides with her rules."""
    ticket = world.flow.ticket("print")
    refused = world.flow.ask(ticket, party=world.people["bob"])
    assert refused.json["error"] == "not_authorized_permission"  # no rule it can satisfy
    rule = rule_from_form(
        "alice",
        world.flow.rs_id,
        {
            "scopes": ["print"],
            "conditions-0-claim": ["secret"],
            "conditions-0-operator": ["equals"],
            "conditions-0-value": ["x"],
            "conditions-0-types": [REDIRECT],
        },
    )
    add_owner_rule(world.store, "alice", rule, world.clock.now())
    ticket = world.flow.ticket("print")
    link = world.link(world.redirect_entry(ticket)["value"])
    sign_in(world.http, "bob", PASSWORD)
    assert back(world.choose(link, "share")) == {"access": "granted", "state": STATE}
    assert "secret" in [claim.name for claim in gathered_claims(world.store, ticket, "bob")]
    assert world.flow.ask(ticket, party=world.people["bob"]).status == 201
