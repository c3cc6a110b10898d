"""Resource sets."""

from __future__ import annotations

import json
from typing import Any

from . import rows as stored
from .handle import Handle
from .records import PAGE_LIMIT, OwnedResourceSet, ResourceSet, ResourceSetQuery

# In the order of creation (rowid, within a second): on SQLite, read from resource_sets_by_owner
# alone.
_LIST_RESOURCE_SETS = (
    "SELECT id FROM resource_sets WHERE owner = ? AND client_id = ? ORDER BY created_at, rowid"
)
_EVERY_SET = ResourceSetQuery()
# A value inside a JSON list of the description (`uris`, `scopes`): SQLite's words, which
# PostgreSQL's dialect says as a jsonb containment (`@>`, which holds a string inside a list).
_IN_URIS = "EXISTS (SELECT 1 FROM json_each(description, '$.uris') WHERE value = ?)"
_IN_SCOPES = "EXISTS (SELECT 1 FROM json_each(description, '$.scopes') WHERE value = ?)"


def _ascii_lower(text: str) -> str:
    # As both databases' lower() folds (SQLite's always, PostgreSQL's under COLLATE "C"): ASCII.
    return "".join(c.lower() if c.isascii() else c for c in text)


# The filtered lists read the same indexes as the plain one: an owner's sets at a resource
# server by resource_sets_by_owner, a resource server's by resource_sets_by_client, then sorted
# (one owner's 10^4 sets, a page of 100 at 5,000: 1.0 ms on SQLite, 2.5 ms on PostgreSQL). The
# name, type and JSON filters are checked on those rows (uri and scope over 10^4: 4.4 and 8.8 ms).
def _list_statement(
    owner: str | None, client_id: str, query: ResourceSetQuery
) -> tuple[str, list[Any]]:
    """The list's statement and its parameters: a fixed text for each combination of filters (so
    each is translated once); the plain list's is `_LIST_RESOURCE_SETS`."""
    if owner is not None and query == _EVERY_SET:
        return _LIST_RESOURCE_SETS, [owner, client_id]
    where: list[str] = []
    parameters: list[Any] = []
    if owner is not None:
        where.append("owner = ?")
        parameters.append(owner)
    where.append("client_id = ?")
    parameters.append(client_id)
    if query.name is not None:
        if query.exact_name:
            where.append("name = ?")
            parameters.append(query.name)
        else:
            where.append("instr(lower(name), ?) > 0")
            parameters.append(_ascii_lower(query.name))
    if query.type is not None:
        where.append("type = ?")
        parameters.append(query.type)
    if query.uri is not None:
        where.append(_IN_URIS)
        parameters.append(query.uri)
    if query.scope is not None:
        where.append(_IN_SCOPES)
        parameters.append(query.scope)
    # Joined from this function's fixed fragments alone; every value is a parameter.
    where_clause = " AND ".join(where)
    sql = f"SELECT id FROM resource_sets WHERE {where_clause} ORDER BY created_at, rowid"  # noqa: S608
    if query.max is not None or query.first:
        sql += " LIMIT ? OFFSET ?"
        parameters += [PAGE_LIMIT if query.max is None else query.max, query.first]
    return sql, parameters


class Resources(Handle):
    """Resource sets, each of one owner at one resource server."""

    def add_resource_set(self, resource_set: ResourceSet, created_at: int) -> None:
        description = resource_set.description
        self._write(
            "INSERT INTO resource_sets (id, owner, client_id, name, type, description,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                resource_set.id,
                resource_set.owner,
                resource_set.client_id,
                # The column orders an owner's list: a set registered without a name sorts first.
                resource_set.name or "",
                description.get("type"),
                json.dumps(description),
                created_at,
                created_at,
            ),
        )

    def get_resource_set(self, rs_id: str, owner: str, client_id: str) -> ResourceSet | None:
        # Its resource server reads a set to change it: the lock an update takes.
        return stored.resource_set(
            self._one(
                "SELECT * FROM resource_sets WHERE id = ? AND owner = ? AND client_id = ?",
                (rs_id, owner, client_id),
                lock="NO KEY UPDATE",
            )
        )

    def find_resource_set(self, rs_id: str) -> ResourceSet | None:
        # A decision reads the set it decides about: decisions on one set go on side by side,
        # and a change of the set waits for them.
        return stored.resource_set(
            self._one("SELECT * FROM resource_sets WHERE id = ?", (rs_id,), lock="SHARE")
        )

    def resource_sets_registered_by(
        self, client_id: str, name: str | None, limit: int
    ) -> list[ResourceSet]:
        named = "" if name is None else " AND name = ?"
        rows = self._all(
            f"SELECT * FROM resource_sets WHERE client_id = ?{named}"  # noqa: S608 (no input)
            " ORDER BY created_at, id LIMIT ?",
            (client_id, limit) if name is None else (client_id, name, limit),
        )
        return [stored.resource_set(row) for row in rows]  # type: ignore[misc]  # never None

    def replace_resource_set(
        self, rs_id: str, owner: str, client_id: str, description: dict[str, Any], updated_at: int
    ) -> bool:
        return (
            self._write(
                "UPDATE resource_sets SET name = ?, type = ?, description = ?, updated_at = ?"
                " WHERE id = ? AND owner = ? AND client_id = ?",
                (
                    str(description.get("name") or ""),
                    description.get("type"),
                    json.dumps(description),
                    updated_at,
                    rs_id,
                    owner,
                    client_id,
                ),
            )
            == 1
        )

    def delete_resource_set(self, rs_id: str, owner: str, client_id: str) -> bool:
        # Tickets, their claims and permissions go with it (ON DELETE CASCADE).
        return (
            self._write(
                "DELETE FROM resource_sets WHERE id = ? AND owner = ? AND client_id = ?",
                (rs_id, owner, client_id),
            )
            == 1
        )

    def list_resource_sets(
        self, owner: str | None, client_id: str, query: ResourceSetQuery | None = None
    ) -> list[str]:
        if query is None and owner is not None:  # the plain list, as the spec has it
            sql, parameters = _LIST_RESOURCE_SETS, [owner, client_id]
        else:
            sql, parameters = _list_statement(owner, client_id, query or _EVERY_SET)
        return [str(rs_id) for rs_id in self._column(sql, parameters, lock="SHARE")]

    def resource_sets_of(
        self, owner: str, now: int, after: tuple[str, str] | None, limit: int
    ) -> list[OwnedResourceSet]:
        after_name, after_id = after if after is not None else ("", "")
        rows = self._all(
            # The page first, then the counts: only for the sets on it.
            "SELECT page.*, c.name AS client_name,"
            " (SELECT COUNT(*) FROM permissions p JOIN rpts r ON r.digest = p.rpt_digest"
            "  WHERE p.resource_set_id = page.id AND p.expires_at > ? AND r.revoked = FALSE"
            "  AND r.expires_at > ?) AS permissions"
            " FROM (SELECT id, name, type, client_id FROM resource_sets"
            "  WHERE owner = ? AND (NOT ? OR name > ? OR (name = ? AND id > ?))"
            "  ORDER BY name, id LIMIT ?) page"
            " JOIN clients c ON c.client_id = page.client_id"
            " ORDER BY page.name, page.id",
            (now, now, owner, after is not None, after_name, after_name, after_id, limit),
        )
        return [
            OwnedResourceSet(
                row["id"],
                row["name"],
                row["type"],
                row["client_id"],
                row["client_name"],
                int(row["permissions"]),
            )
            for row in rows
        ]

    def count_resource_sets_of(self, owner: str) -> int:
        row = self._one("SELECT COUNT(*) AS n FROM resource_sets WHERE owner = ?", (owner,))
        return int(row["n"]) if row is not None else 0
