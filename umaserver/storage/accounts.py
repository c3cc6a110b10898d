"""Clients, users and access tokens."""

from __future__ import annotations

import json
from typing import Any

from . import rows as stored
from .handle import Handle
from .records import AccessToken, Client, InitialAccessToken, User


class Accounts(Handle):
    """Clients, users, PATs and AATs."""

    def add_client(self, client: Client, created_at: int) -> None:
        self._write(
            "INSERT INTO clients (client_id, secret_digest, name, redirect_uris,"
            " push_claim_types, metadata, registration_digest, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                client.client_id,
                client.secret_digest,
                client.name,
                json.dumps(list(client.redirect_uris)),
                json.dumps(list(client.push_claim_types)),
                json.dumps(client.metadata),
                client.registration_digest,
                created_at,
            ),
        )

    def get_client(self, client_id: str) -> Client | None:
        row = self._one("SELECT * FROM clients WHERE client_id = ?", (client_id,), lock="SHARE")
        return None if row is None else stored.client(row)

    def list_clients(self) -> list[Client]:
        rows = self._all("SELECT * FROM clients ORDER BY created_at, rowid", lock="SHARE")
        return [stored.client(row) for row in rows]

    def update_client(self, client: Client) -> bool:
        return (
            self._write(
                "UPDATE clients SET name = ?, redirect_uris = ?, push_claim_types = ?,"
                " metadata = ? WHERE client_id = ?",
                (
                    client.name,
                    json.dumps(list(client.redirect_uris)),
                    json.dumps(list(client.push_claim_types)),
                    json.dumps(client.metadata),
                    client.client_id,
                ),
            )
            == 1
        )

    def set_client_secret_digest(self, client_id: str, secret_digest: str) -> bool:
        return (
            self._write(
                "UPDATE clients SET secret_digest = ? WHERE client_id = ?",
                (secret_digest, client_id),
            )
            == 1
        )

    def set_registration_digest(self, client_id: str, digest: str | None) -> bool:
        return (
            self._write(
                "UPDATE clients SET registration_digest = ? WHERE client_id = ?",
                (digest, client_id),
            )
            == 1
        )

    def replace_registration_digest(self, client_id: str, expected: str, digest: str) -> bool:
        return (
            self._write(
                "UPDATE clients SET registration_digest = ?"
                " WHERE client_id = ? AND registration_digest = ?",
                (digest, client_id, expected),
            )
            == 1
        )

    def delete_client(self, client_id: str) -> bool:
        # Every table naming a client does so with ON DELETE CASCADE.
        return self._write("DELETE FROM clients WHERE client_id = ?", (client_id,)) == 1

    # -- initial access tokens -----------------------------------------------------------------

    def add_initial_access_token(self, token: InitialAccessToken) -> None:
        self._write(
            "INSERT INTO initial_access_tokens (digest, push_claim_types, created_at, expires_at)"
            " VALUES (?, ?, ?, ?)",
            (
                token.digest,
                json.dumps(list(token.push_claim_types)),
                token.created_at,
                token.expires_at,
            ),
        )

    def get_initial_access_token(self, digest: str) -> InitialAccessToken | None:
        row = self._one(
            "SELECT * FROM initial_access_tokens WHERE digest = ?", (digest,), lock="NO KEY UPDATE"
        )
        if row is None:
            return None
        return InitialAccessToken(
            digest=row["digest"],
            push_claim_types=tuple(json.loads(row["push_claim_types"])),
            created_at=row["created_at"],
            expires_at=row["expires_at"],
        )

    def delete_initial_access_tokens_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM initial_access_tokens WHERE digest IN"
            " (SELECT digest FROM initial_access_tokens WHERE expires_at < ? LIMIT ?)",
            (moment, limit),
        )

    # -- users ---------------------------------------------------------------------------------

    def add_user(self, user: User, created_at: int) -> bool:
        # ON CONFLICT instead of catching the error: on PostgreSQL an error would end a caller's
        # transaction.
        return (
            self._write(
                "INSERT INTO users (sub, username, password_hash, claims, created_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (user.sub, user.username, user.password_hash, json.dumps(user.claims), created_at),
            )
            == 1
        )

    def get_user_by_username(self, username: str) -> User | None:
        row = self._one("SELECT * FROM users WHERE username = ?", (username,), lock="SHARE")
        return None if row is None else stored.user(row)

    def get_username(self, sub: str) -> str | None:
        row = self._one("SELECT username FROM users WHERE sub = ?", (sub,), lock="SHARE")
        return None if row is None else str(row["username"])

    def usernames_containing(self, text: str) -> list[str]:
        names = self._column(
            "SELECT username FROM users WHERE instr(username, ?) > 0 ORDER BY username",
            (text,),
            lock="SHARE",
        )
        return [str(name) for name in names]

    def get_user(self, sub: str) -> User | None:
        row = self._one("SELECT * FROM users WHERE sub = ?", (sub,), lock="SHARE")
        return None if row is None else stored.user(row)

    def list_users(self) -> list[User]:
        rows = self._all("SELECT * FROM users ORDER BY username", lock="SHARE")
        return [stored.user(row) for row in rows]

    def set_password_hash(self, sub: str, password_hash: str | None) -> bool:
        return (
            self._write("UPDATE users SET password_hash = ? WHERE sub = ?", (password_hash, sub))
            == 1
        )

    def set_user_claims(self, sub: str, claims: dict[str, Any]) -> bool:
        return (
            self._write("UPDATE users SET claims = ? WHERE sub = ?", (json.dumps(claims), sub)) == 1
        )

    def delete_user(self, sub: str) -> bool:
        # The foreign keys take its sessions, tokens (their RPTs with them), codes and consents.
        return self._write("DELETE FROM users WHERE sub = ?", (sub,)) == 1

    # -- PATs and AATs -------------------------------------------------------------------------

    def add_access_token(self, token: AccessToken) -> None:
        self._write(
            "INSERT INTO access_tokens (digest, client_id, user_sub, scope, issued_at,"
            " expires_at, revoked, family) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                token.digest,
                token.client_id,
                token.user_sub,
                token.scope,
                token.issued_at,
                token.expires_at,
                token.revoked,
                token.family,
            ),
        )

    def has_access_token(self, user_sub: str, client_id: str, scope: str) -> bool:
        row = self._one(
            "SELECT 1 FROM access_tokens WHERE user_sub = ? AND client_id = ?"
            " AND instr(' ' || scope || ' ', ' ' || ? || ' ') > 0 AND revoked = FALSE LIMIT 1",
            (user_sub, client_id, scope),
        )
        return row is not None

    def get_access_token(self, digest: str) -> AccessToken | None:
        row = self._one(
            "SELECT t.*, u.username FROM access_tokens AS t"
            " LEFT JOIN users AS u ON u.sub = t.user_sub WHERE t.digest = ?",
            (digest,),
            lock="NO KEY UPDATE OF t",
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
            family=row["family"],
        )

    def revoke_access_token(self, digest: str) -> bool:
        return (
            self._write(
                "UPDATE access_tokens SET revoked = TRUE WHERE digest = ? AND revoked = FALSE",
                (digest,),
            )
            == 1
        )

    def delete_access_tokens_expired_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM access_tokens WHERE digest IN"
            " (SELECT t.digest FROM access_tokens AS t WHERE t.expires_at < ?"
            " AND NOT EXISTS (SELECT 1 FROM rpts AS r WHERE r.aat_digest = t.digest) LIMIT ?)",
            (moment, limit),
        )
