"""The storage contract, operation by operation (`umaserver.storage.contract`): what each docstring
promises, through the contract alone, so that every backend of `store_factory` must pass it as is.
Transactions, handles and the races between them are in test_concurrency.py."""

from __future__ import annotations

import inspect
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import pytest

from umaserver.storage import Storage, contract
from umaserver.storage.people_records import (
    AccessRequest,
    Event,
    Invitation,
    Notice,
    SeededParty,
    Share,
)
from umaserver.storage.records import (
    AccessToken,
    AssertionUse,
    Client,
    Consent,
    FetchedImage,
    InitialAccessToken,
    OwnedResourceSet,
    Pct,
    Permission,
    RequestedPermission,
    ResourceSet,
    ResourceSetQuery,
    Rpt,
    Session,
    SigningKey,
    Ticket,
    TicketState,
    User,
)

from .builders import (
    HOUR,
    T,
    assertion_use,
    claim,
    make_client,
    make_code,
    make_handle,
    make_refresh_token,
    make_rpt,
    make_set,
    make_ticket,
    make_token,
    make_user,
    permission,
    unique,
)


def same_json(got: Any, expected: Any) -> bool:
    """Equal as JSON, types included (True is not 1, 1.0 is not 1); key order aside."""
    return json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)


# -- the suite covers the contract -----------------------------------------------------------------


SUITE = ("builders.py", "test_conformance.py", "test_concurrency.py")


def contract_operations() -> set[str]:
    return {
        name
        for _, protocol in inspect.getmembers(contract, inspect.isclass)
        if protocol.__module__ == contract.__name__
        for name, member in vars(protocol).items()
        if callable(member) and not name.startswith("_")
    }


def test_every_operation_of_the_contract_is_exercised() -> None:
    here = Path(__file__).parent
    suite = "".join((here / name).read_text(encoding="utf-8") for name in SUITE)
    operations = contract_operations()
    assert {"transaction", "close", "add_client", "record_assertion_use"} <= operations
    assert sorted(name for name in operations if f".{name}(" not in suite) == []


# -- handles ---------------------------------------------------------------------------------------


def test_a_handle_is_reusable_between_units_of_work_only(store_factory: Any) -> None:
    handle = store_factory()
    assert handle.reusable() is True
    with handle.transaction():
        assert handle.reusable() is False  # a pool must never keep it mid-transaction
    assert handle.reusable() is True
    handle.close()
    assert handle.reusable() is False


# -- clients ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("redirect_uris", "push_claim_types"),
    [
        ((), ()),
        (("https://a.test/cb",), ("custom",)),
        (
            ("https://b.test/2", "https://a.test/1", "http://localhost:8080/cb?x=1&y=é"),
            ("claim-client-assertion-saml-1.0", "claim-client-claims-oidc-1.0", "custom"),
        ),
    ],
)
def test_client_round_trip(
    store: Storage, redirect_uris: tuple[str, ...], push_claim_types: tuple[str, ...]
) -> None:
    client = Client("client-1", "digest-1", "Ünïcode client ✓", redirect_uris, push_claim_types)
    store.add_client(client, T)
    assert store.get_client("client-1") == client
    assert store.get_client("client-2") is None


METADATA = {
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "token_endpoint_auth_method": "none",
    "scope": "uma_authorization",
    "logo_uri": "https://a.test/logo.png?size=ünïcode",
    "client_uri": "https://a.test/",
}


def test_client_metadata_registration_digest_and_creation_time_round_trip(
    store: Storage,
) -> None:
    client = Client("client-1", "", "n", ("https://a.test/cb",), (), METADATA, "reg-digest")
    store.add_client(client, T)
    got = store.get_client("client-1")
    assert got == client
    assert got is not None and same_json(got.metadata, METADATA)
    assert got.registration_digest == "reg-digest" and got.created_at == T
    plain = Client("client-2", "d", "n", (), ())
    store.add_client(plain, T + 1)
    assert store.get_client("client-2") == plain
    assert plain.metadata == {} and plain.registration_digest is None


def test_clients_are_listed_in_the_order_they_were_added(store: Storage) -> None:
    assert store.list_clients() == []
    for number, at in ((3, T), (1, T + 5), (2, T + 5)):
        store.add_client(Client(f"client-{number}", "d", "n", (), ()), at)
    listed = store.list_clients()
    assert [c.client_id for c in listed] == ["client-3", "client-1", "client-2"]
    assert [c.created_at for c in listed] == [T, T + 5, T + 5]


def test_updating_a_client_replaces_its_metadata_but_not_its_secrets(store: Storage) -> None:
    client = Client("client-1", "secret", "old", ("https://a.test/1",), ("x",), {}, "reg")
    store.add_client(client, T)
    updated = replace(
        client,
        secret_digest="other",
        registration_digest="other",
        name="new ✓",
        redirect_uris=("https://b.test/2", "http://127.0.0.1/cb"),
        push_claim_types=(),
        metadata=METADATA,
    )
    assert store.update_client(updated)
    assert store.get_client("client-1") == replace(
        updated, secret_digest="secret", registration_digest="reg"
    )
    assert not store.update_client(replace(updated, client_id="client-2"))
    assert store.get_client("client-2") is None


def test_a_clients_secret_and_registration_digests_are_set(store: Storage) -> None:
    client = make_client(store)
    assert store.set_client_secret_digest(client.client_id, "new-secret")
    assert store.set_registration_digest(client.client_id, "new-reg")
    assert store.get_client(client.client_id) == replace(
        client, secret_digest="new-secret", registration_digest="new-reg"
    )
    assert store.set_registration_digest(client.client_id, None)
    assert store.get_client(client.client_id) == replace(client, secret_digest="new-secret")
    assert not store.set_client_secret_digest("nobody", "x")
    assert not store.set_registration_digest("nobody", "x")


def test_a_registration_digest_is_replaced_only_when_it_is_the_one_expected(
    store: Storage,
) -> None:
    client = make_client(store)
    assert not store.replace_registration_digest(client.client_id, "reg", "reg-2")  # none yet
    assert store.set_registration_digest(client.client_id, "reg")
    assert store.replace_registration_digest(client.client_id, "reg", "reg-2")
    assert store.get_client(client.client_id) == replace(client, registration_digest="reg-2")
    # The old one again (a second request that presented it): nothing changes.
    assert not store.replace_registration_digest(client.client_id, "reg", "reg-3")
    assert store.get_client(client.client_id) == replace(client, registration_digest="reg-2")
    assert not store.replace_registration_digest("nobody", "reg-2", "x")
    assert store.set_registration_digest(client.client_id, None)
    assert not store.replace_registration_digest(client.client_id, "reg-2", "x")
    assert store.get_client(client.client_id) == replace(client, registration_digest=None)


def test_deleting_a_client_takes_what_was_issued_to_it(store: Storage) -> None:
    client, other = make_client(store), make_client(store)
    token, kept = make_token(store, client), make_token(store, other)
    resource_set = make_set(store, client)
    rpt = make_rpt(store, token)
    assert store.delete_client(client.client_id)
    assert store.get_client(client.client_id) is None
    assert store.get_access_token(token.digest) is None
    assert store.find_resource_set(resource_set.id) is None
    assert store.get_rpt(rpt.digest) is None
    assert store.get_access_token(kept.digest) == kept
    assert store.list_clients() == [other]
    assert not store.delete_client(client.client_id)


# -- initial access tokens -------------------------------------------------------------------------


@pytest.mark.parametrize("push_claim_types", [(), ("custom", "claim-client-assertion-saml-1.0")])
def test_initial_access_token_round_trip(store: Storage, push_claim_types: tuple[str, ...]) -> None:
    token = InitialAccessToken("iat-digest", push_claim_types, T, T + HOUR)
    store.add_initial_access_token(token)
    assert store.get_initial_access_token("iat-digest") == token
    assert store.get_initial_access_token("other") is None


def test_expired_initial_access_tokens_are_forgotten_in_batches(store: Storage) -> None:
    for number, expires_at in enumerate((T + 10, T + 20, T + 30, T + 40, T + 50)):
        store.add_initial_access_token(InitialAccessToken(f"d{number}", (), T, expires_at))
    assert store.delete_initial_access_tokens_expired_before(T + 40, 2) == 2
    assert store.delete_initial_access_tokens_expired_before(T + 40, 2) == 1
    assert store.delete_initial_access_tokens_expired_before(T + 40, 2) == 0
    assert [store.get_initial_access_token(f"d{n}") is None for n in range(5)] == [
        True,
        True,
        True,
        False,
        False,
    ]


# -- users -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("password_hash", "claims"),
    [
        (None, {}),
        ("scrypt$salt$hash", {"email": "a@b.test", "groups": ["x", "y"], "age": 42, "ok": True}),
        ("h", {"nested": {"list": [1, 2.5, None, "ü"]}}),
    ],
)
def test_user_round_trip(store: Storage, password_hash: str | None, claims: dict[str, Any]) -> None:
    user = User("sub-1", "alice", password_hash, claims)
    assert store.add_user(user, T) is True
    got = store.get_user_by_username("alice")
    assert got == user and got is not None and same_json(got.claims, claims)
    assert store.get_username("sub-1") == "alice"
    assert store.get_user_by_username("bob") is None
    assert store.get_username("sub-2") is None


def test_a_taken_username_is_refused_and_nothing_stored(store: Storage) -> None:
    first = make_user(store, "alice")
    assert store.add_user(User("sub-other", "alice", None, {"x": 1}), T) is False
    assert store.get_user_by_username("alice") == first
    assert store.get_username("sub-other") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [(":", ["client:x", "x:y:z"]), ("client:", ["client:x"]), ("Client", []), ("ü", ["üser"])],
)
def test_usernames_containing_a_text(store: Storage, text: str, expected: list[str]) -> None:
    for name in ("x:y:z", "alice", "client:x", "üser"):
        make_user(store, name)
    assert store.usernames_containing(text) == expected


# -- access tokens ---------------------------------------------------------------------------------


@pytest.mark.parametrize("of_user", [True, False], ids=["user", "client-own"])
def test_access_token_comes_with_its_users_username(store: Storage, of_user: bool) -> None:
    user = make_user(store, "alice") if of_user else None
    token = make_token(store, user=user)
    got = store.get_access_token(token.digest)
    assert got == replace(token, username="alice" if of_user else None)
    assert store.get_access_token("no-such-digest") is None


def test_revoking_an_access_token_works_once(store: Storage) -> None:
    token = make_token(store)
    assert store.revoke_access_token(token.digest) is True
    assert store.revoke_access_token(token.digest) is False
    got = store.get_access_token(token.digest)
    assert got is not None and got.revoked
    assert store.revoke_access_token("no-such-digest") is False
    assert store.revoke_access_token(make_token(store, revoked=True).digest) is False


@pytest.mark.parametrize(
    ("token_scope", "revoked", "asked", "expected"),
    [
        ("uma_protection", False, "uma_protection", True),
        ("uma_protection", True, "uma_protection", False),  # revoked: given, then taken back
        ("openid uma_protection", False, "uma_protection", True),
        ("uma_protection openid", False, "uma_protection", True),
        ("uma_authorization", False, "uma_protection", False),
        ("uma_protection_x", False, "uma_protection", False),
        ("x_uma_protection", False, "uma_protection", False),
    ],
)
def test_whether_a_user_has_been_issued_a_token_at_a_client(
    store: Storage, token_scope: str, revoked: bool, asked: str, expected: bool
) -> None:
    alice, bob = make_user(store), make_user(store)
    client, other_client = make_client(store), make_client(store)
    make_token(store, client, alice, revoked=revoked, scope=token_scope)
    make_token(store, client, scope=asked)  # the client's own, for no user
    make_token(store, other_client, bob, scope=asked)
    assert store.has_access_token(alice.sub, client.client_id, asked) is expected
    assert store.has_access_token(alice.sub, other_client.client_id, asked) is False
    assert store.has_access_token(bob.sub, client.client_id, asked) is False


def expiring_token(store: Storage, client: Client, expires_at: int) -> AccessToken:
    token = AccessToken(
        f"at-expiring-{expires_at}",
        client.client_id,
        None,
        None,
        "uma_protection",
        T,
        expires_at,
        False,
    )
    store.add_access_token(token)
    return token


def test_expired_access_tokens_are_forgotten_in_batches_unless_an_rpt_is_under_them(
    store: Storage,
) -> None:
    client = make_client(store)
    expiring = [expiring_token(store, client, T + n) for n in (10, 20, 30)]
    boundary, later = expiring_token(store, client, T + 40), expiring_token(store, client, T + 50)
    with_rpt = expiring_token(store, client, T + 5)
    rpt = make_rpt(store, with_rpt)
    assert store.delete_access_tokens_expired_before(T + 40, 2) == 2
    assert store.delete_access_tokens_expired_before(T + 40, 2) == 1
    assert store.delete_access_tokens_expired_before(T + 40, 2) == 0
    for token in expiring:
        assert store.get_access_token(token.digest) is None
    for token in (boundary, later, with_rpt):
        assert store.get_access_token(token.digest) == token
    assert store.get_rpt(rpt.digest) == rpt
    assert store.delete_rpts_expired_before(rpt.expires_at + 1, 10) == 1
    assert store.delete_access_tokens_expired_before(T + 40, 2) == 1
    assert store.get_access_token(with_rpt.digest) is None
    assert store.get_access_token(boundary.digest) == boundary


# -- resource sets ---------------------------------------------------------------------------------


def test_resource_set_round_trip(store: Storage) -> None:
    description = {
        "name": "Fotoalbum ✓",
        "type": "https://www.example.com/rsets/photoalbum",
        "scopes": ["view", "edit"],
        "icon_uri": "https://x.test/i.png",
        "extension": {"nested": [1, 2.5, True, None, {"deep": "ü"}]},
    }
    resource_set = make_set(store, description=description)
    got = store.get_resource_set(resource_set.id, resource_set.owner, resource_set.client_id)
    assert got == resource_set and got is not None
    assert same_json(got.description, resource_set.description)
    assert store.find_resource_set(resource_set.id) == resource_set
    assert store.find_resource_set("no-such-set") is None


def test_resource_sets_registered_by_a_resource_server_for_any_owner(store: Storage) -> None:
    server, other = make_client(store), make_client(store)
    named = {"name": "Photos", "scopes": ["view"]}
    later = make_set(store, server, owner="bob", created_at=T + 1, rs_id="rs-b", description=named)
    first = make_set(store, server, owner="alice", created_at=T, rs_id="rs-c", description=named)
    tie = make_set(store, server, owner="alice", created_at=T + 1, rs_id="rs-a")
    make_set(store, other, description=named)
    assert store.resource_sets_registered_by(server.client_id, None, 10) == [first, tie, later]
    assert store.resource_sets_registered_by(server.client_id, "Photos", 10) == [first, later]
    assert store.resource_sets_registered_by(server.client_id, "photos", 10) == []
    assert store.resource_sets_registered_by(server.client_id, None, 2) == [first, tie]
    assert store.resource_sets_registered_by("no-such-client", None, 10) == []


@pytest.mark.parametrize("who", ["other owner", "other resource server", "other id"])
def test_resource_sets_are_only_seen_by_their_owner_and_resource_server(
    store: Storage, who: str
) -> None:
    mine = make_set(store)
    other_client = make_client(store)
    rs_id, owner, client_id = mine.id, mine.owner, mine.client_id
    if who == "other owner":
        owner = "someone-else"
    elif who == "other resource server":
        client_id = other_client.client_id
    else:
        rs_id = make_set(store, client=other_client, owner=mine.owner).id

    assert store.get_resource_set(rs_id, owner, client_id) is None
    assert store.replace_resource_set(rs_id, owner, client_id, {"name": "Hijacked"}, T + 1) is False
    assert store.delete_resource_set(rs_id, owner, client_id) is False
    assert store.list_resource_sets(owner, client_id) == ([mine.id] if who == "other id" else [])
    # ...and the set is untouched, and found by id whoever asks.
    assert store.get_resource_set(mine.id, mine.owner, mine.client_id) == mine
    assert store.find_resource_set(mine.id) == mine


def test_replacing_a_resource_set(store: Storage) -> None:
    rs = make_set(store)
    new = {"name": "Renamed", "scopes": ["view"], "type": None, "extra": {"ü": [1]}}
    assert store.replace_resource_set(rs.id, rs.owner, rs.client_id, new, T + 5) is True
    got = store.get_resource_set(rs.id, rs.owner, rs.client_id)
    assert got == replace(rs, description=new) and got is not None
    assert same_json(got.description, new)
    assert store.list_resource_sets(rs.owner, rs.client_id) == [rs.id]


def test_deleting_a_resource_set(store: Storage) -> None:
    rs = make_set(store)
    assert store.delete_resource_set(rs.id, rs.owner, rs.client_id) is True
    assert store.delete_resource_set(rs.id, rs.owner, rs.client_id) is False
    assert store.get_resource_set(rs.id, rs.owner, rs.client_id) is None
    assert store.find_resource_set(rs.id) is None
    assert store.list_resource_sets(rs.owner, rs.client_id) == []


def test_resource_sets_are_listed_in_registration_order_per_owner_and_server(
    store: Storage,
) -> None:
    client, other_client = make_client(store), make_client(store)
    ids = [make_set(store, client, "alice", T + n, rs_id=f"rs-{c}").id for n, c in enumerate("cab")]
    make_set(store, client, "bob")
    make_set(store, other_client, "alice")
    assert store.list_resource_sets("alice", client.client_id) == ids
    assert store.list_resource_sets("carol", client.client_id) == []


def test_resource_sets_registered_in_one_second_are_listed_in_registration_order(
    store: Storage,
) -> None:
    client = make_client(store)
    for rs_id in ("zeta", "alpha", "mu"):
        make_set(store, client, "alice", T, rs_id=rs_id)
    assert store.list_resource_sets("alice", client.client_id) == ["zeta", "alpha", "mu"]


_FILTERED = {
    "photos": {
        "name": "Holiday Photos",
        "type": "photo",
        "scopes": ["view", "print"],
        "uris": ["/photos/1", "/p"],
    },
    "notes": {"name": "holiday notes", "type": "note", "scopes": ["read"], "uris": ["/notes/1"]},
    "work": {"name": "Work", "type": "photo", "scopes": ["view"], "extra": ["/notes/1"]},
    "sale": {"name": "50% off_sale", "scopes": ["/p"], "uris": []},
    "doctors": {"name": "Ärzte", "type": "PHOTO", "scopes": ["view"], "uris": ["/Photos/1"]},
    "unnamed": {"resource_scopes_were": "given", "scopes": ["view"], "uris": ["/p", "/p"]},
}


def _filtered_sets(store: Storage) -> tuple[Client, dict[str, str]]:
    """The sets of _FILTERED, alice's at one resource server, one a second; and, not to be
    listed, one like each of them of bob's and one of alice's at another server."""
    client, other_client = make_client(store), make_client(store)
    ids = {}
    for n, (key, description) in enumerate(_FILTERED.items()):
        ids[key] = make_set(store, client, "alice", T + n, description=description).id
        make_set(store, client, "bob", T + n, description=description)
        make_set(store, other_client, "alice", T + n, description=description)
    return client, ids


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (ResourceSetQuery(), ["photos", "notes", "work", "sale", "doctors", "unnamed"]),
        # A name: a substring, case aside (ASCII letters only, as both databases fold case).
        (ResourceSetQuery(name="holiday"), ["photos", "notes"]),
        (ResourceSetQuery(name="OTO"), ["photos"]),
        (ResourceSetQuery(name="%"), ["sale"]),
        (ResourceSetQuery(name="_"), ["sale"]),
        (ResourceSetQuery(name="ÄR"), ["doctors"]),
        (ResourceSetQuery(name="är"), []),
        (ResourceSetQuery(name="nothing like it"), []),
        # ...or the whole name, as registered.
        (ResourceSetQuery(name="holiday notes", exact_name=True), ["notes"]),
        (ResourceSetQuery(name="Holiday", exact_name=True), []),
        (ResourceSetQuery(name="HOLIDAY NOTES", exact_name=True), []),
        # A type as registered; a URI of the set's `uris` (not elsewhere in the description).
        (ResourceSetQuery(type="photo"), ["photos", "work"]),
        (ResourceSetQuery(type="phot"), []),
        (ResourceSetQuery(uri="/p"), ["photos", "unnamed"]),
        (ResourceSetQuery(uri="/notes/1"), ["notes"]),
        (ResourceSetQuery(uri="/photos"), []),
        (ResourceSetQuery(uri="/photos/1"), ["photos"]),
        # A scope of the set's scopes.
        (ResourceSetQuery(scope="view"), ["photos", "work", "doctors", "unnamed"]),
        (ResourceSetQuery(scope="/p"), ["sale"]),
        (ResourceSetQuery(scope="vie"), []),
        # Together: every filter must pass.
        (ResourceSetQuery(name="o", type="photo", scope="print"), ["photos"]),
        (ResourceSetQuery(name="holiday", uri="/notes/1", scope="read"), ["notes"]),
        (ResourceSetQuery(name="work", type="photo", scope="print"), []),
        # And a page of what passes.
        (ResourceSetQuery(first=2), ["work", "sale", "doctors", "unnamed"]),
        (ResourceSetQuery(max=2), ["photos", "notes"]),
        (ResourceSetQuery(first=1, max=2), ["notes", "work"]),
        (ResourceSetQuery(first=5, max=10), ["unnamed"]),
        (ResourceSetQuery(first=6), []),
        (ResourceSetQuery(max=0), []),
        (ResourceSetQuery(scope="view", first=1, max=2), ["work", "doctors"]),
    ],
)
def test_listing_resource_sets_by_filters_and_pages(
    store: Storage, query: ResourceSetQuery, expected: list[str]
) -> None:
    client, ids = _filtered_sets(store)
    assert store.list_resource_sets("alice", client.client_id, query) == [
        ids[key] for key in expected
    ]


def test_listing_the_sets_of_every_owner_at_a_resource_server(store: Storage) -> None:
    client, other_client = make_client(store), make_client(store)
    made = [make_set(store, client, owner, T + n).id for n, owner in enumerate("abcab")]
    make_set(store, other_client, "a", T)
    assert store.list_resource_sets(None, client.client_id) == made
    assert (
        store.list_resource_sets(None, client.client_id, ResourceSetQuery(first=1, max=3))
        == (made[1:4])
    )
    assert store.list_resource_sets(None, make_client(store).client_id) == []


def test_pages_of_sets_registered_in_one_second_hold_each_set_once(store: Storage) -> None:
    client = make_client(store)
    made = [make_set(store, client, "alice", T + n // 7).id for n in range(30)]
    pages = [
        store.list_resource_sets("alice", client.client_id, ResourceSetQuery(first=first, max=4))
        for first in range(0, 32, 4)
    ]
    assert [rs_id for page in pages for rs_id in page] == made
    assert store.list_resource_sets(
        "alice", client.client_id, ResourceSetQuery(scope="view", first=0, max=30)
    ) == store.list_resource_sets("alice", client.client_id)


def test_an_owners_sets_across_resource_servers_come_in_pages_by_name_and_id(
    store: Storage,
) -> None:
    photos, notes = make_client(store), make_client(store)
    store.update_client(replace(notes, name="Notes <b>"))
    made = [
        make_set(store, client, "alice", rs_id=rs_id, description=description)
        for client, rs_id, description in [
            (photos, "rs-2", {"name": "Beach", "scopes": ["view"], "type": "photo"}),
            (notes, "rs-1", {"name": "Beach", "scopes": ["read"]}),
            (photos, "rs-0", {"name": "Alps", "scopes": ["view"]}),
            (notes, "rs-3", {"name": "Zoo", "scopes": ["read"]}),
        ]
    ]
    make_set(store, photos, "bob", rs_id="rs-bob")
    # Permissions on "rs-2": one live, one expired, one on a revoked RPT, one on an expired RPT.
    store.put_permission(make_rpt(store).digest, permission(made[0], expires_at=T + 1))
    store.put_permission(make_rpt(store).digest, permission(made[0], expires_at=T))
    store.put_permission(make_rpt(store, revoked=True).digest, permission(made[0]))
    store.put_permission(make_rpt(store, expires_at=T).digest, permission(made[0]))

    def line(rs_id: str, name: str, kind: str | None, client: Client, n: int = 0) -> Any:
        client_name = "Notes <b>" if client is notes else "A client"
        return OwnedResourceSet(rs_id, name, kind, client.client_id, client_name, n)

    everything = [
        line("rs-0", "Alps", None, photos),
        line("rs-1", "Beach", None, notes),
        line("rs-2", "Beach", "photo", photos, 1),
        line("rs-3", "Zoo", None, notes),
    ]
    assert store.resource_sets_of("alice", T, None, 10) == everything
    assert store.resource_sets_of("alice", T, None, 2) == everything[:2]
    assert store.resource_sets_of("alice", T, ("Beach", "rs-1"), 2) == everything[2:]
    assert store.resource_sets_of("alice", T, ("Beach", "rs-2"), 2) == everything[3:]
    assert store.resource_sets_of("alice", T, ("Zoo", "rs-3"), 2) == []
    # A cursor whose set is gone still pages on from where it was.
    assert store.resource_sets_of("alice", T, ("B", "gone"), 1) == everything[1:2]
    assert store.resource_sets_of("carol", T, None, 10) == []
    assert store.count_resource_sets_of("alice") == 4
    assert store.count_resource_sets_of("carol") == 0


def test_deleting_a_resource_set_takes_its_tickets_claims_and_permissions(store: Storage) -> None:
    client = make_client(store)
    doomed, kept = make_set(store, client, "alice"), make_set(store, client, "alice")
    doomed_ticket, kept_ticket = make_ticket(store, doomed), make_ticket(store, kept)
    for ticket in (doomed_ticket, kept_ticket):
        store.record_claims(ticket.digest, "bob", [claim("email", "bob@x.test")])
    rpt = make_rpt(store)
    store.put_permission(rpt.digest, permission(doomed, issued_at=T))
    store.put_permission(rpt.digest, permission(kept, issued_at=T + 1))

    assert store.delete_resource_set(doomed.id, "alice", client.client_id) is True

    assert store.get_ticket(doomed_ticket.digest) is None
    assert store.gathered_claims(doomed_ticket.digest, "bob") == []
    assert store.get_permission(rpt.digest, doomed.id) is None
    assert store.permissions_of(rpt.digest, T) == [permission(kept, issued_at=T + 1)]
    assert store.get_ticket(kept_ticket.digest) == kept_ticket
    assert store.gathered_claims(kept_ticket.digest, "bob") == [claim("email", "bob@x.test")]
    # A ticket made again with the old digest starts without claims.
    make_ticket(store, kept, digest=doomed_ticket.digest)
    assert store.gathered_claims(doomed_ticket.digest, "bob") == []


# -- tickets ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["open", "granted", "finished"])
def test_ticket_round_trip(store: Storage, state: TicketState) -> None:
    rs = make_set(store)
    ticket = Ticket(
        "ticket-1", rs.owner, rs.client_id, rs.id, ("view", "edit"), T, T + 60, 3, state
    )
    store.add_ticket(ticket)
    assert store.get_ticket("ticket-1") == ticket
    assert store.get_ticket("ticket-2") is None


def test_requests_are_counted_on_an_open_ticket(store: Storage) -> None:
    ticket = make_ticket(store)
    assert [store.count_ticket_request(ticket.digest) for _ in range(3)] == [1, 2, 3]
    assert store.get_ticket(ticket.digest) == replace(ticket, requests=3)


@pytest.mark.parametrize("state", ["granted", "finished", "unknown"])
def test_requests_are_not_counted_on_a_ticket_not_open(
    store: Storage, state: TicketState | Literal["unknown"]
) -> None:
    digest = "no-such-ticket" if state == "unknown" else make_ticket(store, state=state).digest
    before = store.get_ticket(digest)
    assert store.count_ticket_request(digest) == 0
    assert store.get_ticket(digest) == before


@pytest.mark.parametrize(("operation", "to"), [("consume", "granted"), ("finish", "finished")])
@pytest.mark.parametrize("start", ["open", "granted", "finished", "unknown"])
def test_closing_a_ticket_moves_only_an_open_one(
    store: Storage, operation: str, to: TicketState, start: TicketState | Literal["unknown"]
) -> None:
    ticket = None if start == "unknown" else make_ticket(store, state=start)
    digest = ticket.digest if ticket else "no-such-ticket"
    close = store.consume_ticket if operation == "consume" else store.finish_ticket
    assert close(digest) is (start == "open")
    assert close(digest) is False  # never twice
    if ticket is not None:
        assert store.get_ticket(digest) == replace(
            ticket, state=to if start == "open" else ticket.state
        )


def test_a_consumed_ticket_cannot_be_finished_nor_a_finished_one_consumed(store: Storage) -> None:
    granted, finished = make_ticket(store), make_ticket(store)
    assert store.consume_ticket(granted.digest) and store.finish_ticket(finished.digest)
    assert store.finish_ticket(granted.digest) is False
    assert store.consume_ticket(finished.digest) is False
    assert store.get_ticket(granted.digest) == replace(granted, state="granted")
    assert store.get_ticket(finished.digest) == replace(finished, state="finished")


def test_expired_tickets_are_forgotten_with_their_claims(store: Storage) -> None:
    rs = make_set(store)
    expiring = [make_ticket(store, rs, expires_at=T + n) for n in (10, 20, 30, 40)]
    boundary = make_ticket(store, rs, expires_at=T + 50)  # expires at the moment: not before it
    later = make_ticket(store, rs, expires_at=T + 60)
    for ticket in [*expiring, boundary, later]:
        store.record_claims(ticket.digest, "bob", [claim("n", 1)])

    assert store.delete_tickets_expired_before(T + 50, 3) == 3  # at most `limit`
    assert store.delete_tickets_expired_before(T + 50, 3) == 1
    assert store.delete_tickets_expired_before(T + 50, 3) == 0

    for ticket in expiring:
        assert store.get_ticket(ticket.digest) is None
        assert store.gathered_claims(ticket.digest, "bob") == []
    for ticket in (boundary, later):
        assert store.get_ticket(ticket.digest) == ticket
        assert store.gathered_claims(ticket.digest, "bob") == [claim("n", 1)]


def test_open_tickets_for_a_set_are_its_open_ones_expired_or_not(store: Storage) -> None:
    rs, other = make_set(store), make_set(store)
    live, expired = make_ticket(store, rs), make_ticket(store, rs, expires_at=T - 1)
    for state in ("granted", "finished"):
        make_ticket(store, rs, state=state)
    make_ticket(store, other)
    assert sorted(store.open_tickets_for(rs.id), key=lambda t: t.expires_at) == [expired, live]
    assert store.open_tickets_for("no-such-set") == []


@pytest.mark.parametrize("state", ["open", "granted", "finished", "unknown"])
def test_an_open_ticket_is_extended_never_shortened(
    store: Storage, state: TicketState | Literal["unknown"]
) -> None:
    ticket = None if state == "unknown" else make_ticket(store, state=state, expires_at=T + 60)
    digest = ticket.digest if ticket else "no-such-ticket"
    assert store.extend_ticket(digest, T + 600) is (state == "open")
    if ticket is not None:
        expected = T + 600 if state == "open" else T + 60
        assert store.get_ticket(digest) == replace(ticket, expires_at=expected)
    if state == "open":
        assert store.extend_ticket(digest, T + 30) is True
        assert store.get_ticket(digest) == replace(ticket, expires_at=T + 600)


# -- claims handles --------------------------------------------------------------------------------


def test_claims_handle_round_trip(store: Storage) -> None:
    handle = make_handle(store)
    assert store.get_claims_handle(handle.digest) == handle
    assert store.get_claims_handle("no-such-handle") is None


def test_a_new_handle_voids_the_open_ones_of_its_ticket_only(store: Storage) -> None:
    ticket, other = make_ticket(store), make_ticket(store)
    first, elsewhere = make_handle(store, ticket), make_handle(store, other)
    used = make_handle(store, ticket)
    assert store.get_claims_handle(first.digest) == replace(first, state="void")
    assert store.use_claims_handle(used.digest)
    second = make_handle(store, ticket)
    assert store.get_claims_handle(used.digest) == replace(used, state="used")  # stays used
    assert store.get_claims_handle(second.digest) == second
    assert store.get_claims_handle(elsewhere.digest) == elsewhere
    assert store.void_claims_handles(ticket.digest) == 1
    assert store.void_claims_handles(ticket.digest) == 0
    assert store.get_claims_handle(second.digest) == replace(second, state="void")


def test_a_handle_is_bound_to_one_browser_once(store: Storage) -> None:
    handle = make_handle(store)
    assert store.bind_claims_handle(handle.digest, "browser-1") is True
    assert store.bind_claims_handle(handle.digest, "browser-2") is False
    assert store.get_claims_handle(handle.digest) == replace(handle, binding_digest="browser-1")
    assert store.bind_claims_handle("no-such-handle", "browser-1") is False
    unused = make_handle(store)
    store.void_claims_handles(unused.ticket_digest)
    assert store.bind_claims_handle(unused.digest, "browser-1") is False


def test_a_handle_is_used_once_and_only_while_open(store: Storage) -> None:
    handle = make_handle(store)
    assert store.use_claims_handle(handle.digest) is True
    assert store.use_claims_handle(handle.digest) is False
    assert store.get_claims_handle(handle.digest) == replace(handle, state="used")
    void = make_handle(store)
    store.void_claims_handles(void.ticket_digest)
    assert store.use_claims_handle(void.digest) is False
    assert store.use_claims_handle("no-such-handle") is False


def test_expired_handles_are_forgotten_and_go_with_their_ticket(store: Storage) -> None:
    expiring = [make_handle(store, expires_at=T + n) for n in (10, 20, 30)]
    boundary, later = make_handle(store, expires_at=T + 40), make_handle(store, expires_at=T + 50)
    assert store.delete_claims_handles_expired_before(T + 40, 2) == 2
    assert store.delete_claims_handles_expired_before(T + 40, 2) == 1
    assert store.delete_claims_handles_expired_before(T + 40, 2) == 0
    assert all(store.get_claims_handle(h.digest) is None for h in expiring)
    assert store.get_claims_handle(boundary.digest) == boundary
    ticket = store.get_ticket(later.ticket_digest)
    assert ticket is not None
    assert store.delete_tickets_expired_before(ticket.expires_at + 1, 10) >= 1
    assert store.get_claims_handle(later.digest) is None


@pytest.mark.parametrize("state", ["open", "granted", "finished", "unknown"])
def test_the_pairs_of_only_an_open_ticket_are_replaced(
    store: Storage, state: TicketState | Literal["unknown"]
) -> None:
    ticket = None if state == "unknown" else make_ticket(store, state=state)
    digest = ticket.digest if ticket else "no-such-ticket"
    other = make_set(store)
    pairs = (
        RequestedPermission(ticket.resource_set_id if ticket else other.id, ("edit", "print")),
        RequestedPermission(other.id, ("view",)),
    )
    assert store.set_ticket_permissions(digest, pairs) is (state == "open")
    if ticket is not None:
        expected = pairs if state == "open" else ticket.permissions
        assert store.get_ticket(digest) == Ticket.asking(
            expected,
            digest=digest,
            owner=ticket.owner,
            client_id=ticket.client_id,
            created_at=ticket.created_at,
            expires_at=ticket.expires_at,
            state=ticket.state,
        )
    if state == "open":  # and back to one pair
        assert store.set_ticket_permissions(digest, pairs[1:]) is True
        found = store.get_ticket(digest)
        assert found is not None and found.permissions == pairs[1:]


def several_pairs(store: Storage, *sets: ResourceSet, digest: str = "ticket-n") -> Ticket:
    ticket = Ticket.asking(
        tuple(RequestedPermission(rs.id, (f"scope-{n}",)) for n, rs in enumerate(sets)),
        digest=digest,
        owner=sets[0].owner,
        client_id=sets[0].client_id,
        created_at=T,
        expires_at=T + HOUR,
        requesting_party="client:the-client",
    )
    store.add_ticket(ticket)
    return ticket


def test_a_ticket_keeps_every_pair_in_order(store: Storage) -> None:
    sets = [make_set(store) for _ in range(4)]
    ticket = several_pairs(store, *sets)
    found = store.get_ticket(ticket.digest)
    assert found == ticket
    assert found is not None and [pair.resource_set_id for pair in found.permissions] == [
        rs.id for rs in sets
    ]
    assert found.requesting_party == "client:the-client"
    # Found by any of its sets, with all its pairs.
    for rs in sets:
        assert store.open_tickets_for(rs.id) == [ticket]


def test_a_ticket_with_several_pairs_goes_with_its_first_set_and_ends_with_a_later_one(
    store: Storage,
) -> None:
    first, later, other = make_set(store), make_set(store), make_set(store)
    one = several_pairs(store, first, later, digest="ticket-a")
    two = several_pairs(store, later, first, digest="ticket-b")
    three = several_pairs(store, later, other, digest="ticket-c")
    # Another owner's or resource server's delete ends nothing.
    assert not store.delete_resource_set(first.id, "someone-else", first.client_id)
    assert not store.delete_resource_set(first.id, first.owner, "another-client")
    assert store.get_ticket(two.digest) == two

    assert store.delete_resource_set(first.id, first.owner, first.client_id)
    # Its first pair's set is the ticket's own row: the ticket goes with it (as a ticket of one
    # pair always did); a ticket that asks for it in a later pair is finished.
    assert store.get_ticket(one.digest) is None
    found = store.get_ticket(two.digest)
    assert found is not None and found.state == "finished"
    assert store.get_ticket(three.digest) == three
    assert store.open_tickets_for(later.id) == [three]


def test_a_rotated_ticket_goes_on_under_its_new_digest_and_the_old_one_stops(
    store: Storage,
) -> None:
    sets = [make_set(store), make_set(store)]
    ticket = several_pairs(store, *sets, digest="old-digest")
    assert store.count_ticket_request(ticket.digest) == 1
    store.record_claims(ticket.digest, "client:the-client", [claim("email", "a@x.test")])
    handle = make_handle(store, ticket)

    assert store.rotate_ticket("old-digest", "new-digest") is True

    assert store.get_ticket("new-digest") == replace(ticket, digest="new-digest", requests=1)
    assert store.get_ticket("old-digest") == replace(ticket, requests=1, state="finished")
    assert store.gathered_claims("new-digest", "client:the-client") == [claim("email", "a@x.test")]
    assert store.gathered_claims("old-digest", "client:the-client") == []
    found = store.get_claims_handle(handle.digest)
    assert found is not None and found.state == "void"
    assert store.rotate_ticket("old-digest", "third-digest") is False  # only an open one
    assert store.get_ticket("third-digest") is None
    assert [t.digest for t in store.open_tickets_for(sets[1].id)] == ["new-digest"]


def test_a_tickets_party_changes_and_its_claims_move_with_it(store: Storage) -> None:
    ticket = several_pairs(store, make_set(store))
    store.record_claims(ticket.digest, "client:the-client", [claim("email", "a@x.test")])
    store.record_claims(ticket.digest, "someone-else", [claim("n", 1)])

    assert store.set_ticket_party(ticket.digest, "sub-alice") is True

    found = store.get_ticket(ticket.digest)
    assert found is not None and found.requesting_party == "sub-alice"
    assert store.gathered_claims(ticket.digest, "sub-alice") == [claim("email", "a@x.test")]
    assert store.gathered_claims(ticket.digest, "client:the-client") == []
    assert store.gathered_claims(ticket.digest, "someone-else") == [claim("n", 1)]
    assert store.finish_ticket(ticket.digest)
    assert store.set_ticket_party(ticket.digest, "sub-bob") is False
    assert store.set_ticket_party("no-such-ticket", "sub-bob") is False


# -- gathered claims -------------------------------------------------------------------------------


def by_name(claims: list[Any]) -> list[Any]:
    return sorted(claims, key=lambda c: (c.type, c.name, c.issuer))


def test_claims_are_replaced_by_type_name_and_issuer_with_their_provenance(
    store: Storage,
) -> None:
    ticket = make_ticket(store)
    store.record_claims(
        ticket.digest,
        "bob",
        [
            claim("email", "old@x.test", issuer="client-x"),
            claim("email", "idp@x.test", issuer="https://idp.test", subject="bob-at-idp"),
        ],
    )
    store.record_claims(ticket.digest, "bob", [])  # nothing to record: nothing changes
    newer = claim("email", "new@x.test", issuer="https://idp.test", at=T + 9, subject="bob-2")
    store.record_claims(ticket.digest, "bob", (c for c in [newer, claim("age", 30)]))
    # The client's own word stays beside the provider's; the provider's newer value (and its
    # subject) replaced its older one.
    assert by_name(store.gathered_claims(ticket.digest, "bob")) == by_name(
        [newer, claim("age", 30), claim("email", "old@x.test", issuer="client-x")]
    )


def test_forgetting_an_issuers_claims_takes_only_that_issuers_on_that_ticket_and_party(
    store: Storage,
) -> None:
    ticket, other_ticket = make_ticket(store), make_ticket(store)
    idp = [
        claim("email", "bob@x.test", issuer="https://idp.test", subject="bob"),
        claim("dept", "research", issuer="https://idp.test", subject="bob"),
    ]
    own = claim("nickname", "bobby", issuer="client-x")
    other_idp = claim("email", "b@y.test", issuer="https://other.test", subject="bob")
    store.record_claims(ticket.digest, "bob", [*idp, own, other_idp])
    store.record_claims(ticket.digest, "carol", idp)
    store.record_claims(other_ticket.digest, "bob", idp)

    assert store.forget_issuer_claims(ticket.digest, "bob", "https://idp.test") == 2
    assert store.forget_issuer_claims(ticket.digest, "bob", "https://idp.test") == 0

    assert by_name(store.gathered_claims(ticket.digest, "bob")) == by_name([own, other_idp])
    assert by_name(store.gathered_claims(ticket.digest, "carol")) == by_name(idp)
    assert by_name(store.gathered_claims(other_ticket.digest, "bob")) == by_name(idp)


def test_claims_are_never_shown_to_another_party_or_for_another_ticket(store: Storage) -> None:
    ticket, other_ticket = make_ticket(store), make_ticket(store)
    store.record_claims(ticket.digest, "bob", [claim("email", "bob@x.test")])
    store.record_claims(ticket.digest, "carol", [claim("email", "carol@x.test")])
    assert store.gathered_claims(ticket.digest, "bob") == [claim("email", "bob@x.test")]
    assert store.gathered_claims(ticket.digest, "carol") == [claim("email", "carol@x.test")]
    assert store.gathered_claims(ticket.digest, "dave") == []
    assert store.gathered_claims(other_ticket.digest, "bob") == []


def test_two_clients_claims_on_one_ticket_and_party_stay_apart(store: Storage) -> None:
    # Issue 27, N1: a claim serves the client that pushed it or that the person shared it with.
    ticket = make_ticket(store)
    mine = claim("email", "bob@x.test", subject="bob")
    theirs = replace(claim("email", "other@x.test", subject="bob"), client_id="client-y")
    store.record_claims(ticket.digest, "bob", [mine])
    store.record_claims(ticket.digest, "bob", [theirs])  # replaces nothing of client-x's

    assert store.gathered_claims(ticket.digest, "bob", "client-x") == [mine]
    assert store.gathered_claims(ticket.digest, "bob", "client-y") == [theirs]
    assert store.gathered_claims(ticket.digest, "bob", "client-z") == []
    assert sorted(c.client_id for c in store.gathered_claims(ticket.digest, "bob")) == [
        "client-x",
        "client-y",
    ]
    newer = replace(theirs, value="newer@x.test", gathered_at=T + 5)
    store.record_claims(ticket.digest, "bob", [newer])  # a client's own re-push replaces its own
    assert store.gathered_claims(ticket.digest, "bob", "client-y") == [newer]
    assert store.forget_issuer_claims(ticket.digest, "bob", "idp", "client-y") == 1
    assert store.gathered_claims(ticket.digest, "bob") == [mine]


def test_each_client_counts_its_own_requests_with_a_ticket(store: Storage) -> None:
    ticket, other = make_ticket(store), make_ticket(store)
    counted = [
        store.count_ticket_request(ticket.digest, client) for client in ("a", "b", "a", "a", "b")
    ]
    assert counted == [1, 1, 2, 3, 2]
    assert store.count_ticket_request(other.digest, "a") == 1  # per ticket too
    found = store.get_ticket(ticket.digest)
    assert found is not None and found.requests == 5  # every client's, for the record
    assert store.count_ticket_request(ticket.digest) == 6
    assert store.finish_ticket(ticket.digest)
    assert store.count_ticket_request(ticket.digest, "a") == 0  # not open: not counted
    assert store.count_ticket_request("no-such-ticket", "a") == 0


def test_a_ticket_is_used_by_the_clients_that_requested_with_it_or_hold_claims(
    store: Storage,
) -> None:
    ticket = make_ticket(store)
    assert store.ticket_used_by_others(ticket.digest, "a") is False
    store.count_ticket_request(ticket.digest, "a")
    assert store.ticket_used_by_others(ticket.digest, "a") is False
    assert store.ticket_used_by_others(ticket.digest, "b") is True
    claims_only = make_ticket(store)
    store.record_claims(claims_only.digest, "bob", [claim("email", "bob@x.test")])
    assert store.ticket_used_by_others(claims_only.digest, "client-x") is False
    assert store.ticket_used_by_others(claims_only.digest, "a") is True
    assert store.ticket_used_by_others("no-such-ticket", "a") is False


def test_a_rotated_ticket_keeps_each_clients_count(store: Storage) -> None:
    ticket = make_ticket(store)
    store.count_ticket_request(ticket.digest, "a")
    store.count_ticket_request(ticket.digest, "b")
    store.count_ticket_request(ticket.digest, "a")
    assert store.rotate_ticket(ticket.digest, "rotated-digest")
    assert store.count_ticket_request("rotated-digest", "a") == 3
    assert store.count_ticket_request("rotated-digest", "b") == 2
    assert store.ticket_used_by_others("rotated-digest", "a") is True


def test_a_clients_handles_are_voided_without_another_clients(store: Storage) -> None:
    ticket, client = make_ticket(store), make_client(store)
    first = make_handle(store, ticket)
    others = replace(first, digest=unique("handle-digest"), client_id=client.client_id)
    store.add_claims_handle(others)  # voids none of the ticket's other client's
    assert store.get_claims_handle(first.digest) == first
    second = make_handle(store, ticket)  # voids its own client's first
    assert store.get_claims_handle(first.digest) == replace(first, state="void")
    assert store.get_claims_handle(others.digest) == others
    assert store.void_claims_handles(ticket.digest, client.client_id) == 1
    assert store.get_claims_handle(second.digest) == second
    assert store.get_claims_handle(others.digest) == replace(others, state="void")


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        "",
        'ünïcödé ✓ 日本語 🎉 "quoted" \\ back\nslash',
        0,
        -17,
        2**53 + 1,
        1.5,
        -0.25,
        1e-7,
        True,
        False,
        None,
        [],
        {},
        ["a", 1, 2.5, True, None, ["nested"], {"k": "v"}],
        {"a": {"b": {"c": [1, {"d": None}]}}, "ü": "ß", "n": False, "f": 3.25},
    ],
    ids=repr,
)
def test_claim_values_of_every_json_kind_round_trip(store: Storage, value: Any) -> None:
    ticket = make_ticket(store)
    store.record_claims(ticket.digest, "bob", [claim("value ✓", value)])
    [got] = store.gathered_claims(ticket.digest, "bob")
    assert got == claim("value ✓", value) and same_json(got.value, value)


# -- assertion uses --------------------------------------------------------------------------------


def test_assertion_uses_report_the_earlier_ones(store: Storage) -> None:
    first, second, third = (make_ticket(store).digest for _ in range(3))
    assert store.record_assertion_use(assertion_use(first, "alice"), T) == []
    assert store.record_assertion_use(assertion_use(second, "bob"), T) == [
        assertion_use(first, "alice")
    ]
    earlier = store.record_assertion_use(assertion_use(third, "alice"), T)
    assert sorted(earlier, key=lambda u: u.ticket_digest) == sorted(
        [assertion_use(first, "alice"), assertion_use(second, "bob")],
        key=lambda u: u.ticket_digest,
    )
    # another assertion ID, or the same ID from another issuer, is another assertion
    assert store.record_assertion_use(assertion_use(first, assertion_id="_a2"), T) == []
    other_issuer = AssertionUse("https://other-idp.test", "_a1", first, "alice", T + HOUR)
    assert store.record_assertion_use(other_issuer, T) == []


def test_of_two_uses_with_one_ticket_the_first_is_kept(store: Storage) -> None:
    ticket, probe = make_ticket(store).digest, make_ticket(store).digest
    first = assertion_use(ticket, "alice", expires_at=T + 100)
    assert store.record_assertion_use(first, T) == []
    assert store.record_assertion_use(assertion_use(ticket, "bob", T + 900), T) == [first]
    assert store.record_assertion_use(assertion_use(probe), T) == [first]


@pytest.mark.parametrize(
    ("expires_at", "reported"),
    [
        (T - 100, False),
        (T - 1, False),
        (T, False),
        (T + 1, True),
    ],
)
def test_uses_expired_at_now_are_not_reported(
    store: Storage, expires_at: int, reported: bool
) -> None:
    earlier = assertion_use(make_ticket(store).digest, expires_at=expires_at)
    store.record_assertion_use(earlier, expires_at - 10)
    got = store.record_assertion_use(assertion_use(make_ticket(store).digest), T)
    assert got == ([earlier] if reported else [])


def test_expired_assertion_uses_are_forgotten_in_batches(store: Storage) -> None:
    uses = [assertion_use(make_ticket(store).digest, expires_at=T + n) for n in (10, 20, 30, 40)]
    for use in uses:
        store.record_assertion_use(use, T)
    assert store.delete_assertion_uses_expired_before(T + 40, 2) == 2
    assert store.delete_assertion_uses_expired_before(T + 40, 2) == 1
    assert store.delete_assertion_uses_expired_before(T + 40, 2) == 0
    assert store.record_assertion_use(assertion_use(make_ticket(store).digest), T) == [uses[3]]


# -- RPTs ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("revoked", [False, True])
def test_rpt_round_trip(store: Storage, revoked: bool) -> None:
    rpt = make_rpt(store, make_token(store, user=make_user(store)), revoked=revoked)
    assert store.get_rpt(rpt.digest) == rpt
    assert store.get_rpt("no-such-rpt") is None


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (T + 5, "newest"),  # newest issued, live
        (T + 200, "older"),  # the newest has expired (at T + 200), the older one lives on
        (T + 300, None),  # every one has expired
    ],
)
def test_the_live_rpt_of_an_aat_is_its_newest_unrevoked_unexpired_one(
    store: Storage, now: int, expected: str | None
) -> None:
    aat = make_token(store)
    rpts = {
        "older": make_rpt(store, aat, issued_at=T, expires_at=T + 300),
        "newest": make_rpt(store, aat, issued_at=T + 2, expires_at=T + 200),
    }
    make_rpt(store, aat, issued_at=T + 3, expires_at=T + 1000, revoked=True)
    make_rpt(store, make_token(store), issued_at=T + 9, expires_at=T + 1000)  # another AAT's
    assert store.live_rpt_of(aat.digest, now) == (rpts[expected] if expected else None)


def test_revoking_the_rpts_of_an_aat_counts_them(store: Storage) -> None:
    aat, other = make_token(store), make_token(store)
    live = [make_rpt(store, aat) for _ in range(2)]
    make_rpt(store, aat, revoked=True)
    others = make_rpt(store, other)
    assert store.revoke_rpts_of(aat.digest) == 2
    assert store.revoke_rpts_of(aat.digest) == 0
    assert all(store.get_rpt(r.digest) == replace(r, revoked=True) for r in live)
    assert store.live_rpt_of(aat.digest, T) is None
    assert store.get_rpt(others.digest) == others
    assert store.revoke_rpts_of("no-such-aat") == 0


def test_expired_rpts_are_forgotten_in_batches_with_their_permissions(store: Storage) -> None:
    rs = make_set(store)
    expiring = [make_rpt(store, expires_at=T + n) for n in (10, 20, 30)]
    boundary, later = make_rpt(store, expires_at=T + 40), make_rpt(store, expires_at=T + 50)
    for rpt in [*expiring, boundary, later]:
        store.put_permission(rpt.digest, permission(rs, expires_at=T + 5))
    assert store.delete_rpts_expired_before(T + 40, 2) == 2
    assert store.delete_rpts_expired_before(T + 40, 2) == 1
    assert store.delete_rpts_expired_before(T + 40, 2) == 0
    for rpt in expiring:
        assert store.get_rpt(rpt.digest) is None
        assert store.get_permission(rpt.digest, rs.id) is None
    for rpt in (boundary, later):
        assert store.get_rpt(rpt.digest) == rpt
        assert store.get_permission(rpt.digest, rs.id) == permission(rs, expires_at=T + 5)


# -- permissions -----------------------------------------------------------------------------------


def test_an_rpt_has_one_permission_per_resource_set(store: Storage) -> None:
    rpt, rs, other = make_rpt(store), make_set(store), make_set(store)
    assert store.get_permission(rpt.digest, rs.id) is None
    store.put_permission(rpt.digest, permission(rs, ("view",), T, T + 60))
    renewed = Permission(rs.id, ("view", "edit"), T + 10, T + 120)
    store.put_permission(rpt.digest, renewed)
    store.put_permission(rpt.digest, permission(other))
    assert store.get_permission(rpt.digest, rs.id) == renewed
    assert store.get_permission(rpt.digest, other.id) == permission(other)
    assert store.get_permission(make_rpt(store).digest, rs.id) is None
    assert store.permissions_of(rpt.digest, T) == [permission(other), renewed]


def test_permissions_of_an_rpt_are_its_unexpired_ones_in_issue_order(store: Storage) -> None:
    rpt = make_rpt(store)
    sets = [make_set(store) for _ in range(5)]
    b = permission(sets[0], issued_at=T - 20)
    a = permission(sets[1], issued_at=T - 30)
    c = permission(sets[2], ("edit",), issued_at=T - 10)
    for p in (b, a, c):
        store.put_permission(rpt.digest, p)
    store.put_permission(rpt.digest, permission(sets[3], issued_at=T - 40, expires_at=T))
    store.put_permission(rpt.digest, permission(sets[4], issued_at=T - 50, expires_at=T - 1))
    store.put_permission(make_rpt(store).digest, permission(sets[0]))  # another RPT's
    assert store.permissions_of(rpt.digest, T) == [a, b, c]
    assert store.permissions_of(rpt.digest, T - 1) == [
        permission(sets[3], issued_at=T - 40, expires_at=T),
        a,
        b,
        c,
    ]
    assert store.permissions_of("no-such-rpt", T) == []


def test_permissions_for_are_on_sets_of_that_owner_and_resource_server(store: Storage) -> None:
    rs_client, other_client, rpt = make_client(store), make_client(store), make_rpt(store)
    late = make_set(store, rs_client, "alice")
    early = make_set(store, rs_client, "alice")
    expired = make_set(store, rs_client, "alice")
    bobs = make_set(store, rs_client, "bob")
    others = make_set(store, other_client, "alice")
    for rs, issued_at in ((late, T - 1), (early, T - 9), (bobs, T - 5), (others, T - 5)):
        store.put_permission(rpt.digest, permission(rs, issued_at=issued_at))
    store.put_permission(rpt.digest, permission(expired, issued_at=T - 20, expires_at=T))
    assert store.permissions_for(rpt.digest, "alice", rs_client.client_id, T) == [
        permission(early, issued_at=T - 9),
        permission(late, issued_at=T - 1),
    ]
    assert store.permissions_for(rpt.digest, "bob", rs_client.client_id, T) == [
        permission(bobs, issued_at=T - 5)
    ]
    assert store.permissions_for(rpt.digest, "alice", other_client.client_id, T) == [
        permission(others, issued_at=T - 5)
    ]
    assert store.permissions_for(rpt.digest, "carol", rs_client.client_id, T) == []
    assert store.permissions_for(make_rpt(store).digest, "alice", rs_client.client_id, T) == []
    # Of any owner: what the resource server registered.
    assert store.permissions_for(rpt.digest, None, rs_client.client_id, T) == [
        permission(early, issued_at=T - 9),
        permission(bobs, issued_at=T - 5),
        permission(late, issued_at=T - 1),
    ]


def test_permissions_on_a_set_are_every_rpts_expired_or_not(store: Storage) -> None:
    rs, other = make_set(store), make_set(store)
    first, second = make_rpt(store), make_rpt(store)
    live = permission(rs, ("view", "edit"), issued_at=T - 5)
    expired = permission(rs, issued_at=T - 9, expires_at=T - 1)
    store.put_permission(first.digest, live)
    store.put_permission(second.digest, expired)
    store.put_permission(first.digest, permission(other))
    assert store.permissions_on(rs.id) == [(second.digest, expired), (first.digest, live)]
    assert store.permissions_on("no-such-set") == []


def test_deleting_one_permission(store: Storage) -> None:
    rs, other, rpt = make_set(store), make_set(store), make_rpt(store)
    store.put_permission(rpt.digest, permission(rs))
    store.put_permission(rpt.digest, permission(other))
    assert store.delete_permission(rpt.digest, rs.id) is True
    assert store.delete_permission(rpt.digest, rs.id) is False
    assert store.get_permission(rpt.digest, rs.id) is None
    assert store.get_permission(rpt.digest, other.id) == permission(other)


# -- authorization codes ---------------------------------------------------------------------------


@pytest.mark.parametrize("challenge", [None, "c" * 43], ids=["no-pkce", "pkce"])
def test_authorization_code_round_trip(store: Storage, challenge: str | None) -> None:
    code = make_code(store, challenge=challenge)
    assert store.get_authorization_code(code.digest) == code
    assert store.get_authorization_code("no-such-digest") is None


def test_a_code_is_consumed_once_and_never_when_expired(store: Storage) -> None:
    code = make_code(store, expires_at=T + 60)
    assert store.consume_authorization_code(code.digest, T + 60) is False  # expired at now
    assert store.consume_authorization_code(code.digest, T) is True
    assert store.consume_authorization_code(code.digest, T) is False
    assert store.get_authorization_code(code.digest) == replace(code, used=True)
    assert store.consume_authorization_code("no-such-digest", T) is False


def test_expired_codes_are_forgotten_in_batches(store: Storage) -> None:
    old = [make_code(store, expires_at=T + n) for n in (1, 2, 3)]
    boundary = make_code(store, expires_at=T + 10)
    assert store.consume_authorization_code(old[0].digest, T)  # used ones go too
    assert store.delete_authorization_codes_expired_before(T + 10, 2) == 2
    assert store.delete_authorization_codes_expired_before(T + 10, 2) == 1
    assert store.delete_authorization_codes_expired_before(T + 10, 2) == 0
    assert all(store.get_authorization_code(code.digest) is None for code in old)
    assert store.get_authorization_code(boundary.digest) == boundary


# -- refresh tokens --------------------------------------------------------------------------------


def test_refresh_token_round_trip(store: Storage) -> None:
    token = make_refresh_token(store)
    assert store.get_refresh_token(token.digest) == token
    assert store.get_refresh_token("no-such-digest") is None


def test_a_refresh_token_is_used_once_and_never_when_expired_or_revoked(store: Storage) -> None:
    token = make_refresh_token(store, expires_at=T + 60)
    assert store.use_refresh_token(token.digest, T + 60) is False
    assert store.use_refresh_token(token.digest, T) is True
    assert store.use_refresh_token(token.digest, T) is False
    assert store.get_refresh_token(token.digest) == replace(token, used=True)
    revoked = make_refresh_token(store)
    assert store.revoke_refresh_token(revoked.digest) is True
    assert store.revoke_refresh_token(revoked.digest) is False
    assert store.use_refresh_token(revoked.digest, T) is False
    assert store.get_refresh_token(revoked.digest) == replace(revoked, revoked=True)
    assert store.revoke_refresh_token("no-such-digest") is False
    assert store.use_refresh_token("no-such-digest", T) is False


def test_expired_refresh_tokens_are_forgotten_in_batches(store: Storage) -> None:
    old = [make_refresh_token(store, expires_at=T + n) for n in (1, 2, 3)]
    boundary = make_refresh_token(store, expires_at=T + 10)
    assert store.delete_refresh_tokens_expired_before(T + 10, 2) == 2
    assert store.delete_refresh_tokens_expired_before(T + 10, 2) == 1
    assert store.delete_refresh_tokens_expired_before(T + 10, 2) == 0
    assert all(store.get_refresh_token(token.digest) is None for token in old)
    assert store.get_refresh_token(boundary.digest) == boundary


# -- token families and grants ---------------------------------------------------------------------


def test_access_tokens_keep_their_family(store: Storage) -> None:
    token = make_token(store, user=make_user(store, "alice"), family="family-1")
    assert store.get_access_token(token.digest) == replace(token, username="alice")


def test_revoking_a_family_takes_only_its_unrevoked_tokens(store: Storage) -> None:
    client, user = make_client(store), make_user(store)
    ours = [make_token(store, client, user, family="fam") for _ in range(2)]
    make_token(store, client, user, family="fam", revoked=True)
    other = make_token(store, client, user, family="other")
    own = make_token(store, client)  # client_credentials: no family
    refresh = [make_refresh_token(store, client, user, family="fam") for _ in range(2)]
    other_refresh = make_refresh_token(store, client, user, family="other")
    assert store.revoke_access_tokens_of_family("fam") == sorted(t.digest for t in ours)
    assert store.revoke_access_tokens_of_family("fam") == []
    assert store.revoke_refresh_tokens_of_family("fam") == 2
    assert store.revoke_refresh_tokens_of_family("fam") == 0
    for token in ours:
        got = store.get_access_token(token.digest)
        assert got is not None and got.revoked
    for token in refresh:
        got_refresh = store.get_refresh_token(token.digest)
        assert got_refresh is not None and got_refresh.revoked
    for kept in (other, own):
        got = store.get_access_token(kept.digest)
        assert got is not None and not got.revoked
    assert store.get_refresh_token(other_refresh.digest) == other_refresh


def test_revoking_a_grant_takes_the_tokens_of_that_user_client_and_scope_name(
    store: Storage,
) -> None:
    client, other_client = make_client(store), make_client(store)
    user, other_user = make_user(store), make_user(store)
    hit = [
        make_token(store, client, user, scope="uma_protection"),
        make_token(store, client, user, scope="uma_authorization uma_protection"),
    ]
    missed = [
        make_token(store, client, user, scope="uma_authorization"),
        make_token(store, client, user, scope="uma_protection_x"),
        make_token(store, other_client, user, scope="uma_protection"),
        make_token(store, client, other_user, scope="uma_protection"),
        make_token(store, client, scope="uma_protection"),  # the client's own
    ]
    hit_refresh = make_refresh_token(store, client, user, scope="uma_protection")
    missed_refresh = make_refresh_token(store, client, user, scope="uma_authorization")
    got = store.revoke_access_tokens_of_grant(user.sub, client.client_id, "uma_protection")
    assert got == sorted(token.digest for token in hit)
    assert store.revoke_access_tokens_of_grant(user.sub, client.client_id, "uma_protection") == []
    assert store.revoke_refresh_tokens_of_grant(user.sub, client.client_id, "uma_protection") == 1
    assert store.revoke_refresh_tokens_of_grant(user.sub, client.client_id, "uma_protection") == 0
    for token in missed:
        kept = store.get_access_token(token.digest)
        assert kept is not None and not kept.revoked
    assert store.get_refresh_token(hit_refresh.digest) == replace(hit_refresh, revoked=True)
    assert store.get_refresh_token(missed_refresh.digest) == missed_refresh


# -- consents --------------------------------------------------------------------------------------


def test_consents_are_kept_per_user_client_and_scope(store: Storage) -> None:
    alice, bob = make_user(store), make_user(store)
    first, second = sorted([make_client(store), make_client(store)], key=lambda c: c.client_id)
    store.put_consent(Consent(alice.sub, second.client_id, "uma_protection", T))
    store.put_consent(Consent(alice.sub, first.client_id, "uma_protection", T))
    store.put_consent(Consent(alice.sub, first.client_id, "uma_authorization", T))
    store.put_consent(Consent(alice.sub, first.client_id, "uma_protection", T + 5))  # again
    store.put_consent(Consent(bob.sub, first.client_id, "uma_protection", T))
    assert store.consents_of(alice.sub) == [
        Consent(alice.sub, first.client_id, "uma_authorization", T),
        Consent(alice.sub, first.client_id, "uma_protection", T + 5),
        Consent(alice.sub, second.client_id, "uma_protection", T),
    ]
    assert store.has_consent(alice.sub, first.client_id, "uma_protection") is True
    assert store.has_consent(alice.sub, second.client_id, "uma_authorization") is False
    assert store.delete_consent(alice.sub, first.client_id, "uma_protection") is True
    assert store.delete_consent(alice.sub, first.client_id, "uma_protection") is False
    assert store.has_consent(alice.sub, first.client_id, "uma_protection") is False
    assert store.has_consent(bob.sub, first.client_id, "uma_protection") is True
    assert store.consents_of("no-such-sub") == []


# -- users, managed -------------------------------------------------------------------------------


def test_a_user_by_sub_and_every_user_by_username(store: Storage) -> None:
    bob, alice = make_user(store, "bob", email="b@x"), make_user(store, "alice")
    assert store.get_user(bob.sub) == bob
    assert store.get_user("no-such-sub") is None
    assert store.list_users() == [alice, bob]


def test_setting_a_password_hash(store: Storage) -> None:
    user = make_user(store)
    assert store.set_password_hash(user.sub, "$argon2id$new") is True
    assert store.get_user(user.sub) == replace(user, password_hash="$argon2id$new")
    assert store.set_password_hash(user.sub, None) is True
    assert store.get_user(user.sub) == replace(user, password_hash=None)
    assert store.set_password_hash("no-such-sub", "x") is False


def test_setting_a_users_claims(store: Storage) -> None:
    user = make_user(store, roles=["a"])
    claims = {"roles": ["a"], "email": "Carol@Example.org", "email_verified": True}
    assert store.set_user_claims(user.sub, claims) is True
    assert store.get_user(user.sub) == replace(user, claims=claims)
    assert store.set_user_claims("no-such-sub", {}) is False


def test_deleting_a_user_takes_their_sessions_and_tokens(store: Storage) -> None:
    user, other = make_user(store), make_user(store)
    token, others_token = make_token(store, user=user), make_token(store, user=other)
    store.add_session(session(user, "s1"))
    store.add_session(session(other, "s2"))
    assert store.delete_user(user.sub) is True
    assert store.delete_user(user.sub) is False
    assert store.get_user(user.sub) is None
    assert store.get_user_by_username(user.username) is None
    assert store.get_access_token(token.digest) is None
    assert store.get_session("s1") is None
    assert store.get_access_token(others_token.digest) is not None
    assert store.get_session("s2") == session(other, "s2")


# -- sessions -------------------------------------------------------------------------------------


def session(user: User, digest: str, created_at: int = T, expires_at: int = T + HOUR) -> Session:
    return Session(digest, user.sub, f"csrf-{digest}", created_at, created_at, expires_at)


def test_session_round_trip_touch_and_delete(store: Storage) -> None:
    user = make_user(store)
    stored = session(user, "d1")
    store.add_session(stored)
    assert store.get_session("d1") == stored
    assert store.get_session("nope") is None
    assert store.touch_session("d1", T + 60, T + 120) is True
    assert store.get_session("d1") == replace(stored, last_seen_at=T + 60, expires_at=T + 120)
    assert store.touch_session("nope", T, T) is False
    assert store.delete_session("d1") is True
    assert store.delete_session("d1") is False
    assert store.get_session("d1") is None


def test_ending_every_session_of_a_user(store: Storage) -> None:
    user, other = make_user(store), make_user(store)
    for digest in ("a", "b"):
        store.add_session(session(user, digest))
    store.add_session(session(other, "c"))
    assert store.delete_sessions_of(user.sub) == 2
    assert store.delete_sessions_of(user.sub) == 0
    assert store.get_session("a") is None and store.get_session("b") is None
    assert store.get_session("c") == session(other, "c")


def test_expired_sessions_are_forgotten_in_batches(store: Storage) -> None:
    user = make_user(store)
    for i in range(3):
        store.add_session(session(user, f"old{i}", expires_at=T - 1 - i))
    store.add_session(session(user, "now", expires_at=T))
    assert store.delete_sessions_expired_before(T, 2) == 2
    assert store.delete_sessions_expired_before(T, 2) == 1
    assert store.delete_sessions_expired_before(T, 2) == 0
    assert store.get_session("now") is not None


# -- failed sign-ins ------------------------------------------------------------------------------


def test_signin_failures_are_counted_per_key_since_a_moment(store: Storage) -> None:
    for moment in (T - 10, T - 5, T):
        store.record_signin_failure("account:a", moment)
    store.record_signin_failure("account:a", T - 5)
    store.record_signin_failure("account:b", T)
    assert store.signin_failures_since("account:a", T - 5) == [T - 5, T - 5, T]
    assert store.signin_failures_since("account:a", 0) == [T - 10, T - 5, T - 5, T]
    assert store.signin_failures_since("account:c", 0) == []
    assert store.clear_signin_failures("account:a") == 4
    assert store.signin_failures_since("account:a", 0) == []
    assert store.signin_failures_since("account:b", 0) == [T]


def test_signin_failures_are_cleared_under_a_prefix(store: Storage) -> None:
    # The prefix is compared as text: '_' and '%' are no wildcards.
    for key in ("address:a_b:1", "address:a_b:2", "address:axb:1", "address:a%b:1", "account:a_b"):
        store.record_signin_failure(key, T)
    with store.transaction():
        store.hold_signin_key("account:a_b")  # a lock held to the end of the transaction
        assert store.clear_signin_failures_under("address:a_b:") == 2
    assert store.signin_failures_since("address:axb:1", 0) == [T]
    assert store.signin_failures_since("address:a%b:1", 0) == [T]
    assert store.signin_failures_since("account:a_b", 0) == [T]
    assert store.clear_signin_failures_under("address:a%") == 1


def test_old_signin_failures_are_forgotten_in_batches(store: Storage) -> None:
    for i in range(3):
        store.record_signin_failure(f"k{i}", T - 10 - i)
    store.record_signin_failure("k0", T)
    assert store.delete_signin_failures_before(T, 2) == 2
    assert store.delete_signin_failures_before(T, 2) == 1
    assert store.delete_signin_failures_before(T, 2) == 0
    assert store.signin_failures_since("k0", 0) == [T]


# -- identity links -------------------------------------------------------------------------------

OP = "https://op.example"


def test_an_identity_is_linked_to_one_user_and_never_relinked(store: Storage) -> None:
    alice, bob = make_user(store), make_user(store)
    assert store.linked_user(OP, "a-1") is None
    assert store.link_identity(OP, "a-1", alice.sub, T) is True
    assert store.linked_user(OP, "a-1") == alice.sub
    # Linked already: to another user, or again to the same one, nothing changes.
    assert store.link_identity(OP, "a-1", bob.sub, T + 1) is False
    assert store.link_identity(OP, "a-1", alice.sub, T + 1) is False
    assert store.linked_user(OP, "a-1") == alice.sub
    # The same subject at another issuer is another identity.
    assert store.link_identity("https://other.example", "a-1", bob.sub, T) is True
    assert store.linked_user("https://other.example", "a-1") == bob.sub
    assert store.link_identity(OP, "a-2", "no-such-sub", T) is False
    assert store.linked_user(OP, "a-2") is None


def test_the_links_of_a_user_are_sorted_and_unlinking_works_once(store: Storage) -> None:
    alice, bob = make_user(store), make_user(store)
    store.link_identity(OP, "z", alice.sub, T)
    store.link_identity("https://a.example", "b", alice.sub, T)
    store.link_identity(OP, "c", alice.sub, T)
    store.link_identity(OP, "bob", bob.sub, T)
    assert store.links_of(alice.sub) == [("https://a.example", "b"), (OP, "c"), (OP, "z")]
    assert store.links_of("no-such-sub") == []
    assert store.unlink_identity(OP, "c") is True
    assert store.unlink_identity(OP, "c") is False
    assert store.linked_user(OP, "c") is None
    assert store.links_of(alice.sub) == [("https://a.example", "b"), (OP, "z")]
    # Unlinked, the identity may be linked again, to anyone.
    assert store.link_identity(OP, "c", bob.sub, T + 5) is True


def test_deleting_a_user_takes_their_identity_links(store: Storage) -> None:
    alice, bob = make_user(store), make_user(store)
    store.link_identity(OP, "a", alice.sub, T)
    store.link_identity(OP, "b", bob.sub, T)
    assert store.delete_user(alice.sub)
    assert store.linked_user(OP, "a") is None
    assert store.links_of(alice.sub) == []
    assert store.linked_user(OP, "b") == bob.sub


# -- the parties seed files created --------------------------------------------------------------


def test_seeded_parties_are_recorded_once_listed_in_order_and_forgotten_once(
    store: Storage,
) -> None:
    assert store.seeded_parties() == []
    user = SeededParty("user", "sub-1")
    client = SeededParty("client", "photo-server")
    links = [SeededParty("link", OP, "a-1"), SeededParty("link", OP, "a 2")]
    assert store.record_seeded(user, T) is True
    assert store.record_seeded(user, T + 1) is False
    for party in (links[1], client, links[0]):
        assert store.record_seeded(party, T) is True
    # A user and a client may share a name: each kind has its own.
    assert store.record_seeded(SeededParty("client", "sub-1"), T) is True
    assert store.seeded_parties() == [
        client,
        SeededParty("client", "sub-1"),
        links[1],
        links[0],
        user,
    ]
    assert store.forget_seeded(links[1]) is True
    assert store.forget_seeded(links[1]) is False
    assert store.forget_seeded(SeededParty("link", OP, "a-1 ")) is False
    assert links[1] not in store.seeded_parties()
    assert links[0] in store.seeded_parties()


# -- owners' rules --------------------------------------------------------------------------------


def owner_rule(rule_id: str, username: str, *scopes: str, **more: Any) -> dict[str, Any]:
    return {"id": rule_id, "owner": username, "scopes": list(scopes or ("view",)), **more}


def test_owner_rule_round_trip_with_every_json_kind(store: Storage) -> None:
    alice = make_user(store, "alice-rules")
    rule = owner_rule(
        "o-1",
        alice.username,
        "view",
        "print",
        description="é ✓",
        resource_sets={"ids": ["rs-1"]},
        conditions=[
            {"claim": "n", "equals": 1.5},
            {"claim": "b", "equals": False},
            {"claim": "l", "one_of": [1, "1", None, {"a": [True]}]},
        ],
    )
    assert store.owner_rules_of(alice.sub) == []
    assert store.add_owner_rule("o-1", alice.sub, rule, T) is True
    [stored] = store.owner_rules_of(alice.sub)
    assert (stored.id, stored.owner, stored.username) == ("o-1", alice.sub, alice.username)
    assert (stored.created_at, stored.updated_at) == (T, T)
    assert same_json(stored.rule, rule)


def test_an_owner_rule_id_is_taken_once_and_only_by_a_user(store: Storage) -> None:
    alice, bob = make_user(store), make_user(store)
    assert store.add_owner_rule("o-1", alice.sub, owner_rule("o-1", alice.username), T)
    assert store.add_owner_rule("o-1", bob.sub, owner_rule("o-1", bob.username), T) is False
    assert store.add_owner_rule("o-2", "no-such-sub", owner_rule("o-2", "nobody"), T) is False
    assert store.owner_rules_of(bob.sub) == []
    assert store.owner_rules_version(bob.sub) == 0
    assert store.owner_rules_version("no-such-sub") == 0
    assert [rule.id for rule in store.owner_rules_of(alice.sub)] == ["o-1"]


def share_of(owner: User, rule_id: str, **more: Any) -> Share:
    fields: dict[str, Any] = {
        "rule_id": rule_id,
        "owner": owner.sub,
        "resource_set_id": "rs-1",
        "recipient": "Bob",
        "kind": "user",
        "scopes": ("view", "print"),
        "until": None,
        "created_at": T,
        **more,
    }
    return Share(**fields)


def test_a_share_marks_one_rule_of_its_owner_once(store: Storage) -> None:
    alice, bob = make_user(store), make_user(store)
    assert store.add_owner_rule("o-s", alice.sub, owner_rule("o-s", alice.username), T)
    assert store.add_share(share_of(bob, "o-s")) is False  # not bob's rule
    assert store.add_share(share_of(alice, "o-none")) is False  # no such rule
    share = share_of(alice, "o-s", recipient="Bob@Example.com", kind="email", until=T + 86400)
    assert store.add_share(share) is True
    assert store.add_share(share_of(alice, "o-s")) is False  # a share already
    assert store.get_share(alice.sub, "o-s") == share
    assert store.get_share(bob.sub, "o-s") is None
    assert store.count_shares(alice.sub) == 1
    assert store.count_shares(bob.sub) == 0


def test_shares_are_listed_oldest_first_by_set_and_go_with_their_rule(store: Storage) -> None:
    alice = make_user(store)
    for rule_id, rs_id, moment in (("o-b", "rs-1", T + 5), ("o-a", "rs-2", T), ("o-c", "rs-1", T)):
        assert store.add_owner_rule(rule_id, alice.sub, owner_rule(rule_id, alice.username), T)
        assert store.add_share(share_of(alice, rule_id, resource_set_id=rs_id, created_at=moment))
    assert [s.rule_id for s in store.shares_of(alice.sub)] == ["o-a", "o-c", "o-b"]
    assert [s.rule_id for s in store.shares_of(alice.sub, "rs-1")] == ["o-c", "o-b"]
    assert store.shares_of(alice.sub, "rs-3") == []
    assert store.delete_owner_rule(alice.sub, "o-c") is True
    assert store.get_share(alice.sub, "o-c") is None
    assert [s.rule_id for s in store.shares_of(alice.sub)] == ["o-a", "o-b"]
    assert store.count_shares(alice.sub) == 2
    assert store.delete_user(alice.sub) is True
    assert store.count_shares(alice.sub) == 0


def test_a_share_is_reassigned_to_the_account_that_accepted_it(store: Storage) -> None:
    alice, bob = make_user(store), make_user(store)
    assert store.add_owner_rule("o-r", alice.sub, owner_rule("o-r", alice.username), T)
    share = share_of(alice, "o-r", recipient="carol@example.org", kind="email")
    assert store.add_share(share)
    assert store.reassign_share(bob.sub, "o-r", "carol", "user") is False  # not bob's
    assert store.reassign_share(alice.sub, "o-none", "carol", "user") is False
    assert store.reassign_share(alice.sub, "o-r", "carol", "user") is True
    assert store.get_share(alice.sub, "o-r") == replace(share, recipient="carol", kind="user")


# -- invitations -----------------------------------------------------------------------------------


def invitation_to(owner: User, rule_id: str, **more: Any) -> Invitation:
    fields: dict[str, Any] = {
        "digest": f"digest-of-{rule_id}",
        "rule_id": rule_id,
        "owner": owner.sub,
        "address": "Carol@Example.org",
        "created_at": T,
        "expires_at": T + HOUR,
        **more,
    }
    return Invitation(**fields)


def email_share(store: Storage, owner: User, rule_id: str, kind: str = "email") -> None:
    assert store.add_owner_rule(rule_id, owner.sub, owner_rule(rule_id, owner.username), T)
    assert store.add_share(share_of(owner, rule_id, recipient="Carol@Example.org", kind=kind))


def test_an_invitation_belongs_to_one_share_by_email_of_its_owner(store: Storage) -> None:
    alice, bob = make_user(store), make_user(store)
    email_share(store, alice, "o-i")
    email_share(store, alice, "o-u", kind="user")
    assert store.add_invitation(invitation_to(bob, "o-i")) is False  # not bob's share
    assert store.add_invitation(invitation_to(alice, "o-none")) is False  # no such share
    assert store.add_invitation(invitation_to(alice, "o-u")) is False  # a share with a user
    invitation = invitation_to(alice, "o-i")
    assert store.add_invitation(invitation) is True
    assert store.add_invitation(invitation_to(alice, "o-i", digest="other")) is False  # one
    assert store.get_invitation("digest-of-o-i") == invitation
    assert store.get_invitation("other") is None
    assert store.invitations_of(alice.sub) == [invitation]
    assert store.invitations_of(bob.sub) == []


def test_invitations_are_listed_oldest_first_and_go_with_their_share(store: Storage) -> None:
    alice = make_user(store)
    for rule_id, moment in (("o-b", T + 5), ("o-a", T + 5), ("o-c", T)):
        email_share(store, alice, rule_id)
        assert store.add_invitation(invitation_to(alice, rule_id, created_at=moment))
    assert [i.rule_id for i in store.invitations_of(alice.sub)] == ["o-c", "o-a", "o-b"]
    assert store.delete_owner_rule(alice.sub, "o-a") is True  # stop sharing
    assert store.get_invitation("digest-of-o-a") is None
    assert store.delete_user(alice.sub) is True
    assert store.invitations_of(alice.sub) == []


def test_a_new_link_replaces_the_digest_of_an_unused_invitation_only(store: Storage) -> None:
    alice, carol = make_user(store), make_user(store)
    email_share(store, alice, "o-n")
    assert store.add_invitation(invitation_to(alice, "o-n"))
    assert store.replace_invitation(alice.sub, "o-n", "new", T + 10, T + 99) is True
    assert store.get_invitation("digest-of-o-n") is None
    assert store.get_invitation("new") == invitation_to(
        alice, "o-n", digest="new", created_at=T + 10, expires_at=T + 99
    )
    assert store.replace_invitation(carol.sub, "o-n", "x", T, T + 99) is False
    assert store.use_invitation("new", carol.sub, T + 20) is not None
    assert store.replace_invitation(alice.sub, "o-n", "newer", T + 30, T + 99) is False
    assert store.delete_invitation(alice.sub, "o-n") is False  # used: kept until pruned
    assert store.get_invitation("new") is not None


def test_cancelling_deletes_an_unused_invitation(store: Storage) -> None:
    alice, bob = make_user(store), make_user(store)
    email_share(store, alice, "o-x")
    assert store.add_invitation(invitation_to(alice, "o-x"))
    assert store.delete_invitation(bob.sub, "o-x") is False
    assert store.delete_invitation(alice.sub, "o-x") is True
    assert store.get_invitation("digest-of-o-x") is None
    assert store.delete_invitation(alice.sub, "o-x") is False
    assert store.get_share(alice.sub, "o-x") is not None  # the share stays


@pytest.mark.parametrize(
    ("used", "now", "expected"),
    [(False, T + HOUR - 1, True), (False, T + HOUR, False), (True, T, False)],
    ids=["usable", "expired", "used"],
)
def test_an_invitation_is_used_once_while_unexpired(
    store: Storage, used: bool, now: int, expected: bool
) -> None:
    alice, carol, dave = make_user(store), make_user(store), make_user(store)
    email_share(store, alice, "o-o")
    assert store.add_invitation(invitation_to(alice, "o-o"))
    if used:
        assert store.use_invitation("digest-of-o-o", dave.sub, T) is not None
    got = store.use_invitation("digest-of-o-o", carol.sub, now)
    if expected:
        assert got == invitation_to(alice, "o-o", used_at=now, used_by=carol.sub)
        assert store.get_invitation("digest-of-o-o") == got
        assert got.is_usable(now) is False
    else:
        assert got is None
    assert store.use_invitation("unknown", carol.sub, T) is None


def test_invitations_expired_or_used_are_forgotten_in_batches(store: Storage) -> None:
    alice, carol = make_user(store), make_user(store)
    for n in range(4):
        email_share(store, alice, f"o-{n}")
        assert store.add_invitation(invitation_to(alice, f"o-{n}", expires_at=T + n))
    email_share(store, alice, "o-used")
    assert store.add_invitation(invitation_to(alice, "o-used", expires_at=T + HOUR))
    assert store.use_invitation("digest-of-o-used", carol.sub, T)
    email_share(store, alice, "o-live")
    assert store.add_invitation(invitation_to(alice, "o-live", expires_at=T + HOUR))
    assert store.delete_invitations_expired_before(T + 3, 2) == 2
    assert store.delete_invitations_expired_before(T + 3, 2) == 2  # T+2 and the used one
    assert store.delete_invitations_expired_before(T + 3, 2) == 0
    assert [i.rule_id for i in store.invitations_of(alice.sub)] == ["o-3", "o-live"]


def test_owner_rules_are_listed_oldest_first_and_every_owners_by_username(store: Storage) -> None:
    bob, alice = make_user(store, "bob-r"), make_user(store, "alice-r")
    for rule_id, user, moment in (
        ("o-b", alice, T + 5),
        ("o-z", bob, T),
        ("o-c", alice, T),
        ("o-a", alice, T),  # same second as o-c, added after it
    ):
        assert store.add_owner_rule(rule_id, user.sub, owner_rule(rule_id, user.username), moment)
    assert [rule.id for rule in store.owner_rules_of(alice.sub)] == ["o-c", "o-a", "o-b"]
    assert [(rule.username, rule.id) for rule in store.all_owner_rules()] == [
        ("alice-r", "o-c"),
        ("alice-r", "o-a"),
        ("alice-r", "o-b"),
        ("bob-r", "o-z"),
    ]


def test_every_change_of_an_owners_rules_bumps_only_their_version(store: Storage) -> None:
    alice, bob = make_user(store), make_user(store)
    assert store.owner_rules_version(alice.sub) == 0
    store.add_owner_rule("o-1", alice.sub, owner_rule("o-1", alice.username), T)
    assert store.owner_rules_version(alice.sub) == 1
    store.add_owner_rule("o-2", alice.sub, owner_rule("o-2", alice.username), T)
    assert store.owner_rules_version(alice.sub) == 2
    changed = owner_rule("o-1", alice.username, "print")
    assert store.replace_owner_rule(alice.sub, "o-1", changed, T + 60) is True
    assert store.owner_rules_version(alice.sub) == 3
    [first, _] = store.owner_rules_of(alice.sub)
    assert (first.rule, first.created_at, first.updated_at) == (changed, T, T + 60)
    # Not hers, or not there: nothing changes, the version neither.
    assert store.replace_owner_rule(bob.sub, "o-1", owner_rule("o-1", bob.username), T) is False
    assert store.replace_owner_rule(alice.sub, "o-9", changed, T) is False
    assert store.delete_owner_rule(bob.sub, "o-1") is False
    assert store.owner_rules_version(alice.sub) == 3
    assert store.owner_rules_version(bob.sub) == 0
    assert store.delete_owner_rule(alice.sub, "o-1") is True
    assert store.delete_owner_rule(alice.sub, "o-1") is False
    assert store.owner_rules_version(alice.sub) == 4
    assert [rule.id for rule in store.owner_rules_of(alice.sub)] == ["o-2"]


def test_a_failed_change_in_a_transaction_rolls_the_version_back_too(store: Storage) -> None:
    alice = make_user(store)
    with pytest.raises(RuntimeError), store.transaction():
        store.add_owner_rule("o-1", alice.sub, owner_rule("o-1", alice.username), T)
        raise RuntimeError("abandoned")
    assert store.owner_rules_of(alice.sub) == []
    assert store.owner_rules_version(alice.sub) == 0


def test_deleting_a_user_takes_their_rules_and_version(store: Storage) -> None:
    alice, bob = make_user(store), make_user(store)
    store.add_owner_rule("o-a", alice.sub, owner_rule("o-a", alice.username), T)
    store.add_owner_rule("o-b", bob.sub, owner_rule("o-b", bob.username), T)
    assert store.delete_user(alice.sub)
    assert store.owner_rules_of(alice.sub) == []
    assert store.owner_rules_version(alice.sub) == 0
    assert [rule.id for rule in store.all_owner_rules()] == ["o-b"]
    # The id is free again.
    assert store.add_owner_rule("o-a", bob.sub, owner_rule("o-a", bob.username), T)


# -- fetched URIs and images ----------------------------------------------------------------------

SCOPE_URI = "https://scopes.example/read"


def test_a_uri_is_queued_once_per_kind(store: Storage) -> None:
    assert store.queue_uri(SCOPE_URI, "scope", "row-1", T) is True
    assert store.queue_uri(SCOPE_URI, "scope", "row-2", T + 1) is False
    assert store.queue_uri(SCOPE_URI, "page", "row-3", T) is True
    queued = store.get_fetched_uri(SCOPE_URI, "scope")
    assert queued is not None
    assert (queued.id, queued.status, queued.next_try_at, queued.failures) == (
        "row-1",
        "pending",
        T,
        0,
    )
    assert store.fetched_uri_by_id("row-3") == store.get_fetched_uri(SCOPE_URI, "page")
    assert store.fetched_uri_by_id("row-9") is None
    assert store.get_fetched_uri(SCOPE_URI, "image") is None


def test_the_fetch_queue_counts_the_rows_due(store: Storage) -> None:
    assert store.count_due_fetches(T) == 0
    store.queue_uri("https://a.example/1", "page", "a", T)
    store.queue_uri("https://a.example/2", "image", "b", T + 5)
    assert store.count_due_fetches(T) == 1
    assert store.count_due_fetches(T + 5) == 2
    store.claim_fetch_work(T + 5, T + 40, 1)  # being fetched: still due until it is checked
    assert store.count_due_fetches(T + 5) == 2
    store.record_fetch_failure("a", T + 40, T + 6, T + 100, "timeout")
    assert store.count_due_fetches(T + 6) == 1


def test_due_work_is_claimed_once_until_its_lease_ends(store: Storage) -> None:
    store.queue_uri("https://a.example/1", "page", "a", T)
    store.queue_uri("https://a.example/2", "page", "b", T + 5)
    store.queue_uri("https://a.example/3", "page", "c", T + 100)  # not due yet
    taken = store.claim_fetch_work(T + 10, T + 40, 10)
    assert [row.id for row in taken] == ["a", "b"]
    assert all(row.claimed_until == T + 40 for row in taken)
    assert store.claim_fetch_work(T + 20, T + 50, 10) == []
    # A lease that ran out (a process died mid-fetch) lets another take the row.
    assert [row.id for row in store.claim_fetch_work(T + 40, T + 70, 1)] == ["a"]
    # The first holder's late result is not recorded over the new lease.
    assert store.record_fetch_failure("a", T + 40, T + 41, T + 100, "late") is False
    assert store.record_fetch_failure("a", T + 70, T + 41, T + 100, "timeout") is True
    failed = store.fetched_uri_by_id("a")
    assert failed is not None
    assert (failed.status, failed.failures, failed.next_try_at, failed.reason) == (
        "failed",
        1,
        T + 100,
        "timeout",
    )
    assert failed.claimed_until == 0


def test_due_work_is_taken_round_robin_by_who_queued_it(store: Storage) -> None:
    for n in range(6):  # one registration's many URIs, queued first
        store.queue_uri(f"https://slow.example/{n}", "scope", f"a{n}", T, "set:a")
    store.queue_uri("https://b.example/icon.png", "image", "b0", T + 1, "set:b")
    store.queue_uri("https://b.example/page", "page", "b1", T + 1, "set:b")
    store.queue_uri("https://c.example/logo.png", "image", "c0", T + 2, "client:c")
    store.queue_uri("https://asked.example/", "page", "p0", T + 3)
    assert store.get_fetched_uri("https://b.example/icon.png", "image").queued_by == "set:b"  # type: ignore[union-attr]
    # Taken together: each queuer's oldest, then each one's next, ...
    taken = store.claim_fetch_work(T + 3, T + 60, 6)
    assert [row.id for row in taken] == ["a0", "b0", "c0", "p0", "a1", "b1"]


def test_a_queuer_with_fetches_under_way_waits_behind_one_without(store: Storage) -> None:
    for n in range(4):
        store.queue_uri(f"https://slow.example/{n}", "scope", f"a{n}", T, "set:a")
    # One at a time, as the job's workers take them: a's fetch under way puts b's first.
    assert [row.id for row in store.claim_fetch_work(T, T + 60, 1)] == ["a0"]
    store.queue_uri("https://b.example/icon.png", "image", "b0", T + 1, "set:b")
    assert [row.id for row in store.claim_fetch_work(T + 1, T + 60, 1)] == ["b0"]
    # With nothing under way, the queuer served longest ago (or never) goes first.
    assert store.record_fetch_failure("a0", T + 60, T + 2, T + 90, "timeout")
    store.queue_uri("https://c.example/logo.png", "image", "c0", T + 2, "client:c")
    assert [row.id for row in store.claim_fetch_work(T + 2, T + 60, 1)] == ["c0"]
    assert [row.id for row in store.claim_fetch_work(T + 2, T + 60, 1)] == ["a1"]


def test_a_queuer_behind_a_long_queue_is_not_left_out(store: Storage) -> None:
    # More rows than a claim looks into (the oldest few hundred), all older than b's one.
    with store.transaction():
        for n in range(300):
            store.queue_uri(f"https://slow.example/{n}", "scope", f"a{n:03}", T, "set:a")
    store.queue_uri("https://b.example/icon.png", "image", "b0", T + 1, "set:b")
    assert [row.id for row in store.claim_fetch_work(T + 1, T + 60, 1)] == ["a000"]
    assert [row.id for row in store.claim_fetch_work(T + 1, T + 60, 1)] == ["b0"]


def test_a_checked_image_is_stored_and_replaced_by_the_next(store: Storage) -> None:
    store.queue_uri("https://a.example/i.png", "image", "i", T)
    (row,) = store.claim_fetch_work(T, T + 30, 5)
    first = FetchedImage("img-1", "image/png", b"\x89PNG...", T)
    assert store.record_fetch_checked(
        "i", row.claimed_until, T, T + 3600, content_type="image/png", image=first
    )
    checked = store.fetched_uri_by_id("i")
    assert checked is not None
    assert (checked.status, checked.image_id, checked.expires_at, checked.next_try_at) == (
        "checked",
        "img-1",
        T + 3600,
        T + 3600,
    )
    assert store.get_fetched_image("img-1") == first
    assert store.get_fetched_image("img-1").size == 7  # type: ignore[union-attr]
    assert store.claim_fetch_work(T + 3599, T + 3630, 5) == []
    (again,) = store.claim_fetch_work(T + 3600, T + 3630, 5)
    second = FetchedImage("img-2", "image/gif", b"GIF89a...", T + 3600)
    assert store.record_fetch_checked(
        "i", again.claimed_until, T + 3600, T + 7200, content_type="image/gif", image=second
    )
    assert store.get_fetched_image("img-1") is None
    assert store.get_fetched_image("img-2") == second
    # A failure forgets the result and its image.
    (third,) = store.claim_fetch_work(T + 7200, T + 7230, 5)
    assert store.record_fetch_failure("i", third.claimed_until, T + 7200, T + 7230, "gone")
    assert store.get_fetched_image("img-2") is None
    failed = store.fetched_uri_by_id("i")
    assert failed is not None and failed.image_id is None and failed.content_type is None


def test_a_scope_description_is_recorded(store: Storage) -> None:
    store.queue_uri(SCOPE_URI, "scope", "s", T)
    (row,) = store.claim_fetch_work(T, T + 30, 5)
    assert store.record_fetch_checked(
        "s", row.claimed_until, T, T + 60, name="Read", icon_uri="https://scopes.example/r.png"
    )
    checked = store.get_fetched_uri(SCOPE_URI, "scope")
    assert checked is not None
    assert (checked.name, checked.icon_uri, checked.failures) == (
        "Read",
        "https://scopes.example/r.png",
        0,
    )


# -- persisted claims tokens (UMA 2.0) -------------------------------------------------------------


def make_pct(
    store: Storage,
    digest: str = "pct-digest",
    user_sub: str | None = None,
    expires_at: int = T + HOUR,
) -> Pct:
    client = make_client(store)
    pct = Pct(
        digest, client.client_id, user_sub or f"client:{client.client_id}", user_sub, T, expires_at
    )
    store.add_pct(
        pct,
        [
            claim("email", "a@x.test"),  # no end of its own: the PCT's
            replace(claim("role", "doctor"), expires_at=T + 60),
            replace(claim("n", 1), expires_at=T + 2 * HOUR),  # no later than the PCT's
        ],
    )
    return pct


def test_a_pct_keeps_its_claims_each_until_its_own_expiry(store: Storage) -> None:
    pct = make_pct(store)
    assert store.get_pct(pct.digest) == pct
    assert store.get_pct("no-such-pct") is None
    held = store.pct_claims(pct.digest, T)
    assert held == [
        replace(claim("email", "a@x.test"), expires_at=T + HOUR),
        replace(claim("n", 1), expires_at=T + HOUR),
        replace(claim("role", "doctor"), expires_at=T + 60),
    ]
    assert store.pct_claims(pct.digest, T + 60) == held[:2]  # expires_at > now: live
    assert store.pct_claims("no-such-pct", T) == []


def test_a_pct_is_revoked_once_and_its_person_sees_it(store: Storage) -> None:
    alice = make_user(store)
    pct = make_pct(store, user_sub=alice.sub)
    assert store.pcts_of(alice.sub) == [pct]
    assert store.revoke_pct(pct.digest) is True
    assert store.revoke_pct(pct.digest) is False
    assert store.revoke_pct("no-such-pct") is False
    found = store.get_pct(pct.digest)
    assert found == replace(pct, revoked=True) and not found.is_live(T)
    assert store.pcts_of("someone-else") == []


def test_a_pct_goes_with_its_person_and_its_client(store: Storage) -> None:
    alice = make_user(store)
    pct = make_pct(store, user_sub=alice.sub)
    assert store.delete_user(alice.sub)
    assert store.get_pct(pct.digest) is None
    assert store.pct_claims(pct.digest, T) == []
    clients = make_pct(store, digest="pct-of-a-client")
    assert store.delete_client(clients.client_id)
    assert store.get_pct(clients.digest) is None


def test_expired_pcts_are_forgotten_with_their_claims(store: Storage) -> None:
    expiring = [make_pct(store, f"pct-{n}", expires_at=T + n) for n in (10, 20, 30)]
    kept = make_pct(store, "pct-kept", expires_at=T + 50)
    assert store.delete_pcts_expired_before(T + 50, 2) == 2
    assert store.delete_pcts_expired_before(T + 50, 2) == 1
    assert store.delete_pcts_expired_before(T + 50, 2) == 0
    assert all(store.get_pct(pct.digest) is None for pct in expiring)
    assert store.get_pct(kept.digest) == kept and len(store.pct_claims(kept.digest, T)) == 3


def test_an_rpt_of_the_2_0_grant_has_no_aat(store: Storage) -> None:
    client = make_client(store)
    rpt = Rpt("rpt-of-a-client", "seed", None, client.client_id, "client:x", T, T + HOUR)
    store.add_rpt(rpt)
    assert store.get_rpt(rpt.digest) == rpt


def test_a_gathered_claim_keeps_when_the_word_it_rests_on_ends(store: Storage) -> None:
    ticket = make_ticket(store)
    ending = replace(claim("email", "a@x.test"), expires_at=T + 300)
    store.record_claims(ticket.digest, "bob", [ending, claim("n", 1)])
    assert store.gathered_claims(ticket.digest, "bob") == [ending, claim("n", 1)]


# -- signing keys (JWT RPTs) -----------------------------------------------------------------------


def signing_key(kid: str, created_at: int = T, algorithm: str = "RS256") -> SigningKey:
    public = {"kty": "RSA", "kid": kid, "use": "sig", "alg": algorithm, "n": "AQAB", "e": "AQAB"}
    return SigningKey(kid, algorithm, public, f"sealed-{kid}", created_at, current=True)


def test_the_first_signing_key_is_current_and_a_second_one_only_replaces_it_when_asked(
    store: Storage,
) -> None:
    assert store.current_signing_key() is None
    assert store.signing_keys() == []
    first = signing_key("kid-1")
    assert store.add_signing_key(first, replace_current=False) is True
    assert store.current_signing_key() == first
    # Without replace_current, another key is not added while one is current.
    assert store.add_signing_key(signing_key("kid-0"), replace_current=False) is False
    assert store.signing_keys() == [first]

    second = signing_key("kid-2", created_at=T + 5, algorithm="ES256")
    assert store.add_signing_key(second, replace_current=True) is True
    assert store.current_signing_key() == second
    assert store.signing_keys() == [replace(first, current=False), second]


def test_retiring_drops_every_signing_key_but_the_current_one(store: Storage) -> None:
    assert store.retire_signing_keys() == []
    for n, kid in enumerate(("kid-b", "kid-a", "kid-c")):
        store.add_signing_key(signing_key(kid, created_at=T), replace_current=n > 0)
    # Made in one second: listed by kid.
    assert [key.kid for key in store.signing_keys()] == ["kid-a", "kid-b", "kid-c"]
    assert store.retire_signing_keys() == ["kid-a", "kid-b"]
    assert store.signing_keys() == [signing_key("kid-c")]
    assert store.retire_signing_keys() == []


def test_a_signing_key_is_resealed_only_from_the_sealed_value_read(store: Storage) -> None:
    key = signing_key("kid-r")
    store.add_signing_key(key, replace_current=False)
    assert store.reseal_signing_key("kid-r", "not-what-is-stored", "other") is False
    assert store.reseal_signing_key("kid-r", key.sealed_key, "resealed") is True
    assert store.signing_keys() == [replace(key, sealed_key="resealed")]
    assert store.reseal_signing_key("kid-r", key.sealed_key, "again") is False
    assert store.reseal_signing_key("kid-none", "resealed", "again") is False


def test_revoking_one_rpt_works_once_and_leaves_the_others(store: Storage) -> None:
    aat = make_token(store)
    rpt, other = make_rpt(store, aat), make_rpt(store, aat)
    assert store.revoke_rpt(rpt.digest) is True
    assert store.revoke_rpt(rpt.digest) is False
    assert store.revoke_rpt("no-such-rpt") is False
    assert store.get_rpt(rpt.digest) == replace(rpt, revoked=True)
    assert store.get_rpt(other.digest) == other


def test_the_permissions_of_a_party_and_client_are_those_of_its_live_rpts(store: Storage) -> None:
    client, person = make_client(store), make_user(store)
    aat, another_aat = make_token(store, client, person), make_token(store, client, person)
    first, second = make_rpt(store, aat), make_rpt(store, another_aat)
    revoked = make_rpt(store, aat, revoked=True)
    expired = make_rpt(store, aat, expires_at=T + 10)
    others = make_rpt(store, make_token(store, client, make_user(store)))  # another person's
    own = Rpt("rpt-of-the-client-itself", "seed", None, client.client_id, person.sub, T, T + HOUR)
    store.add_rpt(own)  # the 2.0 grant's: no AAT, the same party and client
    sets = [make_set(store, client) for _ in range(4)]
    store.put_permission(first.digest, permission(sets[0], issued_at=T + 1))
    store.put_permission(second.digest, permission(sets[1], ("edit",), issued_at=T + 2))
    store.put_permission(own.digest, permission(sets[0], ("edit",), issued_at=T + 3))
    store.put_permission(first.digest, permission(sets[2], issued_at=T, expires_at=T + 20))
    for rpt in (revoked, expired, others):
        store.put_permission(rpt.digest, permission(sets[3]))

    assert store.permissions_of_party(client.client_id, person.sub, T + 20) == [
        permission(sets[0], issued_at=T + 1),
        permission(sets[1], ("edit",), issued_at=T + 2),
        permission(sets[0], ("edit",), issued_at=T + 3),
    ]
    assert store.permissions_of_party(client.client_id, person.sub, T + 5)[0] == permission(
        sets[2], issued_at=T, expires_at=T + 20
    )
    assert store.permissions_of_party(make_client(store).client_id, person.sub, T) == []


# -- events ------------------------------------------------------------------------------------


def event(at: int, owner: str = "alice-sub", rs_id: str = "set-1", **changes: Any) -> Event:
    base = Event(
        at=at,
        owner=owner,
        rs_id=rs_id,
        rs_name=f"Photos {rs_id}",
        scopes=("view", "print"),
        client_id="client-1",
        client_name="Photo printer",
        party="bob",
        kind="decision",
        outcome="granted",
        decided_by="share bob",
    )
    return replace(base, **changes)


def test_an_event_round_trips_with_and_without_its_optional_names(store: Storage) -> None:
    full = event(T)
    bare = event(
        T + 1, party=None, decided_by=None, kind="revocation", outcome="revoked", scopes=()
    )
    store.add_event(full)
    store.add_event(bare)
    assert store.events_of("alice-sub", 10) == [bare, full]
    assert all(found.seq > 0 for found in store.events_of("alice-sub", 10))


def test_events_page_newest_first_by_owner_and_set_from_a_cursor(store: Storage) -> None:
    # Three in one second, added in order: the later added is the newer.
    added = [event(T, outcome=f"n{n}") for n in range(3)]
    added += [event(T + 5, rs_id="set-2"), event(T - 5)]
    added += [event(T + 1, owner="carol-sub")]
    for one in added:
        store.add_event(one)
    newest_first = [added[3], added[2], added[1], added[0], added[4]]
    assert store.events_of("alice-sub", 10) == newest_first
    first = store.events_of("alice-sub", 2)
    assert first == newest_first[:2]
    second = store.events_of("alice-sub", 2, before=(first[-1].at, first[-1].seq))
    assert second == newest_first[2:4]
    third = store.events_of("alice-sub", 2, before=(second[-1].at, second[-1].seq))
    assert third == newest_first[4:]
    assert store.events_of("alice-sub", 10, rs_id="set-2") == [added[3]]
    assert store.events_of("alice-sub", 10, rs_id="set-9") == []
    assert store.events_of("nobody", 10) == []


def test_events_since_a_moment_are_oldest_first_and_include_it(store: Storage) -> None:
    for at in (T + 3, T, T - 1, T + 3):
        store.add_event(event(at, outcome=str(at)))
    store.add_event(event(T, owner="carol-sub"))
    assert [found.at for found in store.events_since("alice-sub", T)] == [T, T + 3, T + 3]
    assert store.events_since("alice-sub", T + 4) == []


def test_events_are_deleted_before_a_moment_in_batches(store: Storage) -> None:
    for n in range(5):
        store.add_event(event(T + n, owner=f"owner-{n % 2}"))
    assert store.delete_events_before(T + 4, 3) == 3
    assert store.delete_events_before(T + 4, 3) == 1
    assert store.delete_events_before(T + 4, 3) == 0
    left = store.events_of("owner-0", 10) + store.events_of("owner-1", 10)
    assert [found.at for found in left] == [T + 4]


# -- requests to owners --------------------------------------------------------------------------


def access_request(owner: User, party: User, rs: ResourceSet, **more: Any) -> AccessRequest:
    fields: dict[str, Any] = {
        "id": unique("req"),
        "owner": owner.sub,
        "resource_set_id": rs.id,
        "scopes": ("view", "print"),
        "party": party.sub,
        "party_name": party.username,
        "client_id": "client-1",
        "client_name": "Photo printer",
        "ticket_digest": unique("ticket-digest"),
        "created_at": T,
        "expires_at": T + HOUR,
        **more,
    }
    return AccessRequest(**fields)


def test_a_request_round_trips_and_is_found_by_its_ticket_as_it_moves(store: Storage) -> None:
    alice, bob = make_user(store), make_user(store)
    rs = make_set(store, owner=alice.sub)
    asked = access_request(alice, bob, rs)
    store.add_request(asked)
    assert store.get_request(asked.id) == asked
    assert store.get_request("no-such-request") is None
    assert store.request_for_ticket(asked.ticket_digest) == asked
    assert store.move_request(asked.ticket_digest, "rotated-digest") == 1
    assert store.request_for_ticket(asked.ticket_digest) is None
    assert store.request_for_ticket("rotated-digest") == replace(
        asked, ticket_digest="rotated-digest"
    )
    assert store.move_request("no-such-digest", "other") == 0


def test_a_request_marks_its_ticket_asked_and_a_rotated_ticket_stays_asked(
    store: Storage,
) -> None:
    alice, bob = make_user(store), make_user(store)
    rs = make_set(store, owner=alice.sub)
    ticket = make_ticket(store, rs)
    other = make_ticket(store, rs)
    assert store.get_ticket(ticket.digest) == ticket and not ticket.asked
    store.add_request(access_request(alice, bob, rs, ticket_digest=ticket.digest))
    assert store.get_ticket(ticket.digest) == replace(ticket, asked=True)
    assert store.get_ticket(other.digest) == other  # another ticket is not asked
    store.add_request(access_request(alice, bob, rs, ticket_digest=""))  # ticketless: no ticket
    assert store.rotate_ticket(ticket.digest, "rotated-asked") is True
    found = store.get_ticket("rotated-asked")
    assert found is not None and found.asked


def test_a_request_is_decided_once_and_only_while_pending(store: Storage) -> None:
    alice, bob = make_user(store), make_user(store)
    rs = make_set(store, owner=alice.sub)
    approved, denied, late = (access_request(alice, bob, rs) for _ in range(3))
    for one in (approved, denied, late):
        store.add_request(one)
    assert store.decide_request(approved.id, "approved", T + 5, ("view",)) is True
    assert store.decide_request(approved.id, "denied", T + 6) is False
    assert store.decide_request(denied.id, "denied", T + 7) is True
    assert store.decide_request(late.id, "approved", T + HOUR, ("view",)) is False  # expired
    assert store.get_request(approved.id) == replace(
        approved, status="approved", decided_at=T + 5, approved_scopes=("view",)
    )
    assert store.get_request(denied.id) == replace(denied, status="denied", decided_at=T + 7)
    assert store.get_request(late.id) == late


def test_requests_are_listed_by_owner_and_status_newest_first_and_counted(
    store: Storage,
) -> None:
    alice, bob, carol = make_user(store), make_user(store), make_user(store)
    rs = make_set(store, owner=alice.sub)
    old = access_request(alice, bob, rs, created_at=T - 10)
    new = access_request(alice, carol, rs, created_at=T)
    gone = access_request(alice, bob, rs, created_at=T - 20, expires_at=T + 5)
    decided = access_request(alice, bob, rs, created_at=T - 30)
    other = access_request(carol, bob, make_set(store, owner=carol.sub))
    for one in (old, new, gone, decided, other):
        store.add_request(one)
    assert store.decide_request(decided.id, "denied", T)
    assert store.requests_of(alice.sub, "pending", T + 5, 10) == [new, old]
    assert store.requests_of(alice.sub, "pending", T + 5, 1) == [new]
    assert store.requests_of(alice.sub, "expired", T + 5, 10) == [replace(gone, status="expired")]
    assert [r.id for r in store.requests_of(alice.sub, "denied", T + 5, 10)] == [decided.id]
    assert store.requests_of(alice.sub, "approved", T + 5, 10) == []
    assert store.count_pending_requests_to(alice.sub, T + 4) == 3
    assert store.count_pending_requests_to(alice.sub, T + 5) == 2
    assert store.count_pending_requests_by(bob.sub, T + 5) == 2  # old, other
    assert store.count_pending_requests_by(carol.sub, T + 5) == 1
    assert store.count_pending_requests_by(alice.sub, T + 5) == 0


def test_requests_go_with_their_owner_party_or_set_and_expire_in_batches(store: Storage) -> None:
    alice, bob, carol = make_user(store), make_user(store), make_user(store)
    client = make_client(store)
    rs = make_set(store, client=client, owner=alice.sub)
    by_bob, by_carol = access_request(alice, bob, rs), access_request(alice, carol, rs)
    store.add_request(by_bob)
    store.add_request(by_carol)
    assert store.delete_user(bob.sub)
    assert store.get_request(by_bob.id) is None and store.get_request(by_carol.id) is not None
    assert store.delete_resource_set(rs.id, alice.sub, client.client_id)
    assert store.get_request(by_carol.id) is None
    rs2 = make_set(store, owner=alice.sub)
    for n in range(5):
        store.add_request(access_request(alice, carol, rs2, expires_at=T + n))
    assert store.delete_requests_expired_before(T + 4, 3) == 3
    assert store.delete_requests_expired_before(T + 4, 3) == 1
    assert store.delete_requests_expired_before(T + 4, 3) == 0
    assert store.count_pending_requests_to(alice.sub, T) == 1
    assert store.delete_user(alice.sub)
    assert store.count_pending_requests_by(carol.sub, T) == 0


def test_an_owner_takes_requests_by_the_servers_default_until_they_choose(store: Storage) -> None:
    alice = make_user(store)
    assert store.takes_requests(alice.sub) is None
    assert store.set_takes_requests(alice.sub, False) is True
    assert store.takes_requests(alice.sub) is False
    assert store.set_takes_requests(alice.sub, True) is True
    assert store.takes_requests(alice.sub) is True
    assert store.set_takes_requests(alice.sub, None) is True
    assert store.takes_requests(alice.sub) is None
    assert store.set_takes_requests("no-such-sub", True) is False
    assert store.takes_requests("no-such-sub") is None


# -- notices -----------------------------------------------------------------------------------


def notice(at: int, user_sub: str | None, notice_id: str | None = None, **changes: Any) -> Notice:
    base = Notice(
        id=notice_id or f"n-{at}-{user_sub}",
        user_sub=user_sub,
        address="bob@example.org",
        kind="share",
        subject="alice shared Holiday photos with you",
        body="alice shared Holiday photos with you: view, print.\n",
        link="https://uma.example/policy",
        created_at=at,
    )
    return replace(base, **changes)


def test_a_notice_round_trips_with_and_without_its_optional_parts(store: Storage) -> None:
    bob = make_user(store, "bob")
    full = notice(
        T, bob.sub, mail_state="pending", next_attempt_at=T, kind="request", address="b@x.org"
    )
    bare = notice(T + 1, bob.sub, address=None)
    store.add_notice(full)
    store.add_notice(bare)
    assert store.notices_of(bob.sub, 10) == [bare, full]
    assert all(found.seq > 0 for found in store.notices_of(bob.sub, 10))
    # An invitation's notice is for an address only: on no one's page, but in the outbox.
    invitation = notice(T, None, "inv", kind="invitation", mail_state="pending", next_attempt_at=T)
    store.add_notice(invitation)
    assert [found.id for found in store.claim_due_mail(T, T + 60, 10)] == [full.id, "inv"]


def test_notices_page_newest_first_by_person_from_a_cursor(store: Storage) -> None:
    bob, carol = make_user(store, "bob"), make_user(store, "carol")
    added = [notice(T, bob.sub, f"same-second-{n}") for n in range(3)]
    added += [notice(T + 5, bob.sub), notice(T - 5, bob.sub), notice(T + 1, carol.sub)]
    for one in added:
        store.add_notice(one)
    newest_first = [added[3], added[2], added[1], added[0], added[4]]
    assert store.notices_of(bob.sub, 10) == newest_first
    first = store.notices_of(bob.sub, 2)
    assert first == newest_first[:2]
    second = store.notices_of(bob.sub, 2, before=(first[-1].created_at, first[-1].seq))
    assert second == newest_first[2:4]
    third = store.notices_of(bob.sub, 2, before=(second[-1].created_at, second[-1].seq))
    assert third == newest_first[4:]
    assert store.notices_of(carol.sub, 10) == [added[5]]
    assert store.notices_of("nobody", 10) == []


def test_unseen_notices_are_counted_and_marked_seen_up_to_now(store: Storage) -> None:
    bob, carol = make_user(store, "bob"), make_user(store, "carol")
    for at in (T - 2, T - 1, T + 10):
        store.add_notice(notice(at, bob.sub))
    store.add_notice(notice(T, carol.sub))
    assert store.count_unseen_notices(bob.sub) == 3
    assert store.mark_notices_seen(bob.sub, T) == 2
    assert store.mark_notices_seen(bob.sub, T + 1) == 0
    assert store.count_unseen_notices(bob.sub) == 1
    assert store.count_unseen_notices(carol.sub) == 1
    assert [found.seen_at for found in store.notices_of(bob.sub, 10)] == [None, T, T]
    assert store.count_unseen_notices("nobody") == 0


def test_a_persons_notices_go_with_the_person(store: Storage) -> None:
    bob = make_user(store, "bob")
    store.add_notice(notice(T, bob.sub))
    assert store.delete_user(bob.sub)
    assert store.notices_of(bob.sub, 10) == []


def test_due_mail_is_claimed_once_then_recorded_sent_or_failed(store: Storage) -> None:
    bob = make_user(store, "bob")
    due = notice(T, bob.sub, "due", mail_state="pending", next_attempt_at=T)
    later = notice(T, bob.sub, "later", mail_state="pending", next_attempt_at=T + 30)
    unmailed = notice(T, bob.sub, "unmailed")
    for one in (due, later, unmailed):
        store.add_notice(one)
    [taken] = store.claim_due_mail(T, T + 600, 10)
    assert taken == replace(due, attempts=1, next_attempt_at=T + 600)
    assert store.claim_due_mail(T + 599, T + 1200, 10) == [
        replace(later, attempts=1, next_attempt_at=T + 1200)
    ]
    assert store.claim_due_mail(T + 599, T + 1200, 10) == []  # both held
    # Only the claim's attempt records its outcome.
    assert store.record_mail_sent("due", 2) is False
    assert store.record_mail_sent("due", 1) is True
    assert store.record_mail_sent("due", 1) is False  # sent already
    assert store.record_mail_failure("later", 1, "421 try again", T + 700) is True
    [again] = store.claim_due_mail(T + 700, T + 1300, 10)
    assert (again.id, again.attempts, again.last_error) == ("later", 2, "421 try again")
    assert store.record_mail_failure("later", 2, "550 no such user", None) is True
    assert store.claim_due_mail(T + 9999, T + 99999, 10) == []
    by_id = {found.id: found for found in store.notices_of(bob.sub, 10)}
    assert (by_id["due"].mail_state, by_id["due"].next_attempt_at) == ("sent", None)
    assert by_id["due"].last_error is None
    assert (by_id["later"].mail_state, by_id["later"].last_error) == ("failed", "550 no such user")
    assert by_id["later"].next_attempt_at is None
    assert by_id["unmailed"] == unmailed


def test_notices_are_deleted_before_a_moment_in_batches_unless_mail_is_pending(
    store: Storage,
) -> None:
    bob = make_user(store, "bob")
    for n in range(5):
        store.add_notice(notice(T + n, bob.sub, mail_state="sent" if n % 2 else "none"))
    store.add_notice(notice(T, None, "waiting", mail_state="pending", next_attempt_at=T + 999))
    assert store.delete_notices_before(T + 4, 3) == 3
    assert store.delete_notices_before(T + 4, 3) == 1
    assert store.delete_notices_before(T + 4, 3) == 0
    assert [found.created_at for found in store.notices_of(bob.sub, 10)] == [T + 4]
    assert [found.id for found in store.claim_due_mail(T + 999, T + 2000, 10)] == ["waiting"]


def test_an_invitations_link_is_forgotten_once_its_mail_is_done(store: Storage) -> None:
    # (An invitation's notice is for an address; one for a user reads back here.)
    carol = make_user(store, "carol")
    for notice_id in ("sent", "given-up", "retried"):
        store.add_notice(
            notice(
                T,
                carol.sub,
                notice_id,
                kind="invitation",
                body="Follow https://uma.example/invitations/secret",
                link="https://uma.example/invitations/secret",
                mail_state="pending",
                next_attempt_at=T,
            )
        )
    store.add_notice(notice(T, carol.sub, "share", mail_state="pending", next_attempt_at=T))
    assert len(store.claim_due_mail(T, T + 60, 10)) == 4
    assert store.record_mail_sent("sent", 1)
    assert store.record_mail_sent("share", 1)
    assert store.record_mail_failure("given-up", 1, "550 no", None)
    assert store.record_mail_failure("retried", 1, "421 later", T + 60)
    by_id = {found.id: found for found in store.notices_of(carol.sub, 10)}
    assert by_id["retried"].link == "https://uma.example/invitations/secret"  # tried again
    for done in ("sent", "given-up"):
        assert (by_id[done].body, by_id[done].link) == ("", ""), done
    # A share's notice keeps its words.
    assert (by_id["share"].body, by_id["share"].link) == (
        notice(T, None).body,
        notice(T, None).link,
    )
    [retried] = store.claim_due_mail(T + 60, T + 120, 10)
    assert store.record_mail_sent(retried.id, 2)
    assert {found.id: found.link for found in store.notices_of(carol.sub, 10)}["retried"] == ""


# -- forgetting everything but the parties (db reset --keep-parties) -------------------------------


def test_a_reset_keeps_clients_users_and_links_and_forgets_everything_else(
    store: Storage,
) -> None:
    # One row at least in every table, through the contract.
    alice, bob = make_user(store, "alice-reset"), make_user(store, "bob-reset")
    assert store.link_identity("https://accounts.test", "248289761001", alice.sub, T)
    client = make_client(store)
    key = signing_key("kid-reset")
    assert store.add_signing_key(key, replace_current=False)
    rs, other = make_set(store, client, owner=alice.sub), make_set(store, client, owner=alice.sub)
    ticket = make_ticket(store, rs)
    pairs = (RequestedPermission(rs.id, ("view",)), RequestedPermission(other.id, ("edit",)))
    assert store.set_ticket_permissions(ticket.digest, pairs)  # ticket_resources
    handle = make_handle(store, ticket)
    store.record_claims(ticket.digest, "bob", [claim("email", "bob@x.test")])
    assert store.count_ticket_request(ticket.digest, "client-x") == 1  # ticket_requests
    assert store.record_assertion_use(assertion_use(ticket.digest), T) == []
    aat = make_token(store, client, bob, scope="uma_authorization")
    pat = make_token(store, client, alice)
    rpt = make_rpt(store, aat)
    store.put_permission(rpt.digest, permission(rs))
    code = make_code(store, client, alice)
    refresh = make_refresh_token(store, client, alice)
    store.put_consent(Consent(alice.sub, client.client_id, "uma_protection", T))
    store.add_initial_access_token(InitialAccessToken("iat-reset", (), T, T + HOUR))
    store.add_session(session(alice, "session-reset"))
    store.record_signin_failure("alice-reset", T)
    pct = make_pct(store, "pct-reset", user_sub=bob.sub)
    email_share(store, alice, "o-reset")
    assert store.add_invitation(invitation_to(alice, "o-reset"))
    version = store.owner_rules_version(alice.sub)
    assert version > 0
    store.add_event(event(T, owner=alice.sub, rs_id=rs.id))
    request = access_request(alice, bob, rs, ticket_digest=ticket.digest)
    store.add_request(request)
    store.add_notice(notice(T, bob.sub))
    store.queue_uri("https://a.example/i.png", "image", "fetch-reset", T)
    (work,) = store.claim_fetch_work(T, T + 30, 5)
    image = FetchedImage("img-reset", "image/png", b"\x89PNG...", T)
    assert store.record_fetch_checked(
        "fetch-reset", work.claimed_until, T, T + HOUR, content_type="image/png", image=image
    )
    parties = (store.list_users(), store.list_clients())
    assert len(parties[0]) == 2 and client in parties[1]

    forgotten = store.reset_keeping_parties()

    # Every table it forgets had a row, and lost it.
    assert sorted(table for table, rows in forgotten.items() if rows == 0) == []
    # The parties stay as they were.
    assert (store.list_users(), store.list_clients()) == parties
    assert store.links_of(alice.sub) == [("https://accounts.test", "248289761001")]
    assert store.current_signing_key() == key
    # Everything they did is gone.
    assert store.find_resource_set(rs.id) is None
    assert store.get_ticket(ticket.digest) is None
    assert store.open_tickets_for(other.id) == []
    assert store.get_claims_handle(handle.digest) is None
    assert store.gathered_claims(ticket.digest, "bob") == []
    assert store.record_assertion_use(assertion_use(ticket.digest), T) == []
    assert store.get_rpt(rpt.digest) is None
    assert store.get_permission(rpt.digest, rs.id) is None
    assert store.get_access_token(aat.digest) is None
    assert store.get_access_token(pat.digest) is None
    assert store.get_authorization_code(code.digest) is None
    assert store.get_refresh_token(refresh.digest) is None
    assert store.has_consent(alice.sub, client.client_id, "uma_protection") is False
    assert store.get_initial_access_token("iat-reset") is None
    assert store.get_session("session-reset") is None
    assert store.signin_failures_since("alice-reset", 0) == []
    assert store.get_pct(pct.digest) is None
    assert store.pcts_of(bob.sub) == []
    assert store.owner_rules_of(alice.sub) == []
    assert store.shares_of(alice.sub) == []
    assert store.get_invitation(invitation_to(alice, "o-reset").digest) is None
    assert store.events_of(alice.sub, 10) == []
    assert store.get_request(request.id) is None
    assert store.notices_of(bob.sub, 10) == []
    assert store.fetched_uri_by_id("fetch-reset") is None
    assert store.get_fetched_image("img-reset") is None
    # The owner's rules moved on: a process that cached them reads them again.
    assert store.owner_rules_version(alice.sub) > version
    # And the parties can start again.
    assert store.add_owner_rule("o-again", alice.sub, owner_rule("o-again", alice.username), T)
    assert [rule.id for rule in store.owner_rules_of(alice.sub)] == ["o-again"]


def test_a_reset_of_an_empty_database_forgets_nothing(store: Storage) -> None:
    forgotten = store.reset_keeping_parties()
    assert forgotten and set(forgotten.values()) == {0}
