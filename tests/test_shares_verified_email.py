"""A share by e-mail holds for an `email` of a verified ID token that says `email_verified: true`
(issue 25, item 1), compared case-insensitively, and never for a client's own word: through UMA
2.0's grant (claim_token) and the 1.0 authorization request (pushed claims), over the Flask test
client. alice shares print on Photos with Carol@Example.org, whom no local account has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from joserfc.jwk import RSAKey

from umaserver import secrets_at_rest
from umaserver.claims.model import ACCOUNT_CLAIM_TYPE
from umaserver.services import invitations

from .conftest import FakeClock, Party, Store, make_party, make_person, write_config
from .flows import OIDC, OP, FlaskApi, Flow
from .oidc_fixtures import id_token_claims, jwks_of, make_id_token, make_rsa_key
from .test_uma2_grant import Uma2, custom_token, make_uma2_client
from .test_verified_claims import CUSTOM

ID_TOKEN = "http://openid.net/specs/openid-connect-core-1_0.html#IDToken"


@pytest.fixture(scope="module")
def op_key() -> RSAKey:
    return make_rsa_key("op-1")


@pytest.fixture
def config_path(tmp_path: Path, op_key: RSAKey) -> Path:
    (tmp_path / "policies.toml").write_text("", encoding="utf-8")
    (tmp_path / "op-jwks.json").write_text(json.dumps(jwks_of([op_key])), encoding="utf-8")
    return write_config(
        tmp_path,
        extra=f"""
[[oidc_issuers]]
issuer = "{OP}"
audiences = ["photo-app"]
jwks_file = "op-jwks.json"
""",
    )


def share_with_carol(store: Store, rs_id: str, scope: str, now: int) -> None:
    """alice shares `scope` with Carol@Example.org, as the Share form does (an invitation too)."""
    if store.get_user_by_username("alice") is None:
        make_person(store, "alice", None)
    resource_set = store.find_resource_set(rs_id)
    assert resource_set is not None
    made, invited = invitations.share(
        store,
        "alice",
        resource_set,
        "Carol@Example.org",
        [scope],
        None,
        now,
        limit=10,
        lifetime=3600,
        issuer="http://uma.test",
        outbox=None,
    )
    assert made.kind == "email" and invited is not None


class Photos(Uma2):
    def __init__(self, http: FlaskClient, store: Store, rs: Party, clock: FakeClock) -> None:
        super().__init__(http, store, rs)
        self.clock = clock
        self.client_id, self.secret = make_uma2_client(
            store, "Photo app", push_types=(OIDC, CUSTOM)
        )
        share_with_carol(store, self.rs_id, "print", clock.now())

    def id_token(self, key: RSAKey, **claims: Any) -> str:
        return make_id_token(
            key, id_token_claims(OP, "photo-app", now=self.clock.now(), sub="carol-at-op", **claims)
        )

    def push(self, claim_token: str, claim_token_format: str = ID_TOKEN) -> int:
        status, body = self.token(
            ticket=self.ticket("print"),
            claim_token=claim_token,
            claim_token_format=claim_token_format,
        )
        assert status in (200, 403), body
        return status


@pytest.fixture
def uma(http: FlaskClient, store: Store, rs: Party, clock: FakeClock) -> Photos:
    return Photos(http, store, rs, clock)


@pytest.mark.parametrize(
    ("claims", "granted"),
    [
        ({"email": "carol@example.org", "email_verified": True}, True),
        ({"email": "CAROL@example.ORG", "email_verified": True}, True),  # any case
        ({"email": "carol@example.org"}, False),  # not said to be verified
        ({"email": "carol@example.org", "email_verified": False}, False),
        ({"email": "carol@example.org", "email_verified": "true"}, False),  # not the JSON true
        ({"email": "dan@example.org", "email_verified": True}, False),
        ({"email": ["carol@example.org"], "email_verified": True}, False),
    ],
)
def test_a_verified_id_tokens_email_is_the_share_s(
    uma: Photos, op_key: RSAKey, claims: dict[str, Any], granted: bool
) -> None:
    assert (uma.push(uma.id_token(op_key, **claims)) == 200) is granted


def test_a_token_of_a_key_the_op_does_not_hold_is_no_word(uma: Photos) -> None:
    forged = uma.id_token(make_rsa_key("op-1"), email="carol@example.org", email_verified=True)
    status, body = uma.token(
        ticket=uma.ticket("print"), claim_token=forged, claim_token_format=ID_TOKEN
    )
    assert status == 400 and body["error"] == "invalid_request"


def test_the_clients_own_word_never_matches(uma: Photos) -> None:
    pushed = {"email": "carol@example.org", "email_verified": True}
    assert uma.push(custom_token(pushed), CUSTOM) == 403


# -- UMA 1.0: pushed claims ------------------------------------------------------------------------


@pytest.fixture
def flow(http: FlaskClient, rs: Party, store: Store, clock: FakeClock) -> Flow:
    client = make_party(store, "bob", "uma_authorization", push_types=(OIDC, CUSTOM))
    made = Flow(FlaskApi(http), rs, client, {"name": "Photos", "scopes": ["view", "print"]})
    share_with_carol(store, made.rs_id, "view", clock.now())
    return made


@pytest.mark.parametrize(
    "claims",
    [
        # The client's own word, in each shape it may push it.
        [{"type": OIDC, "value": {"email": "carol@example.org", "email_verified": True}}],
        [{"type": CUSTOM, "value": {"email": "carol@example.org", "email_verified": True}}],
    ],
    ids=["oidc-members", "custom"],
)
def test_pushed_claims_of_the_client_never_match(flow: Flow, claims: list[Any]) -> None:
    reply = flow.ask(flow.ticket("view"), claims)
    assert reply.status == 403, reply.text


def test_no_client_pushes_account_claims(flow: Flow) -> None:
    claims = [{"type": ACCOUNT_CLAIM_TYPE, "value": {"email": "carol@example.org"}}]
    reply = flow.ask(flow.ticket("view"), claims)
    assert reply.status in (400, 403), reply.text
    assert reply.status != 201


def test_an_id_token_pushed_in_1_0_matches(flow: Flow, op_key: RSAKey, clock: FakeClock) -> None:
    token = make_id_token(
        op_key,
        id_token_claims(
            OP, "photo-app", now=clock.now(), email="Carol@example.org", email_verified=True
        ),
    )
    reply = flow.ask(flow.ticket("view"), [{"type": OIDC, "value": {"id_token": token}}])
    assert reply.status == 201, reply.text


def test_a_local_accounts_verified_address_matches_in_any_case(flow: Flow, store: Store) -> None:
    make_person(
        store, "carol", secrets_at_rest.hash_password("x" * 8), {"email": "CAROL@example.org"}
    )
    carol = make_party(store, "carol", "uma_authorization")
    assert flow.ask(flow.ticket("view"), party=carol).status == 201
