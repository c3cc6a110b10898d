"""The verified claim token formats through UMA 2.0's grant at /token, over HTTP (Flask test client):
an ID token (`...openid-connect-core-1_0.html#IDToken`, http or https) and a SAML 2.0 assertion
(`urn:ietf:params:oauth:token-type:saml2`, base64url or base64 of the signed XML) satisfy rules
that demand their provider's word, the same claims on the client's own word do not, refusals name
why, replay memory follows the ticket digest, and a PCT keeps an ID token's claims only until the
token ends. The same tokens through the 1.0 authorization request: test_verified_claims.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from joserfc.jwk import RSAKey
from lxml import etree

from umaserver.config import Config

from . import saml_fixtures as saml
from .conftest import FakeClock, Party, Store, write_config
from .flows import IDP, OIDC, OP, SAML, VERIFIED_STAFF_AND_EMAIL
from .oidc_fixtures import id_token_claims, jwks_of, make_id_token, make_rsa_key
from .test_uma2_grant import Uma2, custom_token, make_uma2_client
from .test_verified_claims import CUSTOM

ID_TOKEN_HTTP = "http://openid.net/specs/openid-connect-core-1_0.html#IDToken"
ID_TOKEN_HTTPS = "https://openid.net/specs/openid-connect-core-1_0.html#IDToken"
SAML2 = "urn:ietf:params:oauth:token-type:saml2"


@pytest.fixture(scope="module")
def idp_key() -> saml.IdpKey:
    return saml.make_idp_key("umaserver test IdP")


@pytest.fixture(scope="module")
def op_key() -> RSAKey:
    return make_rsa_key("op-1")


@pytest.fixture
def config_path(tmp_path: Path, idp_key: saml.IdpKey, op_key: RSAKey) -> Path:
    """Staff (IDP's word) may view, a verified example.com email (OP's word) may print; the IdP
    and the OP as test_verified_claims.py configures them."""
    (tmp_path / "policies.toml").write_text(VERIFIED_STAFF_AND_EMAIL, encoding="utf-8")
    (tmp_path / "idp.pem").write_text(idp_key.certificate_pem, encoding="utf-8")
    (tmp_path / "op-jwks.json").write_text(json.dumps(jwks_of([op_key])), encoding="utf-8")
    return write_config(
        tmp_path,
        extra=f"""
[[saml_idps]]
entity_id = "{IDP}"
certificates = ["idp.pem"]

[[oidc_issuers]]
issuer = "{OP}"
audiences = ["photo-app"]
jwks_file = "op-jwks.json"
""",
    )


class Photos(Uma2):
    """alice's Photos set (view, print) and bob's photo app, a 2.0 client that may push SAML,
    OIDC and custom claims."""

    def __init__(self, http: FlaskClient, store: Store, rs: Party, clock: FakeClock) -> None:
        super().__init__(http, store, rs)
        self.clock = clock
        self.client_id, self.secret = make_uma2_client(
            store, "Photo app", push_types=(SAML, OIDC, CUSTOM)
        )

    def push(
        self, ticket: str, pushed: dict[str, str], client: tuple[str, str] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """The grant with a claim token (`pushed`: claim_token and claim_token_format)."""
        return self.token(
            client,
            ticket=ticket,
            claim_token=pushed["claim_token"],
            claim_token_format=pushed["claim_token_format"],
        )

    def id_token(self, key: RSAKey, **overrides: Any) -> str:
        """An ID token of OP for photo-app about alice (sub), with a bob@example.com email, living
        300 s from the app's now."""
        claims = id_token_claims(
            OP, "photo-app", now=self.clock.now(), email="bob@example.com", **overrides
        )
        return make_id_token(key, claims)

    def assertion_xml(self, key: saml.IdpKey, one_time: bool = False, **overrides: Any) -> bytes:
        """A signed assertion of IDP for this server (staff, research) whose length is no multiple
        of 3, so that its base64 ends in padding."""
        now = self.clock.now()
        for extra in range(3):
            values: dict[str, Any] = {
                "issuer": IDP,
                "audience": "http://uma.test",
                "now": now,
                "not_before": now - 60,
                "not_on_or_after": now + 300,
                "subject_not_on_or_after": now + 120,
                "assertion_id": saml.new_id() + "x" * extra,
                **overrides,
            }
            unsigned = saml.build_assertion(**values)
            if one_time:
                saml.find(unsigned, "saml:Conditions").append(etree.Element(saml.s("OneTimeUse")))
            xml: bytes = etree.tostring(saml.sign(unsigned, key))
            if len(xml) % 3:
                return xml
        raise AssertionError("no assertion length with padding")


def base64url(data: bytes, padded: bool = False) -> str:
    encoded = base64.urlsafe_b64encode(data).decode()
    return encoded if padded else encoded.rstrip("=")


def saml_token(xml: bytes) -> dict[str, str]:
    return {"claim_token": base64url(xml), "claim_token_format": SAML2}


def oidc_token(token: str, token_format: str = ID_TOKEN_HTTP) -> dict[str, str]:
    return {"claim_token": token, "claim_token_format": token_format}


@pytest.fixture
def uma(http: FlaskClient, store: Store, rs: Party, clock: FakeClock) -> Photos:
    return Photos(http, store, rs, clock)


def granted_scopes(uma: Uma2, body: dict[str, Any]) -> list[str]:
    [permission] = uma.introspect(body["access_token"])["permissions"]
    assert permission["resource_id"] == uma.rs_id
    scopes: list[str] = permission["resource_scopes"]
    return scopes


# -- grants on a provider's word -----------------------------------------------------------------


@pytest.mark.parametrize("token_format", [ID_TOKEN_HTTP, ID_TOKEN_HTTPS], ids=["http", "https"])
def test_an_id_token_grants_through_a_rule_demanding_the_op(
    uma: Photos, op_key: RSAKey, token_format: str
) -> None:
    status, body = uma.push(uma.ticket("print"), oidc_token(uma.id_token(op_key), token_format))
    assert status == 200, body
    assert granted_scopes(uma, body) == ["print"]
    assert body["pct"].startswith("uma_pct_")


@pytest.mark.parametrize(
    "encode",
    [
        lambda xml: base64url(xml),
        lambda xml: base64url(xml, padded=True),
        lambda xml: base64.b64encode(xml).decode(),
    ],
    ids=["base64url", "base64url-padded", "base64"],
)
def test_a_saml_assertion_grants_through_a_rule_demanding_the_idp(
    uma: Photos, idp_key: saml.IdpKey, encode: Any
) -> None:
    xml = uma.assertion_xml(idp_key)
    # The three encodings of this assertion are three different texts.
    encodings = {base64url(xml), base64url(xml, padded=True), base64.b64encode(xml).decode()}
    assert len(encodings) == 3
    status, body = uma.token(
        ticket=uma.ticket("view"), claim_token=encode(xml), claim_token_format=SAML2
    )
    assert status == 200, body
    assert granted_scopes(uma, body) == ["view"]


def test_both_providers_one_after_the_other_across_a_rotation(
    uma: Photos, idp_key: saml.IdpKey, op_key: RSAKey
) -> None:
    status, body = uma.push(uma.ticket("view", "print"), oidc_token(uma.id_token(op_key)))
    assert status == 403 and body["error"] == "need_info", body
    assert [claim["name"] for claim in body["required_claims"]] == ["eduPersonAffiliation"]
    status, body = uma.push(body["ticket"], saml_token(uma.assertion_xml(idp_key)))
    assert status == 200, body
    assert granted_scopes(uma, body) == ["view", "print"]


# -- the client's own word -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "token_format", "claims", "wanted"),
    [
        (
            "view",
            CUSTOM,
            {"eduPersonAffiliation": ["staff"]},
            {
                "name": "eduPersonAffiliation",
                "friendly_name": "Your affiliation, from your institution",
                "claim_token_format": [SAML2],
                "issuer": [IDP],
            },
        ),
        (
            "print",
            CUSTOM,
            {"email": "bob@example.com"},
            {"name": "email", "claim_token_format": [ID_TOKEN_HTTP], "issuer": [OP]},
        ),
        (
            # Plain OIDC claims (the 1.0 profile's type as a custom format): still the client's.
            "print",
            OIDC,
            {"email": "bob@example.com", "email_verified": True},
            {"name": "email", "claim_token_format": [ID_TOKEN_HTTP], "issuer": [OP]},
        ),
    ],
    ids=["saml-claims-as-custom", "oidc-claims-as-custom", "plain-oidc-type"],
)
def test_the_same_claims_on_the_clients_word_are_need_info(
    uma: Photos,
    scope: str,
    token_format: str,
    claims: dict[str, Any],
    wanted: dict[str, Any],
) -> None:
    ticket = uma.ticket(scope)
    status, body = uma.token(
        ticket=ticket, claim_token=custom_token(claims), claim_token_format=token_format
    )
    assert status == 403 and body["error"] == "need_info", body
    assert body["ticket"] != ticket
    [required] = body["required_claims"]
    assert {name: required[name] for name in wanted} == wanted
    assert set(required) <= {"name", "friendly_name", "claim_token_format", "issuer"}


# -- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (
            lambda uma, idp, op: saml_token(uma.assertion_xml(saml.make_idp_key("someone else"))),
            "SAML assertion refused: signature does not verify",
        ),
        (
            lambda uma, idp, op: saml_token(uma.assertion_xml(idp, audience="https://other.test")),
            "SAML assertion refused: the assertion is not addressed to this server (audience",
        ),
        (
            lambda uma, idp, op: {"claim_token": "%%%", "claim_token_format": SAML2},
            "claim_token: a SAML 2.0 assertion must be base64url",
        ),
        (
            lambda uma, idp, op: oidc_token(uma.id_token(make_rsa_key("op-1"))),
            "ID token refused: its signature does not verify",
        ),
        (
            lambda uma, idp, op: oidc_token(uma.id_token(op, aud="another-app"), ID_TOKEN_HTTPS),
            "ID token refused: its audience 'aud' names none of the accepted audiences",
        ),
    ],
    ids=[
        "saml-bad-signature",
        "saml-wrong-audience",
        "saml-not-base64",
        "oidc-bad-signature",
        "oidc-wrong-audience",
    ],
)
def test_a_token_that_does_not_verify_is_invalid_request_naming_why(
    uma: Photos, idp_key: saml.IdpKey, op_key: RSAKey, make: Any, fragment: str
) -> None:
    ticket = uma.ticket("view", "print")
    status, body = uma.push(ticket, make(uma, idp_key, op_key))
    assert (status, body["error"]) == (400, "invalid_request"), body
    assert fragment in body["error_description"]
    assert "claims[0]" not in body["error_description"]
    # Nothing recorded and no rotation: the same ticket still works.
    status, body = uma.push(ticket, saml_token(uma.assertion_xml(idp_key)))
    assert status == 403 and body["error"] == "need_info", body


@pytest.mark.parametrize(
    ("make", "claim_type"),
    [
        (lambda uma, idp, op: oidc_token(uma.id_token(op)), OIDC),
        (lambda uma, idp, op: oidc_token(uma.id_token(op), ID_TOKEN_HTTPS), OIDC),
        (lambda uma, idp, op: saml_token(uma.assertion_xml(idp)), SAML),
    ],
    ids=["id-token-http", "id-token-https", "saml"],
)
def test_a_client_not_registered_for_the_type_may_not_push_it(
    uma: Photos, store: Store, idp_key: saml.IdpKey, op_key: RSAKey, make: Any, claim_type: str
) -> None:
    other = make_uma2_client(store, "Custom only", push_types=(CUSTOM,))
    status, body = uma.push(uma.ticket("view", "print"), make(uma, idp_key, op_key), other)
    assert (status, body["error"]) == (400, "invalid_request"), body
    description = body["error_description"]
    assert description.startswith("claim_token: this client may not push")
    assert claim_type in description and "claims[0]" not in description


# -- replay --------------------------------------------------------------------------------------


def test_an_id_token_is_refused_again_on_its_ticket_and_accepted_on_the_rotated_one(
    uma: Photos, op_key: RSAKey, idp_key: saml.IdpKey
) -> None:
    pushed = oidc_token(uma.id_token(op_key))
    first = uma.ticket("view", "print")
    status, body = uma.push(first, pushed)
    assert status == 403 and body["error"] == "need_info", body
    # The same ticket again: it was rotated, so it is over before its claims are read.
    status, again = uma.push(first, pushed)
    assert (status, again["error"]) == (400, "invalid_grant"), again
    # Replay memory is per ticket digest: the rotated ticket is another digest, and the same
    # token of the same requesting party is taken again (its claims replace the same claims).
    status, body = uma.push(body["ticket"], pushed)
    assert status == 403 and body["error"] == "need_info", body
    assert [claim["name"] for claim in body["required_claims"]] == ["eduPersonAffiliation"]
    status, body = uma.push(body["ticket"], saml_token(uma.assertion_xml(idp_key)))
    assert status == 200, body
    assert granted_scopes(uma, body) == ["view", "print"]


def test_a_one_time_use_assertion_is_refused_on_the_rotated_ticket(
    uma: Photos, idp_key: saml.IdpKey
) -> None:
    pushed = saml_token(uma.assertion_xml(idp_key, one_time=True))
    status, body = uma.push(uma.ticket("view", "print"), pushed)
    assert status == 403 and body["error"] == "need_info", body
    status, again = uma.push(body["ticket"], pushed)
    assert (status, again["error"]) == (400, "invalid_request"), again
    assert "(replay: it is for one time use only)" in again["error_description"]


def test_another_client_presenting_the_same_id_token_is_refused(
    uma: Photos, store: Store, op_key: RSAKey
) -> None:
    pushed = oidc_token(uma.id_token(op_key))
    status, body = uma.push(uma.ticket("print"), pushed)
    assert status == 200, body
    # The same client may use it for another ticket (the same requesting party) ...
    status, body = uma.push(uma.ticket("print"), pushed)
    assert status == 200, body
    # ... another client (another requesting party) may not.
    other = make_uma2_client(store, "Other", push_types=(OIDC,))
    status, body = uma.push(uma.ticket("print"), pushed, other)
    assert (status, body["error"]) == (400, "invalid_request"), body
    assert "(replay: by another requesting party)" in body["error_description"]


# -- the PCT keeps an ID token's claims until the token ends -------------------------------------


def test_a_pct_keeps_id_token_claims_only_until_the_token_ends(
    uma: Photos, op_key: RSAKey, clock: FakeClock, config: Config
) -> None:
    # The token lives 300 s; this server takes it until its exp plus the clock skew it allows
    # ([claims] clock_skew), and so long the claims it vouched for last, in a PCT too.
    skew = config.claims.clock_skew
    assert skew > 0
    status, body = uma.push(uma.ticket("print"), oidc_token(uma.id_token(op_key)))
    assert status == 200, body
    pct = body["pct"]
    clock.advance(300 + skew - 1)  # past exp, one second before the token ends here
    status, body = uma.token(ticket=uma.ticket("print"), pct=pct)
    assert status == 200, body
    later = body["pct"]  # a new PCT, carrying the same claims and their end
    clock.advance(1)
    for carried in (pct, later):
        status, body = uma.token(ticket=uma.ticket("print"), pct=carried)
        assert status == 403 and body["error"] == "need_info", body
        [required] = body["required_claims"]
        assert required["name"] == "email" and required["issuer"] == [OP]
