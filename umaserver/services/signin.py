"""Signing a person in with a username and a password: the limits on failures, the check, and the
upgrade of an old hash. Plain functions over the storage contract and a moment; the page
(`umaserver.pages.signin`) turns HTTP into a call of `sign_in` and its `Outcome` back into HTML.

Failures are counted under two keys: the account from anywhere, and the account from one address.
`account_max_failures` of the first, or `max_failures` of the second, within `window` seconds lock
it (from everywhere, or from that address) for `lockout` seconds from the last of
them; while locked the password is not even checked (nor is the attempt counted). An account that
does not exist is counted, checked against a dummy hash and answered exactly like a wrong password,
so that neither the answer nor its time tells whether a username exists.

An attempt is counted as a failure BEFORE its password is checked (reserved: the count and the
row added are one transaction, under the account's key held), and a success forgets the failures
as it always did. So concurrent guesses check at most `max_failures` passwords per window from one
address and `account_max_failures` per account, however many arrive at once: a check that reads
the lock and writes the failure after it let 40 guesses at once check 12 (issue 27, N4).
`unlock` (the `user unlock` command) forgets the failures of a name from everywhere.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .. import events, secrets_at_rest
from ..config import MAX_PASSWORD_LENGTH, SigninSettings
from ..storage import Storage
from ..storage.records import User

log = logging.getLogger("umaserver.signin")

# Longer usernames and passwords (config.MAX_PASSWORD_LENGTH, 1,024) are refused without a check
# (they cost hashing time and log space).
MAX_USERNAME_LENGTH = 256


@dataclass(frozen=True)
class Outcome:
    """`signed_in` (with the user), `failed` (a wrong password, an unknown or password-less
    account: one answer for all), or `locked` (until `retry_at`)."""

    kind: Literal["signed_in", "failed", "locked"]
    user: User | None = None
    retry_at: int = 0


def password_problem(password: str, settings: SigninSettings) -> str | None:
    """Why `password` may not be a person's new password, as a sentence; None when it may: at
    least `[signin] min_password_length` characters, and at most what sign-in reads (a longer one
    could never sign in)."""
    if len(password) < settings.min_password_length:
        return f"Choose a password of at least {settings.min_password_length} characters."
    if len(password) > MAX_PASSWORD_LENGTH:
        return (
            f"Choose a password of at most {MAX_PASSWORD_LENGTH} characters: sign-in reads no more."
        )
    return None


def failure_keys(username: str, address: str) -> tuple[str, str]:
    """The keys of the account and of the account from `address`. The name is kept as a digest:
    failed sign-ins are stored for names that are no account too (mistyped passwords among them)."""
    account = secrets_at_rest.digest(username)
    return f"account:{account}", f"address:{account}:{address}"


def locked_until(failures: Sequence[int], settings: SigninSettings, count: int) -> int:
    """When the lock these failures (oldest first) put on a key ends; 0 when they put none. A lock
    starts at a failure that is the `count`-th within `window` seconds."""
    until = 0
    for i in range(count - 1, len(failures)):
        if failures[i] - failures[i - count + 1] <= settings.window:
            until = max(until, failures[i] + settings.lockout)
    return until


def _lock(storage: Storage, keys: tuple[str, str], now: int, settings: SigninSettings) -> int:
    """When the lock on the account from anywhere, or from this address, ends (0: none)."""
    since = now - settings.window - settings.lockout
    account, from_address = keys
    until = max(
        locked_until(
            storage.signin_failures_since(account, since), settings, settings.account_max_failures
        ),
        locked_until(
            storage.signin_failures_since(from_address, since), settings, settings.max_failures
        ),
    )
    return until if until > now else 0


def sign_in(
    storage: Storage,
    settings: SigninSettings,
    now: int,
    username: str,
    unverified_password: str,
    address: str,
) -> Outcome:
    """Checks the password of `username` signing in from `address`, within the limits. On success
    the failures are forgotten and a scrypt (or outdated argon2) hash is replaced by argon2id.
    Logs one line (the username and the address, never the password)."""
    name = username[:MAX_USERNAME_LENGTH]
    keys = failure_keys(name, address)
    retry_at = _reserve(storage, keys, now, settings)
    if retry_at:
        return _locked(name, address, retry_at)
    user = storage.get_user_by_username(username) if len(username) <= MAX_USERNAME_LENGTH else None
    if len(unverified_password) > MAX_PASSWORD_LENGTH:
        unverified_password = ""  # still spend the time of a check: the answer is the same
    if user is None or user.password_hash is None or not unverified_password:
        good = secrets_at_rest.check_no_password(unverified_password)
    else:
        good = secrets_at_rest.check_password(unverified_password, user.password_hash)
    if not good or user is None:
        return _failed(storage, keys, name, address, now, settings)
    with storage.transaction():
        for key in keys:
            storage.clear_signin_failures(key)
        if user.password_hash and secrets_at_rest.password_needs_rehash(user.password_hash):
            storage.set_password_hash(user.sub, secrets_at_rest.hash_password(unverified_password))
    log.info("sign-in succeeded username=%r address=%s", name, address)
    return Outcome("signed_in", user=user)


def _reserve(storage: Storage, keys: tuple[str, str], now: int, settings: SigninSettings) -> int:
    """Counts this attempt as a failure of both keys unless they are locked; when the lock ends
    when they are (nothing is then counted). The account's key is held for the count and the
    rows: every attempt on the account, from any address, takes it, so none counts rows another
    is adding."""
    with storage.transaction():
        storage.hold_signin_key(keys[0])
        retry_at = _lock(storage, keys, now, settings)
        if not retry_at:
            for key in keys:
                storage.record_signin_failure(key, now)
    return retry_at


def _locked(name: str, address: str, retry_at: int) -> Outcome:
    """A sign-in refused unchecked: the account is locked (from everywhere, or from `address`)."""
    log.info("sign-in locked username=%r address=%s until=%d", name, address, retry_at)
    return Outcome("locked", retry_at=retry_at)


def _failed(
    storage: Storage,
    keys: tuple[str, str],
    name: str,
    address: str,
    now: int,
    settings: SigninSettings,
) -> Outcome:
    """A password checked and wrong (or no account): its failure was counted before the check;
    answered `locked` when this failure (or a racing one) locked the account."""
    events.signin_failed(name, address)
    retry_at = _lock(storage, keys, now, settings)
    if retry_at:
        events.locked_out(name, address, retry_at)
    return Outcome("locked", retry_at=retry_at) if retry_at else Outcome("failed")


def unlock(storage: Storage, username: str) -> int:
    """Forgets the failed sign-ins of `username` from everywhere and from every address, which
    ends its lockouts; how many were forgotten. A name that is no account has them too."""
    account, from_address = failure_keys(username[:MAX_USERNAME_LENGTH], "")
    with storage.transaction():
        storage.hold_signin_key(account)
        return storage.clear_signin_failures(account) + storage.clear_signin_failures_under(
            from_address
        )


def client_address(
    remote_addr: str | None, forwarded_for: Sequence[str], trusted_proxies: Sequence[str]
) -> str:
    """The address a request comes from. `X-Forwarded-For` (every header of it, in order) is
    believed only when the connection comes from a trusted proxy: then the address is the last
    one of it that is not a trusted proxy (the proxy nearest to us appends the one it saw).
    A malformed entry stops the walk: what is before it could be anyone's writing."""
    remote = remote_addr or "unknown"
    networks = [ipaddress.ip_network(p, strict=False) for p in trusted_proxies]

    def trusted(text: str) -> bool | None:
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            return None
        return any(address in network for network in networks)

    if not networks or not trusted(remote):
        return remote
    hops = [hop.strip() for header in forwarded_for for hop in header.split(",")]
    found = remote
    for hop in reversed(hops):
        verdict = trusted(hop)
        if verdict is None:
            return found
        found = hop
        if not verdict:
            return hop
    return found
