"""The permissions granted on an owner's resource set, as the owner's page shows them, and their
revocation: per (RPT, resource set), every scope at once (issue 12).

The page never holds an RPT, nor its digest (the store's key for it, the same on every owner's
page where that RPT has a permission). A permission is named by a reference: an HMAC (key from
`secret_key`) of the resource set's id and the RPT's digest. It names one permission on one set,
tells nothing about the RPT, and two owners cannot match their references to learn that one
client's RPT holds permissions on both their sets. Revoking finds the permission whose reference
matches among those on the set (compared in constant time), so a reference from another set
names nothing here.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

from .. import secrets_at_rest
from ..storage import Storage
from ..storage.records import Client
from . import access_history


def reference_key(secret_key: str) -> bytes:
    return secrets_at_rest.reissue_key(secret_key, "permission reference")


def reference(key: bytes, rs_id: str, rpt_digest: str) -> str:
    message = f"{rs_id}\n{rpt_digest}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Granted:
    """A live permission on a set: who holds it (the client of the RPT, and its requesting party:
    a username, or None for a client acting for itself), which scopes, until when."""

    reference: str
    client_id: str
    client_name: str
    party: str | None
    scopes: tuple[str, ...]
    issued_at: int
    expires_at: int


def granted_on(storage: Storage, rs_id: str, now: int, key: bytes) -> list[Granted]:
    """The live permissions on the set (unexpired, on an unrevoked, unexpired RPT), newest
    first."""
    found = []
    for rpt_digest, permission in storage.permissions_on(rs_id):
        if permission.expires_at <= now:
            continue
        rpt = storage.get_rpt(rpt_digest)
        if rpt is None or not rpt.is_live(now):
            continue
        client = storage.get_client(rpt.client_id)
        party = None
        if not rpt.requesting_party.startswith("client:"):
            party = storage.get_username(rpt.requesting_party) or rpt.requesting_party
        found.append(
            Granted(
                reference=reference(key, rs_id, rpt_digest),
                client_id=rpt.client_id,
                client_name=client.name if client is not None else rpt.client_id,
                party=party,
                scopes=permission.scopes,
                issued_at=permission.issued_at,
                expires_at=permission.expires_at,
            )
        )
    found.sort(key=lambda granted: granted.issued_at, reverse=True)
    return found


def revoke(
    storage: Storage, rs_id: str, unverified_reference: str, keys: Sequence[bytes], now: int
) -> bool:
    """Deletes the permission (every scope) on the set that the reference names under one of
    `keys` (those of every listed secret key), expired or not, and writes the revocation to the
    owner's history (at `now`) in the same transaction; False when none matches."""
    sent = unverified_reference.encode("utf-8")
    with storage.transaction():
        for rpt_digest, permission in storage.permissions_on(rs_id):
            mine = [reference(key, rs_id, rpt_digest).encode("utf-8") for key in keys]
            if any(hmac.compare_digest(sent, one) for one in mine):
                if not storage.delete_permission(rpt_digest, rs_id):
                    return False
                _record_revocation(storage, rs_id, rpt_digest, permission.scopes, now)
                return True
    return False


def _record_revocation(
    storage: Storage, rs_id: str, rpt_digest: str, scopes: tuple[str, ...], now: int
) -> None:
    resource_set = storage.find_resource_set(rs_id)
    rpt = storage.get_rpt(rpt_digest)
    if resource_set is None or rpt is None:
        return
    client = storage.get_client(rpt.client_id)
    access_history.record(
        storage,
        now=now,
        kind="revocation",
        outcome="revoked",
        client=client or Client(rpt.client_id, "", rpt.client_id, (), ()),
        party=rpt.requesting_party,
        pairs=[(resource_set, scopes, ())],
    )
