"""Open registration's limit per address (issue 27): with `[registration] open = true`, one
address registers at most `[registration] per_address_per_hour` clients in any hour (a sliding
one); past it `/register` answers 429 `temporarily_unavailable` with `Retry-After`. Without it,
300 clients were registered in 0.4 s. A request with an initial access token is not counted (an
operator vouched for it).

A registration is reserved before it is made, as a sign-in attempt is: the count of the address's
registrations in the last hour, the row that counts this one and the client itself are one
transaction, under the address's key held (`hold_signin_key`), so racing requests from one address
cannot pass the limit, and a registration that fails (refused, or the database gone) counts
nothing. The registrations are rows of the failed sign-ins' table under the key
`registration:<address>`; the maintenance job prunes them with the failures, after at least a day.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import TooManyRequests
from ..storage import Storage

HOUR = 3600


def registration_key(address: str) -> str:
    return f"registration:{address}"


@contextmanager
def counted(storage: Storage, now: int, address: str, per_hour: int) -> Iterator[None]:
    """A transaction in which the caller registers one client from `address`, counted against
    the address's limit; TooManyRequests (with Retry-After: when the oldest registration that
    keeps it at the limit leaves the hour) instead when the address reached it."""
    key = registration_key(address)
    with storage.transaction():
        storage.hold_signin_key(key)
        recent = storage.signin_failures_since(key, now - HOUR + 1)
        if len(recent) >= per_hour:
            retry_at = recent[len(recent) - per_hour] + HOUR
            raise TooManyRequests(
                f"This address registered {per_hour} clients within the last hour, as many as"
                " [registration] per_address_per_hour allows; try again later.",
                headers={"Retry-After": str(max(1, retry_at - now))},
            )
        storage.record_signin_failure(key, now)
        yield
