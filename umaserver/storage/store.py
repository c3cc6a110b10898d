"""The storage contract over one connection of either database: `SQLStorage`.

Each aggregate's operations are written once, in the module named after it, over `handle.Handle`;
what differs between SQLite and PostgreSQL is the handle's dialect (`dialect`, `sqlite`,
`postgresql`).
"""

from __future__ import annotations

from .accounts import Accounts
from .events import Events
from .evidence import Evidence
from .fetched import FetchedUris
from .identity_links import IdentityLinks
from .invitations import Invitations
from .notices import Notices
from .oauth import OAuth
from .owner_rules import OwnerRules
from .pcts import Pcts
from .requests import Requests
from .reset import Reset
from .resources import Resources
from .seeded import SeededParties
from .sessions import Sessions
from .shares import Shares
from .signing_keys import SigningKeys
from .tickets import Tickets
from .tokens import Tokens


class SQLStorage(
    Accounts,
    Resources,
    Tickets,
    Evidence,
    Tokens,
    OAuth,
    Sessions,
    IdentityLinks,
    OwnerRules,
    Shares,
    Invitations,
    FetchedUris,
    Pcts,
    SigningKeys,
    Events,
    Requests,
    Notices,
    SeededParties,
    Reset,
):
    """The contract's operations over one connection (see `contract.Storage`)."""
