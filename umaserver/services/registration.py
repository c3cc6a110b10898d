"""Resource set registration and permission registration: what a resource server, holding a PAT,
asks of this server. Every operation is scoped to the PAT's owner and resource server."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import Any

from .. import events, secrets_at_rest
from ..errors import APIError, InvalidRequest, InvalidResourceSetId, InvalidScope, echo
from ..fetching.queue import queue_resource_set, resource_set_uris
from ..storage import Storage
from ..storage.records import (
    AccessToken,
    RequestedPermission,
    ResourceSet,
    ResourceSetQuery,
    Ticket,
    User,
)

# The scope of a PAT (UMA 1.0's protection API token).
PROTECTION_SCOPE = "uma_protection"


def create_resource_set(
    storage: Storage, now: int, pat: AccessToken, description: dict[str, Any]
) -> ResourceSet:
    # "_id is an opaque random string, never a counter."
    resource_set = ResourceSet(secrets_at_rest.new_id(), pat.owner, pat.client_id, description)
    # Without URIs to queue it is one statement, which needs no transaction of its own.
    with storage.transaction() if resource_set_uris(description) else nullcontext():
        storage.add_resource_set(resource_set, now)
        # Its scope descriptions and icon are fetched in the background, never here.
        queue_resource_set(storage, resource_set.id, description, now)
    events.resource_set_changed("registered", **_whose(pat, resource_set.id))
    return resource_set


def _whose(pat: AccessToken, rs_id: str) -> dict[str, str]:
    return {"owner": pat.owner_name, "resource_set": rs_id, "client": pat.client_id}


def replace_resource_set(
    storage: Storage, now: int, pat: AccessToken, rs_id: str, description: dict[str, Any]
) -> bool:
    """Replaces the description of one of this owner's and resource server's sets; False when
    there is none. Its scope descriptions and icon are queued for the fetch job. A scope the update
    removes is taken out of the open tickets that ask for it (a ticket left with a pair of no
    scope is finished) and out of the permissions on the set (a permission left with none is
    deleted), in the same transaction."""
    with storage.transaction():
        existing = storage.get_resource_set(rs_id, pat.owner, pat.client_id)
        if existing is None:
            return False
        storage.replace_resource_set(rs_id, pat.owner, pat.client_id, description, now)
        events.resource_set_changed("updated", **_whose(pat, rs_id))
        queue_resource_set(storage, rs_id, description, now)
        kept = set(description["scopes"])
        if set(existing.scopes) <= kept:
            return True
        for ticket in storage.open_tickets_for(rs_id):
            narrowed = tuple(
                replace(pair, scopes=tuple(s for s in pair.scopes if s in kept))
                if pair.resource_set_id == rs_id
                else pair
                for pair in ticket.permissions
            )
            if any(not pair.scopes for pair in narrowed):
                storage.finish_ticket(ticket.digest)
            elif narrowed != ticket.permissions:
                storage.set_ticket_permissions(ticket.digest, narrowed)
        for rpt_digest, permission in storage.permissions_on(rs_id):
            scopes = tuple(scope for scope in permission.scopes if scope in kept)
            if not scopes:
                storage.delete_permission(rpt_digest, rs_id)
            elif scopes != permission.scopes:
                storage.put_permission(rpt_digest, replace(permission, scopes=scopes))
    return True


def delete_resource_set(storage: Storage, pat: AccessToken, rs_id: str) -> bool:
    """Deletes one of this owner's and resource server's sets, with the permissions on it; the
    open tickets that ask for it, in any of their pairs, end. False when there is none."""
    deleted = storage.delete_resource_set(rs_id, pat.owner, pat.client_id)
    if deleted:
        events.resource_set_changed("deleted", **_whose(pat, rs_id))
    return deleted


def list_resource_sets(
    storage: Storage,
    pat: AccessToken,
    query: ResourceSetQuery,
    owner_name: str | None = None,
    *,
    every_owner: bool = False,
) -> list[str]:
    """The ids of the sets of this PAT's owner at its resource server that pass `query`; with
    `every_owner` (Keycloak's resource server acting for itself), of every owner there. Keycloak's
    `owner` filter, `owner_name`, keeps those of one owner: a username, or the resource server's
    own client id for its own sets (or a user's sub, as Keycloak's owner id)."""
    owner = None if every_owner else pat.owner
    if owner_name is not None:
        named = _owner_named(storage, pat, owner_name)
        if named is None or (owner is not None and named != owner):
            return []
        owner = named
    return storage.list_resource_sets(owner, pat.client_id, query)


def _owner_named(storage: Storage, pat: AccessToken, name: str) -> str | None:
    if name == pat.client_id:
        return f"client:{pat.client_id}"
    user = _user_named(storage, name)
    return user.sub if user is not None else None


def _user_named(storage: Storage, name: str) -> User | None:
    # A username, or (Keycloak's owner `id`) a user's sub.
    return storage.get_user_by_username(name) or storage.get_user(name)


def registering_for(storage: Storage, pat: AccessToken, owner_name: str) -> AccessToken:
    """The PAT to register a set with when Keycloak's `owner` names `owner_name` (a username, or
    the resource server's own client id): the PAT itself when it is that owner's; a resource
    server acting for itself may register for a user who has given it a PAT (the consent UMA
    rests on: a PAT live or expired, not revoked, or the user's standing consent to the scope),
    and the set is then that user's. Raises InvalidRequest naming why not."""
    if _owner_named(storage, pat, owner_name) == pat.owner:
        return pat
    if pat.user_sub is not None:
        raise InvalidRequest(
            "owner: a set registered with a person's PAT is that person's; register for another"
            " owner with that owner's PAT, or with the resource server's own token."
        )
    user = _user_named(storage, owner_name)
    if user is None or not (
        storage.has_access_token(user.sub, pat.client_id, PROTECTION_SCOPE)
        or storage.has_consent(user.sub, pat.client_id, PROTECTION_SCOPE)
    ):
        raise InvalidRequest(
            f"owner: {echo(owner_name)} is not a user who has given this resource server a PAT"
            " (a token of scope uma_protection), so it cannot register sets for them."
        )
    return replace(pat, user_sub=user.sub, username=user.username)


def find_registered_set(
    storage: Storage, pat: AccessToken, rs_id: str, *, every_owner: bool = False
) -> tuple[ResourceSet, AccessToken] | None:
    """One of the sets `list_resource_sets` would list (by id), with the PAT to change it with:
    the set's owner's, as `registering_for` gave it (the resource server acting for itself
    changes the sets it registered for users); None when there is none."""
    if not every_owner:
        found = storage.get_resource_set(rs_id, pat.owner, pat.client_id)
        return None if found is None else (found, pat)
    found = storage.find_resource_set(rs_id)
    if found is None or found.client_id != pat.client_id:
        return None
    if found.owner == pat.owner:
        return found, pat
    # The resource server registered it for a user who had given it a PAT.
    return found, replace(pat, user_sub=found.owner, username=storage.get_username(found.owner))


def register_permission(
    storage: Storage,
    now: int,
    pat: AccessToken,
    requested: Sequence[tuple[str, Sequence[str]]],
    lifetime: int,
    *,
    unknown_set: type[APIError] = InvalidResourceSetId,
    requesting_party: str | None = None,
    every_owner: bool = False,
) -> str:
    """A ticket for one request of access to one or more of this owner's and resource server's
    sets: (set id, scopes) pairs, a set named twice asking for the scopes of both. Raises
    `unknown_set` (1.0's InvalidResourceSetId, 2.0's InvalidResourceId) or InvalidScope. With
    `every_owner` (Keycloak's resource server acting for itself) the sets may be of any owner at
    this resource server, one owner for the whole ticket: the ticket is that owner's."""
    wanted: dict[str, list[str]] = {}
    for rs_id, scopes in requested:
        wanted.setdefault(rs_id, []).extend(scopes)
    pairs = []
    owner = pat.owner
    for index, (rs_id, scopes) in enumerate(wanted.items()):
        if every_owner:
            found = storage.find_resource_set(rs_id)
            resource_set = found if found is not None and found.client_id == pat.client_id else None
        else:
            resource_set = storage.get_resource_set(rs_id, pat.owner, pat.client_id)
        if resource_set is None:
            raise unknown_set()
        if index == 0:
            owner = resource_set.owner
        elif resource_set.owner != owner:
            raise InvalidRequest(
                "A ticket asks for the sets of one owner: these sets belong to several."
            )
        unknown = [scope for scope in scopes if scope not in resource_set.scopes]
        if unknown:
            raise InvalidScope(
                f"The scope {echo(unknown[0])} is not registered on the resource set"
                f" {echo(resource_set.id)}."
            )
        pairs.append(RequestedPermission(resource_set.id, tuple(dict.fromkeys(scopes))))
    ticket = secrets_at_rest.new_token(secrets_at_rest.TICKET_PREFIX)
    storage.add_ticket(
        Ticket.asking(
            tuple(pairs),
            digest=secrets_at_rest.digest(ticket),
            owner=owner,
            client_id=pat.client_id,
            created_at=now,
            expires_at=now + lifetime,
            requesting_party=requesting_party,
        )
    )
    events.issued("ticket")
    return ticket
