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

from . import saml_fixtures as saml
from .conftest import (
    Party,
    Store,
    free_port,
    gathered_claims,
    make_party,
    open_store,
    stored_ticket,
    write_config,
)
from .flows import IDP, OIDC, OP, SAML, VERIFIED_STAFF_AND_EMAIL, FlaskApi, Flow
from .oidc_fixtures import id_token_claims, jwks_of, make_id_token, make_rsa_key

CUSTOM = "urn:example:attributes"
AFFILIATION = "urn:oid:1.3.6.1.4.1.5923.1.1.1.1"


@pytest.fixture(scope="module")
def idp_key() -> saml.IdpKey:
    return saml.make_idp_key("umaserver test IdP")


@pytest.fixture(scope="module")
def op_key() -> RSAKey:
    return make_rsa_key("op-1")


@pytest.fixture
def config_path(tmp_path: Path, idp_key: saml.IdpKey, op_key: RSAKey) -> Path:
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


def photo_flow(http: FlaskClient, store: Store, rs: Party) -> Flow:
    """alice's Photos set; bob's client, which may push SAML, OIDC and custom claims."""
    app = make_party(store, "bob", "uma_authorization", push_types=(SAML, OIDC, CUSTOM))
    return Flow(FlaskApi(http), rs, app, {"name": "Photos", "scopes": ["view", "print"]})


@pytest.fixture
def flow(http: FlaskClient, store: Store, rs: Party) -> Flow:
    return photo_flow(http, store, rs)


def test_configuration_lists_the_saml_profile(http: FlaskClient) -> None:
    profiles = http.get("/.well-known/uma-configuration").json["claim_profiles_supported"]
    assert SAML in profiles and OIDC in profiles


def test_a_valid_assertion_grants_through_a_rule_requiring_the_idp(
    flow: Flow, idp_key: saml.IdpKey
) -> None:
    response = flow.ask(flow.ticket("view"), [assertion(idp_key)])
    assert response.status == 201, response.json


def test_the_clients_own_word_does_not_satisfy_a_rule_naming_the_idp(flow: Flow) -> None:
    plain = {"type": CUSTOM, "value": {"eduPersonAffiliation": ["staff"]}}
    response = flow.ask(flow.ticket("view"), [plain])
    assert response.status == 403
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
    assert response.status == 403 and response.json["error"] == "need_claims"
    assert response.json["need_claims"][0]["type"] == OIDC
    assert flow.ask(flow.ticket("print"), [id_token(op_key)]).status == 201


def test_both_verified_sources_together(flow: Flow, idp_key: saml.IdpKey, op_key: RSAKey) -> None:
    response = flow.ask(flow.ticket("view", "print"), [assertion(idp_key), id_token(op_key)])
    assert response.status == 201


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
    flow: Flow, store: Store, idp_key: saml.IdpKey, op_key: RSAKey, make: Any, fragment: str
) -> None:
    ticket = flow.ticket("view")
    plain = {"type": CUSTOM, "value": {"department": "research"}}
    response = flow.ask(ticket, [plain, make(idp_key, op_key)])
    assert response.status == 400
    assert response.json["error"] == "invalid_request"
    assert fragment in response.json["error_description"]
    stored = stored_ticket(store, ticket)
    # Counted toward the ticket's ten requests (item f of issue 9); nothing else recorded.
    assert stored is not None and stored.requests == 1
    assert gathered_claims(store, ticket, "bob") == []
    assert flow.ask(ticket, [assertion(idp_key)]).status == 201  # the ticket is still usable


def test_an_assertion_is_accepted_once_per_ticket_and_requesting_party(
    flow: Flow, store: Store, idp_key: saml.IdpKey
) -> None:
    pushed = assertion(idp_key)
    first = flow.ticket("view", "print")
    assert flow.ask(first, [pushed]).status == 403  # need_claims: print still wanted
    again = flow.ask(first, [pushed])
    assert again.status == 400
    assert "(replay: with this ticket)" in again.json["error_description"]
    # Another requesting party presenting the same assertion is refused too ...
    carol = make_party(store, "carol", "uma_authorization", client_id=flow.app.client_id)
    stolen = flow.ask(flow.ticket("view"), [pushed], party=carol)
    assert stolen.status == 400
    assert "(replay: by another requesting party)" in stolen.json["error_description"]
    # ... while the same party may use it for another ticket.
    assert flow.ask(flow.ticket("view"), [pushed]).status == 201


def test_a_one_time_use_assertion_is_accepted_once_at_all(flow: Flow, idp_key: saml.IdpKey) -> None:
    pushed = assertion(idp_key, one_time=True)
    assert flow.ask(flow.ticket("view"), [pushed]).status == 201
    again = flow.ask(flow.ticket("view"), [pushed])
    assert again.status == 400
    assert "(replay: it is for one time use only)" in again.json["error_description"]


def test_a_single_valued_attribute_satisfies_contains(flow: Flow, idp_key: saml.IdpKey) -> None:
    # One value arrives as that value, not as an array of one; "contains staff" still holds.
    only_staff = ((AFFILIATION, "eduPersonAffiliation", ("staff",)),)
    pushed = assertion(idp_key, attributes=only_staff)
    assert flow.ask(flow.ticket("view"), [pushed]).status == 201


def test_a_client_not_registered_for_saml_may_not_push_it(
    flow: Flow, store: Store, idp_key: saml.IdpKey
) -> None:
    other = make_party(store, "dora", "uma_authorization", push_types=(CUSTOM,))
    response = flow.ask(flow.ticket("view"), [assertion(idp_key)], party=other)
    assert response.status == 400 and SAML in response.json["error_description"]


def test_keys_not_fetched_yet_answer_503_and_record_nothing(tmp_path: Path, op_key: RSAKey) -> None:
    # A provider whose jwks_uri cannot be reached (a closed loopback port): its keys never arrive.
    folder = tmp_path / "unreachable"
    folder.mkdir()
    (folder / "policies.toml").write_text(VERIFIED_STAFF_AND_EMAIL, encoding="utf-8")
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
    open_store(config.database).close()
    app = create_app(config)
    http = app.test_client()
    own = open_store(config.database)
    try:
        flow = photo_flow(http, own, make_party(own, "alice", "uma_protection"))
        ticket = flow.ticket("print")
        response = flow.ask(ticket, [id_token(op_key)])
        assert response.status == 503, response.json
        assert response.json["error"] == "temporarily_unavailable"
        assert "not available yet" in response.json["error_description"]
        assert int(response.headers["Retry-After"]) >= 1
        assert gathered_claims(own, ticket, "bob") == []
        stored = stored_ticket(own, ticket)
        assert stored is not None and stored.state == "open" and stored.requests == 0
    finally:
        own.close()
