"""Schema versions: one numbered history for both databases, in this folder.

A step is a file `NNNN_what_it_does.<database>.sql` that takes a database from version NNNN - 1 to
NNNN: `0009_x.sqlite.sql` beside `0009_x.postgresql.sql`, so that version 9 is one change on
both. A version one database does not need has only the other's file; that database records the
version all the same. SQLite's history starts at version 1, the schema first released (commit
2c72f37); PostgreSQL's at version 8 (`FIRST_VERSION`), the whole schema as it was when that
backend came.

A new database gets every step of its own from its first, in one transaction, and records every
version; an older one gets the steps after its version, each in one transaction of its own (the
runners: `sqlite.migrate`, `postgresql.migrate`). A step, once released, is never edited: databases
out there have applied it (`tests/storage/test_migrations.py` holds each one's digest).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

Backend = Literal["sqlite", "postgresql"]

# The version each database's history starts at (its first step is the whole schema then).
FIRST_VERSION: dict[Backend, int] = {"sqlite": 1, "postgresql": 8}

_NAMES: dict[Backend, str] = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.(sqlite|postgresql)\.sql")


class StorageError(Exception):
    """The database cannot be opened, created or upgraded; the message says why."""


class SchemaError(StorageError):
    """The database cannot be brought to this code's schema; the message says why."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str  # the file's name
    sql: str


@cache
def _files() -> dict[Backend, dict[int, Migration]]:
    found: dict[Backend, dict[int, Migration]] = {"sqlite": {}, "postgresql": {}}
    names: dict[int, str] = {}
    for entry in resources.files(__package__).iterdir():
        matched = _FILE.fullmatch(entry.name)
        if matched is None:
            continue
        version, what, backend = int(matched[1]), matched[2], matched[3]
        # One change per version: its files share its name.
        if names.setdefault(version, what) != what:
            raise SchemaError(f"version {version} has two names: {what} and {names[version]}")
        steps = found["sqlite" if backend == "sqlite" else "postgresql"]
        steps[version] = Migration(version, entry.name, entry.read_text(encoding="utf-8"))
    versions = sorted(names)
    if versions != list(range(1, len(versions) + 1)):
        raise SchemaError(f"the migrations' versions are out of sequence: {versions}")
    for backend, first in FIRST_VERSION.items():
        if min(found[backend], default=None) != first:
            raise SchemaError(f"{backend}'s history must start with a step of version {first}")
    return found


def current_version() -> int:
    """The version this code's schema is at: the last step's, of either database."""
    return max(max(steps) for steps in _files().values())


def migrations(backend: Backend) -> list[Migration]:
    """`backend`'s steps in order, from its first version on (versions it needs no file for are
    not in the list)."""
    steps = _files()[backend]
    return [steps[version] for version in sorted(steps)]


@dataclass(frozen=True)
class Upgrade:
    """One transaction of an upgrade: the statements, and the versions they bring."""

    script: str
    versions: tuple[int, ...]
    name: str  # for messages


def upgrades(backend: Backend, found: int) -> list[Upgrade]:
    """What brings a database of `backend` at version `found` (0: empty) to the current version,
    one transaction each: every step at once for a new database, else the steps after `found`.
    SchemaError for a database newer than this code, or older than its backend's first version
    (no umaserver made it)."""
    target = current_version()
    first = FIRST_VERSION[backend]
    if found > target:
        raise SchemaError(
            f"the database has schema version {found}, newer than this umaserver's {target};"
            " run the newer umaserver, or restore a backup made before it upgraded"
        )
    if found == 0:
        script = "\n".join(step(backend, version) for version in range(first, target + 1))
        return [Upgrade(script, tuple(range(1, target + 1)), "the new schema")]
    if found < first:
        raise SchemaError(
            f"the database has schema version {found}, older than any {_NAMES[backend]} database"
            f" of umaserver ({first}); nothing was changed"
        )
    return [
        Upgrade(step(backend, version), (version,), f"version {version}")
        for version in range(found + 1, target + 1)
    ]


def step(backend: Backend, version: int) -> str:
    """What `backend` runs to reach `version` from the one before: its file's statements, or
    nothing when it has no file for that version."""
    found = _files()[backend].get(version)
    return "" if found is None else found.sql
