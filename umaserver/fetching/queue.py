"""Adding URIs to the fetch queue: the rows of `fetched_uris` (see the storage contract's
`FetchedUris`). Requests and pages only ever queue and read; the job fetches.

A URI is queued when a resource set is created or updated (its scopes that are http(s) URIs, its
`icon_uri`), when a client registers or updates itself at /register (`logo_uri`, `client_uri`),
when a checked scope description names an `icon_uri`, and when a page asks about a URI it has
no row for. A URI this server would never fetch (not http(s), too long) is not queued.

Each row names who queued it first (`queued_by`: `set:<id>`, `client:<client_id>`, '' for a page's
question), so that the job takes due rows round-robin by registration (issue 27, N5).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import secrets_at_rest
from ..storage import Storage
from ..storage.records import FetchedUri, FetchKind
from .content import is_fetchable


def queue(
    storage: Storage, uri: str, kind: FetchKind, now: int, queued_by: str = ""
) -> FetchedUri | None:
    """The row of (uri, kind), queued now by `queued_by` if it had none; None for a URI never
    fetched."""
    if not is_fetchable(uri):
        return None
    row = storage.get_fetched_uri(uri, kind)
    if row is None:
        storage.queue_uri(uri, kind, secrets_at_rest.new_id(), now, queued_by)
        row = storage.get_fetched_uri(uri, kind)
    return row


def resource_set_uris(description: Mapping[str, Any]) -> list[tuple[str, FetchKind]]:
    """What a resource set description points at that the job would fetch: its scopes that are
    URIs, its icon."""
    found: list[tuple[str, FetchKind]] = [
        (scope, "scope")
        for scope in description.get("scopes", ())
        if isinstance(scope, str) and is_fetchable(scope)
    ]
    icon_uri = description.get("icon_uri")
    if isinstance(icon_uri, str) and is_fetchable(icon_uri):
        found.append((icon_uri, "image"))
    return found


def client_uris(metadata: Mapping[str, Any]) -> list[tuple[str, FetchKind]]:
    """What a dynamically registered client points at that the job would fetch: its logo and
    its page."""
    found: list[tuple[str, FetchKind]] = []
    for name, kind in (("logo_uri", "image"), ("client_uri", "page")):
        uri = metadata.get(name)
        if isinstance(uri, str) and is_fetchable(uri):
            found.append((uri, kind))  # type: ignore[arg-type]
    return found


def queue_resource_set(
    storage: Storage, rs_id: str, description: Mapping[str, Any], now: int
) -> None:
    """Queues what resource set `rs_id`'s description points at (`resource_set_uris`)."""
    for uri, kind in resource_set_uris(description):
        queue(storage, uri, kind, now, f"set:{rs_id}")


def queue_client(storage: Storage, client_id: str, metadata: Mapping[str, Any], now: int) -> None:
    """Queues what a dynamically registered client points at (`client_uris`)."""
    for uri, kind in client_uris(metadata):
        queue(storage, uri, kind, now, f"client:{client_id}")
