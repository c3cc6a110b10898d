"""ID tokens pushed in claim-client-claims-oidc-1.0 claims, and the JWKS key cache."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import re
import struct
import threading
import time
import weakref
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from joserfc.jwk import Key, KeySet

from tests.oidc_fixtures import (
    JwksServer,
    b64url,
    id_token_claims,
    jwks_of,
    make_ec_key,
    make_ed25519_key,
    make_id_token,
    make_rsa_key,
    raw_token,
)
from umaserver.claims.id_tokens import MAX_ID_TOKEN_LENGTH, oidc_claims, verify_id_token
from umaserver.claims.key_sets import MAX_ASKED_KIDS, KeySets
from umaserver.claims.model import OIDC_TYPE, ClaimsError, ClaimsUnavailable
from umaserver.claims.oidc_issuers import OidcIssuer
from umaserver.storage.records import Claim

IDP_A = "https://idp-a.example"
IDP_B = "https://idp-b.example"
AUD = "uma-client-at-a"
NOW = 1_700_000_000
WAIT = 5.0  # longest a test waits for the background thread


class Keys:
    def __init__(self) -> None:
        self.rsa_a = make_rsa_key("a-rsa")
        self.ec_a = make_ec_key("a-ec")
        self.ed_a = make_ed25519_key("a-ed")
        self.rsa_b = make_rsa_key("b-rsa")


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys()


def write_jwks(path: Path, keys: list[Key]) -> Path:
    path.write_text(json.dumps(jwks_of(keys)))
    return path


@pytest.fixture(scope="module")
def issuers(keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> list[OidcIssuer]:
    directory = tmp_path_factory.mktemp("jwks")
    return [
        OidcIssuer(
            IDP_A,
            (AUD, "another-client-at-a"),
            jwks_file=write_jwks(directory / "a.json", [keys.rsa_a, keys.ec_a, keys.ed_a]),
        ),
        OidcIssuer(
            IDP_B,
            ("uma-client-at-b",),
            jwks_file=write_jwks(directory / "b.json", [keys.rsa_b]),
            algorithms=("RS256",),
        ),
    ]


@pytest.fixture(scope="module")
def key_sets(issuers: list[OidcIssuer]) -> KeySets:
    return KeySets(issuers)


@pytest.fixture
def verify(issuers: list[OidcIssuer], key_sets: KeySets) -> Callable[..., dict[str, Any]]:
    def verify(token: Any, *, now: int = NOW, skew: int = 120) -> dict[str, Any]:
        return verify_id_token(token, issuers, key_sets, now=now, skew=skew)

    return verify


def claims_a(**extra: Any) -> dict[str, Any]:
    return id_token_claims(IDP_A, AUD, now=NOW, **extra)


def without(claims: dict[str, Any], name: str) -> dict[str, Any]:
    return {k: v for k, v in claims.items() if k != name}


# --- valid tokens ---------------------------------------------------------------------------


def test_rs256_token_verifies(keys: Keys, verify: Callable[..., dict[str, Any]]) -> None:
    token = make_id_token(keys.rsa_a, claims_a(email="alice@example.com"))
    claims = verify(token)
    assert claims["iss"] == IDP_A
    assert claims["sub"] == "alice"
    assert claims["email"] == "alice@example.com"


def test_es256_token_verifies(keys: Keys, verify: Callable[..., dict[str, Any]]) -> None:
    token = make_id_token(keys.ec_a, claims_a(), alg="ES256")
    assert verify(token)["sub"] == "alice"


@pytest.mark.filterwarnings("ignore:EdDSA is deprecated")
def test_eddsa_token_verifies(keys: Keys, verify: Callable[..., dict[str, Any]]) -> None:
    token = make_id_token(keys.ed_a, claims_a(), alg="EdDSA")
    assert verify(token)["sub"] == "alice"


def test_token_without_kid_is_tried_with_each_key(
    keys: Keys, verify: Callable[..., dict[str, Any]]
) -> None:
    token = make_id_token(keys.ec_a, claims_a(), alg="ES256", kid=None)
    assert verify(token)["sub"] == "alice"


def test_single_audience_as_array_and_matching_azp_verify(
    keys: Keys, verify: Callable[..., dict[str, Any]]
) -> None:
    assert verify(make_id_token(keys.rsa_a, claims_a(aud=[AUD])))["aud"] == [AUD]
    several = claims_a(aud=[AUD, "https://api.example"], azp=AUD)
    assert verify(make_id_token(keys.rsa_a, several))["azp"] == AUD


@pytest.mark.parametrize(
    ("changes", "skew"),
    [
        ({"exp": NOW - 60}, 120),  # expired a minute ago by our clock
        ({"iat": NOW + 60}, 120),  # issued a minute ahead of our clock
        ({"nbf": NOW + 60}, 120),
        ({"exp": NOW + 1}, 0),
    ],
)
def test_clock_skew_is_accepted(
    keys: Keys, verify: Callable[..., dict[str, Any]], changes: dict[str, int], skew: int
) -> None:
    token = make_id_token(keys.rsa_a, claims_a(**changes))
    assert verify(token, skew=skew)["sub"] == "alice"


# --- oidc_claims ----------------------------------------------------------------------------


def test_oidc_claims_give_the_provider_as_issuer_of_id_token_claims(
    keys: Keys, issuers: list[OidcIssuer], key_sets: KeySets
) -> None:
    token = make_id_token(
        keys.rsa_a, claims_a(email="alice@a.example", acr="mfa", nonce="n-0S6", at_hash="x")
    )
    value = {"id_token": token, "email": "alice@client-says.example", "role": "admin"}

    claims = oidc_claims(
        value, issuers=issuers, key_sets=key_sets, client_id="client-1", now=NOW, skew=120
    )

    def claim(name: str, issuer: str, value: Any) -> Claim:
        # The provider's word is about its subject; the client's own word about nobody in
        # particular.
        subject = "alice" if issuer == IDP_A else None
        return Claim(OIDC_TYPE, name, value, issuer, "client-1", NOW, subject)

    assert sorted(claims, key=lambda c: (c.issuer, c.name)) == [
        claim("email", "client-1", "alice@client-says.example"),
        claim("role", "client-1", "admin"),
        claim("acr", IDP_A, "mfa"),
        claim("email", IDP_A, "alice@a.example"),
        claim("sub", IDP_A, "alice"),
    ]


def test_oidc_claims_list_the_providers_word_after_the_clients(
    keys: Keys, issuers: list[OidcIssuer], key_sets: KeySets
) -> None:
    # The caller lets a later claim of the same name replace an earlier one: the verified wins.
    token = make_id_token(keys.rsa_a, claims_a(email="alice@a.example"))
    value = {"email": "alice@client-says.example", "id_token": token, "role": "admin"}

    claims = oidc_claims(
        value, issuers=issuers, key_sets=key_sets, client_id="client-1", now=NOW, skew=120
    )

    assert [(c.name, c.issuer) for c in claims] == [
        ("email", "client-1"),
        ("role", "client-1"),
        ("sub", IDP_A),
        ("email", IDP_A),
    ]


def test_oidc_claims_without_id_token_are_the_clients_word(
    issuers: list[OidcIssuer], key_sets: KeySets
) -> None:
    claims = oidc_claims(
        {"sub": "alice", "iss": IDP_A},
        issuers=issuers,
        key_sets=key_sets,
        client_id="client-1",
        now=NOW,
        skew=120,
    )
    assert {(c.name, c.issuer) for c in claims} == {("sub", "client-1"), ("iss", "client-1")}


def test_oidc_claims_refuse_the_whole_value_with_a_bad_id_token(
    keys: Keys, issuers: list[OidcIssuer], key_sets: KeySets
) -> None:
    token = make_id_token(keys.rsa_a, claims_a(aud="someone-else"))
    with pytest.raises(ClaimsError, match="audience"):
        oidc_claims(
            {"id_token": token, "role": "admin"},
            issuers=issuers,
            key_sets=key_sets,
            client_id="client-1",
            now=NOW,
            skew=120,
        )


# --- refusals -------------------------------------------------------------------------------


def tampered(keys: Keys) -> str:
    header, _, signature = make_id_token(keys.rsa_a, claims_a()).split(".")
    payload = b64url(json.dumps(claims_a(sub="mallory")).encode())
    return f"{header}.{payload}.{signature}"


def hs256_with_public_key(keys: Keys) -> str:
    secret = keys.rsa_a.as_pem(private=False)
    header = b64url(json.dumps({"alg": "HS256", "kid": "a-rsa"}).encode())
    payload = b64url(json.dumps(claims_a()).encode())
    mac = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64url(mac)}"


def duplicate_members(keys: Keys) -> str:
    header = b64url(json.dumps({"alg": "RS256", "kid": "a-rsa"}).encode())
    payload = b64url(f'{{"iss": "{IDP_B}", "iss": "{IDP_A}"}}'.encode())
    return f"{header}.{payload}.c2ln"


REFUSALS: list[tuple[str, Callable[[Keys], str], str]] = [
    ("bad signature", tampered, "signature does not verify"),
    (
        "signed by another issuer's key under our kid",
        lambda k: make_id_token(k.rsa_b, claims_a(), kid="a-rsa"),
        "signature does not verify",
    ),
    (
        "signed by another issuer's key",
        lambda k: make_id_token(k.rsa_b, claims_a()),
        f"issuer '{IDP_A}' has no key with kid 'b-rsa'",
    ),
    (
        "EC token under an RSA kid",
        lambda k: make_id_token(k.ec_a, claims_a(), alg="ES256", kid="a-rsa"),
        "signature does not verify",
    ),
    (
        "wrong audience",
        lambda k: make_id_token(k.rsa_a, claims_a(aud="someone-else")),
        "audience 'aud' names none of the accepted audiences",
    ),
    (
        "several audiences without azp",
        lambda k: make_id_token(k.rsa_a, claims_a(aud=[AUD, "https://api.example"])),
        "several audiences and no 'azp'",
    ),
    (
        "several audiences with a foreign azp",
        lambda k: make_id_token(
            k.rsa_a, claims_a(aud=[AUD, "https://api.example"], azp="https://api.example")
        ),
        "'azp' is not an accepted audience",
    ),
    (
        "expired",
        lambda k: make_id_token(k.rsa_a, claims_a(exp=NOW - 121)),
        f"expired at {NOW - 121}",
    ),
    (
        "issued in the future",
        lambda k: make_id_token(k.rsa_a, claims_a(iat=NOW + 121)),
        "issued in the future",
    ),
    (
        "not valid yet",
        lambda k: make_id_token(k.rsa_a, claims_a(nbf=NOW + 121)),
        "not valid yet",
    ),
    (
        "no exp",
        lambda k: make_id_token(k.rsa_a, without(claims_a(), "exp")),
        "required claims missing: exp",
    ),
    (
        "no iat",
        lambda k: make_id_token(k.rsa_a, without(claims_a(), "iat")),
        "required claims missing: iat",
    ),
    (
        "no sub",
        lambda k: make_id_token(k.rsa_a, without(claims_a(), "sub")),
        "required claims missing: sub",
    ),
    (
        "no aud",
        lambda k: make_id_token(k.rsa_a, without(claims_a(), "aud")),
        "required claims missing: aud",
    ),
    (
        "exp not a number",
        lambda k: make_id_token(k.rsa_a, claims_a(exp="tomorrow")),
        "claim 'exp' is invalid",
    ),
    (
        "alg none",
        lambda k: raw_token({"alg": "none"}, claims_a()),
        "algorithm 'none' is not accepted",
    ),
    (
        "HS256 keyed with the RSA public key",
        hs256_with_public_key,
        "algorithm 'HS256' is not accepted",
    ),
    (
        "algorithm the issuer does not use",
        lambda k: make_id_token(
            k.ec_a, id_token_claims(IDP_B, "uma-client-at-b", now=NOW), alg="ES256"
        ),
        f"algorithm 'ES256' is not accepted for issuer '{IDP_B}'",
    ),
    (
        "unknown issuer",
        lambda k: make_id_token(k.rsa_a, claims_a(iss="https://evil.example")),
        "issuer 'https://evil.example' is not configured",
    ),
    (
        "no iss",
        lambda k: make_id_token(k.rsa_a, without(claims_a(), "iss")),
        "it has no 'iss' claim",
    ),
    (
        "critical header extension",
        lambda k: raw_token({"alg": "RS256", "crit": ["x"], "x": 1}, claims_a(), b"sig"),
        "'crit'",
    ),
    ("duplicate claim names", duplicate_members, "payload is not a base64url-encoded JSON"),
    (
        "NaN in the header",
        lambda k: raw_token({"alg": "RS256", "x": math.nan}, claims_a(), b"sig"),
        "header is not a base64url-encoded JSON",
    ),
    (
        "header nested too deeply",
        lambda k: b64url(b"[" * 11000) + ".e30.c2ln",
        "header is not a base64url-encoded JSON",
    ),
    (
        "number too large in the payload",
        lambda k: b64url(b'{"alg": "RS256"}') + "." + b64url(b'{"exp": 1e999}') + ".c2ln",
        "payload is not a base64url-encoded JSON",
    ),
    ("two parts", lambda k: "eyJhbGciOiJSUzI1NiJ9.e30", "not a signed JWT"),
    ("four parts", lambda k: "a.b.c.d", "not a signed JWT"),
    ("not base64url", lambda k: "a+b.c/d.e=f", "not a signed JWT"),
    ("empty", lambda k: "", "not a signed JWT"),
    ("header not JSON", lambda k: "bm9wZQ.e30.c2ln", "header is not a base64url-encoded JSON"),
    ("header without alg", lambda k: "e30.e30.c2ln", "header has no 'alg'"),
    (
        "payload not an object",
        lambda k: raw_token({"alg": "RS256"}, ["iss"]),  # type: ignore[arg-type]
        "payload is not a base64url-encoded JSON object",
    ),
    (
        "oversized",
        lambda k: make_id_token(k.rsa_a, claims_a(padding="x" * MAX_ID_TOKEN_LENGTH)),
        f"longer than {MAX_ID_TOKEN_LENGTH} characters",
    ),
]


@pytest.mark.parametrize(
    ("make_token", "reason"),
    [pytest.param(make, reason, id=name) for name, make, reason in REFUSALS],
)
def test_refused_tokens(
    keys: Keys,
    verify: Callable[..., dict[str, Any]],
    make_token: Callable[[Keys], str],
    reason: str,
) -> None:
    with pytest.raises(ClaimsError) as refused:
        verify(make_token(keys))
    assert refused.value.description.startswith("ID token refused: ")
    assert reason in refused.value.description


@pytest.mark.parametrize("value", [None, 42, ["a.b.c"], {"alg": "RS256"}, b"a.b.c"])
def test_id_token_that_is_not_a_string_is_refused(
    verify: Callable[..., dict[str, Any]], value: Any
) -> None:
    with pytest.raises(ClaimsError, match="'id_token' is not a string"):
        verify(value)


def test_token_with_a_kid_is_tried_with_the_keys_published_without_one(
    keys: Keys, tmp_path: Path
) -> None:
    without_kid = without(keys.rsa_a.as_dict(private=False), "kid")
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [keys.ec_a.as_dict(private=False), without_kid]}))
    issuer = OidcIssuer(IDP_A, (AUD,), jwks_file=path)
    token = make_id_token(keys.rsa_a, claims_a(), kid="rotated-2025")
    assert verify_id_token(token, [issuer], KeySets([issuer]), now=NOW)["sub"] == "alice"


def test_token_whose_kid_is_held_is_not_tried_with_the_keys_without_one(
    keys: Keys, tmp_path: Path
) -> None:
    without_kid = without(keys.rsa_b.as_dict(private=False), "kid")
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [keys.rsa_a.as_dict(private=False), without_kid]}))
    issuer = OidcIssuer(IDP_A, (AUD,), jwks_file=path)
    token = make_id_token(keys.rsa_b, claims_a(), kid="a-rsa")
    with pytest.raises(ClaimsError, match="signature does not verify"):
        verify_id_token(token, [issuer], KeySets([issuer]), now=NOW)


def test_refusal_never_echoes_the_token(keys: Keys, verify: Callable[..., dict[str, Any]]) -> None:
    token = make_id_token(keys.rsa_a, claims_a(iss="https://evil.example/" + "p" * 500))
    with pytest.raises(ClaimsError) as refused:
        verify(token)
    assert token not in refused.value.description
    assert len(refused.value.description) < 200


def test_keys_not_fetched_yet_ask_to_try_again_later(keys: Keys) -> None:
    issuer = OidcIssuer(IDP_A, (AUD,), jwks_uri="https://idp-a.example/jwks")
    token = make_id_token(keys.rsa_a, claims_a())
    with pytest.raises(
        ClaimsUnavailable, match=f"keys of issuer '{IDP_A}' are not available yet"
    ) as unavailable:
        verify_id_token(token, [issuer], KeySets([issuer]), now=NOW)
    assert unavailable.value.retry_after == 1  # the first fetch is due now


def test_keys_of_an_unreachable_provider_ask_to_try_again_after_the_retry(keys: Keys) -> None:
    issuer = OidcIssuer(IDP_A, (AUD,), jwks_uri="http://127.0.0.1:9/jwks")
    key_sets = KeySets([issuer], fetch_timeout=0.5, retry_interval=30.0)
    key_sets.refresh_now()
    token = make_id_token(keys.rsa_a, claims_a())
    with pytest.raises(ClaimsUnavailable, match="not available yet") as unavailable:
        verify_id_token(token, [issuer], key_sets, now=NOW)
    assert 25 <= unavailable.value.retry_after <= 30


# --- configuration --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"algorithms": ("RS256", "none")}, "algorithm 'none' of OIDC issuer"),
        ({"algorithms": ("HS256",)}, "algorithm 'HS256' of OIDC issuer"),
        ({"algorithms": ()}, "at least one algorithm"),
        ({"algorithms": "RS256"}, "must be a list"),
        ({"audiences": ()}, "at least one non-empty audience"),
        ({"audiences": AUD}, "must be a list"),
        ({"jwks_uri": "https://idp/jwks", "jwks_file": Path("a.json")}, "exactly one of"),
        ({"jwks_uri": None}, "exactly one of"),
        ({"jwks_uri": "file:///etc/jwks.json"}, "absolute http(s) URL"),
        ({"jwks_uri": "/jwks"}, "absolute http(s) URL"),
        ({"jwks_uri": "http://idp-a.example/jwks"}, "must use https"),
        ({"jwks_uri": "http://localhost.idp-a.example/jwks"}, "must use https"),
        ({"jwks_uri": "http://10.0.0.1/jwks"}, "must use https"),
        ({"issuer": ""}, "non-empty 'issuer'"),
    ],
)
def test_bad_issuer_configuration_is_refused(arguments: dict[str, Any], message: str) -> None:
    settings: dict[str, Any] = {
        "issuer": IDP_A,
        "audiences": (AUD,),
        "jwks_uri": "https://idp-a.example/jwks",
        **arguments,
    }
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        OidcIssuer(**settings)


@pytest.mark.parametrize(
    "uri",
    [
        "http://127.0.0.1:8080/jwks",
        "http://127.8.9.10/jwks",
        "http://[::1]:8080/jwks",
        "http://localhost/jwks",
        "http://LOCALHOST:8080/jwks",
    ],
)
def test_plain_http_jwks_uri_is_allowed_on_loopback(uri: str) -> None:
    assert OidcIssuer(IDP_A, (AUD,), jwks_uri=uri).jwks_uri == uri


def test_same_issuer_twice_is_refused() -> None:
    issuer = OidcIssuer(IDP_A, (AUD,), jwks_uri="https://idp-a.example/jwks")
    with pytest.raises(ValueError, match="configured twice"):
        KeySets([issuer, issuer])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot be read"),
        ("{not json", "not a JSON object"),
        ("[]", "not a JSON object"),
        ('{"keys": [], "keys": []}', "member 'keys' appears more than once"),
        ('{"keys": [{"kty": "RSA", "e": NaN}]}', "NaN is not a JSON number"),
        ('{"keys": {}}', "not a JWK set"),
        ('{"keys": []}', "no usable public signature key"),
        ('{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}', "no usable public signature key"),
        ('{"keys": [{"kty": "RSA", "n": "AQAB"}]}', "no usable public signature key"),
    ],
)
def test_broken_jwks_file_is_a_configuration_error(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "jwks.json"
    if content is not None:
        path.write_text(content)
    # Read with the configuration, so it is reported with the configuration's other errors.
    with pytest.raises(ValueError, match=message) as refused:
        OidcIssuer(IDP_A, (AUD,), jwks_file=path)
    assert str(path) in str(refused.value)
    assert IDP_A in str(refused.value)


def test_jwks_file_keeps_only_public_signature_keys(keys: Keys, tmp_path: Path) -> None:
    document = {
        "keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {**keys.ec_a.as_dict(private=False), "use": "enc", "kid": "for-encryption"},
            {"kty": "PQC", "kid": "from-the-future"},
            keys.rsa_a.as_dict(private=True),  # published with its private half by mistake
        ]
    }
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(document))
    key_set = KeySets([OidcIssuer(IDP_A, (AUD,), jwks_file=path)]).key_set(IDP_A)
    assert key_set is not None
    assert [key.kid for key in key_set.keys] == ["a-rsa"]
    assert not key_set.keys[0].is_private


# --- jwks_uri -------------------------------------------------------------------------------


@pytest.fixture
def jwks_server(keys: Keys) -> Iterator[JwksServer]:
    with JwksServer(jwks_of([keys.rsa_a])) as server:
        yield server


def uri_issuer(server: JwksServer) -> OidcIssuer:
    return OidcIssuer(IDP_A, (AUD,), jwks_uri=server.url)


def wait_until(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_refresh_now_fetches_the_jwks_uri(keys: Keys, jwks_server: JwksServer) -> None:
    issuer = uri_issuer(jwks_server)
    key_sets = KeySets([issuer])
    assert key_sets.key_set(IDP_A) is None
    assert jwks_server.hits == 0  # nothing is fetched before asked

    key_sets.refresh_now()

    token = make_id_token(keys.rsa_a, claims_a())
    assert verify_id_token(token, [issuer], key_sets, now=NOW)["sub"] == "alice"
    assert jwks_server.hits == 1


def test_background_thread_fetches_the_jwks_uri(keys: Keys, jwks_server: JwksServer) -> None:
    key_sets = KeySets([uri_issuer(jwks_server)])
    key_sets.start()
    try:
        assert wait_until(lambda: key_sets.key_set(IDP_A) is not None)
    finally:
        key_sets.stop()
    key_set = key_sets.key_set(IDP_A)
    assert key_set is not None
    assert [key.kid for key in key_set.keys] == ["a-rsa"]


def test_background_thread_refreshes_and_picks_up_new_keys(
    keys: Keys, jwks_server: JwksServer
) -> None:
    key_sets = KeySets([uri_issuer(jwks_server)], refresh_interval=0.05)
    key_sets.start()
    try:
        assert wait_until(lambda: key_sets.key_set(IDP_A) is not None)
        jwks_server.serve(jwks_of([keys.ec_a]))
        assert wait_until(lambda: kids(key_sets) == ["a-ec"])
    finally:
        key_sets.stop()


def kids(key_sets: KeySets) -> list[str | None]:
    key_set = key_sets.key_set(IDP_A)
    return [] if key_set is None else [key.kid for key in key_set.keys]


def test_key_rollover(keys: Keys, jwks_server: JwksServer) -> None:
    issuer = uri_issuer(jwks_server)
    key_sets = KeySets([issuer])
    key_sets.refresh_now()
    old_token = make_id_token(keys.rsa_a, claims_a())
    new_token = make_id_token(keys.ec_a, claims_a(), alg="ES256")
    assert verify_id_token(old_token, [issuer], key_sets, now=NOW)
    with pytest.raises(ClaimsError, match="has no key with kid 'a-ec'"):
        verify_id_token(new_token, [issuer], key_sets, now=NOW)

    jwks_server.serve(jwks_of([keys.ec_a]))
    key_sets.refresh_now()

    assert verify_id_token(new_token, [issuer], key_sets, now=NOW)
    with pytest.raises(ClaimsError, match="has no key with kid 'a-rsa'"):
        verify_id_token(old_token, [issuer], key_sets, now=NOW)


def test_unknown_kid_has_the_background_thread_fetch_early(
    keys: Keys, jwks_server: JwksServer
) -> None:
    issuer = uri_issuer(jwks_server)
    key_sets = KeySets([issuer], refresh_interval=3600.0, retry_interval=0.05)
    key_sets.start()
    try:
        assert wait_until(lambda: key_sets.key_set(IDP_A) is not None)
        jwks_server.serve(jwks_of([keys.rsa_a, keys.ec_a]))
        new_token = make_id_token(keys.ec_a, claims_a(), alg="ES256")
        # The request that meets the unknown kid is refused without fetching in its own thread.
        with pytest.raises(ClaimsError, match="has no key with kid 'a-ec'"):
            verify_id_token(new_token, [issuer], key_sets, now=NOW)
        assert wait_until(lambda: kids(key_sets) == ["a-rsa", "a-ec"])
        assert verify_id_token(new_token, [issuer], key_sets, now=NOW)
        assert jwks_server.hits == 2
    finally:
        key_sets.stop()


def unavailable_now(token: str, issuer: OidcIssuer, key_sets: KeySets) -> bool:
    """Whether the token is answered "try again later" rather than refused."""
    try:
        verify_id_token(token, [issuer], key_sets, now=NOW)
    except ClaimsUnavailable:
        return True
    except ClaimsError:
        return False
    raise AssertionError("the token was accepted")


def test_unknown_kid_asks_to_try_again_until_a_fetch_since_lacks_it(
    keys: Keys, jwks_server: JwksServer
) -> None:
    issuer = uri_issuer(jwks_server)
    key_sets = KeySets([issuer], retry_interval=0.5)
    key_sets.refresh_now()
    token = make_id_token(keys.ec_a, claims_a(), alg="ES256")
    # Keys fetched a moment ago may still lack a key the provider published since (item 11 of
    # issue 9): try again once the next fetch may run, not a refusal.
    with pytest.raises(ClaimsUnavailable, match="has no key with kid 'a-ec' yet") as unavailable:
        verify_id_token(token, [issuer], key_sets, now=NOW)
    assert unavailable.value.retry_after == 1
    with pytest.raises(ClaimsUnavailable, match="has no key with kid 'a-ec' yet"):
        verify_id_token(token, [issuer], key_sets, now=NOW)  # still, until that fetch

    key_sets.refresh_now()  # that early fetch: the provider still does not publish 'a-ec'
    with pytest.raises(ClaimsError, match="has no key with kid 'a-ec'") as refused:
        verify_id_token(token, [issuer], key_sets, now=NOW)
    assert not isinstance(refused.value, ClaimsUnavailable)

    # Once the retry interval has passed, the kid may be asked for (and fetched) again.
    assert wait_until(lambda: unavailable_now(token, issuer, key_sets))
    jwks_server.serve(jwks_of([keys.rsa_a, keys.ec_a]))
    key_sets.refresh_now()
    assert verify_id_token(token, [issuer], key_sets, now=NOW)["sub"] == "alice"


def test_unknown_kids_remembered_are_bounded(keys: Keys, jwks_server: JwksServer) -> None:
    issuer = uri_issuer(jwks_server)
    key_sets = KeySets([issuer], retry_interval=0.5)
    key_sets.refresh_now()
    for number in range(MAX_ASKED_KIDS + 50):
        assert key_sets.request_refresh(IDP_A, f"kid-{number}") == 1
    assert len(key_sets._asked[IDP_A]) == MAX_ASKED_KIDS


def test_unknown_kid_of_a_jwks_file_is_refused(
    keys: Keys, issuers: list[OidcIssuer], key_sets: KeySets
) -> None:
    token = make_id_token(keys.rsa_b, claims_a())
    with pytest.raises(ClaimsError, match="has no key with kid 'b-rsa'") as refused:
        verify_id_token(token, issuers, key_sets, now=NOW)
    assert not isinstance(refused.value, ClaimsUnavailable)


def test_failed_signature_without_kid_has_the_background_thread_fetch_early(
    keys: Keys, jwks_server: JwksServer
) -> None:
    issuer = uri_issuer(jwks_server)
    key_sets = KeySets([issuer], refresh_interval=3600.0, retry_interval=0.05)
    key_sets.start()
    try:
        assert wait_until(lambda: key_sets.key_set(IDP_A) is not None)
        jwks_server.serve(jwks_of([keys.ec_a]))  # rolled over, and its tokens name no kid
        new_token = make_id_token(keys.ec_a, claims_a(), alg="ES256", kid=None)
        with pytest.raises(ClaimsError, match="signature does not verify"):
            verify_id_token(new_token, [issuer], key_sets, now=NOW)
        assert wait_until(lambda: kids(key_sets) == ["a-ec"])
        assert verify_id_token(new_token, [issuer], key_sets, now=NOW)
        assert jwks_server.hits == 2
    finally:
        key_sets.stop()


def oversized_body() -> bytes:
    return json.dumps({"keys": [], "padding": "x" * 4096}).encode()


@pytest.mark.parametrize(
    ("answer", "logged"),
    [
        ({"status": 404, "body": b"{}"}, "HTTP 404"),
        ({"status": 302, "body": b""}, "HTTP 302"),
        ({"status": 500, "body": b"oops"}, "HTTP 500"),
        ({"body": oversized_body()}, "larger than 2048 bytes"),
        ({"body": oversized_body(), "content_length": False}, "larger than 2048 bytes"),
        ({"body": oversized_body(), "gzipped": True}, "larger than 2048 bytes"),
        ({"body": b"<html>down for maintenance</html>"}, "not a JSON object"),
        ({"body": b'{"keys": "none"}'}, "not a JWK set"),
        ({"body": b'{"keys": []}'}, "no usable public signature key"),
        ({"delay": 1.0}, "timed out"),
    ],
    ids=[
        "404",
        "redirect",
        "500",
        "oversized",
        "oversized-without-length",
        "oversized-once-gunzipped",
        "not-json",
        "not-jwks",
        "no-keys",
        "timeout",
    ],
)
def test_fetch_errors_keep_the_previous_keys(
    keys: Keys,
    jwks_server: JwksServer,
    caplog: pytest.LogCaptureFixture,
    answer: dict[str, Any],
    logged: str,
) -> None:
    key_sets = KeySets([uri_issuer(jwks_server)], fetch_timeout=0.3, max_bytes=2048)
    bad = {"jwks": jwks_of([keys.rsa_a]), **answer}

    jwks_server.serve(**bad)
    with caplog.at_level(logging.WARNING, logger="umaserver.keys"):
        key_sets.refresh_now()  # a first fetch that fails leaves no keys, and does not raise
    assert key_sets.key_set(IDP_A) is None
    assert logged in caplog.text

    jwks_server.serve(jwks_of([keys.rsa_a]))
    key_sets.refresh_now()
    before = key_sets.key_set(IDP_A)
    assert isinstance(before, KeySet)

    jwks_server.serve(**bad)
    key_sets.refresh_now()
    assert key_sets.key_set(IDP_A) is before


def test_gzipped_jwks_is_read(keys: Keys, jwks_server: JwksServer) -> None:
    jwks_server.serve(jwks_of([keys.rsa_a]), gzipped=True)
    key_sets = KeySets([uri_issuer(jwks_server)])
    key_sets.refresh_now()
    assert kids(key_sets) == ["a-rsa"]


@pytest.mark.parametrize("gzipped", [False, True])
@pytest.mark.parametrize("content_length", [True, False])
def test_fetch_of_a_dripping_body_gives_up_at_the_timeout(
    keys: Keys,
    jwks_server: JwksServer,
    caplog: pytest.LogCaptureFixture,
    content_length: bool,
    gzipped: bool,
) -> None:
    # Some 400 bytes, one every 50 ms: about 20 s in all, though each read waits far less than
    # the timeout. Gzipped, a decoder that waits for output would read on past the deadline.
    jwks_server.serve(
        jwks_of([keys.rsa_a]), drip=0.05, content_length=content_length, gzipped=gzipped
    )
    key_sets = KeySets([uri_issuer(jwks_server)], fetch_timeout=0.5)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="umaserver.keys"):
        key_sets.refresh_now()
    # Far below the ~20 s the whole body takes; loose enough for a busy machine.
    assert time.monotonic() - started < 5.0
    assert "the body took longer than 0.5 s" in caplog.text
    assert key_sets.key_set(IDP_A) is None


def empty_blocks_then(data: bytes, blocks: int) -> bytes:
    """A gzip stream of `blocks` empty deflate blocks before `data`: bytes that decode to nothing,
    so a reader waiting for decoded output reads on and on."""
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"
    empty_stored_block = b"\x00\x00\x00\xff\xff"  # not final, stored, length 0
    deflate = zlib.compressobj(wbits=-15)
    trailer = struct.pack("<II", zlib.crc32(data), len(data))
    return header + empty_stored_block * blocks + deflate.compress(data) + deflate.flush() + trailer


@pytest.mark.parametrize("encoding", ["gzip", "x-gzip"])
def test_fetch_of_compressed_nothing_gives_up_at_the_timeout(
    keys: Keys, jwks_server: JwksServer, caplog: pytest.LogCaptureFixture, encoding: str
) -> None:
    body = empty_blocks_then(json.dumps(jwks_of([keys.rsa_a])).encode(), blocks=500)
    jwks_server.serve(body=body, content_encoding=encoding, drip=0.01)  # ~25 s of nothing
    key_sets = KeySets([uri_issuer(jwks_server)], fetch_timeout=0.5)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="umaserver.keys"):
        key_sets.refresh_now()
    assert time.monotonic() - started < 5.0
    assert "the body took longer than 0.5 s" in caplog.text
    assert key_sets.key_set(IDP_A) is None


def test_an_unknown_content_encoding_is_refused(
    keys: Keys, jwks_server: JwksServer, caplog: pytest.LogCaptureFixture
) -> None:
    jwks_server.serve(body=json.dumps(jwks_of([keys.rsa_a])).encode(), content_encoding="br")
    key_sets = KeySets([uri_issuer(jwks_server)])
    with caplog.at_level(logging.WARNING, logger="umaserver.keys"):
        key_sets.refresh_now()
    assert "encoded as 'br'" in caplog.text
    assert key_sets.key_set(IDP_A) is None


def test_unreachable_jwks_uri_does_not_raise() -> None:
    issuer = OidcIssuer(IDP_A, (AUD,), jwks_uri="http://127.0.0.1:9/jwks")
    key_sets = KeySets([issuer], fetch_timeout=0.5)
    key_sets.refresh_now()
    assert key_sets.key_set(IDP_A) is None


def test_stop_ends_the_background_thread(jwks_server: JwksServer) -> None:
    key_sets = KeySets([uri_issuer(jwks_server)])
    key_sets.start()
    thread = key_sets._thread
    assert thread is not None
    key_sets.stop()
    assert not thread.is_alive()


def test_start_twice_runs_one_thread_and_start_after_stop_another(
    jwks_server: JwksServer,
) -> None:
    key_sets = KeySets([uri_issuer(jwks_server)])
    key_sets.start()
    first = key_sets._thread
    key_sets.start()
    assert key_sets._thread is first
    key_sets.stop()
    key_sets.start()
    try:
        assert first is not None and not first.is_alive()
        assert key_sets._thread is not None and key_sets._thread is not first
    finally:
        key_sets.stop()


def test_stop_is_safe_twice_before_start_and_from_a_finalizer(jwks_server: JwksServer) -> None:
    key_sets = KeySets([uri_issuer(jwks_server)])
    key_sets.stop()
    key_sets.start()
    thread = key_sets._thread
    assert thread is not None

    class App:
        pass

    app = App()
    weakref.finalize(app, key_sets.stop)
    del app  # create_app registers stop() like this

    assert not thread.is_alive()
    key_sets.stop()


def test_stop_that_times_out_keeps_the_thread_and_start_runs_no_second_one(
    jwks_server: JwksServer,
) -> None:
    key_sets = KeySets([uri_issuer(jwks_server)], fetch_timeout=0.05)
    release = threading.Event()
    # Stands for the background thread caught in a fetch that outlasts stop()'s wait.
    stuck = threading.Thread(target=release.wait, daemon=True)
    stuck.start()
    key_sets._thread = stuck
    try:
        key_sets.stop()
        assert key_sets._thread is stuck
        with pytest.raises(RuntimeError, match="has not stopped yet"):
            key_sets.start()
    finally:
        release.set()
        stuck.join()
    key_sets.stop()
    assert key_sets._thread is None


# --- the audience of the pushing client, the accepted lifetime (issue 9, item 2) -------------


@pytest.fixture(scope="module")
def per_client(keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> OidcIssuer:
    """IDP_A knowing only which audience each of two clients has there."""
    directory = tmp_path_factory.mktemp("per-client")
    return OidcIssuer(
        IDP_A,
        (),
        client_audiences={"photo": AUD, "printer": "printer-at-a"},
        jwks_file=write_jwks(directory / "a.json", [keys.rsa_a]),
    )


@pytest.mark.parametrize(
    ("client_id", "aud", "extra", "refusal"),
    [
        ("photo", AUD, {}, None),
        ("printer", "printer-at-a", {}, None),
        ("printer", AUD, {}, "names none of the accepted audiences"),
        ("photo", [AUD, "printer-at-a"], {"azp": AUD}, None),
        ("printer", [AUD, "printer-at-a"], {"azp": AUD}, "'azp' is not an accepted audience"),
        ("photo", [AUD, "printer-at-a"], {}, "several audiences and no 'azp'"),
        ("stranger", AUD, {}, "only for the clients of its 'client_audiences'"),
        (None, AUD, {}, "only for the clients of its 'client_audiences'"),
    ],
)
def test_client_audiences_bind_the_token_to_the_pushing_client(
    keys: Keys,
    per_client: OidcIssuer,
    client_id: str | None,
    aud: Any,
    extra: dict[str, Any],
    refusal: str | None,
) -> None:
    token = make_id_token(keys.rsa_a, id_token_claims(IDP_A, aud, now=NOW, **extra))
    key_sets = KeySets([per_client])
    if refusal is None:
        verified = verify_id_token(token, [per_client], key_sets, now=NOW, client_id=client_id)
        assert verified["sub"] == "alice"
    else:
        with pytest.raises(ClaimsError, match=re.escape(refusal)):
            verify_id_token(token, [per_client], key_sets, now=NOW, client_id=client_id)


@pytest.mark.parametrize(
    ("iat", "exp", "max_lifetime", "accepted"),
    [
        (NOW, NOW + 86400, 86400, True),
        (NOW, NOW + 86401, 86400, False),
        (NOW - 10, NOW + 60, 60, False),
        (NOW, 10**30, 86400, False),
        (NOW, 10**400, 86400, False),
        (NOW, 1e308, 86400, False),
        (-(10**30), NOW + 60, 86400, False),
    ],
)
def test_the_lifetime_from_iat_to_exp_is_capped(
    keys: Keys,
    issuers: list[OidcIssuer],
    key_sets: KeySets,
    iat: float,
    exp: float,
    max_lifetime: int,
    accepted: bool,
) -> None:
    token = make_id_token(keys.rsa_a, claims_a(iat=iat, exp=exp))
    if accepted:
        assert verify_id_token(token, issuers, key_sets, now=NOW, max_lifetime=max_lifetime)
    else:
        with pytest.raises(ClaimsError, match=f"lives longer than {max_lifetime} s"):
            verify_id_token(token, issuers, key_sets, now=NOW, max_lifetime=max_lifetime)


@pytest.mark.parametrize("name", ["iat", "nbf"])
def test_a_huge_date_in_the_future_is_refused_without_quoting_it(
    keys: Keys, issuers: list[OidcIssuer], key_sets: KeySets, name: str
) -> None:
    token = make_id_token(keys.rsa_a, claims_a(**{name: 10**4000}))
    with pytest.raises(ClaimsError) as refused:
        verify_id_token(token, issuers, key_sets, now=NOW)
    assert f"({name} a number out of range," in refused.value.description
