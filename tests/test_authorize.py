"""The authorization endpoint (`/authorize`) through the Flask test client: which bad requests get
an error page and which go back to the client, sign-in first, the consent page and its form, and
codes that /token exchanges for a person's PAT or AAT."""

from __future__ import annotations

import logging
import secrets
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from flask.testing import FlaskClient

from umaserver import secrets_at_rest

from .conftest import Store, make_person, make_web_client
from .pages_helpers import TOKEN, sign_in

REDIRECT = "https://app.test/callback?x=1"
LOOPBACK = "http://127.0.0.1:8400/callback"
VERIFIER = secrets.token_urlsafe(48)
CHALLENGE = create_s256_code_challenge(VERIFIER)


class World:
    """A confidential client `app` and a public client `spa` (each with REDIRECT and LOOPBACK),
    and alice, who can sign in."""

    def __init__(self, http: FlaskClient, store: Store) -> None:
        self.http = http
        self.app = make_web_client(store, "Photo Printer", [REDIRECT, LOOPBACK])
        self.spa = make_web_client(store, "Photo Viewer", [REDIRECT, LOOPBACK], public=True)
        make_person(store, "alice", secrets_at_rest.hash_password("alice's password"))

    def sign_in(self) -> None:
        assert sign_in(self.http, "alice", "alice's password").status_code == 303

    def params(self, client: tuple[str, str] | None = None, **extra: Any) -> dict[str, Any]:
        base: dict[str, Any] = {
            "response_type": "code",
            "client_id": (client or self.app)[0],
            "redirect_uri": REDIRECT,
            "scope": "uma_protection",
            "state": "s t/a+te=1",
        }
        if client is self.spa:
            base |= {"code_challenge": CHALLENGE, "code_challenge_method": "S256"}
        return {key: value for key, value in (base | extra).items() if value is not None}

    def url(self, client: tuple[str, str] | None = None, **extra: Any) -> str:
        return "/authorize?" + urlencode(self.params(client, **extra), doseq=True)

    def decide(self, url: str, decision: str = "allow") -> Any:
        page = self.http.get(url)
        assert page.status_code == 200, page.text
        found = TOKEN.search(page.text)
        assert found is not None
        return self.http.post(url, data={"csrf_token": found.group(1), "decision": decision})

    def exchange(self, code: str, client: tuple[str, str] | None = None, **extra: str) -> Any:
        client_id, secret = client or self.app
        data = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, **extra}
        if secret:
            return self.http.post("/token", data=data, auth=(client_id, secret))
        return self.http.post("/token", data={**data, "client_id": client_id})


@pytest.fixture
def world(http: FlaskClient, store: Store) -> World:
    return World(http, store)


def query(response: Any) -> dict[str, str]:
    location = response.headers["Location"]
    return {key: value[0] for key, value in parse_qs(urlsplit(location).query).items()}


def assert_page(response: Any, status: int = 400) -> None:
    assert response.status_code == status, response.text
    assert "Location" not in response.headers
    assert response.mimetype == "text/html"


# -- errors shown as pages: the client or its redirect URI cannot be trusted ----------------------


PAGE_ERRORS = [
    ("no parameters", None),
    ("unknown client", {"client_id": "nobody"}),
    ("client_id twice", {"client_id": ["A", "A"]}),
    ("oversized client_id", {"client_id": "c" * 5000}),
    ("mismatched redirect URI", {"redirect_uri": "https://evil.test/callback"}),
    ("redirect URI with more", {"redirect_uri": REDIRECT + "&y=2"}),
    ("redirect URI twice", {"redirect_uri": [REDIRECT, REDIRECT]}),
    ("no redirect URI", {"redirect_uri": None}),
    ("oversized redirect URI", {"redirect_uri": REDIRECT + "a" * 5000}),
    ("confidential loopback port", {"redirect_uri": "http://127.0.0.1:9999/callback"}),
]


@pytest.mark.parametrize(("case", "change"), PAGE_ERRORS, ids=[c for c, _ in PAGE_ERRORS])
def test_a_bad_client_or_redirect_uri_gets_a_page_never_a_redirect(
    world: World, http: FlaskClient, case: str, change: dict[str, Any] | None
) -> None:
    if change is None:
        url = "/authorize"
    else:
        if change.get("client_id") == ["A", "A"]:
            change = {"client_id": [world.app[0], world.app[0]]}
        url = world.url(**change)
    for signed_in in (False, True):
        if signed_in:
            world.sign_in()
        answer = http.get(url)
        assert_page(answer)
        assert "<h1>" in answer.text


def test_a_public_clients_loopback_port_may_vary_and_token_takes_the_same(
    world: World, http: FlaskClient
) -> None:
    world.sign_in()
    other_port = "http://127.0.0.1:51234/callback"
    answer = world.decide(world.url(world.spa, redirect_uri=other_port))
    assert answer.status_code == 302
    assert answer.headers["Location"].startswith(other_port + "?code=")
    code = query(answer)["code"]
    # Another path or host is no loopback variation.
    for uri in ("http://127.0.0.1:51234/other", "http://localhost:51234/callback"):
        assert_page(http.get(world.url(world.spa, redirect_uri=uri)))
    wrong = world.exchange(code, world.spa, code_verifier=VERIFIER)  # REDIRECT, not other_port
    assert wrong.status_code == 400 and wrong.json["error"] == "invalid_grant"
    code = query(http.get(world.url(world.spa, redirect_uri=other_port)))["code"]  # remembered
    tokens = world.exchange(code, world.spa, code_verifier=VERIFIER, redirect_uri=other_port)
    assert tokens.status_code == 200, tokens.json


# -- errors sent back to the client (RFC 6749 4.1.2.1) -------------------------------------------

REDIRECTED = [
    ("unsupported response_type", {"response_type": "token"}, "unsupported_response_type"),
    ("no response_type", {"response_type": None}, "unsupported_response_type"),
    ("no scope", {"scope": None}, "invalid_scope"),
    ("unknown scope", {"scope": "openid"}, "invalid_scope"),
    (
        "public without PKCE",
        {"code_challenge": None, "code_challenge_method": None},
        "invalid_request",
    ),
    ("plain PKCE", {"code_challenge_method": "plain"}, "invalid_request"),
    ("challenge without method", {"code_challenge_method": None}, "invalid_request"),
    ("malformed challenge", {"code_challenge": "short"}, "invalid_request"),
    ("scope twice", {"scope": ["uma_protection", "uma_protection"]}, "invalid_request"),
    ("response_type twice", {"response_type": ["code", "code"]}, "invalid_request"),
    ("oversized scope", {"scope": "uma_protection " * 100}, "invalid_request"),
    ("oversized challenge", {"code_challenge": "a" * 200}, "invalid_request"),
]


@pytest.mark.parametrize(("case", "change", "error"), REDIRECTED, ids=[c for c, _, _ in REDIRECTED])
def test_other_errors_go_back_to_the_client_with_the_state(
    world: World, http: FlaskClient, case: str, change: dict[str, Any], error: str
) -> None:
    answer = http.get(world.url(world.spa, **change))  # not even signed in
    assert answer.status_code == 302, answer.text
    assert answer.headers["Location"].startswith(REDIRECT + "&")
    got = query(answer)
    assert got["x"] == "1"
    assert got["error"] == error and got["error_description"]
    assert got["state"] == "s t/a+te=1"
    assert "code" not in got


def test_a_repeated_or_oversized_state_is_not_echoed(world: World, http: FlaskClient) -> None:
    for state in (["a", "b"], "s" * 5000):
        got = query(http.get(world.url(state=state)))
        assert got["error"] == "invalid_request" and "state" not in got


# -- sign-in, consent, codes ---------------------------------------------------------------------


def test_not_signed_in_goes_to_sign_in_and_comes_back(world: World, http: FlaskClient) -> None:
    url = world.url()
    answer = http.get(url)
    assert answer.status_code == 303
    location = urlsplit(answer.headers["Location"])
    assert location.path == "/signin"
    assert parse_qs(location.query)["next"] == [url]
    signed_in = sign_in(http, "alice", "alice's password", next_path=url)
    assert signed_in.headers["Location"] == "http://uma.test" + url
    page = http.get(url)
    assert page.status_code == 200 and "Photo Printer" in page.text


def test_the_consent_page_names_the_client_the_scope_and_the_person(
    world: World, http: FlaskClient, store: Store
) -> None:
    world.sign_in()
    page = http.get(world.url(scope="uma_protection uma_authorization"))
    assert page.status_code == 200
    text = page.text
    assert "Photo Printer" in text and "alice" in text
    assert "register and manage resource sets for you" in text
    assert "ask for access on your behalf" in text
    assert 'name="decision" value="allow"' in text and 'name="decision" value="deny"' in text
    # The client's redirect origin may be the target of the form's redirect.
    assert "form-action 'self' https://app.test" in page.headers["Content-Security-Policy"]
    assert page.headers["X-Frame-Options"] == "DENY"


def test_the_consent_page_says_what_the_app_acts_with(
    world: World, http: FlaskClient, store: Store
) -> None:
    world.sign_in()
    text = http.get(world.url(scope="uma_authorization")).text
    # alice's account has no attributes: her username only.
    assert "it acts as you: this server tells the owners' rules your username" in text
    assert "<strong>alice</strong>." in text and "your roles" not in text
    assert "your groups" not in text and "e-mail" not in text
    claims = {"roles": ["editor", "admin"], "groups": "research", "email": "dora@example.com"}
    make_person(store, "dora", secrets_at_rest.hash_password("dora's password"), claims)
    assert sign_in(http, "dora", "dora's password").status_code == 303
    text = http.get(world.url(scope="uma_authorization")).text
    assert (
        "your username <strong>dora</strong>, your e-mail address"
        ' <strong>dora@example.com</strong>, your roles <strong class="role">editor</strong>,'
        ' <strong class="role">admin</strong>, your groups <strong class="group">research</strong>.'
    ) in text


def test_the_consent_page_shows_the_client_uri_as_unverified_text(
    http: FlaskClient, store: Store
) -> None:
    from umaserver.services import clients

    settings = clients.ClientSettings(
        name="<b>Evil</b>",
        redirect_uris=(REDIRECT,),
        grant_types=("authorization_code",),
        client_uri="https://evil.test/about",
    )
    client_id = clients.create_client(store, 0, settings).client.client_id
    make_person(store, "bob", secrets_at_rest.hash_password("pw"))
    sign_in(http, "bob", "pw")
    url = "/authorize?" + urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT,
            "scope": "uma_authorization",
        }
    )
    page = http.get(url)
    assert "&lt;b&gt;Evil&lt;/b&gt;" in page.text and "<b>Evil" not in page.text
    assert "https://evil.test/about" in page.text and "(not verified)" in page.text
    assert 'href="https://evil.test' not in page.text


@pytest.mark.parametrize("token", [None, "wrong", "twice"])
def test_the_consent_form_needs_its_csrf_token(
    world: World, http: FlaskClient, token: str | None
) -> None:
    world.sign_in()
    url = world.url()
    good = TOKEN.search(http.get(url).text)
    assert good is not None
    data: dict[str, Any] = {"decision": "allow"}
    if token == "wrong":
        data["csrf_token"] = "0" * 64
    elif token == "twice":
        data["csrf_token"] = [good.group(1), good.group(1)]
    answer = http.post(url, data=data)
    assert_page(answer)


def test_deny_sends_access_denied_with_the_state(world: World) -> None:
    world.sign_in()
    answer = world.decide(world.url(), "deny")
    assert answer.status_code == 302
    got = query(answer)
    assert got["error"] == "access_denied" and got["state"] == "s t/a+te=1"
    assert "code" not in got


def test_allow_gives_a_code_for_a_pat_that_registers_a_resource_set(
    world: World, http: FlaskClient, caplog: pytest.LogCaptureFixture
) -> None:
    world.sign_in()
    with caplog.at_level(logging.INFO, logger="umaserver"):
        answer = world.decide(world.url())
    assert answer.status_code == 302
    got = query(answer)
    assert got["state"] == "s t/a+te=1" and got["x"] == "1"
    code = got["code"]
    logged = caplog.text
    assert "consent given" in logged and "code issued" in logged
    assert code not in logged
    tokens = world.exchange(code)
    assert tokens.status_code == 200, tokens.json
    assert tokens.json["scope"] == "uma_protection"
    pat = {"Authorization": f"Bearer {tokens.json['access_token']}"}
    created = http.post(
        "/rs/resource_set", json={"name": "Photos", "scopes": ["view"]}, headers=pat
    )
    assert created.status_code == 201, created.json
    # A reused code is refused and revokes what it gave.
    again = world.exchange(code)
    assert again.status_code == 400 and again.json["error"] == "invalid_grant"
    assert http.get("/rs/resource_set", headers=pat).status_code == 401


def test_a_requesting_party_gets_an_aat_with_a_legacy_scope_uri(
    world: World, http: FlaskClient
) -> None:
    world.sign_in()
    legacy = "http://docs.kantarainitiative.org/uma/scopes/authz.json"
    code = query(world.decide(world.url(world.spa, scope=legacy)))["code"]
    tokens = world.exchange(code, world.spa, code_verifier=VERIFIER)
    assert tokens.status_code == 200, tokens.json
    assert tokens.json["scope"] == "uma_authorization"
    rpt = http.post("/rpt", headers={"Authorization": f"Bearer {tokens.json['access_token']}"})
    assert rpt.status_code == 200


@pytest.mark.parametrize(
    ("asked", "granted"),
    [
        ("openid uma_protection", "uma_protection"),  # pyuma's request
        ("uma_protection profile openid email", "uma_protection"),
        (
            "openid http://docs.kantarainitiative.org/uma/scopes/authz.json uma_protection",
            "uma_authorization uma_protection",
        ),
    ],
)
def test_scopes_not_offered_beside_offered_ones_are_left_out_and_the_token_says_so(
    world: World, http: FlaskClient, asked: str, granted: str
) -> None:
    # RFC 6749 3.3: the server may grant less than asked, and says what in the token response.
    world.sign_in()
    page = http.get(world.url(scope=asked))
    assert page.status_code == 200, page.text
    shown = page.text.split('<ul class="scopes">', 1)[1].split("</ul>", 1)[0]
    assert shown.count("<li>") == len(granted.split(" "))
    assert "openid" not in shown and "profile" not in shown
    code = query(world.decide(world.url(scope=asked)))["code"]
    tokens = world.exchange(code)
    assert tokens.status_code == 200, tokens.json
    assert tokens.json["scope"] == granted
    # The consent given is for what was granted: asking for that alone is not asked again.
    again = http.get(world.url(scope=granted))
    assert again.status_code == 302 and "code" in query(again)


def test_scopes_not_offered_beside_one_the_client_may_not_have_are_still_invalid_scope(
    world: World, http: FlaskClient, store: Store
) -> None:
    from umaserver.services import clients

    settings = clients.ClientSettings(
        name="Printer", redirect_uris=(REDIRECT,), scope=("uma_protection",)
    )
    client_id = clients.create_client(store, 0, settings).client.client_id
    got = query(http.get(world.url((client_id, ""), scope="openid uma_authorization")))
    assert got["error"] == "invalid_scope"
    assert "registered for the scope" in got["error_description"]


def test_consent_is_remembered_per_client_and_scope(world: World, http: FlaskClient) -> None:
    world.sign_in()
    assert world.decide(world.url()).status_code == 302
    again = http.get(world.url(state="second"))
    assert again.status_code == 302
    got = query(again)
    assert got["state"] == "second" and got["code"]
    # Another scope, or another client, asks again.
    assert http.get(world.url(scope="uma_authorization")).status_code == 200
    assert http.get(world.url(world.spa)).status_code == 200
    # Signed out: sign-in first, consent or not.
    token = TOKEN.search(http.get("/").text)
    assert token is not None
    http.post("/signout", data={"csrf_token": token.group(1)})
    assert http.get(world.url()).status_code == 303


def test_a_public_client_must_send_the_verifier(world: World) -> None:
    world.sign_in()
    code = query(world.decide(world.url(world.spa)))["code"]
    missing = world.exchange(code, world.spa)
    assert missing.status_code == 400
    code = query(world.http.get(world.url(world.spa)))["code"]  # consent remembered
    wrong = world.exchange(code, world.spa, code_verifier=secrets.token_urlsafe(48))
    assert wrong.status_code == 400 and wrong.json["error"] == "invalid_grant"


def test_an_unknown_decision_is_a_page(world: World, http: FlaskClient) -> None:
    world.sign_in()
    url = world.url()
    found = TOKEN.search(http.get(url).text)
    assert found is not None
    answer = http.post(url, data={"csrf_token": found.group(1), "decision": "maybe"})
    assert_page(answer)
