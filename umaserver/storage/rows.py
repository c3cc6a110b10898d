"""Records from stored rows, for both databases: a row of SQLite (`sqlite3.Row`) and of
PostgreSQL (psycopg's dict rows) is read by column name alike, and both keep lists and objects as
JSON text (flags are SQLite's 0 and 1, PostgreSQL's booleans: read them with `bool`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Protocol

from .people_records import Share
from .records import Claim, Client, Permission, ResourceSet, StoredOwnerRule, Ticket, User


class Row(Protocol):
    def __getitem__(self, column: str) -> Any: ...

    def keys(self) -> Iterable[str]: ...


def client(row: Row) -> Client:
    return Client(
        client_id=row["client_id"],
        secret_digest=row["secret_digest"],
        name=row["name"],
        redirect_uris=tuple(json.loads(row["redirect_uris"])),
        push_claim_types=tuple(json.loads(row["push_claim_types"])),
        metadata=json.loads(row["metadata"]),
        registration_digest=row["registration_digest"],
        created_at=row["created_at"],
    )


def user(row: Row) -> User:
    return User(row["sub"], row["username"], row["password_hash"], json.loads(row["claims"]))


def owner_rule(row: Row) -> StoredOwnerRule:
    return StoredOwnerRule(
        id=str(row["id"]),
        owner=str(row["owner"]),
        username=str(row["username"]),
        rule=json.loads(row["rule"]),
        created_at=int(row["created_at"]),
        updated_at=int(row["updated_at"]),
    )


def share(row: Row) -> Share:
    kind = str(row["kind"])
    assert kind in ("user", "email")
    return Share(
        rule_id=str(row["rule_id"]),
        owner=str(row["owner"]),
        resource_set_id=str(row["resource_set_id"]),
        recipient=str(row["recipient"]),
        kind="user" if kind == "user" else "email",
        scopes=tuple(json.loads(row["scopes"])),
        until=None if row["until"] is None else int(row["until"]),
        created_at=int(row["created_at"]),
    )


def resource_set(row: Row | None) -> ResourceSet | None:
    if row is None:
        return None
    return ResourceSet(row["id"], row["owner"], row["client_id"], json.loads(row["description"]))


def ticket(row: Row | None) -> Ticket | None:
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
        requesting_party=row["requesting_party"],
        asked=bool(row["asked"]),
    )


def permission(row: Row) -> Permission:
    return Permission(
        row["resource_set_id"],
        tuple(json.loads(row["scopes"])),
        row["issued_at"],
        row["expires_at"],
    )


def claim(row: Row) -> Claim:
    """A gathered claim, or a PCT's (each table has the claim's columns)."""
    return Claim(
        type=row["type"],
        name=row["name"],
        value=json.loads(row["value"]),
        issuer=row["issuer"],
        client_id=row["client_id"],
        gathered_at=row["gathered_at"],
        subject=row["subject"],
        expires_at=row["expires_at"],
    )
