"""Signing in at an external OpenID Connect provider (`pages.external_signin`): our side through
the Flask test client, the provider a real HTTP server on loopback (`fake_provider`)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import pytest
from flask import Flask
from flask.testing import FlaskClient

from umaserver import create_app
from umaserver.config import load_config
from umaserver.pages import csrf, external_signin
from umaserver.services import accounts
from umaserver.storage import Storage as Store

from .conftest import FakeClock, make_party, make_web_client, write_config
from .fake_provider import CLIENT_ID, FakeProvider
from .flows import FlaskApi, Flow


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as started:
        yield started


@pytest.fixture
def config_path(tmp_path: Path, provider: FakeProvider) -> Path:
    # alice's sets may be viewed by whoever shares an email the provider vouches for.
    rules = (
        '[[rules]]\nid = "by-provider"\nowner = "alice"\nscopes = ["view"]\n'
        '[[rules.conditions]]\nclaim = "email"\nexists = true\n'
        f'types = ["claim-client-redirect-1.0"]\nissuers = ["{provider.issuer}"]\n'
    )
    (tmp_path / "policies.toml").write_text(rules, encoding="utf-8")
    (tmp_path / "op-jwks.json").write_text(json.dumps(provider.jwks), encoding="utf-8")
    # Short bounds, for the cases that reach them.
    extra = "[claims]\nprovider_timeout = 1\nprovider_max_bytes = 8192\n" + provider.config_entry()
    return write_config(tmp_path, extra=extra)


def start(http: FlaskClient, index: int = 0, next_path: str = "/account") -> dict[str, str]:
    """Follows a "Sign in with ..." button: the parameters of the authorization request."""
    answer = http.get(f"/rqp_claims/external/{index}?next={quote(next_path)}")
    assert answer.status_code == 303, answer.text
    location = urlsplit(answer.headers["Location"])
    return {name: values[0] for name, values in parse_qs(location.query).items()}


def back(http: FlaskClient, query: str) -> object:
    return http.get(f"/rqp_claims/callback?{query}")


def link(store: Store, username: str, provider: FakeProvider, subject: str) -> str:
    user = accounts.create_user(store, 1, username, None, {})
    assert user is not None
    assert store.link_identity(provider.issuer, subject, user.sub, 1)
    return user.sub


def identity_in(http: FlaskClient) -> external_signin.ExternalIdentity | None:
    with http:
        http.get("/")
        return external_signin.current_identity()


def test_the_authorization_request_has_pkce_state_nonce_and_our_callback(
    http: FlaskClient, provider: FakeProvider
) -> None:
    answer = http.get("/rqp_claims/external/0?next=/account")
    assert answer.status_code == 303
    assert answer.headers["Location"].startswith(provider.issuer + "/auth?")
    params = start(http)
    assert params["response_type"] == "code"
    assert params["client_id"] == CLIENT_ID
    assert params["redirect_uri"] == "http://uma.test/rqp_claims/callback"
    assert params["scope"] == "openid email profile"
    assert params["code_challenge_method"] == "S256" and len(params["code_challenge"]) == 43
    assert len(params["state"]) >= 20 and len(params["nonce"]) >= 20
    cookie = answer.headers["Set-Cookie"]
    assert cookie.startswith("umaserver_rp=")
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/" in cookie


def test_a_linked_identity_signs_its_user_in(
    http: FlaskClient, store: Store, provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    link(store, "alice", provider, "op-alice")
    assert http.get("/account").status_code == 303  # not signed in yet
    params = start(http)
    code = provider.approve(params, "op-alice", given_name="Alice")
    with caplog.at_level(logging.INFO, logger="umaserver.gathering"):
        answer = back(http, f"code={code}&state={params['state']}")
    assert answer.status_code == 303
    assert answer.headers["Location"] == "http://uma.test/account"
    assert http.get("/account").status_code == 200
    assert "outcome=linked" in caplog.text and "username='alice'" in caplog.text
    # The code went back with its PKCE verifier and our redirect URI (the provider checked both).
    (request,) = provider.token_requests
    assert request["code_verifier"] and request["redirect_uri"] == params["redirect_uri"]
    identity = identity_in(http)
    assert identity is not None
    assert (identity.issuer, identity.subject) == (provider.issuer, "op-alice")
    assert identity.display_name == "Example ID"
    assert identity.claims == {"given_name": "Alice", "email": "alice@op.example"}


def test_an_unlinked_identity_signs_nobody_in_and_is_remembered(
    http: FlaskClient, store: Store, provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    link(store, "alice", provider, "op-alice")
    params = start(http)
    back(http, f"code={provider.approve(params, 'op-alice')}&state={params['state']}")
    assert http.get("/account").status_code == 200
    # Someone else signs in at the provider in this browser: alice is signed out.
    params = start(http)
    with caplog.at_level(logging.INFO, logger="umaserver.gathering"):
        answer = back(
            http, f"code={provider.approve(params, 'op-mallory')}&state={params['state']}"
        )
    assert answer.status_code == 303
    assert http.get("/account").status_code == 303
    assert "outcome=unlinked" in caplog.text
    identity = identity_in(http)
    assert identity is not None and identity.subject == "op-mallory"
    assert store.linked_user(identity.issuer, identity.subject) is None
    # No protocol claims among the person's.
    assert not {"iss", "aud", "exp", "iat", "nonce", "auth_time", "sub"} & set(identity.claims)


def test_signing_out_forgets_the_identity(
    http: FlaskClient, store: Store, provider: FakeProvider
) -> None:
    link(store, "alice", provider, "op-alice")
    params = start(http)
    back(http, f"code={provider.approve(params, 'op-alice')}&state={params['state']}")
    assert identity_in(http) is not None
    with http:
        http.get("/")
        token = csrf.token()
    assert http.post("/signout", data={"csrf_token": token}).status_code == 303
    assert identity_in(http) is None
    # And forget_identity() does the same.
    params = start(http)
    back(http, f"code={provider.approve(params)}&state={params['state']}")
    assert identity_in(http) is not None
    with http:
        http.get("/")
        external_signin.forget_identity()
        assert external_signin.current_identity() is None


def test_the_identity_is_cut_to_fit_the_cookie(
    http: FlaskClient, provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    params = start(http)
    code = provider.approve(params, big="x" * 3000, small="ok")
    with caplog.at_level(logging.INFO, logger="umaserver.gathering"):
        back(http, f"code={code}&state={params['state']}")
    identity = identity_in(http)
    assert identity is not None
    assert identity.claims == {"small": "ok", "email": "alice@op.example"}
    assert identity.dropped == ("big",)
    assert "dropped_claims=['big']" in caplog.text


def test_the_providers_for_the_buttons(app: Flask, provider: FakeProvider) -> None:
    with app.test_request_context("/"):
        assert external_signin.providers() == [
            external_signin.SignInProvider(0, provider.issuer, "Example ID")
        ]
        assert external_signin.start_url(0, "/rqp_claims?x=1") == (
            "http://uma.test/rqp_claims/external/0?next=/rqp_claims%3Fx%3D1"
        )


def test_redirect_required_does_not_say_where_to_sign_in_and_the_page_offers_every_way(
    http: FlaskClient, store: Store, provider: FakeProvider
) -> None:
    rs = make_party(store, "alice", "uma_protection")
    client_id, _ = make_web_client(store, "Viewer", ["https://viewer.test/back"])
    bob = make_party(store, "bob", "uma_authorization", client_id=client_id)
    flow = Flow(FlaskApi(http), rs, bob, {"name": "Photos", "scopes": ["view"]})
    reply = flow.ask(flow.ticket("view"))
    assert reply.status == 403, reply.text
    [entry] = reply.json["need_claims"]
    assert entry["type"] == "redirect_required"
    # Only the provider can vouch for the email, yet the client is not told where (the spec
    # keeps the choice of claims source from it).
    assert entry["name"] == "Sign in to share your 'email'"
    assert provider.issuer not in reply.text and "Example ID" not in reply.text
    query = {
        "scope": entry["value"],
        "redirect_uri": "https://viewer.test/back",
        "client_id": client_id,
        "state": "s",
    }
    page = http.get("/rqp_claims?" + urlencode(query))
    assert page.status_code == 200, page.text
    assert 'id="signin-local"' in page.text and "Sign in with Example ID" in page.text


# -- what goes wrong: an error page, never a 500, nobody signed in ----------------------------


def refused(answer: object, status: int, words: str = "") -> None:
    assert answer.status_code == status, answer.text  # type: ignore[attr-defined]
    assert answer.mimetype == "text/html"  # type: ignore[attr-defined]
    assert words in answer.text  # type: ignore[attr-defined]
    assert "Traceback" not in answer.text  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "next_path", ["https://evil.example/", "//evil.example/x", "", "account", "/\\evil.example"]
)
def test_next_must_be_a_path_of_this_server(http: FlaskClient, next_path: str) -> None:
    answer = http.get(f"/rqp_claims/external/0?next={quote(next_path)}")
    refused(answer, 400, "does not say where to go")


def test_an_unknown_provider_and_a_repeated_next(http: FlaskClient) -> None:
    refused(http.get("/rqp_claims/external/7?next=/"), 404)
    refused(http.get("/rqp_claims/external/0?next=/&next=/account"), 400, "more than once")


def test_a_state_this_browser_did_not_start_is_refused(
    app: Flask, http: FlaskClient, provider: FakeProvider, store: Store
) -> None:
    link(store, "alice", provider, "op-alice")
    params = start(http)
    code = provider.approve(params, "op-alice")
    # The victim's browser receives the attacker's code and state (login CSRF).
    victim = app.test_client()
    refused(
        back(victim, f"code={code}&state={params['state']}"), 400, "not started in this browser"
    )
    refused(back(http, f"code={code}&state=made-up"), 400, "not started in this browser")
    refused(back(http, f"code={code}"), 400, "not started in this browser")
    # Used once, a state is gone.
    assert back(http, f"code={code}&state={params['state']}").status_code == 303
    refused(back(http, f"code={code}&state={params['state']}"), 400, "not started")


def test_an_error_from_the_provider(http: FlaskClient, caplog: pytest.LogCaptureFixture) -> None:
    params = start(http)
    with caplog.at_level(logging.INFO, logger="umaserver.gathering"):
        answer = back(http, f"error=access_denied&state={params['state']}")
    refused(answer, 400, "The sign-in at Example ID was not completed (access_denied).")
    assert "outcome=failed" in caplog.text
    # That sign-in is over.
    refused(back(http, f"code=x&state={params['state']}"), 400, "not started")


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"nonce": "another-sign-in"}, "was not for this sign-in"),
        ({"nonce": None}, "was not for this sign-in"),
        ({"aud": "someone-else"}, "could not be verified"),
        ({"iss": "https://other.example"}, "could not be verified"),
        ({"exp": 1000}, "could not be verified"),
    ],
)
def test_an_id_token_that_fails_is_refused(
    http: FlaskClient, store: Store, provider: FakeProvider, extra: dict[str, object], words: str
) -> None:
    link(store, "alice", provider, "op-alice")
    provider.id_token_extra = extra
    params = start(http)
    refused(
        back(http, f"code={provider.approve(params, 'op-alice')}&state={params['state']}"),
        400,
        words,
    )
    assert http.get("/account").status_code == 303
    assert identity_in(http) is None


def test_a_code_the_provider_refuses(http: FlaskClient) -> None:
    params = start(http)
    refused(back(http, f"code=never-issued&state={params['state']}"), 400, "did not accept")


def test_userinfo_about_someone_else_is_refused(
    http: FlaskClient, store: Store, provider: FakeProvider
) -> None:
    link(store, "alice", provider, "op-alice")
    provider.userinfo = {"sub": "op-bob"}
    params = start(http)
    answer = back(http, f"code={provider.approve(params, 'op-alice')}&state={params['state']}")
    refused(answer, 400, "do not agree")
    assert http.get("/account").status_code == 303


def test_a_provider_too_slow_is_a_503(http: FlaskClient, provider: FakeProvider) -> None:
    provider.token_delay = 2  # provider_timeout is 1
    params = start(http)
    refused(back(http, f"code={provider.approve(params)}&state={params['state']}"), 503)


def test_an_oversized_answer_is_a_502(http: FlaskClient, provider: FakeProvider) -> None:
    provider.token_padding = 10_000  # provider_max_bytes is 8192
    params = start(http)
    refused(back(http, f"code={provider.approve(params)}&state={params['state']}"), 502)


# -- discovery ---------------------------------------------------------------------------------


def test_a_provider_found_by_discovery(tmp_path: Path, provider: FakeProvider) -> None:
    app = _app_with(tmp_path, provider, explicit=False)
    http = app.test_client()
    params = start(http)
    assert params["redirect_uri"] == "http://uma.test/rqp_claims/callback"
    answer = back(http, f"code={provider.approve(params)}&state={params['state']}")
    assert answer.status_code == 303
    assert identity_in(http) is not None


def test_a_discovery_document_of_another_issuer_is_a_503(
    tmp_path: Path, provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    provider.discovery_issuer = "https://impostor.example"
    app = _app_with(tmp_path, provider, explicit=False)
    with caplog.at_level(logging.WARNING, logger="umaserver.gathering"):
        refused(app.test_client().get("/rqp_claims/external/0?next=/"), 503)
    assert "is not" in caplog.text and "impostor" in caplog.text


def test_with_an_https_issuer_the_cookie_is_secure(tmp_path: Path, provider: FakeProvider) -> None:
    app = _app_with(tmp_path, provider, explicit=True, issuer="https://uma.example")
    answer = app.test_client().get("/rqp_claims/external/0?next=/", base_url="https://uma.example")
    assert answer.status_code == 303
    cookie = answer.headers["Set-Cookie"]
    assert cookie.startswith("__Host-umaserver_rp=") and "Secure" in cookie


def _app_with(
    tmp_path: Path, provider: FakeProvider, explicit: bool, issuer: str = "http://uma.test"
) -> Flask:
    folder = tmp_path / "other"
    folder.mkdir()
    (folder / "policies.toml").write_text("", encoding="utf-8")
    (folder / "op-jwks.json").write_text(json.dumps(provider.jwks), encoding="utf-8")
    entry = provider.config_entry(explicit=explicit)
    config = load_config(write_config(folder, issuer=issuer, extra=entry))
    app = create_app(config, clock=FakeClock())
    app.config["TESTING"] = True
    return app
