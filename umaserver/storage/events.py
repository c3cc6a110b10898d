"""The access history: events, written once each, read by owner (newest first, or oldest first
since a moment), pruned by time in batches."""

from __future__ import annotations

import json

from .handle import Handle
from .people_records import Event
from .rows import Row

_COLUMNS = (
    "rowid AS seq, at, owner, resource_set_id, resource_set_name, scopes, client_id, client_name,"
    " requesting_party, kind, outcome, decided_by"
)


class Events(Handle):
    """Events by owner and time; `seq` orders those of one second."""

    def add_event(self, event: Event) -> None:
        self._write(
            "INSERT INTO events (at, owner, resource_set_id, resource_set_name, scopes, client_id,"
            " client_name, requesting_party, kind, outcome, decided_by)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                event.at,
                event.owner,
                event.rs_id,
                event.rs_name,
                json.dumps(list(event.scopes)),
                event.client_id,
                event.client_name,
                event.party,
                event.kind,
                event.outcome,
                event.decided_by,
            ),
        )

    def events_of(
        self,
        owner: str,
        limit: int,
        *,
        rs_id: str | None = None,
        before: tuple[int, int] | None = None,
    ) -> list[Event]:
        where = "owner = ?"
        parameters: list[object] = [owner]
        if rs_id is not None:
            where += " AND resource_set_id = ?"
            parameters.append(rs_id)
        if before is not None:
            where += " AND (at < ? OR (at = ? AND rowid < ?))"
            parameters += [before[0], before[0], before[1]]
        rows = self._all(
            f"SELECT {_COLUMNS} FROM events WHERE {where}"  # noqa: S608 - no input in the text
            " ORDER BY at DESC, rowid DESC LIMIT ?",
            (*parameters, limit),
        )
        return [_event(row) for row in rows]

    def events_since(self, owner: str, moment: int) -> list[Event]:
        rows = self._all(
            f"SELECT {_COLUMNS} FROM events WHERE owner = ? AND at >= ?"  # noqa: S608
            " ORDER BY at, rowid",
            (owner, moment),
        )
        return [_event(row) for row in rows]

    def delete_events_before(self, moment: int, limit: int) -> int:
        return self._write(
            "DELETE FROM events WHERE rowid IN (SELECT rowid FROM events WHERE at < ? LIMIT ?)",
            (moment, limit),
        )


def _event(row: Row) -> Event:
    return Event(
        at=int(row["at"]),
        owner=str(row["owner"]),
        rs_id=str(row["resource_set_id"]),
        rs_name=str(row["resource_set_name"]),
        scopes=tuple(json.loads(row["scopes"])),
        client_id=str(row["client_id"]),
        client_name=str(row["client_name"]),
        party=None if row["requesting_party"] is None else str(row["requesting_party"]),
        kind=row["kind"],
        outcome=str(row["outcome"]),
        decided_by=None if row["decided_by"] is None else str(row["decided_by"]),
        seq=int(row["seq"]),
    )
