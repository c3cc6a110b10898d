"""JWT RPTs (`[tokens] rpt_format = "jwt"`): signed with a key the server keeps sealed in its
database, published at /jwks, verified by PyJWT (a library that is not ours) against the keys
fetched from there; each grant mints a new JWT with every live permission of that party and
client; introspection and revocation work as for opaque RPTs; the keys rotate and retire through
the command line. Over HTTP through the Flask test client, and one real server process."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt as pyjwt
import pytest
import requests
from flask.testing import FlaskClient
from joserfc import jwt as jose_jwt
from joserfc.jwk import ECKey, RSAKey

from umaserver import create_app, secrets_at_rest
from umaserver.config import load_config
from umaserver.services import signing_keys

from .conftest import (
    CLI,
    SECRET,
    LiveServer,
    Party,
    Store,
    dump_database,
    make_party,
    open_store,
    start_server,
    stop_server,
    write_config,
)
from .flows import EMPLOYEE, PHOTO_TYPE
from .test_keycloak_realm import OIDC, REALM, Realm, jwt_claims
from .test_keycloak_realm import RULES as REALM_RULES
from .test_uma2_grant import RULES, UMA_TICKET, Uma2, basic, doctor, make_uma2_client

ISSUER = "http://uma.test"


@pytest.fixture
def rules_text() -> str:
    return RULES


@pytest.fixture(params=["RS256"])
def algorithm(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def config_path(tmp_path: Path, rules_text: str, algorithm: str) -> Path:
    (tmp_path / "policies.toml").write_text(rules_text, encoding="utf-8")
    extra = f'[tokens]\nrpt_format = "jwt"\njwt_algorithm = "{algorithm}"\n'
    return write_config(tmp_path, extra=extra)


@pytest.fixture
def uma(http: FlaskClient, store: Store, rs: Party) -> Uma2:
    return Uma2(http, store, rs)


def published(http: FlaskClient) -> pyjwt.PyJWKSet:
    reply = http.get("/jwks")
    assert reply.status_code == 200 and reply.mimetype == "application/json"
    return pyjwt.PyJWKSet.from_dict(reply.json)


def verified(http: FlaskClient, token: str, audience: str | list[str] | None) -> dict[str, Any]:
    """`token`'s claims, as PyJWT verifies them with the key /jwks publishes under its kid (and
    no `aud` at all when `audience` is None)."""
    kid = pyjwt.get_unverified_header(token)["kid"]
    key = published(http)[kid]
    required = ["exp", "iat", "jti", "iss", *(["aud"] if audience is not None else [])]
    claims: dict[str, Any] = pyjwt.decode(
        token,
        key,
        algorithms=["RS256", "ES256"],
        audience=audience,
        issuer=ISSUER,
        options={"require": required},
    )
    if audience is None:
        assert "aud" not in claims
    return claims


def granted(uma: Uma2, *scopes: str, rs_id: str | None = None, **more: str) -> dict[str, Any]:
    status, body = uma.token(ticket=uma.ticket(*scopes, rs_id=rs_id), **doctor(), **more)
    assert status == 200, body
    return body


def parts(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    header, payload, _ = token.split(".")
    return tuple(  # type: ignore[return-value]
        json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
        for part in (header, payload)
    )


# -- what a JWT RPT is ---------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["RS256", "ES256"], indirect=True)
def test_a_granted_rpt_is_a_jwt_that_pyjwt_verifies_with_the_published_key(
    uma: Uma2, http: FlaskClient, algorithm: str
) -> None:
    body = granted(uma, "view")
    token = body["access_token"]
    header = pyjwt.get_unverified_header(token)
    assert header["alg"] == algorithm and header["kid"]
    claims = verified(http, token, uma.rs.client_id)
    assert claims["iss"] == ISSUER
    assert claims["aud"] == uma.rs.client_id  # the resource server that registered the set
    assert claims["azp"] == uma.client_id  # the acting client
    assert "sub" not in claims  # the client acts for itself: no person to name
    assert claims["exp"] - claims["iat"] == 3600 and body["expires_in"] == 3600
    assert claims["authorization"] == {
        "permissions": [{"rsid": uma.rs_id, "rsname": "Photos", "scopes": ["view"]}]
    }

    keys = http.get("/jwks")
    assert keys.headers["Cache-Control"] == "public, max-age=300"
    (key,) = keys.json["keys"]
    assert key["kid"] == header["kid"] and key["use"] == "sig" and key["alg"] == algorithm
    assert key["kty"] == {"RS256": "RSA", "ES256": "EC"}[algorithm]
    assert "d" not in key and "p" not in key


def test_an_rpt_of_the_1_0_authorization_request_names_the_person(
    uma: Uma2, http: FlaskClient, store: Store
) -> None:
    bob = make_party(store, "bob", "uma_authorization", push_types=(EMPLOYEE,))
    empty = http.post("/rpt", headers=bob.auth).json["rpt"]
    # The RPT endpoint's fresh RPT holds nothing yet, so it is for no resource server.
    assert verified(http, empty, None)["authorization"] == {"permissions": []}
    reply = http.post(
        "/rpt_authorization",
        json={
            "rpt": empty,
            "ticket": uma.ticket("view"),
            "claims": [{"type": EMPLOYEE, "value": {"role": ["doctor"]}}],
        },
        headers=bob.auth,
    )
    assert reply.status_code == 201, reply.json
    token = reply.json["rpt"]
    assert token != empty  # a signed token cannot gain permissions: a new one
    claims = verified(http, token, uma.rs.client_id)
    user = store.get_user_by_username("bob")
    assert user is not None and claims["sub"] == user.sub and claims["azp"] == bob.client_id
    assert claims["authorization"]["permissions"] == [
        {"rsid": uma.rs_id, "rsname": "Photos", "scopes": ["view"]}
    ]
    assert uma.introspect(token)["permissions"][0]["resource_id"] == uma.rs_id


def test_discovery_names_the_jwks_in_both_documents(http: FlaskClient) -> None:
    for path in ("/.well-known/uma-configuration", "/.well-known/uma2-configuration"):
        document = http.get(path).json
        assert document["jwks_uri"] == f"{ISSUER}/jwks"
        assert http.get("/jwks").status_code == 200


def test_with_opaque_rpts_nothing_changes(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path))
    assert config.tokens.rpt_format == "opaque"
    http = create_app(config).test_client()
    for path in ("/.well-known/uma-configuration", "/.well-known/uma2-configuration"):
        assert "jwks_uri" not in http.get(path).json
    assert http.get("/jwks").json == {"keys": []}  # no key is made for opaque RPTs


# -- introspection and revocation ----------------------------------------------------------------


def test_a_jwt_rpt_is_introspected_and_revoked_as_an_opaque_one(
    uma: Uma2, http: FlaskClient
) -> None:
    token = granted(uma, "view")["access_token"]
    answer = uma.introspect(token)
    assert answer["active"] is True and answer["client_id"] == uma.client_id
    assert [(p["resource_id"], p["resource_scopes"]) for p in answer["permissions"]] == [
        (uma.rs_id, ["view"])
    ]
    # Another client cannot revoke it (200, nothing happens: RFC 7009 2.2); its own client can.
    other = make_uma2_client(uma.store, "Other")
    for client_id, secret in (other, (uma.client_id, uma.secret)):
        reply = http.post(
            "/revoke", data={"token": token}, headers={"Authorization": basic(client_id, secret)}
        )
        assert reply.status_code == 200
        if client_id == other[0]:
            assert uma.introspect(token)["active"] is True
    assert uma.introspect(token) == {"active": False}
    # A revoked JWT's permissions are no longer carried into the next one.
    later = granted(uma, "view", rs_id=uma.register({"name": "Later", "resource_scopes": ["view"]}))
    assert [
        p["rsname"] for p in parts(later["access_token"])[1]["authorization"]["permissions"]
    ] == ["Later"]


def test_a_tampered_or_foreign_jwt_is_inactive_at_introspection(uma: Uma2) -> None:
    token = granted(uma, "view")["access_token"]
    header, claims = parts(token)
    signature = token.split(".")[2]
    # More scopes, under the server's signature.
    claims["authorization"]["permissions"][0]["scopes"] = ["view", "print"]
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    tampered = f"{token.split('.')[0]}.{payload}.{signature}"
    # The same header (the server's kid) and claims, signed with another key.
    foreign = jose_jwt.encode(header, claims, RSAKey.generate_key(2048, private=True))
    # The exact token text, its signature cut off.
    unsigned = token.rsplit(".", 1)[0] + "."
    for forged in (tampered, foreign, unsigned):
        assert uma.introspect(forged) == {"active": False}
    assert uma.introspect(token)["active"] is True


# -- a signed token cannot gain permissions ------------------------------------------------------


def test_an_upgrade_mints_a_new_jwt_with_every_live_permission(
    uma: Uma2, http: FlaskClient, store: Store
) -> None:
    first = granted(uma, "view")["access_token"]
    # A second resource server of alice registers a set of hers.
    other_rs = make_party(store, "alice", "uma_protection")
    reply = http.post(
        "/rs/resource_set",
        json={"name": "Holidays", "resource_scopes": ["view"], "type": PHOTO_TYPE},
        headers=other_rs.auth,
    )
    assert reply.status_code == 201, reply.json
    holidays = reply.json["_id"]
    ticket = http.post(
        "/permission",
        json=[{"resource_id": holidays, "resource_scopes": ["view"]}],
        headers=other_rs.auth,
    ).json["ticket"]
    status, body = uma.token(ticket=ticket, rpt=first, **doctor())
    assert status == 200, body
    second = body["access_token"]
    assert body["upgraded"] is True and second != first
    claims = verified(http, second, [uma.rs.client_id, other_rs.client_id])
    assert claims["aud"] == [uma.rs.client_id, other_rs.client_id]
    assert claims["authorization"]["permissions"] == [
        {"rsid": uma.rs_id, "rsname": "Photos", "scopes": ["view"]},
        {"rsid": holidays, "rsname": "Holidays", "scopes": ["view"]},
    ]
    # The first one stays valid, with what it carried.
    assert verified(http, first, uma.rs.client_id)["authorization"]["permissions"] == [
        {"rsid": uma.rs_id, "rsname": "Photos", "scopes": ["view"]}
    ]
    assert uma.introspect(first)["active"] is True
    # Without `rpt` (as python-keycloak asks), a grant also carries every live permission.
    third = granted(uma, "view")["access_token"]
    assert sorted(p["rsid"] for p in parts(third)[1]["authorization"]["permissions"]) == sorted(
        [uma.rs_id, holidays]
    )
    assert len({first, second, third}) == 3


# -- keys ----------------------------------------------------------------------------------------


def test_keys_rotate_and_retire_through_the_command_line(
    cli: CLI, uma: Uma2, http: FlaskClient
) -> None:
    made = cli.json("init")["signing_key"]
    listed = cli.json("keys", "list")
    assert [(key["kid"], key["algorithm"], key["current"]) for key in listed] == [
        (made, "RS256", True)
    ]
    assert isinstance(listed[0]["created"], int)
    before = granted(uma, "view")["access_token"]
    assert pyjwt.get_unverified_header(before)["kid"] == made

    rotated = cli.json("keys", "rotate")
    assert rotated["current"] is True and rotated["kid"] != made
    assert [key["kid"] for key in http.get("/jwks").json["keys"]] == [rotated["kid"], made]
    after = granted(uma, "view")["access_token"]
    assert pyjwt.get_unverified_header(after)["kid"] == rotated["kid"]
    # The old key still verifies until it is retired.
    verified(http, before, uma.rs.client_id)
    assert uma.introspect(before)["active"] is True

    assert cli.json("keys", "retire") == {"retired": [made]}
    assert [key["kid"] for key in http.get("/jwks").json["keys"]] == [rotated["kid"]]
    assert uma.introspect(before) == {"active": False}
    assert uma.introspect(after)["active"] is True
    with pytest.raises(KeyError):
        published(http)[made]
    assert cli.json("keys", "retire") == {"retired": []}


def test_init_makes_no_second_key(cli: CLI) -> None:
    first = cli.json("init")["signing_key"]
    assert cli.json("init")["signing_key"] == first
    assert len(cli.json("keys", "list")) == 1


def test_the_private_key_is_not_stored_in_clear(uma: Uma2, config_path: Path, store: Store) -> None:
    granted(uma, "view")
    config = load_config(config_path)
    (key,) = store.signing_keys()
    dump = dump_database(config.database)
    assert key.kid in dump and "PRIVATE KEY" not in dump
    settings = signing_keys.configured(config)
    assert settings is not None
    pem = secrets_at_rest.unseal(settings.sealing_keys, key.sealed_key, key.kid)
    private = RSAKey.import_key(pem).as_dict(private=True)
    for parameter in ("d", "p", "q"):
        assert private[parameter] not in dump
    # Under another secret_key the stored key does not open.
    other = secrets_at_rest.sealing_key("another-secret-key-of-forty-characters--", "signing keys")
    with pytest.raises(secrets_at_rest.SealBroken):
        secrets_at_rest.unseal([other], key.sealed_key, key.kid)


# -- a real server -------------------------------------------------------------------------------


@pytest.mark.live
def test_a_real_server_makes_its_key_at_start_and_pyjwt_fetches_it(tmp_path: Path) -> None:
    server: LiveServer = start_server(
        tmp_path,
        extra_config='[tokens]\nrpt_format = "jwt"\njwt_algorithm = "ES256"\n',
        rules_text=RULES,
    )
    try:
        (key,) = server.command("keys", "list")  # made by serve, before any RPT
        assert key["algorithm"] == "ES256" and key["current"] is True
        rs_id, _ = _client(server, "Photo server")
        app_id, app_secret = _client(server, "Viewer", "--push-claims", EMPLOYEE)
        server.command("user", "create", "alice")
        pat = server.command(
            "token", "issue", "--client", rs_id, "--user", "alice", "--scope", "uma_protection"
        )["access_token"]
        auth = {"Authorization": f"Bearer {pat}"}
        made = requests.post(
            f"{server.url}/rs/resource_set",
            json={"name": "Photos", "resource_scopes": ["view"], "type": PHOTO_TYPE},
            headers=auth,
            timeout=10,
        )
        assert made.status_code == 201, made.text
        ticket = requests.post(
            f"{server.url}/permission",
            json={"resource_id": made.json()["_id"], "resource_scopes": ["view"]},
            headers=auth,
            timeout=10,
        ).json()["ticket"]
        reply = requests.post(
            f"{server.url}/token",
            data={"grant_type": "urn:ietf:params:oauth:grant-type:uma-ticket", "ticket": ticket}
            | doctor(),
            auth=(app_id, app_secret),
            timeout=10,
        )
        assert reply.status_code == 200, reply.text
        token = reply.json()["access_token"]
        jwks_uri = requests.get(f"{server.url}/.well-known/uma2-configuration", timeout=10).json()[
            "jwks_uri"
        ]
        signing = pyjwt.PyJWKClient(jwks_uri).get_signing_key_from_jwt(token)
        assert signing.key_id == key["kid"]
        claims = pyjwt.decode(
            token, signing, algorithms=["ES256"], audience=rs_id, issuer=server.url
        )
        assert claims["azp"] == app_id and claims["authorization"]["permissions"][0]["scopes"] == [
            "view"
        ]
    finally:
        stop_server(server)


def _client(server: LiveServer, name: str, *more: str) -> tuple[str, str]:
    made = server.command("client", "create", "--name", name, *more)
    return made["client_id"], made["client_secret"]


def test_an_ec_key_is_made_for_es256() -> None:
    settings = signing_keys.JwtRpts.of("ES256", ["a-secret-key-of-at-least-forty-characters"])
    made = signing_keys.new_signing_key("ES256", settings.sealing_keys[0], 0)
    pem = secrets_at_rest.unseal(settings.sealing_keys, made.sealed_key, made.kid)
    assert ECKey.import_key(pem).thumbprint() == made.kid
    assert made.public_jwk["crv"] == "P-256" and "d" not in made.public_jwk


# -- the Keycloak realm face ---------------------------------------------------------------------


@pytest.fixture
def realm(tmp_path: Path) -> Iterator[Realm]:
    (tmp_path / "policies.toml").write_text(REALM_RULES, encoding="utf-8")
    extra = (
        f'[keycloak]\nrealm = "demo"\nclaim_token_type = "{EMPLOYEE}"\n'
        '[tokens]\nrpt_format = "jwt"\n'
    )
    config = load_config(write_config(tmp_path, extra=extra))
    http = create_app(config).test_client()
    store = open_store(config.database)
    try:
        yield Realm(http, store, make_party(store, "alice", "uma_protection"))
    finally:
        store.close()


def test_on_the_realm_face_a_jwt_rpt_names_the_realm_as_its_issuer(realm: Realm) -> None:
    status, body = realm.ask("Shared#view")  # Keycloak's form: audience and permission
    assert status == 200, body
    shared = body["access_token"]
    kid = pyjwt.get_unverified_header(shared)["kid"]
    # The keys where Keycloak's clients look: the realm's jwks_uri, its certs (those of /jwks).
    certs = realm.http.get(f"{REALM}/.well-known/openid-configuration").json["jwks_uri"]
    assert certs == f"http://uma.test{OIDC}/certs"
    published = realm.http.get(certs.removeprefix("http://uma.test")).json
    assert published == realm.http.get("/jwks").json and published["keys"]
    key = pyjwt.PyJWKSet.from_dict(published)[kid]
    issuer = "http://uma.test/realms/demo"
    claims = pyjwt.decode(
        shared, key, algorithms=["RS256"], audience=realm.rs.client_id, issuer=issuer
    )
    bob = realm.store.get_user_by_username("bob")
    assert bob is not None and claims["sub"] == bob.sub and claims["azp"] == realm.app_id
    assert claims["authorization"]["permissions"] == [
        {"rsid": realm.shared, "rsname": "Shared", "scopes": ["view"]}
    ]
    # A ticket brought with bob's token on the realm face: the realm's issuer too, and the JWT
    # holds what was granted before.
    ticket = realm.http.post(
        "/permission",
        json={"resource_id": realm.photos, "resource_scopes": ["view"]},
        headers=realm.rs.auth,
    ).json["ticket"]
    status, body = realm.token(
        {"grant_type": UMA_TICKET, "ticket": ticket, **jwt_claims({"role": ["doctor"]})},
        realm.bob.token,
    )
    assert status == 200, body
    claims = pyjwt.decode(
        body["access_token"], key, algorithms=["RS256"], audience=realm.rs.client_id, issuer=issuer
    )
    assert sorted(p["rsname"] for p in claims["authorization"]["permissions"]) == [
        "Photos",
        "Shared",
    ]
    # The standard token endpoint still names the standard issuer.
    standard = realm.http.post(
        "/token",
        data={
            "grant_type": UMA_TICKET,
            "ticket": realm.http.post(
                "/permission",
                json={"resource_id": realm.shared, "resource_scopes": ["view"]},
                headers=realm.rs.auth,
            ).json["ticket"],
        },
        headers={"Authorization": basic(realm.app_id, realm.app_secret)},
    ).json["access_token"]
    assert parts(standard)[1]["iss"] == ISSUER
    # Realm introspection (the client by its secret) sees it; a tampered one is inactive.
    ask = {"client_id": realm.rs.client_id, "client_secret": realm.rs.client_secret}
    answer = realm.http.post(f"{OIDC}/token/introspect", data={**ask, "token": shared}).json
    assert answer["active"] is True
    tampered = shared[:-4] + ("AAAA" if not shared.endswith("AAAA") else "BBBB")
    answer = realm.http.post(f"{OIDC}/token/introspect", data={**ask, "token": tampered}).json
    assert answer["active"] is False


def test_a_changed_secret_key_is_told_at_init_and_cured_by_rotating(
    cli: CLI, config_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    made = cli.json("init")["signing_key"]
    config_path.write_text(
        config_path.read_text(encoding="utf-8").replace(SECRET, "another-secret-key-" + "x" * 30),
        encoding="utf-8",
    )
    failed = cli("init")
    assert failed.exit_code == 1
    assert f"The current signing key {made} does not open with this secret_key" in failed.stderr
    # Served anyway: a grant is a plain server_error (nothing consumed), the log says why.
    config = load_config(config_path)
    http = create_app(config).test_client()
    store = open_store(config.database)
    try:
        uma = Uma2(http, store, make_party(store, "alice", "uma_protection"))
        ticket = uma.ticket("view")
        status, body = uma.token(ticket=ticket, **doctor())
        assert status == 500 and body["error"] == "server_error"
        assert "keys rotate" in caplog.text
        rotated = cli.json("keys", "rotate")["kid"]
        status, body = uma.token(ticket=ticket, **doctor())  # the ticket was not used up
        assert status == 200, body
        assert pyjwt.get_unverified_header(body["access_token"])["kid"] == rotated
        assert cli.json("init")["signing_key"] == rotated
    finally:
        store.close()
