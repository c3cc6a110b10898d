"""The SQLite implementation of the storage contract: every SQL statement of the server is in this
package or in the migrations beside it.

One connection per handle, `sqlite3.Row`, WAL and foreign keys on. Writers take the lock at the
start (`BEGIN IMMEDIATE`), so concurrent writers queue on the busy timeout instead of failing on a
lock upgrade. One class per group of aggregates, all over the same connection.
"""

from __future__ import annotations

from pathlib import Path

from .accounts import Accounts
from .base import connect
from .evidence import Evidence
from .fetched import FetchedUris
from .identity_links import IdentityLinks
from .oauth import OAuth
from .owner_rules import OwnerRules
from .resources import Resources
from .sessions import Sessions
from .tokens import Tokens

__all__ = ["SQLiteStorage", "connect"]


class SQLiteStorage(
    Accounts,
    Resources,
    Evidence,
    Tokens,
    OAuth,
    Sessions,
    IdentityLinks,
    OwnerRules,
    FetchedUris,
):
    """The contract's operations over one SQLite connection (see `contract.Storage`)."""

    @classmethod
    def open(cls, path: Path) -> SQLiteStorage:
        return cls(connect(path))
