"""The authorization code and refresh token grants at /token, through HTTP. Codes are minted by
`services.grants.issue_code`, standing in for /authorize, and exchanged as a real
client would. Also the consent service and the pruning of codes and refresh tokens."""

from __future__ import annotations

import logging
import secrets
from typing import Any

import pytest
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from flask.testing import FlaskClient
from werkzeug.datastructures import MultiDict

from umaserver.config import Config
from umaserver.services import consents
from umaserver.services.grants import BadCodeChallenge, issue_code
from umaserver.services.maintenance import EXPIRED_MEMORY, prune

from .conftest import (
    FakeClock,
    Store,
    dump_database,
    make_party,
    make_user,
    make_web_client,
)

REDIRECT = "https://app.test/callback?x=1"
CODE_LIFETIME = 60
REFRESH_LIFETIME = 30 * 24 * 3600


def assert_error(response: Any, status: int, error: str, fragment: str = "") -> None:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    assert response.headers["Cache-Control"] == "no-store"
    assert response.json["error"] == error
    assert fragment in response.json["error_description"]


class Web:
    """A confidential client `app`, a public client `spa` and another client `other`, each with
    REDIRECT registered, and the person alice."""

    def __init__(self, http: FlaskClient, store: Store, clock: FakeClock) -> None:
        self.http, self.store, self.clock = http, store, clock
        self.app = make_web_client(store, "an app", [REDIRECT])
        self.spa = make_web_client(store, "a single-page app", [REDIRECT], public=True)
        self.other = make_web_client(store, "another app", [REDIRECT])
        self.alice = make_user(store, "alice")

    def code(
        self,
        client: tuple[str, str] | None = None,
        scope: str = "uma_protection",
        challenge: str | None = None,
        redirect_uri: str = REDIRECT,
    ) -> str:
        client_id = (client or self.app)[0]
        return issue_code(
            self.store,
            self.clock.now(),
            client_id,
            self.alice.sub,
            redirect_uri,
            scope,
            challenge,
            "S256" if challenge else None,
            CODE_LIFETIME,
        )

    def token(self, data: Any, client: tuple[str, str] | None = None) -> Any:
        client_id, secret = client or self.app
        if secret:
            return self.http.post("/token", data=data, auth=(client_id, secret))
        if isinstance(data, MultiDict):
            data.add("client_id", client_id)
            return self.http.post("/token", data=data)
        return self.http.post("/token", data={**data, "client_id": client_id})

    def exchange(self, code: str, client: tuple[str, str] | None = None, **extra: str) -> Any:
        data = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT}
        return self.token({**data, **extra}, client)

    def refresh(
        self, refresh_token: str, client: tuple[str, str] | None = None, **extra: str
    ) -> Any:
        return self.token(
            {"grant_type": "refresh_token", "refresh_token": refresh_token, **extra}, client
        )

    def tokens(self, scope: str = "uma_protection") -> dict[str, Any]:
        response = self.exchange(self.code(scope=scope))
        assert response.status_code == 200, response.json
        body: dict[str, Any] = response.json
        return body

    def works(self, access_token: str) -> bool:
        """Whether the token is accepted (as a PAT at /rs, or as an AAT at /rpt)."""
        headers = {"Authorization": f"Bearer {access_token}"}
        answer = self.http.get("/rs/resource_set", headers=headers)
        if answer.status_code == 403:  # an AAT
            answer = self.http.post("/rpt", headers=headers)
        assert answer.status_code in (200, 401), answer.json
        return bool(answer.status_code == 200)


@pytest.fixture
def web(http: FlaskClient, store: Store, clock: FakeClock) -> Web:
    return Web(http, store, clock)


def verifier() -> str:
    return secrets.token_urlsafe(48)


# -- the code for a person's token ---------------------------------------------------------------


def test_a_code_gives_the_owner_a_pat_that_registers_her_resource_sets(
    web: Web, http: FlaskClient, store: Store
) -> None:
    response = web.exchange(web.code())
    assert response.status_code == 200, response.json
    body = response.json
    assert response.headers["Cache-Control"] == "no-store"
    assert body["token_type"] == "Bearer" and body["scope"] == "uma_protection"
    assert body["expires_in"] == 3600
    assert body["access_token"].startswith("uma_at_")
    assert body["refresh_token"].startswith("uma_rt_")
    pat = {"Authorization": f"Bearer {body['access_token']}"}
    created = http.post(
        "/rs/resource_set", json={"name": "Photos", "scopes": ["view"]}, headers=pat
    )
    assert created.status_code == 201, created.json
    # The set is alice's: her other PAT at the same resource server sees it.
    her_other_pat = make_party(store, "alice", "uma_protection", client_id=web.app[0])
    listed = http.get("/rs/resource_set", headers=her_other_pat.auth)
    assert listed.json == [created.json["_id"]]
    # ...and a PAT of someone else at that resource server does not.
    bobs = make_party(store, "bob", "uma_protection", client_id=web.app[0])
    assert http.get("/rs/resource_set", headers=bobs.auth).json == []


def test_a_code_gives_a_requesting_party_an_aat(web: Web, http: FlaskClient) -> None:
    body = web.tokens("uma_authorization")
    assert body["scope"] == "uma_authorization"
    rpt = http.post("/rpt", headers={"Authorization": f"Bearer {body['access_token']}"})
    assert rpt.status_code == 200 and rpt.json["rpt"]


def test_legacy_scope_uris_in_a_code_are_the_scope_names(web: Web) -> None:
    body = web.tokens("http://docs.kantarainitiative.org/uma/scopes/prot.json")
    assert body["scope"] == "uma_protection"


@pytest.mark.parametrize(
    ("case", "status", "error", "fragment"),
    [
        ("another client's code", 400, "invalid_grant", "another client"),
        ("unknown code", 400, "invalid_grant", "unknown"),
        ("another redirect_uri", 400, "invalid_grant", "redirect_uri"),
        ("redirect_uri differing in case", 400, "invalid_grant", "redirect_uri"),
        ("redirect_uri with a trailing slash", 400, "invalid_grant", "redirect_uri"),
        ("no redirect_uri", 400, "invalid_grant", "redirect_uri"),
        ("no code", 400, "invalid_request", "code"),
        ("expired code", 400, "invalid_grant", "expired"),
        ("code at its expiry", 400, "invalid_grant", "expired"),
        ("code just before its expiry", 200, "", ""),
        ("unauthenticated confidential client", 401, "invalid_client", ""),
        ("wrong secret", 401, "invalid_client", ""),
        ("code twice", 400, "invalid_request", "more than once"),
        ("redirect_uri twice", 400, "invalid_request", "more than once"),
        ("oversized code", 400, "invalid_grant", "unknown"),
        ("scope asked with the code", 200, "", ""),
    ],
)
def test_bad_code_exchanges(
    web: Web, clock: FakeClock, case: str, status: int, error: str, fragment: str
) -> None:
    code = web.code()
    data: Any = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT}
    client = web.app
    if case == "another client's code":
        client = web.other
    elif case == "unknown code":
        data["code"] = "uma_ac_" + "x" * 43
    elif case == "another redirect_uri":
        data["redirect_uri"] = "https://app.test/elsewhere"
    elif case == "redirect_uri differing in case":
        data["redirect_uri"] = REDIRECT.replace("app.test", "APP.test")
    elif case == "redirect_uri with a trailing slash":
        data["redirect_uri"] = REDIRECT + "/"
    elif case == "no redirect_uri":
        del data["redirect_uri"]
    elif case == "no code":
        del data["code"]
    elif case == "expired code":
        clock.advance(CODE_LIFETIME + 1)
    elif case == "code at its expiry":
        clock.advance(CODE_LIFETIME)
    elif case == "code just before its expiry":
        clock.advance(CODE_LIFETIME - 1)
    elif case == "unauthenticated confidential client":
        client = (web.app[0], "")
    elif case == "wrong secret":
        client = (web.app[0], "nope")
    elif case == "code twice":
        data = MultiDict([*data.items(), ("code", code)])
    elif case == "redirect_uri twice":
        data = MultiDict([*data.items(), ("redirect_uri", REDIRECT)])
    elif case == "oversized code":
        data["code"] = "x" * 100_000
    elif case == "scope asked with the code":
        data["scope"] = "uma_authorization"  # the code's own scope is what is granted
    response = web.token(data, client)
    if status == 200:
        assert response.status_code == 200, response.json
        assert response.json["scope"] == "uma_protection"
        return
    assert_error(response, status, error, fragment)
    # A refused exchange (other than a second one) leaves the code usable by its client.
    if case not in ("expired code", "code at its expiry", "code twice", "redirect_uri twice"):
        assert web.exchange(code).status_code == 200


def test_a_reused_code_is_refused_and_revokes_what_it_issued(web: Web) -> None:
    code = web.code()
    first = web.exchange(code).json
    assert web.works(first["access_token"])
    assert_error(web.exchange(code), 400, "invalid_grant", "used already")
    assert not web.works(first["access_token"])
    assert_error(web.refresh(first["refresh_token"]), 400, "invalid_grant")
    # Another grant of the same person and client is untouched.
    assert web.works(web.tokens()["access_token"])


def test_a_reused_code_revokes_the_tokens_refreshed_from_it_too(web: Web) -> None:
    code = web.code()
    first = web.exchange(code).json
    refreshed = web.refresh(first["refresh_token"]).json
    assert web.works(refreshed["access_token"])
    assert web.exchange(code).status_code == 400
    assert not web.works(refreshed["access_token"])
    assert_error(web.refresh(refreshed["refresh_token"]), 400, "invalid_grant")


# -- PKCE ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "status", "error", "fragment"),
    [
        ("right verifier", 200, "", ""),
        ("wrong verifier", 400, "invalid_grant", "challenge failed"),
        ("no verifier", 400, "invalid_request", "code_verifier"),
        ("malformed verifier", 400, "invalid_request", "code_verifier"),
        ("verifier without a challenge", 400, "invalid_request", "code_challenge"),
        ("the challenge as verifier", 400, "invalid_grant", "challenge failed"),
        ("public, right verifier", 200, "", ""),
        ("public, no verifier", 400, "invalid_request", "code_verifier"),
        ("public, code without a challenge", 400, "invalid_grant", "public client"),
        ("public, with a made-up secret", 401, "invalid_client", ""),
        ("public, verifier twice", 400, "invalid_request", "more than once"),
    ],
)
def test_pkce(
    web: Web, http: FlaskClient, case: str, status: int, error: str, fragment: str
) -> None:
    secret = verifier()
    challenge = create_s256_code_challenge(secret)
    public = case.startswith("public")
    client = web.spa if public else web.app
    code = web.code(
        client,
        challenge=None
        if case in ("verifier without a challenge", "public, code without a challenge")
        else challenge,
    )
    data: Any = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT}
    if case in ("right verifier", "public, right verifier", "verifier without a challenge"):
        data["code_verifier"] = secret
    elif case == "wrong verifier":
        data["code_verifier"] = verifier()
    elif case == "malformed verifier":
        data["code_verifier"] = "short"
    elif case == "the challenge as verifier":
        data["code_verifier"] = challenge
    elif case == "public, with a made-up secret":
        client = (web.spa[0], "made-up")
    elif case == "public, verifier twice":
        data = MultiDict([*data.items(), ("code_verifier", secret), ("code_verifier", secret)])
    response = web.token(data, client)
    if status == 200:
        assert response.status_code == 200, response.json
        assert web.works(response.json["access_token"])
        return
    assert_error(response, status, error, fragment)


@pytest.mark.parametrize(
    ("challenge", "method"),
    [
        ("c" * 43, "plain"),
        ("c" * 43, None),  # RFC 7636 reads no method as plain
        ("c" * 43, "s256"),
        ("c" * 42, "S256"),
        ("c" * 129, "S256"),
        ("c" * 42 + "=", "S256"),
        (None, "S256"),
    ],
)
def test_only_s256_challenges_make_codes(
    web: Web, store: Store, clock: FakeClock, challenge: str | None, method: str | None
) -> None:
    with pytest.raises(BadCodeChallenge):
        issue_code(
            store,
            clock.now(),
            web.app[0],
            web.alice.sub,
            REDIRECT,
            "uma_protection",
            challenge,
            method,
            60,
        )


def test_a_public_client_gets_no_client_credentials_token(web: Web) -> None:
    response = web.token({"grant_type": "client_credentials", "scope": "uma_protection"}, web.spa)
    assert_error(response, 401, "invalid_client")


# -- refresh tokens --------------------------------------------------------------------------------


def test_refresh_rotates_and_the_new_tokens_act_for_the_same_person(web: Web) -> None:
    first = web.tokens()
    second = web.refresh(first["refresh_token"])
    assert second.status_code == 200, second.json
    body = second.json
    assert body["refresh_token"] != first["refresh_token"]
    assert body["access_token"] != first["access_token"]
    assert body["scope"] == "uma_protection" and body["expires_in"] == 3600
    assert web.works(body["access_token"]) and web.works(first["access_token"])
    third = web.refresh(body["refresh_token"])
    assert third.status_code == 200, third.json


def test_a_used_refresh_token_is_refused_and_its_reuse_revokes_the_family(web: Web) -> None:
    first = web.tokens()
    second = web.refresh(first["refresh_token"]).json
    assert_error(web.refresh(first["refresh_token"]), 400, "invalid_grant", "used or revoked")
    for access_token in (first["access_token"], second["access_token"]):
        assert not web.works(access_token)
    assert_error(web.refresh(second["refresh_token"]), 400, "invalid_grant")
    # Other grants of the same person and client live on.
    assert web.works(web.tokens()["access_token"])


@pytest.mark.parametrize(
    ("case", "status", "error", "fragment"),
    [
        ("another client", 400, "invalid_grant", "another client"),
        ("unknown", 400, "invalid_grant", "unknown"),
        ("missing", 400, "invalid_request", "refresh_token"),
        ("expired", 400, "invalid_grant", "expired"),
        ("twice", 400, "invalid_request", "more than once"),
        ("wrong secret", 401, "invalid_client", ""),
        ("narrower scope", 200, "", ""),
        ("the same scope as a legacy URI", 200, "", ""),
        ("wider scope", 400, "invalid_scope", "no more than"),
        ("unknown scope", 400, "invalid_scope", "unknown"),
    ],
)
def test_refresh_requests(
    web: Web, clock: FakeClock, case: str, status: int, error: str, fragment: str
) -> None:
    scope = "uma_authorization uma_protection" if case == "narrower scope" else "uma_protection"
    first = web.tokens(scope)
    data: Any = {"grant_type": "refresh_token", "refresh_token": first["refresh_token"]}
    client = web.app
    if case == "another client":
        client = web.other
    elif case == "unknown":
        data["refresh_token"] = "uma_rt_unknown"
    elif case == "missing":
        del data["refresh_token"]
    elif case == "expired":
        clock.advance(REFRESH_LIFETIME)
    elif case == "twice":
        data = MultiDict([*data.items(), ("refresh_token", first["refresh_token"])])
    elif case == "wrong secret":
        client = (web.app[0], "nope")
    elif case == "narrower scope":
        data["scope"] = "uma_protection"
    elif case == "the same scope as a legacy URI":
        data["scope"] = "http://docs.kantarainitiative.org/uma/scopes/prot.json"
    elif case == "wider scope":
        data["scope"] = "uma_authorization"
    elif case == "unknown scope":
        data["scope"] = "admin"
    response = web.token(data, client)
    if status != 200:
        assert_error(response, status, error, fragment)
        if case in ("another client", "unknown", "missing", "wrong secret", "wider scope"):
            # Refused without using it: the refresh token still works for its client.
            assert web.refresh(first["refresh_token"]).status_code == 200
        return
    assert response.status_code == 200, response.json
    body = response.json
    assert body["scope"] == "uma_protection"
    if case == "narrower scope":
        # The new refresh token keeps the grant's whole scope (RFC 6749 6).
        again = web.refresh(body["refresh_token"], scope="uma_authorization")
        assert again.status_code == 200, again.json
        assert again.json["scope"] == "uma_authorization"


def test_client_credentials_still_gives_no_refresh_token(web: Web) -> None:
    response = web.token({"grant_type": "client_credentials", "scope": "uma_protection"})
    assert response.status_code == 200
    assert "refresh_token" not in response.json


def test_a_public_client_refreshes_with_its_client_id(web: Web) -> None:
    secret = verifier()
    code = web.code(web.spa, challenge=create_s256_code_challenge(secret))
    first = web.exchange(code, web.spa, code_verifier=secret).json
    second = web.refresh(first["refresh_token"], web.spa)
    assert second.status_code == 200, second.json
    assert web.works(second.json["access_token"])


def test_codes_and_refresh_tokens_are_stored_as_digests(web: Web, config: Config) -> None:
    code = web.code()
    body = web.exchange(code).json
    dump = dump_database(config.database)
    for secret in (code, body["access_token"], body["refresh_token"]):
        assert secret not in dump


# -- consents --------------------------------------------------------------------------------------


def test_consents_are_remembered_per_client_and_scope(
    web: Web, store: Store, clock: FakeClock
) -> None:
    alice, app = web.alice.sub, web.app[0]
    assert not consents.consent_for(store, alice, app, "uma_protection")
    consents.remember_consent(store, clock.now(), alice, app, "uma_protection")
    assert consents.consent_for(store, alice, app, "uma_protection")
    assert not consents.consent_for(store, alice, app, "uma_authorization uma_protection")
    assert not consents.consent_for(store, alice, web.other[0], "uma_protection")
    assert not consents.consent_for(store, alice, app, "")
    consents.remember_consent(store, clock.now(), alice, app, "uma_authorization")
    assert consents.consent_for(store, alice, app, "uma_authorization uma_protection")
    assert [(c.client_id, c.scope) for c in consents.consents_of(store, alice)] == [
        (app, "uma_authorization"),
        (app, "uma_protection"),
    ]


def test_withdrawing_a_consent_revokes_the_tokens_issued_under_it(
    web: Web, store: Store, clock: FakeClock
) -> None:
    alice, app = web.alice.sub, web.app[0]
    consents.remember_consent(store, clock.now(), alice, app, "uma_protection uma_authorization")
    pat, aat = web.tokens("uma_protection"), web.tokens("uma_authorization")
    own = web.token({"grant_type": "client_credentials", "scope": "uma_protection"}).json
    assert consents.withdraw_consent(store, alice, app, "uma_protection") is True
    assert not web.works(pat["access_token"])
    assert_error(web.refresh(pat["refresh_token"]), 400, "invalid_grant")
    # The other scope's tokens, and the client's own token, are not under that consent.
    assert web.works(aat["access_token"]) and web.works(own["access_token"])
    assert web.refresh(aat["refresh_token"]).status_code == 200
    assert [c.scope for c in consents.consents_of(store, alice)] == ["uma_authorization"]
    assert consents.withdraw_consent(store, alice, app, "uma_protection") is False


# -- pruning ---------------------------------------------------------------------------------------


def test_codes_and_refresh_tokens_are_pruned_a_day_after_expiry(
    web: Web, store: Store, clock: FakeClock
) -> None:
    web.code()
    web.tokens()  # its code (used) and its refresh token
    now = clock.now()
    assert prune(store, now + CODE_LIFETIME + EXPIRED_MEMORY).authorization_codes == 0
    pruned = prune(store, now + CODE_LIFETIME + EXPIRED_MEMORY + 1)
    assert pruned.authorization_codes == 2 and pruned.refresh_tokens == 0
    pruned = prune(store, now + REFRESH_LIFETIME + EXPIRED_MEMORY + 1)
    assert pruned.refresh_tokens == 1


def test_each_token_issued_is_logged_once_without_the_token(
    web: Web, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="umaserver.oauth"):
        issued = web.tokens()
        refreshed = web.refresh(issued["refresh_token"]).json
        own = web.token({"grant_type": "client_credentials", "scope": "uma_protection"}).json
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("token issued")]
    assert len(lines) == 3, lines
    assert "refresh=yes" in lines[0] and "refresh=no" in lines[2]
    for secret in (
        issued["access_token"],
        issued["refresh_token"],
        refreshed["access_token"],
        refreshed["refresh_token"],
        own["access_token"],
    ):
        assert all(secret not in line for line in lines)
