"""Seeding the benchmark's database through the storage contract, in bulk (never over HTTP).

Everything here runs in the benchmark's own process on the database file the server uses: clients,
users and tokens as `tests/conftest.py` makes them (the services and the contract), resource sets
in batches of one transaction each, and permission tickets minted ahead of a run so that every
authorization request of the run has a fresh one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from umaserver import secrets_at_rest
from umaserver.services import accounts, clients, database
from umaserver.storage import Database, Storage, open_storage
from umaserver.storage.records import ResourceSet, Ticket, User

# The benchmark's parties' tokens outlive any run.
TOKEN_LIFETIME = 30 * 24 * 3600
# Sets written per transaction when seeding.
BATCH = 20_000
# The owner asked about holds at most this many sets (10^4 at 10^5 and 10^6 sets).
ASKED_OWNER_SETS = 10_000
# Owners of the database (the owner asked about among them).
OWNERS = 1_000

PHOTO = "https://example.com/rsets/photo"


@dataclass(frozen=True)
class Parties:
    """The benchmark's parties, made once per database."""

    rs_client: str  # the resource server (a client with a secret)
    # the requesting party's client, which pushes employee claims (in 1.0's authorization
    # requests, and as claim tokens in UMA 2.0's uma-ticket grant)
    app_client: str
    app_secret: str
    alice: str  # the sub of the owner asked about
    writer: str  # the sub of the owner whose sets are created, updated and deleted
    pat: str  # alice's PAT at the resource server
    writer_pat: str  # the writer's PAT at the resource server
    aat: str  # the client's AAT (for bob)
    target: str  # the id of alice's set that tickets ask for ("X-rays")


def prepared(path: Database) -> Storage:
    database.prepare(path, int(time.time()))
    return open_storage(path)


def _client(
    store: Storage,
    name: str,
    push_types: tuple[str, ...] = (),
    grant_types: tuple[str, ...] = ("client_credentials",),
) -> tuple[str, str]:
    settings = clients.ClientSettings(
        name=name,
        grant_types=grant_types,
        response_types=(),
        push_claim_types=push_types,
    )
    problem = clients.settings_problem(settings)
    assert problem is None, problem
    issued = clients.create_client(store, int(time.time()), settings)
    assert issued.secret is not None
    return issued.client.client_id, issued.secret


def _user(store: Storage, username: str) -> str:
    user = accounts.create_user(store, int(time.time()), username, None, {})
    assert user is not None, f"the user {username} exists already"
    return user.sub


def _token(store: Storage, client_id: str, sub: str | None, scope: str) -> str:
    token = accounts.new_access_token()
    accounts.store_access_token(
        store, int(time.time()), token, client_id, sub, scope, TOKEN_LIFETIME
    )
    return token


def description(name: str, scopes: tuple[str, ...] = ("view", "print")) -> dict[str, Any]:
    return {"name": name, "scopes": list(scopes), "type": PHOTO}


def make_parties(store: Storage, employee_claim_type: str) -> Parties:
    rs_client, _ = _client(store, "bench resource server")
    # The viewer also redeems tickets at /token with UMA 2.0's grant (the uma-ticket path).
    app_client, app_secret = _client(
        store,
        "bench viewer",
        (employee_claim_type,),
        ("client_credentials", clients.UMA_TICKET),
    )
    alice = _user(store, "alice")
    writer = _user(store, "writer")
    bob = _user(store, "bob")
    target = secrets_at_rest.new_id()
    store.add_resource_set(
        ResourceSet(target, alice, rs_client, description("X-rays")), int(time.time())
    )
    return Parties(
        rs_client=rs_client,
        app_client=app_client,
        app_secret=app_secret,
        alice=alice,
        writer=writer,
        pat=_token(store, rs_client, alice, "uma_protection"),
        writer_pat=_token(store, rs_client, writer, "uma_protection"),
        aat=_token(store, app_client, bob, "uma_authorization"),
        target=target,
    )


def owner_subs(store: Storage, parties: Parties) -> list[str]:
    """The database's OWNERS owners, alice first; made when missing (as users, in one transaction)."""
    others: list[str] = []
    now = int(time.time())
    with store.transaction():
        for index in range(1, OWNERS):
            username = f"owner{index:04d}"
            found = store.get_user_by_username(username)
            if found is None:
                found = User(secrets_at_rest.new_id(), username, None, {})
                assert store.add_user(found, now)
            others.append(found.sub)
    return [parties.alice, *others]


def alice_share(total: int) -> int:
    """How many of `total` sets are alice's: a tenth, at most ASKED_OWNER_SETS."""
    return min(ASKED_OWNER_SETS, total // 10)


def grow(store: Storage, parties: Parties, have: int, total: int) -> int:
    """Adds sets until the database holds `total` seeded sets (`have` are there): alice gets her
    share (alice_share), the other owners the rest in turn. Returns how many were added."""
    owners = owner_subs(store, parties)
    alice_have, alice_want = alice_share(have), alice_share(total)
    now = int(time.time())
    added = 0

    def sets() -> Iterator[ResourceSet]:
        for index in range(alice_have, alice_want):
            yield ResourceSet(
                secrets_at_rest.new_id(), parties.alice, parties.rs_client, description(f"a{index}")
            )
        others = (total - alice_want) - (have - alice_have)
        start = have - alice_have
        for index in range(start, start + others):
            owner = owners[1 + index % (len(owners) - 1)]
            yield ResourceSet(
                secrets_at_rest.new_id(), owner, parties.rs_client, description(f"s{index}")
            )

    pending = sets()
    while True:
        with store.transaction():
            count = 0
            for resource_set in pending:
                store.add_resource_set(resource_set, now)
                count += 1
                if count == BATCH:
                    break
        added += count
        if count < BATCH:
            return added


def pat_for(store: Storage, parties: Parties, sub: str) -> str:
    """A PAT at the resource server for the owner `sub`."""
    return _token(store, parties.rs_client, sub, "uma_protection")


def alice_sets(store: Storage, parties: Parties) -> list[str]:
    return store.list_resource_sets(parties.alice, parties.rs_client)


def writer_sets(store: Storage, parties: Parties, count: int, prefix: str) -> list[str]:
    """`count` new sets of the writer's (to update, or to delete each once)."""
    ids = [secrets_at_rest.new_id() for _ in range(count)]
    now = int(time.time())
    with store.transaction():
        for index, rs_id in enumerate(ids):
            store.add_resource_set(
                ResourceSet(
                    rs_id, parties.writer, parties.rs_client, description(f"{prefix}{index}")
                ),
                now,
            )
    return ids


def tickets(store: Storage, parties: Parties, count: int, lifetime: int) -> list[str]:
    """`count` new open tickets for view on alice's target set, as /permission makes them."""
    now = int(time.time())
    made: list[str] = []
    with store.transaction():
        for _ in range(count):
            ticket = secrets_at_rest.new_token(secrets_at_rest.TICKET_PREFIX)
            store.add_ticket(
                Ticket(
                    digest=secrets_at_rest.digest(ticket),
                    owner=parties.alice,
                    client_id=parties.rs_client,
                    resource_set_id=parties.target,
                    scopes=("view",),
                    created_at=now,
                    expires_at=now + lifetime,
                )
            )
            made.append(ticket)
    return made


def count_sets(store: Storage) -> int:
    """How many resource sets the database holds (the contract lists per owner only)."""
    conn = getattr(store, "conn", None)
    if conn is None:
        return -1
    row = conn.execute("SELECT count(*) FROM resource_sets").fetchone()
    return int(row[0])
