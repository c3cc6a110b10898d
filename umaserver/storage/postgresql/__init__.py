"""PostgreSQL as `database` (a `postgresql://` URL): what the rest of the server may know of it
without its driver. psycopg is an extra (`pip install 'umaserver[postgresql]'`), imported only by
the modules of this package that talk to a database (`database`: the dialect, `prepare`,
`check_database`, `write_problem`; `connection`, `pool`, `copy`, `migrate`), and those are
imported only when a PostgreSQL URL is configured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "CONNECT_TIMEOUT",
    "MISSING_DRIVER",
    "URL_SCHEMES",
    "PostgreSQLSettings",
    "describe",
    "driver_missing",
    "is_url",
]

# Seconds to wait for a connection when the settings do not say (`[postgresql] connect_timeout`).
CONNECT_TIMEOUT = 5

# `database` in the config is a PostgreSQL connection URL when it starts with one of these.
URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(database: object) -> bool:
    return isinstance(database, str) and database.startswith(URL_SCHEMES)


@dataclass(frozen=True)
class PostgreSQLSettings:
    """`[postgresql]` of the config: the connections each serving process keeps open at least and
    at most, and how many seconds a connection (or a request waiting for one) may take."""

    pool_min: int = 2
    pool_max: int = 10
    connect_timeout: int = CONNECT_TIMEOUT


def driver_missing() -> bool:
    """Whether psycopg or psycopg_pool cannot be imported here (installed without the extra, or
    without a libpq psycopg can use). Imports them when they can be: ask only when a PostgreSQL
    database is about to be used."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        return True
    return False


# What a person is told when a PostgreSQL URL is configured and the driver is not installed.
MISSING_DRIVER = (
    "needs the PostgreSQL driver, which is not installed: "
    "install umaserver[postgresql] (pip install 'umaserver[postgresql]')"
)


def describe(url: str) -> str:
    """The URL without its password (in the user part or as a parameter), for messages and logs."""
    url = _URL_PASSWORD.sub(r"\1:***@", url, count=1)
    return _PARAMETER_PASSWORD.sub(r"\1password=***", url)


_URL_PASSWORD = re.compile(r"^(postgres(?:ql)?://[^:@/?]*):[^@/?]*@")
_PARAMETER_PASSWORD = re.compile(r"([?&])password=[^&]*")
