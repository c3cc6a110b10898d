"""Requesting party tokens and the permissions they carry.

An AAT has at most one live RPT: a fresh one revokes the ones before. A grant adds a permission to
the RPT the client sent when it is live and this AAT's, else to the AAT's live RPT, which is made
again from its seed (the client may be using it, so it must stay live rather than be replaced
behind the client's back). Issuing and granting hold the AAT first (`hold_aat`), so this holds
under any concurrency, on several processes too: every grant lands in the live RPT.

With `[tokens] rpt_format = "jwt"` (a `JwtRpts` given), an RPT is a JWS signed with the current
signing key (`signing_keys`), carrying its permissions in Keycloak's form. A signed token cannot
gain permissions: each grant mints a new JWT holding every live permission of that requesting party
and client (`mint_jwt`), and the ones before stay valid until they expire or are revoked (a
resource server may hold them). Each is stored as an opaque RPT is (its digest, its permissions;
its jti as its seed, never made again from it), so introspection and revocation work alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .. import events, secrets_at_rest
from ..config import Lifetimes
from ..errors import InvalidToken
from ..storage import Storage
from ..storage.records import AccessToken, Permission, RequestedPermission, ResourceSet, Rpt
from . import signing_keys
from .signing_keys import JwtRpts


def issue_rpt(
    storage: Storage,
    now: int,
    aat: AccessToken,
    rpt_key: bytes,
    lifetime: int,
    *,
    jwt: JwtRpts | None = None,
    issuer: str = "",
) -> tuple[str, Rpt]:
    """A fresh RPT for the AAT, its previous ones revoked: the token and its record (a JWT with no
    permissions, with `jwt`)."""
    if jwt is not None:
        with storage.transaction():
            hold_aat(storage, aat, now)
            storage.revoke_rpts_of(aat.digest)
            return mint_jwt(
                storage,
                now,
                jwt,
                issuer=issuer,
                client_id=aat.client_id,
                party=aat.owner,
                aat_digest=aat.digest,
                granted=(),
                lifetimes=Lifetimes(rpt=lifetime),
                carry=False,
            )
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
        hold_aat(storage, aat, now)
        storage.revoke_rpts_of(aat.digest)
        storage.add_rpt(record)
        events.issued("rpt")
    return rpt, record


def hold_aat(storage: Storage, aat: AccessToken, now: int) -> None:
    """Holds the AAT until the caller's transaction ends, so that the transactions that issue or
    grant under one AAT take turns: each finds the live RPT the one before it left (or made), and
    an AAT has one live RPT under any concurrency. On PostgreSQL the read locks the AAT's row
    (`get_access_token` in a transaction); SQLite's transaction holds the whole database. Taken
    before any RPT of the AAT is read, as revocations do (the AAT, then its RPTs).

    InvalidToken (401, nothing written) when the AAT, live when the request was authenticated, was
    revoked or expired since: a revocation that commits in between would otherwise leave an RPT
    behind it."""
    held = storage.get_access_token(aat.digest)
    if held is None or held.revoked or held.expires_at <= now:
        raise InvalidToken()


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
    events.issued("rpt")
    return rpt, record


def permission_end(now: int, lifetime: int, ends_at: int | None) -> int:
    """When a permission granted now ends: after `lifetime`, or sooner when the rules that granted
    it end (`RequestedPermission.ends_at`: a share's last day)."""
    return now + lifetime if ends_at is None else min(now + lifetime, ends_at)


def add_permission(
    storage: Storage,
    now: int,
    rpt: Rpt,
    rs_id: str,
    scopes: Iterable[str],
    lifetime: int,
    ends_at: int | None = None,
) -> None:
    """One permission per resource set: a repeat grant merges the scopes of a live permission and
    renews its expiry (never past the RPT's, nor past `ends_at`, when the rules that granted it
    end)."""
    with storage.transaction():
        merged = list(scopes)
        earlier = storage.get_permission(rpt.digest, rs_id)
        if earlier is not None and earlier.expires_at > now:
            merged = list(dict.fromkeys([*earlier.scopes, *merged]))
        storage.put_permission(
            rpt.digest,
            Permission(
                rs_id,
                tuple(merged),
                now,
                min(permission_end(now, lifetime, ends_at), rpt.expires_at),
            ),
        )


def grant(
    storage: Storage,
    now: int,
    aat: AccessToken,
    unverified_rpt: str,
    permissions: Sequence[RequestedPermission],
    lifetimes: Lifetimes,
    rpt_keys: Sequence[bytes],
    *,
    jwt: JwtRpts | None = None,
    issuer: str = "",
) -> str:
    """Adds the permissions (one per pair of the ticket) to the RPT the client should use from now
    on, and returns that RPT. With `jwt`, that is a new JWT with every live permission of the AAT's
    party and client (the RPT sent among them when it is one of theirs). Called inside the
    caller's transaction (the authorization request's), which holds the AAT (`hold_aat`)."""
    hold_aat(storage, aat, now)
    if jwt is not None:
        rpt, _ = mint_jwt(
            storage,
            now,
            jwt,
            issuer=issuer,
            client_id=aat.client_id,
            party=aat.owner,
            aat_digest=aat.digest,
            granted=permissions,
            lifetimes=lifetimes,
        )
        return rpt
    sent = storage.get_rpt(secrets_at_rest.digest(unverified_rpt))
    if (
        sent is not None
        and sent.is_live(now)
        and sent.aat_digest == aat.digest
        and vouched(sent, rpt_keys)
    ):
        add_permissions(storage, now, sent, permissions, lifetimes)
        return unverified_rpt
    live = storage.live_rpt_of(aat.digest, now)
    if live is not None:
        made = secrets_at_rest.reissued(
            secrets_at_rest.RPT_PREFIX, rpt_keys, live.seed, live.digest
        )
        if made is not None:
            add_permissions(storage, now, live, permissions, lifetimes)
            return made
    # No live RPT, or one whose secret key is no longer listed (it ended with the key, and its
    # permissions with it): a new one.
    rpt, record = issue_rpt(storage, now, aat, rpt_keys[0], lifetimes.rpt)
    add_permissions(storage, now, record, permissions, lifetimes)
    return rpt


def vouched(rpt: Rpt, rpt_keys: Sequence[bytes]) -> bool:
    """Whether a listed secret key still makes this opaque RPT from its seed: one made under a
    key since removed from `secret_keys` no longer counts. (A JWT RPT's seed is its jti: its
    signature vouches for it.)"""
    made = secrets_at_rest.reissued(secrets_at_rest.RPT_PREFIX, rpt_keys, rpt.seed, rpt.digest)
    return made is not None


def add_permissions(
    storage: Storage,
    now: int,
    rpt: Rpt,
    permissions: Sequence[RequestedPermission],
    lifetimes: Lifetimes,
) -> None:
    """`add_permission` for each pair of a ticket."""
    for pair in permissions:
        add_permission(
            storage,
            now,
            rpt,
            pair.resource_set_id,
            pair.scopes,
            lifetimes.permission,
            pair.ends_at,
        )


def mint_jwt(
    storage: Storage,
    now: int,
    settings: JwtRpts,
    *,
    issuer: str,
    client_id: str,
    party: str,
    aat_digest: str | None,
    granted: Sequence[RequestedPermission],
    lifetimes: Lifetimes,
    carry: bool = True,
) -> tuple[str, Rpt]:
    """A new JWT RPT of `client_id` (the acting client, `azp`) for `party`, holding the `granted`
    pairs and, with `carry`, every live permission of that party and client's live RPTs: the token
    and its record, stored with its permissions.

    A granted pair's permission lives `[lifetimes] permission` from now (its scopes merged with a
    carried permission on the same set); a carried one keeps its expiry. The token expires with
    the first of them to expire (at most `[lifetimes] rpt` from now), so that a resource server
    that reads only `exp` never honours an expired permission. `iss` is `issuer` (the document
    the client found the token endpoint through); `aud` the client id of each resource server
    that registered a set it covers (a list when there are several), `sub` the person when the
    party is one.
    """
    held: dict[str, Permission] = {}
    if carry:
        for found in storage.permissions_of_party(client_id, party, now):
            earlier = held.get(found.resource_set_id)
            if earlier is not None:
                found = Permission(
                    found.resource_set_id,
                    tuple(dict.fromkeys([*earlier.scopes, *found.scopes])),
                    min(earlier.issued_at, found.issued_at),
                    max(earlier.expires_at, found.expires_at),
                )
            held[found.resource_set_id] = found
    for pair in granted:
        earlier = held.get(pair.resource_set_id)
        scopes = [*(earlier.scopes if earlier is not None else ()), *pair.scopes]
        held[pair.resource_set_id] = Permission(
            pair.resource_set_id,
            tuple(dict.fromkeys(scopes)),
            now,
            permission_end(now, lifetimes.permission, pair.ends_at),
        )
    sets: list[tuple[ResourceSet, Permission]] = []
    for permission in held.values():
        found_set = storage.find_resource_set(permission.resource_set_id)
        if found_set is not None:  # a set deleted since: its permissions went with it
            sets.append((found_set, permission))
    expires_at = min([now + lifetimes.rpt, *(p.expires_at for _, p in sets)])
    jti = secrets_at_rest.new_id()
    audiences = list(dict.fromkeys(rs.client_id for rs, _ in sets))
    claims: dict[str, Any] = {"iss": issuer}
    if audiences:
        claims["aud"] = audiences[0] if len(audiences) == 1 else audiences
    claims["azp"] = client_id
    if not party.startswith("client:"):
        claims["sub"] = party
    claims.update(
        {
            "exp": expires_at,
            "iat": now,
            "jti": jti,
            "typ": "Bearer",
            "authorization": {
                "permissions": [
                    {"rsid": rs.id, "rsname": rs.label, "scopes": list(p.scopes)} for rs, p in sets
                ]
            },
        }
    )
    token = signing_keys.sign(storage, settings, claims, now)
    record = Rpt(
        digest=secrets_at_rest.digest(token),
        seed=jti,
        aat_digest=aat_digest,
        client_id=client_id,
        requesting_party=party,
        issued_at=now,
        expires_at=expires_at,
    )
    with storage.transaction():
        storage.add_rpt(record)
        events.issued("rpt")
        for rs, permission in sets:
            storage.put_permission(
                record.digest,
                Permission(
                    rs.id,
                    permission.scopes,
                    permission.issued_at,
                    min(permission.expires_at, expires_at),
                ),
            )
    return token, record


def introspect_rpt_for_client(
    storage: Storage, now: int, unverified_rpt: str, client_id: str, rpt_keys: Sequence[bytes]
) -> tuple[Rpt, list[Permission]] | None:
    """An RPT known here (live or not) with its live permissions on the sets this resource server
    registered, for any owner (Keycloak's introspection); None when the token is no RPT of ours."""
    rpt = _known_rpt(storage, unverified_rpt, rpt_keys)
    if rpt is None:
        return None
    return rpt, storage.permissions_for(rpt.digest, None, client_id, now)


def introspect_rpt(
    storage: Storage,
    now: int,
    unverified_rpt: str,
    owner: str,
    client_id: str,
    rpt_keys: Sequence[bytes],
) -> tuple[Rpt, list[Permission]] | None:
    """An RPT known here (live or not) with its live permissions on this owner's and resource
    server's sets; None when the token is no RPT of ours."""
    rpt = _known_rpt(storage, unverified_rpt, rpt_keys)
    if rpt is None:
        return None
    return rpt, storage.permissions_for(rpt.digest, owner, client_id, now)


def _known_rpt(storage: Storage, unverified_rpt: str, rpt_keys: Sequence[bytes]) -> Rpt | None:
    """The RPT stored under this token's digest; a JWT RPT must also verify with a key still
    published (a retired key's tokens are no longer ours), an opaque one be made from its seed
    by a listed secret key (`vouched`)."""
    if signing_keys.looks_like_jws(unverified_rpt):
        if signing_keys.verify(storage, unverified_rpt) is None:
            return None
        return storage.get_rpt(secrets_at_rest.digest(unverified_rpt))
    found = storage.get_rpt(secrets_at_rest.digest(unverified_rpt))
    return found if found is not None and vouched(found, rpt_keys) else None
