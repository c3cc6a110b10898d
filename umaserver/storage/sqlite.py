"""The SQLite implementation of the storage contract: every SQL statement of the server is here
or in the migrations beside it.

One connection per handle, `sqlite3.Row`, WAL and foreign keys on. Writers take the lock at the
start (`BEGIN IMMEDIATE`), so concurrent writers queue on the busy timeout instead of failing on a
lock upgrade.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..claims.model import Claim
from .records import (
    AccessToken,
    AssertionUse,
    Client,
    Permission,
    ResourceSet,
    Rpt,
    Ticket,
    User,
)

BUSY_TIMEOUT_MS = 10_000


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


class SQLiteStorage:
    """The contract's operations over one SQLite connection (see `contract.Storage`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    @classmethod
    def open(cls, path: Path) -> SQLiteStorage:
        return cls(connect(path))

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def _write(self, sql: str, parameters: Iterable[Any] = ()) -> int:
        with self.transaction():
            return self.conn.execute(sql, tuple(parameters)).rowcount

    def _one(self, sql: str, parameters: Iterable[Any] = ()) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.conn.execute(sql, tuple(parameters)).fetchone()
        return row

    # -- clients -------------------------------------------------------------------------------

    def add_client(self, client: Client, created_at: int) -> None:
        self._write(
            "INSERT INTO clients (client_id, secret_digest, name, redirect_uris,"
            " push_claim_types, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (
                client.client_id,
                client.secret_digest,
                client.name,
                json.dumps(list(client.redirect_uris)),
                json.dumps(list(client.push_claim_types)),
                created_at,
            ),
        )

    def get_client(self, client_id: str) -> Client | None:
        row = self._one("SELECT * FROM clients WHERE client_id = ?", (client_id,))
        if row is None:
            return None
        return Client(
            client_id=row["client_id"],
            secret_digest=row["secret_digest"],
            name=row["name"],
            redirect_uris=tuple(json.loads(row["redirect_uris"])),
            push_claim_types=tuple(json.loads(row["push_claim_types"])),
        )

    # -- users ---------------------------------------------------------------------------------

    def add_user(self, user: User, created_at: int) -> bool:
        try:
            self._write(
                "INSERT INTO users (sub, username, password_hash, claims, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (user.sub, user.username, user.password_hash, json.dumps(user.claims), created_at),
            )
        except sqlite3.IntegrityError:
            return False
        return True

    def get_user_by_username(self, username: str) -> User | None:
        row = self._one("SELECT * FROM users WHERE username = ?", (username,))
        if row is None:
            return None
        return User(row["sub"], row["username"], row["password_hash"], json.loads(row["claims"]))

    def get_username(self, sub: str) -> str | None:
        row = self._one("SELECT username FROM users WHERE sub = ?", (sub,))
        return None if row is None else str(row["username"])

    # -- PATs and AATs -------------------------------------------------------------------------

    def add_access_token(self, token: AccessToken) -> None:
        self._write(
            "INSERT INTO access_tokens (digest, client_id, user_sub, scope, issued_at,"
            " expires_at, revoked) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                token.digest,
                token.client_id,
                token.user_sub,
                token.scope,
                token.issued_at,
                token.expires_at,
                int(token.revoked),
            ),
        )

    def get_access_token(self, digest: str) -> AccessToken | None:
        row = self._one(
            "SELECT t.*, u.username FROM access_tokens AS t"
            " LEFT JOIN users AS u ON u.sub = t.user_sub WHERE t.digest = ?",
            (digest,),
        )
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

    def revoke_access_token(self, digest: str) -> bool:
        return (
            self._write(
                "UPDATE access_tokens SET revoked = 1 WHERE digest = ? AND revoked = 0", (digest,)
            )
            == 1
        )

    # -- resource sets -------------------------------------------------------------------------

    def add_resource_set(self, resource_set: ResourceSet, created_at: int) -> None:
        description = resource_set.description
        self._write(
            "INSERT INTO resource_sets (id, owner, client_id, name, type, description,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                resource_set.id,
                resource_set.owner,
                resource_set.client_id,
                description["name"],
                description.get("type"),
                json.dumps(description),
                created_at,
                created_at,
            ),
        )

    def get_resource_set(self, rs_id: str, owner: str, client_id: str) -> ResourceSet | None:
        return _resource_set(
            self._one(
                "SELECT * FROM resource_sets WHERE id = ? AND owner = ? AND client_id = ?",
                (rs_id, owner, client_id),
            )
        )

    def find_resource_set(self, rs_id: str) -> ResourceSet | None:
        return _resource_set(self._one("SELECT * FROM resource_sets WHERE id = ?", (rs_id,)))

    def replace_resource_set(
        self, rs_id: str, owner: str, client_id: str, description: dict[str, Any], updated_at: int
    ) -> bool:
        return (
            self._write(
                "UPDATE resource_sets SET name = ?, type = ?, description = ?, updated_at = ?"
                " WHERE id = ? AND owner = ? AND client_id = ?",
                (
                    description["name"],
                    description.get("type"),
                    json.dumps(description),
                    updated_at,
                    rs_id,
                    owner,
                    client_id,
                ),
            )
            == 1
        )

    def delete_resource_set(self, rs_id: str, owner: str, client_id: str) -> bool:
        # Tickets, their claims and permissions go with it (ON DELETE CASCADE).
        return (
            self._write(
                "DELETE FROM resource_sets WHERE id = ? AND owner = ? AND client_id = ?",
                (rs_id, owner, client_id),
            )
            == 1
        )

    def list_resource_sets(self, owner: str, client_id: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT id FROM resource_sets WHERE owner = ? AND client_id = ? ORDER BY created_at, id",
            (owner, client_id),
        ).fetchall()
        return [row["id"] for row in rows]

    # -- permission tickets --------------------------------------------------------------------

    def add_ticket(self, ticket: Ticket) -> None:
        self._write(
            "INSERT INTO tickets (digest, owner, client_id, resource_set_id, scopes,"
            " created_at, expires_at, requests, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                ticket.digest,
                ticket.owner,
                ticket.client_id,
                ticket.resource_set_id,
                json.dumps(list(ticket.scopes)),
                ticket.created_at,
                ticket.expires_at,
                ticket.requests,
                ticket.state,
            ),
        )

    def get_ticket(self, digest: str) -> Ticket | None:
        row = self._one("SELECT * FROM tickets WHERE digest = ?", (digest,))
        if row is None:
            return None
        return Ticket(
            digest=row["digest"],
            owner=row["owner"],
            client_id=row["client_id"],
            resource_set_id=row["resource_set_id"],
            scopes=tuple(json.loads(row["scopes"])),
            created_at=row["created_at"],
            expires_at=row["expires_at"],
            requests=row["requests"],
            state=row["state"],
        )

    def count_ticket_request(self, digest: str) -> int:
        with self.transaction():
            row = self._one(
                "UPDATE tickets SET requests = requests + 1 WHERE digest = ? AND state = 'open'"
                " RETURNING requests",
                (digest,),
            )
        return int(row["requests"]) if row is not None else 0

    def consume_ticket(self, digest: str) -> bool:
        return self._close_ticket(digest, "granted")

    def finish_ticket(self, digest: str) -> bool:
        return self._close_ticket(digest, "finished")

    def _close_ticket(self, digest: str, state: str) -> bool:
        return (
            self._write(
                "UPDATE tickets SET state = ? WHERE digest = ? AND state = 'open'", (state, digest)
            )
            == 1
        )

    def delete_tickets_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM tickets WHERE digest IN"
            " (SELECT digest FROM tickets WHERE expires_at < ? LIMIT ?)",
            (moment, limit),
        )

    # -- gathered claims -----------------------------------------------------------------------

    def record_claims(
        self, ticket_digest: str, requesting_party: str, claims: Iterable[Claim]
    ) -> None:
        with self.transaction():
            self.conn.executemany(
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

    # -- assertion uses (replay) ---------------------------------------------------------------

    def record_assertion_use(self, use: AssertionUse, now: int) -> list[AssertionUse]:
        with self.transaction():
            rows = self.conn.execute(
                "SELECT * FROM seen_assertions WHERE issuer = ? AND assertion_id = ?"
                " AND expires_at >= ?",
                (use.issuer, use.assertion_id, now),
            ).fetchall()
            # The first use of an assertion with a ticket is the one remembered.
            self.conn.execute(
                "INSERT OR IGNORE INTO seen_assertions (issuer, assertion_id, ticket_digest,"
                " requesting_party, expires_at) VALUES (?, ?, ?, ?, ?)",
                (
                    use.issuer,
                    use.assertion_id,
                    use.ticket_digest,
                    use.requesting_party,
                    use.expires_at,
                ),
            )
        return [
            AssertionUse(
                row["issuer"],
                row["assertion_id"],
                row["ticket_digest"],
                row["requesting_party"],
                row["expires_at"],
            )
            for row in rows
        ]

    def delete_assertion_uses_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM seen_assertions WHERE rowid IN"
            " (SELECT rowid FROM seen_assertions WHERE expires_at < ? LIMIT ?)",
            (moment, limit),
        )

    # -- RPTs ----------------------------------------------------------------------------------

    def add_rpt(self, rpt: Rpt) -> None:
        self._write(
            "INSERT INTO rpts (digest, seed, aat_digest, client_id, requesting_party,"
            " issued_at, expires_at, revoked) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rpt.digest,
                rpt.seed,
                rpt.aat_digest,
                rpt.client_id,
                rpt.requesting_party,
                rpt.issued_at,
                rpt.expires_at,
                int(rpt.revoked),
            ),
        )

    def get_rpt(self, digest: str) -> Rpt | None:
        return _rpt(self._one("SELECT * FROM rpts WHERE digest = ?", (digest,)))

    def live_rpt_of(self, aat_digest: str, now: int) -> Rpt | None:
        return _rpt(
            self._one(
                "SELECT * FROM rpts WHERE aat_digest = ? AND revoked = 0 AND expires_at > ?"
                " ORDER BY issued_at DESC LIMIT 1",
                (aat_digest, now),
            )
        )

    def revoke_rpts_of(self, aat_digest: str) -> int:
        return self._write(
            "UPDATE rpts SET revoked = 1 WHERE aat_digest = ? AND revoked = 0", (aat_digest,)
        )

    def delete_rpts_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM rpts WHERE digest IN"
            " (SELECT digest FROM rpts WHERE expires_at < ? LIMIT ?)",
            (moment, limit),
        )

    # -- permissions ---------------------------------------------------------------------------

    def get_permission(self, rpt_digest: str, rs_id: str) -> Permission | None:
        row = self._one(
            "SELECT * FROM permissions WHERE rpt_digest = ? AND resource_set_id = ?",
            (rpt_digest, rs_id),
        )
        return None if row is None else _permission(row)

    def put_permission(self, rpt_digest: str, permission: Permission) -> None:
        self._write(
            "INSERT INTO permissions (rpt_digest, resource_set_id, scopes, issued_at,"
            " expires_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (rpt_digest, resource_set_id)"
            " DO UPDATE SET scopes = excluded.scopes, issued_at = excluded.issued_at,"
            " expires_at = excluded.expires_at",
            (
                rpt_digest,
                permission.resource_set_id,
                json.dumps(list(permission.scopes)),
                permission.issued_at,
                permission.expires_at,
            ),
        )

    def permissions_of(self, rpt_digest: str, now: int) -> list[Permission]:
        rows = self.conn.execute(
            "SELECT * FROM permissions WHERE rpt_digest = ? AND expires_at > ?"
            " ORDER BY issued_at, resource_set_id",
            (rpt_digest, now),
        ).fetchall()
        return [_permission(row) for row in rows]

    def permissions_for(
        self, rpt_digest: str, owner: str, client_id: str, now: int
    ) -> list[Permission]:
        rows = self.conn.execute(
            "SELECT p.* FROM permissions AS p JOIN resource_sets AS r ON r.id = p.resource_set_id"
            " WHERE p.rpt_digest = ? AND r.owner = ? AND r.client_id = ? AND p.expires_at > ?"
            " ORDER BY p.issued_at, p.resource_set_id",
            (rpt_digest, owner, client_id, now),
        ).fetchall()
        return [_permission(row) for row in rows]


def _resource_set(row: sqlite3.Row | None) -> ResourceSet | None:
    if row is None:
        return None
    return ResourceSet(row["id"], row["owner"], row["client_id"], json.loads(row["description"]))


def _rpt(row: sqlite3.Row | None) -> Rpt | None:
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


def _permission(row: sqlite3.Row) -> Permission:
    return Permission(
        row["resource_set_id"],
        tuple(json.loads(row["scopes"])),
        row["issued_at"],
        row["expires_at"],
    )
