"""The access history (issue 25, item 5): what each decision, grant and revocation on an owner's
set was, as an event written in the transaction of what it records.

An event keeps names as text, as they were: the set's label, the client's name and the
requesting party's username (a person's sub when they have no local account; None for a client
acting for itself). Writing one costs one INSERT (and, for a person, one read of their username).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from ..storage import Storage
from ..storage.people_records import Event, EventKind
from ..storage.records import Client, ResourceSet

# What came of a ticket's decision, in the history's words.
OUTCOMES = {"grant": "granted", "deny": "refused", "need_claims": "needs claims"}


def party_name(storage: Storage, party: str | None) -> str | None:
    """A requesting party as the history names it: a username when the party is a local user,
    else as given; None for a client acting for itself (`client:<id>`)."""
    if party is None or party.startswith("client:"):
        return None
    return storage.get_username(party) or party


def record(
    storage: Storage,
    *,
    now: int,
    kind: EventKind,
    outcome: str,
    client: Client,
    party: str | None,
    pairs: Iterable[tuple[ResourceSet, Sequence[str], Sequence[str]]],
    username: str | None = None,
) -> None:
    """One event for each (set, scopes, rules that decided) of `pairs`, on that set's owner's
    history. `party` as the store has it (a sub, or `client:<id>`); `username`, the party's when
    the caller has it already (an AAT carries it), saves reading it."""
    name = username if username is not None and party is not None else party_name(storage, party)
    for resource_set, scopes, rule_ids in pairs:
        storage.add_event(
            Event(
                at=now,
                owner=resource_set.owner,
                rs_id=resource_set.id,
                rs_name=resource_set.label,
                scopes=tuple(scopes),
                client_id=client.client_id,
                client_name=client.name or client.client_id,
                party=name,
                kind=kind,
                outcome=outcome,
                decided_by=", ".join(rule_ids) or None,
            )
        )


def iso_time(moment: int) -> str:
    """A moment as ISO 8601 in UTC, to the second: `2026-11-26T11:40:00Z`."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def as_json(event: Event, owner_name: str) -> dict[str, Any]:
    """An event as `umaserver audit` prints it, the owner named as given."""
    return {
        "time": iso_time(event.at),
        "owner": owner_name,
        "kind": event.kind,
        "outcome": event.outcome,
        "resource_set_id": event.rs_id,
        "resource_set_name": event.rs_name,
        "scopes": list(event.scopes),
        "client_id": event.client_id,
        "client_name": event.client_name,
        "requesting_party": event.party,
        "decided_by": event.decided_by,
    }


def record_share(
    storage: Storage,
    *,
    now: int,
    kind: EventKind,
    resource_set: ResourceSet,
    scopes: Sequence[str],
    to: str,
) -> None:
    """The owner shared `resource_set` with `to` (a username or an address, as registered), or
    stopped sharing it (`kind` "share" or "stop"): an event of the owner's history, with no app."""
    storage.add_event(
        Event(
            at=now,
            owner=resource_set.owner,
            rs_id=resource_set.id,
            rs_name=resource_set.label,
            scopes=tuple(scopes),
            client_id="",
            client_name="",
            party=to,
            kind=kind,
            outcome="shared" if kind == "share" else "stopped",
            decided_by=None,
        )
    )
