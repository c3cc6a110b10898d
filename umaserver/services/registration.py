"""Resource set registration and permission registration: what a resource server, holding a PAT,
asks of this server. Every operation is scoped to the PAT's owner and resource server."""

from __future__ import annotations

from typing import Any

from .. import secrets_at_rest
from ..errors import InvalidResourceSetId, InvalidScope
from ..storage import Storage
from ..storage.records import AccessToken, ResourceSet, Ticket


def create_resource_set(
    storage: Storage, now: int, pat: AccessToken, description: dict[str, Any]
) -> ResourceSet:
    # "_id is an opaque random string, never a counter."
    resource_set = ResourceSet(secrets_at_rest.new_id(), pat.owner, pat.client_id, description)
    storage.add_resource_set(resource_set, now)
    return resource_set


def register_permission(
    storage: Storage,
    now: int,
    pat: AccessToken,
    rs_id: str,
    scopes: list[str],
    lifetime: int,
) -> str:
    """A ticket for one request of access to one of this owner's and resource server's sets;
    raises InvalidResourceSetId, InvalidScope."""
    resource_set = storage.get_resource_set(rs_id, pat.owner, pat.client_id)
    if resource_set is None:
        raise InvalidResourceSetId()
    registered = set(resource_set.description["scopes"])
    unknown = [scope for scope in scopes if scope not in registered]
    if unknown:
        raise InvalidScope(f"The scope {unknown[0]!r} is not registered on this resource set.")
    ticket = secrets_at_rest.new_token(secrets_at_rest.TICKET_PREFIX)
    storage.add_ticket(
        Ticket(
            digest=secrets_at_rest.digest(ticket),
            owner=pat.owner,
            client_id=pat.client_id,
            resource_set_id=resource_set.id,
            scopes=tuple(dict.fromkeys(scopes)),
            created_at=now,
            expires_at=now + lifetime,
        )
    )
    return ticket
