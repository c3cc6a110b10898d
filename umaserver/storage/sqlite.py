"""The data layer: every SQL statement of the server lives in this module.

One SQLite connection per request (on `flask.g`), `sqlite3.Row`, WAL and foreign keys on, and one
transaction helper for writers (`BEGIN IMMEDIATE`, so concurrent writers queue on the busy timeout
instead of failing on a lock upgrade). Handlers call named methods, never build queries.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from flask import Flask, current_app, g

from .. import secrets_at_rest
from ..claims.model import Assertion, Claim

BUSY_TIMEOUT_MS = 10_000
# Seconds an expired ticket is remembered (to answer expired_ticket), and an expired RPT kept.
EXPIRED_MEMORY = 24 * 3600


def _schema() -> str:
    # Package data: found the same way in a checkout and in an installed wheel.
    return (resources.files(__package__) / "schema.sql").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Client:
    client_id: str
    secret_digest: str
    name: str
    redirect_uris: tuple[str, ...]
    push_claim_types: tuple[str, ...]

    def check_secret(self, unverified: str) -> bool:
        return secrets_at_rest.matches_digest(unverified, self.secret_digest)


@dataclass(frozen=True)
class User:
    sub: str
    username: str
    password_hash: str | None
    claims: dict[str, Any]


@dataclass(frozen=True)
class AccessToken:
    """A PAT or an AAT as stored (the token itself is never stored)."""

    digest: str
    client_id: str
    user_sub: str | None
    username: str | None
    scope: str
    issued_at: int
    expires_at: int
    revoked: bool

    @property
    def owner(self) -> str:
        """Whom the token acts for: a user, or the client itself (client_credentials)."""
        return self.user_sub if self.user_sub is not None else f"client:{self.client_id}"

    @property
    def owner_name(self) -> str:
        """The owner as policies name it: the username, or `client:<client_id>`."""
        return self.username if self.username is not None else f"client:{self.client_id}"


@dataclass(frozen=True)
class ResourceSet:
    id: str
    owner: str
    client_id: str
    description: dict[str, Any]


@dataclass(frozen=True)
class Ticket:
    digest: str
    owner: str
    client_id: str
    resource_set_id: str
    scopes: tuple[str, ...]
    expires_at: int
    requests: int
    state: str


@dataclass(frozen=True)
class Rpt:
    digest: str
    seed: str
    aat_digest: str
    client_id: str
    requesting_party: str
    issued_at: int
    expires_at: int
    revoked: bool

    def is_live(self, now: float) -> bool:
        return not self.revoked and self.expires_at > now


@dataclass(frozen=True)
class Permission:
    resource_set_id: str
    scopes: tuple[str, ...]
    expires_at: int


class Store:
    """Named operations over one SQLite connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    @classmethod
    def open(cls, path: Path) -> Store:
        conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        return cls(conn)

    def close(self) -> None:
        self.conn.close()

    def initialise(self) -> None:
        """Create or upgrade the schema; safe to run any number of times."""
        self.conn.executescript(_schema())

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; nested uses join the outer one."""
        if self.conn.in_transaction:
            yield self.conn
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # -- clients ---------------------------------------------------------------------------------

    def create_client(
        self,
        name: str,
        redirect_uris: list[str],
        push_claim_types: list[str],
    ) -> tuple[Client, str]:
        """Returns the client and its secret, which exists only in this return value."""
        client_id = secrets_at_rest.new_id()
        secret = secrets_at_rest.new_token(secrets_at_rest.CLIENT_SECRET_PREFIX)
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO clients (client_id, secret_digest, name, redirect_uris,"
                " push_claim_types, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    client_id,
                    secrets_at_rest.digest(secret),
                    name,
                    json.dumps(redirect_uris),
                    json.dumps(push_claim_types),
                    int(time.time()),
                ),
            )
        client = self.get_client(client_id)
        assert client is not None
        return client, secret

    def get_client(self, client_id: str) -> Client | None:
        row = self.conn.execute(
            "SELECT * FROM clients WHERE client_id = ?", (client_id,)
        ).fetchone()
        if row is None:
            return None
        return Client(
            client_id=row["client_id"],
            secret_digest=row["secret_digest"],
            name=row["name"],
            redirect_uris=tuple(json.loads(row["redirect_uris"])),
            push_claim_types=tuple(json.loads(row["push_claim_types"])),
        )

    # -- users -----------------------------------------------------------------------------------

    def create_user(
        self, username: str, password_hash: str | None, claims: dict[str, Any]
    ) -> User | None:
        """None when the username is taken."""
        sub = secrets_at_rest.new_id()
        try:
            with self.transaction() as conn:
                conn.execute(
                    "INSERT INTO users (sub, username, password_hash, claims, created_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (sub, username, password_hash, json.dumps(claims), int(time.time())),
                )
        except sqlite3.IntegrityError:
            return None
        return User(sub, username, password_hash, claims)

    def get_user_by_username(self, username: str) -> User | None:
        row = self.conn.execute("SELECT * FROM users WHERE username = ?", (username,)).fetchone()
        if row is None:
            return None
        return User(row["sub"], row["username"], row["password_hash"], json.loads(row["claims"]))

    def owner_name(self, owner: str) -> str:
        """An owner as policies name it: the username, or `client:<client_id>` as stored."""
        row = self.conn.execute("SELECT username FROM users WHERE sub = ?", (owner,)).fetchone()
        return str(row["username"]) if row is not None else owner

    # -- PATs and AATs ---------------------------------------------------------------------------

    def create_access_token(
        self, token: str, client_id: str, user_sub: str | None, scope: str, lifetime: int
    ) -> None:
        now = int(time.time())
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO access_tokens (digest, client_id, user_sub, scope, issued_at,"
                " expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                (secrets_at_rest.digest(token), client_id, user_sub, scope, now, now + lifetime),
            )

    def get_access_token(self, token: str) -> AccessToken | None:
        row = self.conn.execute(
            "SELECT t.*, u.username FROM access_tokens AS t"
            " LEFT JOIN users AS u ON u.sub = t.user_sub WHERE t.digest = ?",
            (secrets_at_rest.digest(token),),
        ).fetchone()
        if row is None:
            return None
        return AccessToken(
            digest=row["digest"],
            client_id=row["client_id"],
            user_sub=row["user_sub"],
            username=row["username"],
            scope=row["scope"],
            issued_at=row["issued_at"],
            expires_at=row["expires_at"],
            revoked=bool(row["revoked"]),
        )

    def revoke_access_token(self, token: str) -> bool:
        """False when no such live token exists. Revoking an AAT revokes its RPTs."""
        token_digest = secrets_at_rest.digest(token)
        with self.transaction() as conn:
            cursor = conn.execute(
                "UPDATE access_tokens SET revoked = 1 WHERE digest = ? AND revoked = 0",
                (token_digest,),
            )
            conn.execute("UPDATE rpts SET revoked = 1 WHERE aat_digest = ?", (token_digest,))
        return cursor.rowcount == 1

    # -- resource sets ---------------------------------------------------------------------------

    def create_resource_set(
        self, owner: str, client_id: str, description: dict[str, Any]
    ) -> ResourceSet:
        rs_id = secrets_at_rest.new_id()
        now = int(time.time())
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO resource_sets (id, owner, client_id, name, type, description,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    rs_id,
                    owner,
                    client_id,
                    description["name"],
                    description.get("type"),
                    json.dumps(description),
                    now,
                    now,
                ),
            )
        return ResourceSet(rs_id, owner, client_id, description)

    def get_resource_set(self, rs_id: str, owner: str, client_id: str) -> ResourceSet | None:
        row = self.conn.execute(
            "SELECT * FROM resource_sets WHERE id = ? AND owner = ? AND client_id = ?",
            (rs_id, owner, client_id),
        ).fetchone()
        return _resource_set(row)

    def update_resource_set(
        self, rs_id: str, owner: str, client_id: str, description: dict[str, Any]
    ) -> bool:
        """Replaces the description completely; False when there is no such set for this RS."""
        with self.transaction() as conn:
            cursor = conn.execute(
                "UPDATE resource_sets SET name = ?, type = ?, description = ?, updated_at = ?"
                " WHERE id = ? AND owner = ? AND client_id = ?",
                (
                    description["name"],
                    description.get("type"),
                    json.dumps(description),
                    int(time.time()),
                    rs_id,
                    owner,
                    client_id,
                ),
            )
        return cursor.rowcount == 1

    def delete_resource_set(self, rs_id: str, owner: str, client_id: str) -> bool:
        with self.transaction() as conn:
            cursor = conn.execute(
                "DELETE FROM resource_sets WHERE id = ? AND owner = ? AND client_id = ?",
                (rs_id, owner, client_id),
            )
        return cursor.rowcount == 1

    def list_resource_sets(self, owner: str, client_id: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT id FROM resource_sets WHERE owner = ? AND client_id = ? ORDER BY created_at, id",
            (owner, client_id),
        ).fetchall()
        return [row["id"] for row in rows]

    def find_resource_set(self, rs_id: str) -> ResourceSet | None:
        """Any owner's set, for decisions about a ticket that names it."""
        row = self.conn.execute("SELECT * FROM resource_sets WHERE id = ?", (rs_id,)).fetchone()
        return _resource_set(row)

    # -- permission tickets ----------------------------------------------------------------------

    def create_ticket(
        self, owner: str, client_id: str, rs_id: str, scopes: list[str], lifetime: int
    ) -> str:
        ticket = secrets_at_rest.new_token(secrets_at_rest.TICKET_PREFIX)
        now = int(time.time())
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO tickets (digest, owner, client_id, resource_set_id, scopes,"
                " created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    secrets_at_rest.digest(ticket),
                    owner,
                    client_id,
                    rs_id,
                    json.dumps(scopes),
                    now,
                    now + lifetime,
                ),
            )
            # Expired tickets are kept a day to answer expired_ticket, then forgotten.
            conn.execute("DELETE FROM tickets WHERE expires_at < ?", (now - EXPIRED_MEMORY,))
            conn.execute("DELETE FROM seen_assertions WHERE expires_at < ?", (now,))
        return ticket

    def get_ticket(self, ticket: str) -> Ticket | None:
        row = self.conn.execute(
            "SELECT * FROM tickets WHERE digest = ?", (secrets_at_rest.digest(ticket),)
        ).fetchone()
        if row is None:
            return None
        return Ticket(
            digest=row["digest"],
            owner=row["owner"],
            client_id=row["client_id"],
            resource_set_id=row["resource_set_id"],
            scopes=tuple(json.loads(row["scopes"])),
            expires_at=row["expires_at"],
            requests=row["requests"],
            state=row["state"],
        )

    def count_ticket_request(self, ticket_digest: str) -> int:
        """Counts one authorization request made with an open ticket; returns the new count."""
        with self.transaction() as conn:
            row = conn.execute(
                "UPDATE tickets SET requests = requests + 1 WHERE digest = ? AND state = 'open'"
                " RETURNING requests",
                (ticket_digest,),
            ).fetchone()
        return int(row["requests"]) if row is not None else 0

    def close_ticket(self, ticket_digest: str, state: str) -> bool:
        """Consumes ('granted') or ends ('finished') an open ticket; only one caller can."""
        with self.transaction() as conn:
            cursor = conn.execute(
                "UPDATE tickets SET state = ? WHERE digest = ? AND state = 'open'",
                (state, ticket_digest),
            )
        return cursor.rowcount == 1

    # -- gathered claims -------------------------------------------------------------------------

    def record_claims(
        self, ticket_digest: str, requesting_party: str, claims: Iterable[Claim]
    ) -> None:
        with self.transaction() as conn:
            conn.executemany(
                "INSERT INTO gathered_claims (ticket_digest, requesting_party, type, name, issuer,"
                " value, client_id, gathered_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (ticket_digest, requesting_party, type, name) DO UPDATE"
                " SET value = excluded.value, issuer = excluded.issuer,"
                " client_id = excluded.client_id, gathered_at = excluded.gathered_at",
                [
                    (
                        ticket_digest,
                        requesting_party,
                        claim.type,
                        claim.name,
                        claim.issuer,
                        json.dumps(claim.value),
                        claim.client_id,
                        claim.gathered_at,
                    )
                    for claim in claims
                ],
            )

    def gathered_claims(self, ticket_digest: str, requesting_party: str) -> list[Claim]:
        rows = self.conn.execute(
            "SELECT * FROM gathered_claims WHERE ticket_digest = ? AND requesting_party = ?"
            " ORDER BY type, name, issuer",
            (ticket_digest, requesting_party),
        ).fetchall()
        return [
            Claim(
                type=row["type"],
                name=row["name"],
                value=json.loads(row["value"]),
                issuer=row["issuer"],
                client_id=row["client_id"],
                gathered_at=row["gathered_at"],
            )
            for row in rows
        ]

    def remember_assertion(
        self, assertion: Assertion, ticket_digest: str, requesting_party: str
    ) -> Literal["this ticket", "another requesting party", "one time use"] | None:
        """Remembers a verified assertion's ID until it expires; None when it may be used now, else
        the earlier use it collides with: with this ticket, by another requesting party, or at all
        when the assertion is for one time use."""
        with self.transaction() as conn:
            earlier = conn.execute(
                "SELECT ticket_digest, requesting_party FROM seen_assertions"
                " WHERE issuer = ? AND assertion_id = ? AND expires_at >= ?",
                (assertion.issuer, assertion.assertion_id, int(time.time())),
            ).fetchall()
            if any(row["ticket_digest"] == ticket_digest for row in earlier):
                return "this ticket"
            if earlier and assertion.one_time:
                return "one time use"
            if any(row["requesting_party"] != requesting_party for row in earlier):
                return "another requesting party"
            conn.execute(
                "INSERT OR REPLACE INTO seen_assertions (issuer, assertion_id, ticket_digest,"
                " requesting_party, expires_at) VALUES (?, ?, ?, ?, ?)",
                (
                    assertion.issuer,
                    assertion.assertion_id,
                    ticket_digest,
                    requesting_party,
                    assertion.expires_at,
                ),
            )
        return None

    # -- RPTs and their permissions --------------------------------------------------------------

    def create_rpt(self, aat: AccessToken, rpt: str, seed: str, lifetime: int) -> Rpt:
        """Stores a fresh RPT for the AAT and revokes the AAT's previous ones. RPTs a day past
        their expiry are forgotten, with their permissions."""
        now = int(time.time())
        record = Rpt(
            digest=secrets_at_rest.digest(rpt),
            seed=seed,
            aat_digest=aat.digest,
            client_id=aat.client_id,
            requesting_party=aat.owner,
            issued_at=now,
            expires_at=now + lifetime,
            revoked=False,
        )
        with self.transaction() as conn:
            conn.execute(
                "UPDATE rpts SET revoked = 1 WHERE aat_digest = ? AND revoked = 0", (aat.digest,)
            )
            conn.execute(
                "INSERT INTO rpts (digest, seed, aat_digest, client_id, requesting_party,"
                " issued_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    record.digest,
                    record.seed,
                    record.aat_digest,
                    record.client_id,
                    record.requesting_party,
                    record.issued_at,
                    record.expires_at,
                ),
            )
            conn.execute("DELETE FROM rpts WHERE expires_at < ?", (now - EXPIRED_MEMORY,))
        return record

    def get_rpt(self, rpt: str) -> Rpt | None:
        return self._rpt_where("digest = ?", (secrets_at_rest.digest(rpt),))

    def live_rpt_of(self, aat_digest: str) -> Rpt | None:
        return self._rpt_where(
            "aat_digest = ? AND revoked = 0 AND expires_at > ? ORDER BY issued_at DESC",
            (aat_digest, int(time.time())),
        )

    def _rpt_where(self, condition: str, parameters: tuple[Any, ...]) -> Rpt | None:
        row = self.conn.execute(
            f"SELECT * FROM rpts WHERE {condition} LIMIT 1",  # noqa: S608 - fixed fragments
            parameters,
        ).fetchone()
        if row is None:
            return None
        return Rpt(
            digest=row["digest"],
            seed=row["seed"],
            aat_digest=row["aat_digest"],
            client_id=row["client_id"],
            requesting_party=row["requesting_party"],
            issued_at=row["issued_at"],
            expires_at=row["expires_at"],
            revoked=bool(row["revoked"]),
        )

    def copy_permissions(self, from_digest: str, to: Rpt) -> None:
        """Carries the live permissions of one RPT into another (never past its expiry)."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO permissions (rpt_digest, resource_set_id, scopes, issued_at,"
                " expires_at) SELECT ?, resource_set_id, scopes, issued_at, MIN(expires_at, ?)"
                " FROM permissions WHERE rpt_digest = ? AND expires_at > ?",
                (to.digest, to.expires_at, from_digest, int(time.time())),
            )

    def add_permission(self, rpt: Rpt, rs_id: str, scopes: Iterable[str], lifetime: int) -> None:
        """One permission per resource set: a repeat grant merges scopes and renews expiry."""
        now = int(time.time())
        expires_at = min(now + lifetime, rpt.expires_at)
        with self.transaction() as conn:
            row = conn.execute(
                "SELECT scopes, expires_at FROM permissions"
                " WHERE rpt_digest = ? AND resource_set_id = ?",
                (rpt.digest, rs_id),
            ).fetchone()
            merged = list(scopes)
            if row is not None and row["expires_at"] > now:
                merged = list(dict.fromkeys([*json.loads(row["scopes"]), *merged]))
            conn.execute(
                "INSERT INTO permissions (rpt_digest, resource_set_id, scopes, issued_at,"
                " expires_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (rpt_digest, resource_set_id)"
                " DO UPDATE SET scopes = excluded.scopes, issued_at = excluded.issued_at,"
                " expires_at = excluded.expires_at",
                (rpt.digest, rs_id, json.dumps(merged), now, expires_at),
            )

    def permissions_for(self, rpt: Rpt, owner: str, client_id: str) -> list[Permission]:
        """The RPT's live permissions on sets of this owner registered by this resource server."""
        rows = self.conn.execute(
            "SELECT p.resource_set_id, p.scopes, p.expires_at FROM permissions AS p"
            " JOIN resource_sets AS r ON r.id = p.resource_set_id"
            " WHERE p.rpt_digest = ? AND r.owner = ? AND r.client_id = ? AND p.expires_at > ?"
            " ORDER BY p.issued_at, p.resource_set_id",
            (rpt.digest, owner, client_id, int(time.time())),
        ).fetchall()
        return [
            Permission(row["resource_set_id"], tuple(json.loads(row["scopes"])), row["expires_at"])
            for row in rows
        ]


def _resource_set(row: sqlite3.Row | None) -> ResourceSet | None:
    if row is None:
        return None
    return ResourceSet(row["id"], row["owner"], row["client_id"], json.loads(row["description"]))


def get_store() -> Store:
    """The request's store, opened on first use and closed on teardown."""
    if "store" not in g:
        g.store = Store.open(current_app.config["UMA"].database)
    store: Store = g.store
    return store


def _close_store(exc: BaseException | None) -> None:
    store = g.pop("store", None)
    if store is not None:
        store.close()


def init_app(app: Flask) -> None:
    app.teardown_appcontext(_close_store)
