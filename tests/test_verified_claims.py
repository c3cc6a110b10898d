"""SAML assertions and ID tokens pushed through the authorization request, over HTTP.

The rules demand the identity provider's word: the same claims pushed as the client's own word do
not satisfy them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
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
from .flows import IDP, OIDC, OP, SAML, VERIFIED_STAFF_AND_EMAIL, FlaskApi, Flow, wait_until
from .oidc_fixtures import JwksServer, id_token_claims, jwks_of, make_id_token, make_rsa_key

CUSTOM = "urn:example:attributes"
AFFILIATION = "urn:oid:1.3.6.1.4.1.5923.1.1.1.1"


@pytest.fixture(scope="module")
def idp_key() -> saml.IdpKey:
    return saml.make_idp_key("umaserver test IdP")


@pytest.fixture(scope="module")
def op_key() -> RSAKey:
    return make_rsa_key("op-1")


# Rules whose conditions all demand one provider's word: they must hold on claims about one person.
ONE_PERSON_RULES = f"""
[[rules]]
id = "verified-researcher-annotate"
owner = "alice"
scopes = ["annotate"]
[[rules.conditions]]
claim = "email"
suffix = "@example.com"
issuers = ["{OP}"]
[[rules.conditions]]
claim = "email_verified"
equals = true
issuers = ["{OP}"]
[[rules.conditions]]
claim = "department"
equals = "research"
issuers = ["{OP}"]

[[rules]]
id = "staff-researcher-share"
owner = "alice"
scopes = ["share"]
[[rules.conditions]]
claim = "eduPersonAffiliation"
contains = "staff"
issuers = ["{IDP}"]
[[rules.conditions]]
claim = "department"
equals = "research"
issuers = ["{IDP}"]
"""


@pytest.fixture
def config_path(tmp_path: Path, idp_key: saml.IdpKey, op_key: RSAKey) -> Path:
    (tmp_path / "policies.toml").write_text(
        VERIFIED_STAFF_AND_EMAIL + ONE_PERSON_RULES, encoding="utf-8"
    )
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
    return Flow(
        FlaskApi(http),
        rs,
        app,
        {"name": "Photos", "scopes": ["view", "print", "annotate", "share"]},
    )


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
    # The nearest rule still asks, for the kind of claim that can satisfy it, and whose word.
    assert response.json["need_claims"] == [
        {
            "type": SAML,
            "name": "eduPersonAffiliation",
            "value": "Your affiliation, from your institution",
            "issuers": [IDP],
        }
    ]


def test_a_valid_id_token_grants_plain_oidc_claims_do_not(flow: Flow, op_key: RSAKey) -> None:
    plain = {"type": OIDC, "value": {"email": "bob@example.com"}}
    response = flow.ask(flow.ticket("print"), [plain])
    assert response.status == 403 and list(response.json) == ["need_claims"]
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


# -- evidence speaks of one person (issue 9, item 1) ---------------------------------------------

EMAIL_ONLY = (("urn:oid:0.9.2342.19200300.100.1.3", "mail", ("x@example.org",)),)
STAFF_ONLY = ((AFFILIATION, "eduPersonAffiliation", ("staff",)),)
RESEARCH_ONLY = (("department", None, ("research",)),)


def token_about(key: RSAKey, sub: str, **claims: Any) -> dict[str, Any]:
    made = id_token_claims(OP, "photo-app", now=int(time.time()), sub=sub, **claims)
    return {"type": OIDC, "value": {"id_token": make_id_token(key, made)}}


def assertion_about(key: saml.IdpKey, name_id: str | None, attributes: Any) -> dict[str, Any]:
    return assertion(key, name_id=name_id, attributes=attributes)


def email_token(key: RSAKey, sub: str) -> dict[str, Any]:
    return token_about(key, sub, email="bob@example.com", email_verified=True)


def research_token(key: RSAKey, sub: str) -> dict[str, Any]:
    return token_about(key, sub, department="research")


@pytest.mark.parametrize(
    ("scope", "first", "second"),
    [
        (
            "annotate",
            lambda op, idp: email_token(op, "bob"),
            lambda op, idp: research_token(op, "eve"),
        ),
        (
            "share",
            lambda op, idp: assertion_about(idp, "bob", STAFF_ONLY),
            lambda op, idp: assertion_about(idp, "eve", RESEARCH_ONLY),
        ),
        (
            "share",  # an assertion without a NameID is about nobody else either
            lambda op, idp: assertion_about(idp, None, STAFF_ONLY),
            lambda op, idp: assertion_about(idp, None, RESEARCH_ONLY),
        ),
    ],
    ids=["id-tokens", "saml-assertions", "saml-without-name-id"],
)
def test_claims_about_two_people_never_combine_across_requests(
    flow: Flow,
    store: Store,
    op_key: RSAKey,
    idp_key: saml.IdpKey,
    scope: str,
    first: Any,
    second: Any,
) -> None:
    ticket = flow.ticket(scope)
    asked = flow.ask(ticket, [first(op_key, idp_key)])
    assert asked.status == 403 and list(asked.json) == ["need_claims"], asked.json
    # The second person's word replaces the first's on this ticket: still one claim short.
    again = flow.ask(ticket, [second(op_key, idp_key)])
    assert again.status == 403 and list(again.json) == ["need_claims"], again.json
    subjects = {claim.subject for claim in gathered_claims(store, ticket, "bob")}
    assert len(subjects) == 1 and None not in subjects


@pytest.mark.parametrize(
    ("scope", "pushed"),
    [
        ("annotate", lambda op, idp: [email_token(op, "bob"), research_token(op, "eve")]),
        (
            "share",
            lambda op, idp: [
                assertion_about(idp, "bob", STAFF_ONLY),
                assertion_about(idp, "eve", RESEARCH_ONLY),
            ],
        ),
    ],
    ids=["id-tokens", "saml-assertions"],
)
def test_claims_about_two_people_in_one_request_are_refused(
    flow: Flow, store: Store, op_key: RSAKey, idp_key: saml.IdpKey, scope: str, pushed: Any
) -> None:
    ticket = flow.ticket(scope)
    response = flow.ask(ticket, pushed(op_key, idp_key))
    assert response.status == 400, response.json
    assert response.json["error"] == "invalid_request"
    assert "two different subjects" in response.json["error_description"]
    assert gathered_claims(store, ticket, "bob") == []


@pytest.mark.parametrize(
    ("scope", "pushes"),
    [
        (
            "annotate",
            lambda op, idp: [[email_token(op, "bob")], [research_token(op, "bob")]],
        ),
        ("annotate", lambda op, idp: [[email_token(op, "bob"), research_token(op, "bob")]]),
        (
            "share",
            lambda op, idp: [
                [assertion_about(idp, "bob", STAFF_ONLY)],
                [assertion_about(idp, "bob", RESEARCH_ONLY)],
            ],
        ),
    ],
    ids=["id-tokens-in-two-requests", "id-tokens-in-one-request", "saml-in-two-requests"],
)
def test_claims_about_one_person_combine(
    flow: Flow, op_key: RSAKey, idp_key: saml.IdpKey, scope: str, pushes: Any
) -> None:
    ticket = flow.ticket(scope)
    *earlier, last = pushes(op_key, idp_key)
    for claims in earlier:
        assert flow.ask(ticket, claims).status == 403
    response = flow.ask(ticket, last)
    assert response.status == 201, response.json


def test_a_later_person_replaces_the_earlier_ones_claims_of_that_issuer_only(
    flow: Flow, store: Store, op_key: RSAKey, idp_key: saml.IdpKey
) -> None:
    ticket = flow.ticket("annotate")
    plain = {"type": CUSTOM, "value": {"nickname": "bobby"}}
    assert flow.ask(ticket, [email_token(op_key, "eve"), plain]).status == 403
    assert flow.ask(ticket, [assertion(idp_key)]).status == 403
    assert flow.ask(ticket, [research_token(op_key, "bob")]).status == 403
    kept = {(c.issuer, c.name, c.subject) for c in gathered_claims(store, ticket, "bob")}
    assert (OP, "email", "eve") not in kept  # eve's word is gone ...
    assert (OP, "department", "bob") in kept  # ... bob's is there
    assert (IDP, "department", "alice") in kept  # the other provider's word stays
    assert (flow.app.client_id, "nickname", None) in kept  # and so does the client's own
    # bob's own email completes it.
    assert flow.ask(ticket, [email_token(op_key, "bob")]).status == 201


# -- ID tokens are remembered, bound to the pushing client, and live a bounded time (item 2) -----


def test_an_id_token_is_accepted_once_per_ticket_and_for_one_requesting_party(
    flow: Flow, store: Store, op_key: RSAKey
) -> None:
    pushed = id_token(op_key)
    first = flow.ticket("view", "print")
    assert flow.ask(first, [pushed]).status == 403  # need_claims: view still wanted
    again = flow.ask(first, [pushed])
    assert again.status == 400, again.json
    assert "ID token refused" in again.json["error_description"]
    assert "(replay: with this ticket)" in again.json["error_description"]
    # Another requesting party, through the same client or another one, is refused too ...
    carol = make_party(store, "carol", "uma_authorization", client_id=flow.app.client_id)
    stolen = flow.ask(flow.ticket("print"), [pushed], party=carol)
    assert stolen.status == 400, stolen.json
    assert "(replay: by another requesting party)" in stolen.json["error_description"]
    dave = make_party(store, "dave", "uma_authorization", push_types=(OIDC,))
    elsewhere = flow.ask(flow.ticket("print"), [pushed], party=dave)
    assert elsewhere.status == 400, elsewhere.json
    assert "(replay: by another requesting party)" in elsewhere.json["error_description"]
    # ... while the same party may use it for another ticket.
    assert flow.ask(flow.ticket("print"), [pushed]).status == 201


@pytest.mark.parametrize("with_jti", [True, False], ids=["by-jti", "by-digest"])
def test_id_tokens_are_told_apart_by_jti_or_digest(
    flow: Flow, store: Store, op_key: RSAKey, with_jti: bool
) -> None:
    extra = {"jti": "token-1"} if with_jti else {}
    pushed = id_token(op_key, **extra)
    assert flow.ask(flow.ticket("print"), [pushed]).status == 201
    carol = make_party(store, "carol", "uma_authorization", client_id=flow.app.client_id)
    assert flow.ask(flow.ticket("print"), [pushed], party=carol).status == 400
    # Another token (another jti, or another text) about the same person is another token.
    other = id_token(op_key, jti="token-2") if with_jti else id_token(op_key, nonce="n-2")
    assert flow.ask(flow.ticket("print"), [other], party=carol).status == 201


@dataclass(frozen=True)
class FROM_NOW:
    """A time relative to when the test runs, not to when the tests were collected."""

    seconds: int


@pytest.mark.parametrize(
    ("claims", "fragment"),
    [
        ({"exp": 10**30}, "lives longer than 86400 s"),
        ({"exp": 10**400}, "lives longer than 86400 s"),
        ({"exp": 1e300}, "lives longer than 86400 s"),
        ({"iat": FROM_NOW(-86400), "exp": FROM_NOW(60)}, "lives longer"),
        ({"iat": None}, "required claims missing: iat"),
        ({"iat": -(10**400)}, "lives longer"),
    ],
    ids=["exp-1e30", "exp-10^400", "exp-float", "two-days", "no-iat", "iat-far-past"],
)
def test_id_token_lifetimes_are_capped(
    flow: Flow, store: Store, op_key: RSAKey, claims: dict[str, Any], fragment: str
) -> None:
    now = int(time.time())
    made = id_token_claims(OP, "photo-app", now=now, email="bob@example.com")
    made.update(
        {name: now + v.seconds if isinstance(v, FROM_NOW) else v for name, v in claims.items()}
    )
    made = {name: value for name, value in made.items() if value is not None}
    token = {"type": OIDC, "value": {"id_token": make_id_token(op_key, made)}}
    ticket = flow.ticket("print")
    response = flow.ask(ticket, [token])
    assert response.status == 400, response.json
    assert fragment in response.json["error_description"]
    assert gathered_claims(store, ticket, "bob") == []


def test_the_audience_is_bound_to_the_pushing_client(tmp_path: Path, op_key: RSAKey) -> None:
    folder = tmp_path / "audiences"
    folder.mkdir()
    (folder / "policies.toml").write_text(VERIFIED_STAFF_AND_EMAIL, encoding="utf-8")
    (folder / "op-jwks.json").write_text(json.dumps(jwks_of([op_key])), encoding="utf-8")
    database = folder / "uma.db"
    own = open_store(database)
    try:
        rs = make_party(own, "alice", "uma_protection")
        photo = make_party(own, "bob", "uma_authorization", push_types=(OIDC,))
        printer = make_party(own, "bob", "uma_authorization", push_types=(OIDC,))
        other = make_party(own, "bob", "uma_authorization", push_types=(OIDC,))
        config = load_config(
            write_config(
                folder,
                extra=f"""
[[oidc_issuers]]
issuer = "{OP}"
audiences = ["shared-app"]
client_audiences = {{ "{photo.client_id}" = "photo-app", "{printer.client_id}" = "print-app" }}
jwks_file = "op-jwks.json"
""",
            )
        )
        http = create_app(config).test_client()
        flows = {
            party.client_id: Flow(FlaskApi(http), rs, party, {"name": "P", "scopes": ["print"]})
            for party in (photo, printer, other)
        }

        def push(party: Party, aud: Any, **extra: Any) -> int:
            made = id_token_claims(OP, aud, now=int(time.time()), email="bob@example.com", **extra)
            token = {"type": OIDC, "value": {"id_token": make_id_token(op_key, made)}}
            flow = flows[party.client_id]
            return flow.ask(flow.ticket("print"), [token]).status

        assert push(photo, "photo-app") == 201
        assert push(printer, "photo-app") == 400  # photo-app's token, pushed by the printer
        assert push(printer, "print-app") == 201
        assert push(photo, "shared-app") == 400  # a listed client is held to its own audience
        assert push(other, "shared-app") == 201  # one not listed: the issuer-wide audiences
        assert push(other, "photo-app") == 400
        # Several audiences: azp must be the pushing client's.
        assert push(photo, ["photo-app", "print-app"], azp="print-app") == 400
        assert push(photo, ["photo-app", "print-app"]) == 400
        assert push(photo, ["print-app", "photo-app"], azp="photo-app") == 201
    finally:
        own.close()


# -- a key published a moment after our last fetch (issue 9, item 11) ----------------------------


def test_a_new_key_right_after_a_fetch_answers_503_until_the_next_fetch(
    tmp_path: Path, op_key: RSAKey
) -> None:
    folder = tmp_path / "rollover"
    folder.mkdir()
    (folder / "policies.toml").write_text(VERIFIED_STAFF_AND_EMAIL, encoding="utf-8")
    with JwksServer(jwks_of([op_key])) as jwks:
        config = load_config(
            write_config(
                folder,
                extra=f"""
[[oidc_issuers]]
issuer = "{OP}"
audiences = ["photo-app"]
jwks_uri = "{jwks.url}"
""",
            )
        )
        open_store(config.database).close()
        http = create_app(config).test_client()
        own = open_store(config.database)
        try:
            flow = photo_flow(http, own, make_party(own, "alice", "uma_protection"))
            assert wait_until(
                lambda: flow.ask(flow.ticket("print"), [id_token(op_key)]).status == 201
            )
            # The provider publishes a new key and signs with it at once: our keys, fetched less
            # than the retry interval ago, lack it. Not the token's fault: try again later.
            new_key = make_rsa_key("op-2")
            jwks.serve(jwks_of([op_key, new_key]))
            ticket = flow.ticket("print")
            response = flow.ask(ticket, [id_token(new_key)])
            assert response.status == 503, response.json
            assert response.json["error"] == "temporarily_unavailable"
            assert "has no key with kid 'op-2' yet" in response.json["error_description"]
            assert 1 <= int(response.headers["Retry-After"]) <= 30
            assert gathered_claims(own, ticket, "bob") == []
        finally:
            own.close()
