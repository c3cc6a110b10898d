"""The data layer: every SQL statement of the server lives in this module.

One SQLite connection per request (on `flask.g`), `sqlite3.Row`, WAL and foreign keys on, and one
transaction helper for writers (`BEGIN IMMEDIATE`, so concurrent writers queue on the busy timeout
instead of failing on a lock upgrade). Handlers call named methods, never build queries.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import Flask, current_app, g

from . import secrets_at_rest

BUSY_TIMEOUT_MS = 10_000


SCHEMA = Path(__file__).resolve().parent.parent / "schema.sql"


def _schema() -> str:
    return SCHEMA.read_text(encoding="utf-8")


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
        """False when no such live token exists."""
        with self.transaction() as conn:
            cursor = conn.execute(
                "UPDATE access_tokens SET revoked = 1 WHERE digest = ? AND revoked = 0",
                (secrets_at_rest.digest(token),),
            )
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
