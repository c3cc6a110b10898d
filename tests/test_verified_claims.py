"""SAML assertions and ID tokens pushed through the authorization request, over HTTP.

The rules demand the identity provider's word: the same claims pushed as the client's own word do
not satisfy them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from joserfc.jwk import RSAKey
from lxml import etree

from umaserver import create_app
from umaserver.config import load_config
from umaserver.storage import open_storage

from . import saml_fixtures as saml
from .conftest import FakeClock, Party, Store, free_port, make_party, write_config
from .oidc_fixtures import id_token_claims, jwks_of, make_id_token, make_rsa_key

SAML = "claim-client-assertion-saml-1.0"
OIDC = "claim-client-claims-oidc-1.0"
CUSTOM = "urn:example:attributes"
IDP = "https://idp.example/saml"
OP = "https://accounts.example"
AFFILIATION = "urn:oid:1.3.6.1.4.1.5923.1.1.1.1"

RULES = f"""
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


@pytest.fixture(scope="module")
def idp_key() -> saml.IdpKey:
    return saml.make_idp_key("umaserver test IdP")


@pytest.fixture(scope="module")
def op_key() -> RSAKey:
    return make_rsa_key("op-1")


@pytest.fixture
def config_path(tmp_path: Path, idp_key: saml.IdpKey, op_key: RSAKey) -> Path:
    (tmp_path / "policies.toml").write_text(RULES, encoding="utf-8")
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


def assertion(key: saml.IdpKey, one_time: bool = False, **overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    values: dict[str, Any] = {
        "issuer": IDP,
        "audience": "http://uma.test",
        "now": now,
        "not_before": now - 60,
        "not_on_or_after": now + 300,
        "subject_not_on_or_after": now + 120,
        **overrides,
    }
    unsigned = saml.build_assertion(**values)
    if one_time:
        saml.find(unsigned, "saml:Conditions").append(etree.Element(saml.s("OneTimeUse")))
    return {
        "type": SAML,
        "value": {"saml_assertion": saml.to_b64(saml.sign(unsigned, key))},
    }


def id_token(key: RSAKey, **overrides: Any) -> dict[str, Any]:
    claims = id_token_claims(
        OP, "photo-app", now=int(time.time()), email="bob@example.com", **overrides
    )
    return {"type": OIDC, "value": {"id_token": make_id_token(key, claims), "nickname": "bob"}}


class Flow:
    def __init__(self, http: FlaskClient, store: Store, rs: Party) -> None:
        self.http = http
        self.store = store
        self.rs = rs
        self.app = make_party(store, "bob", "uma_authorization", push_types=(SAML, OIDC, CUSTOM))
        created = http.post(
            "/rs/resource_set",
            json={"name": "Photos", "scopes": ["view", "print"]},
            headers=rs.auth,
        )
        self.photos = created.json["_id"]

    def ticket(self, *scopes: str) -> str:
        response = self.http.post(
            "/permission",
            json={"resource_set_id": self.photos, "scopes": list(scopes)},
            headers=self.rs.auth,
        )
        ticket: str = response.json["ticket"]
        return ticket

    def ask(self, ticket: str, claims: list[dict[str, Any]], party: Party | None = None) -> Any:
        return self.http.post(
            "/rpt_authorization",
            json={"rpt": "none", "ticket": ticket, "claims": claims},
            headers=(party or self.app).auth,
        )


@pytest.fixture
def flow(http: FlaskClient, store: Store, rs: Party) -> Flow:
    return Flow(http, store, rs)


def test_configuration_lists_the_saml_profile(http: FlaskClient) -> None:
    profiles = http.get("/.well-known/uma-configuration").json["claim_profiles_supported"]
    assert SAML in profiles and OIDC in profiles


def test_a_valid_assertion_grants_through_a_rule_requiring_the_idp(
    flow: Flow, idp_key: saml.IdpKey
) -> None:
    response = flow.ask(flow.ticket("view"), [assertion(idp_key)])
    assert response.status_code == 201, response.json


def test_the_clients_own_word_does_not_satisfy_a_rule_naming_the_idp(flow: Flow) -> None:
    plain = {"type": CUSTOM, "value": {"eduPersonAffiliation": ["staff"]}}
    response = flow.ask(flow.ticket("view"), [plain])
    assert response.status_code == 403
    # The nearest rule still asks, for the kind of claim that can satisfy it.
    assert response.json["need_claims"] == [
        {
            "type": SAML,
            "name": "eduPersonAffiliation",
            "value": "Your affiliation, from your institution",
        }
    ]


def test_a_valid_id_token_grants_plain_oidc_claims_do_not(flow: Flow, op_key: RSAKey) -> None:
    plain = {"type": OIDC, "value": {"email": "bob@example.com"}}
    response = flow.ask(flow.ticket("print"), [plain])
    assert response.status_code == 403 and response.json["error"] == "need_claims"
    assert response.json["need_claims"][0]["type"] == OIDC
    assert flow.ask(flow.ticket("print"), [id_token(op_key)]).status_code == 201


def test_both_verified_sources_together(flow: Flow, idp_key: saml.IdpKey, op_key: RSAKey) -> None:
    response = flow.ask(flow.ticket("view", "print"), [assertion(idp_key), id_token(op_key)])
    assert response.status_code == 201


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda key, op: assertion(saml.make_idp_key("someone else")), "signature does not verify"),
        (
            lambda key, op: assertion(key, issuer="https://unknown.example"),
            "unknown identity provider",
        ),
        (lambda key, op: assertion(key, audience="https://other.example"), "audience"),
        (
            lambda key, op: assertion(
                key, not_on_or_after=int(time.time()) - 600, subject_not_on_or_after=None
            ),
            "expired",
        ),
        (lambda key, op: {"type": SAML, "value": {"saml_assertion": "%%%"}}, "base64"),
        (lambda key, op: {"type": SAML, "value": {}}, "saml_assertion"),
        (lambda key, op: id_token(op, aud="another-app"), "ID token refused"),
        (lambda key, op: id_token(make_rsa_key("op-1")), "ID token refused"),
    ],
)
def test_refusals_are_invalid_request_and_record_nothing(
    flow: Flow, idp_key: saml.IdpKey, op_key: RSAKey, make: Any, fragment: str
) -> None:
    ticket = flow.ticket("view")
    plain = {"type": CUSTOM, "value": {"department": "research"}}
    response = flow.ask(ticket, [plain, make(idp_key, op_key)])
    assert response.status_code == 400
    assert response.json["error"] == "invalid_request"
    assert fragment in response.json["error_description"]
    stored = flow.store.get_ticket(ticket)
    assert stored is not None and stored.requests == 0
    assert flow.store.conn.execute("SELECT COUNT(*) FROM gathered_claims").fetchone()[0] == 0
    assert flow.ask(ticket, [assertion(idp_key)]).status_code == 201  # the ticket is still usable


def test_an_assertion_is_accepted_once_per_ticket_and_requesting_party(
    flow: Flow, idp_key: saml.IdpKey
) -> None:
    pushed = assertion(idp_key)
    first = flow.ticket("view", "print")
    assert flow.ask(first, [pushed]).status_code == 403  # need_claims: print still wanted
    again = flow.ask(first, [pushed])
    assert again.status_code == 400
    assert "(replay: with this ticket)" in again.json["error_description"]
    # Another requesting party presenting the same assertion is refused too ...
    carol = make_party(flow.store, "carol", "uma_authorization", client_id=flow.app.client_id)
    stolen = flow.ask(flow.ticket("view"), [pushed], party=carol)
    assert stolen.status_code == 400
    assert "(replay: by another requesting party)" in stolen.json["error_description"]
    # ... while the same party may use it for another ticket.
    assert flow.ask(flow.ticket("view"), [pushed]).status_code == 201


def test_a_one_time_use_assertion_is_accepted_once_at_all(flow: Flow, idp_key: saml.IdpKey) -> None:
    pushed = assertion(idp_key, one_time=True)
    assert flow.ask(flow.ticket("view"), [pushed]).status_code == 201
    again = flow.ask(flow.ticket("view"), [pushed])
    assert again.status_code == 400
    assert "(replay: it is for one time use only)" in again.json["error_description"]


def test_a_single_valued_attribute_satisfies_contains(flow: Flow, idp_key: saml.IdpKey) -> None:
    # One value arrives as that value, not as an array of one; "contains staff" still holds.
    only_staff = ((AFFILIATION, "eduPersonAffiliation", ("staff",)),)
    pushed = assertion(idp_key, attributes=only_staff)
    assert flow.ask(flow.ticket("view"), [pushed]).status_code == 201


def test_a_client_not_registered_for_saml_may_not_push_it(flow: Flow, idp_key: saml.IdpKey) -> None:
    other = make_party(flow.store, "dora", "uma_authorization", push_types=(CUSTOM,))
    response = flow.ask(flow.ticket("view"), [assertion(idp_key)], party=other)
    assert response.status_code == 400 and SAML in response.json["error_description"]


def test_keys_not_fetched_yet_answer_503_and_record_nothing(tmp_path: Path, op_key: RSAKey) -> None:
    # A provider whose jwks_uri cannot be reached (a closed loopback port): its keys never arrive.
    folder = tmp_path / "unreachable"
    folder.mkdir()
    (folder / "policies.toml").write_text(RULES, encoding="utf-8")
    config = load_config(
        write_config(
            folder,
            extra=f"""
[claims]
jwks_fetch_timeout = 1

[[oidc_issuers]]
issuer = "{OP}"
audiences = ["photo-app"]
jwks_uri = "http://127.0.0.1:{free_port()}/jwks.json"
""",
        )
    )
    app = create_app(config, clock=FakeClock())
    http = app.test_client()
    own = Store(open_storage(config.database), FakeClock())
    try:
        flow = Flow(http, own, make_party(own, "alice", "uma_protection"))
        ticket = flow.ticket("print")
        response = flow.ask(ticket, [id_token(op_key)])
        assert response.status_code == 503, response.json
        assert response.json["error"] == "temporarily_unavailable"
        assert "not available yet" in response.json["error_description"]
        assert int(response.headers["Retry-After"]) >= 1
        assert own.conn.execute("SELECT COUNT(*) FROM gathered_claims").fetchone()[0] == 0
        stored = own.get_ticket(ticket)
        assert stored is not None and stored.state == "open" and stored.requests == 0
    finally:
        own.close()
