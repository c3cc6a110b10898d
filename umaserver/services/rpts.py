"""Requesting party tokens and the permissions they carry.

An AAT has at most one live RPT: a fresh one revokes the ones before. A grant adds a permission to
the RPT the client sent when it is live and this AAT's, else to the AAT's live RPT, which is made
again from its seed (the client may be using it, so it must stay live rather than be replaced
behind the client's back).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .. import secrets_at_rest
from ..config import Lifetimes
from ..storage import Storage
from ..storage.records import AccessToken, Permission, RequestedPermission, Rpt


def issue_rpt(
    storage: Storage, now: int, aat: AccessToken, rpt_key: bytes, lifetime: int
) -> tuple[str, Rpt]:
    """A fresh RPT for the AAT, its previous ones revoked: the token and its record."""
    rpt, seed = secrets_at_rest.new_reissuable_token(secrets_at_rest.RPT_PREFIX, rpt_key)
    record = Rpt(
        digest=secrets_at_rest.digest(rpt),
        seed=seed,
        aat_digest=aat.digest,
        client_id=aat.client_id,
        requesting_party=aat.owner,
        issued_at=now,
        expires_at=now + lifetime,
    )
    with storage.transaction():
        storage.revoke_rpts_of(aat.digest)
        storage.add_rpt(record)
    return rpt, record


def issue_client_rpt(
    storage: Storage, now: int, client_id: str, party: str, rpt_key: bytes, lifetimes: Lifetimes
) -> tuple[str, Rpt]:
    """A new RPT of the UMA 2.0 grant: the client's own (no AAT), for `party`."""
    rpt, seed = secrets_at_rest.new_reissuable_token(secrets_at_rest.RPT_PREFIX, rpt_key)
    record = Rpt(
        digest=secrets_at_rest.digest(rpt),
        seed=seed,
        aat_digest=None,
        client_id=client_id,
        requesting_party=party,
        issued_at=now,
        expires_at=now + lifetimes.rpt,
    )
    storage.add_rpt(record)
    return rpt, record


def add_permission(
    storage: Storage, now: int, rpt: Rpt, rs_id: str, scopes: Iterable[str], lifetime: int
) -> None:
    """One permission per resource set: a repeat grant merges the scopes of a live permission and
    renews its expiry (never past the RPT's)."""
    with storage.transaction():
        merged = list(scopes)
        earlier = storage.get_permission(rpt.digest, rs_id)
        if earlier is not None and earlier.expires_at > now:
            merged = list(dict.fromkeys([*earlier.scopes, *merged]))
        storage.put_permission(
            rpt.digest,
            Permission(rs_id, tuple(merged), now, min(now + lifetime, rpt.expires_at)),
        )


def grant(
    storage: Storage,
    now: int,
    aat: AccessToken,
    unverified_rpt: str,
    permissions: Sequence[RequestedPermission],
    lifetimes: Lifetimes,
    rpt_key: bytes,
) -> str:
    """Adds the permissions (one per pair of the ticket) to the RPT the client should use from now
    on, and returns that RPT."""
    sent = storage.get_rpt(secrets_at_rest.digest(unverified_rpt))
    if sent is not None and sent.is_live(now) and sent.aat_digest == aat.digest:
        add_permissions(storage, now, sent, permissions, lifetimes)
        return unverified_rpt
    live = storage.live_rpt_of(aat.digest, now)
    if live is not None:
        rpt = secrets_at_rest.reissue_token(secrets_at_rest.RPT_PREFIX, rpt_key, live.seed)
        if secrets_at_rest.matches_digest(rpt, live.digest):
            add_permissions(storage, now, live, permissions, lifetimes)
            return rpt
    # No live RPT, or one made under an earlier secret_key: a new one carrying its permissions.
    rpt, record = issue_rpt(storage, now, aat, rpt_key, lifetimes.rpt)
    if live is not None:
        for permission in storage.permissions_of(live.digest, now):
            storage.put_permission(
                record.digest,
                Permission(
                    permission.resource_set_id,
                    permission.scopes,
                    permission.issued_at,
                    min(permission.expires_at, record.expires_at),
                ),
            )
    add_permissions(storage, now, record, permissions, lifetimes)
    return rpt


def add_permissions(
    storage: Storage,
    now: int,
    rpt: Rpt,
    permissions: Sequence[RequestedPermission],
    lifetimes: Lifetimes,
) -> None:
    """`add_permission` for each pair of a ticket."""
    for pair in permissions:
        add_permission(storage, now, rpt, pair.resource_set_id, pair.scopes, lifetimes.permission)


def introspect_rpt_for_client(
    storage: Storage, now: int, unverified_rpt: str, client_id: str
) -> tuple[Rpt, list[Permission]] | None:
    """An RPT known here (live or not) with its live permissions on the sets this resource server
    registered, for any owner (Keycloak's introspection); None when the token is no RPT of ours."""
    rpt = storage.get_rpt(secrets_at_rest.digest(unverified_rpt))
    if rpt is None:
        return None
    return rpt, storage.permissions_for(rpt.digest, None, client_id, now)


def introspect_rpt(
    storage: Storage, now: int, unverified_rpt: str, owner: str, client_id: str
) -> tuple[Rpt, list[Permission]] | None:
    """An RPT known here (live or not) with its live permissions on this owner's and resource
    server's sets; None when the token is no RPT of ours."""
    rpt = storage.get_rpt(secrets_at_rest.digest(unverified_rpt))
    if rpt is None:
        return None
    return rpt, storage.permissions_for(rpt.digest, owner, client_id, now)
