"""Clients, users and their access tokens (PATs and AATs): made with fresh secrets that exist only
in the return value; stored as digests; revoked with what they carry."""

from __future__ import annotations

from typing import Any

from .. import events, secrets_at_rest
from ..storage import Storage
from ..storage.records import AccessToken, User

# Owners are named by username, or `client:<client_id>` for a client acting for itself: a username
# with this character could take a client's name, and the rules meant for it.
RESERVED_IN_USERNAMES = ":"


class ReservedUsername(ValueError):
    """A username that could be mistaken for a client's own name."""


class ClashingUsernames(Exception):
    """The database holds users whose names could be mistaken for clients' own names."""

    def __init__(self, usernames: list[str]) -> None:
        self.usernames = usernames
        listed = ", ".join(repr(name) for name in usernames)
        super().__init__(
            f"The database holds users whose names contain {RESERVED_IN_USERNAMES!r}, which"
            f" names clients acting for themselves (client:<id>): {listed}. Rename or remove"
            " them (back the database up first), then start again."
        )


def username_problem(username: str) -> str | None:
    """Why `username` may not be a user's name, as a sentence; None when it may."""
    if RESERVED_IN_USERNAMES in username:
        return (
            f"The username must not contain {RESERVED_IN_USERNAMES!r}: names like client:<id>"
            " belong to clients acting for themselves."
        )
    return None


def new_username_problem(username: str) -> str | None:
    """Why an operator may not name a new user `username` (`user create`, a seed file), as a
    sentence; None when they may."""
    if not username or username != username.strip() or any(c.isspace() for c in username):
        return "The username must be non-empty and have no white space."
    return username_problem(username)


def set_password_hash(storage: Storage, sub: str, password_hash: str) -> int:
    """Gives the user a new password (its argon2id hash) and ends their sessions, in one
    transaction: how many ended."""
    with storage.transaction():
        storage.set_password_hash(sub, password_hash)
        return storage.delete_sessions_of(sub)


def check_stored_usernames(storage: Storage) -> None:
    """Raises ClashingUsernames when a stored user's name could be a client's own name (users
    made before names were checked). Called wherever the database is prepared."""
    clashing = storage.usernames_containing(RESERVED_IN_USERNAMES)
    if clashing:
        raise ClashingUsernames(clashing)


def create_user(
    storage: Storage, now: int, username: str, password_hash: str | None, claims: dict[str, Any]
) -> User | None:
    """None when the username is taken; raises ReservedUsername when it may not be one."""
    problem = username_problem(username)
    if problem is not None:
        raise ReservedUsername(problem)
    user = User(secrets_at_rest.new_id(), username, password_hash, claims)
    return user if storage.add_user(user, now) else None


def new_access_token() -> str:
    return secrets_at_rest.new_token(secrets_at_rest.ACCESS_TOKEN_PREFIX)


def store_access_token(
    storage: Storage,
    now: int,
    token: str,
    client_id: str,
    user_sub: str | None,
    scope: str,
    lifetime: int,
    family: str | None = None,
) -> None:
    """Remembers a token made by `new_access_token` (or by Authlib's generator, which uses it);
    `family` names the code grant it came from, with its refreshes."""
    storage.add_access_token(
        AccessToken(
            digest=secrets_at_rest.digest(token),
            client_id=client_id,
            user_sub=user_sub,
            username=None,
            scope=scope,
            issued_at=now,
            expires_at=now + lifetime,
            revoked=False,
            family=family,
        )
    )
    events.issued("access_token")


def find_access_token(storage: Storage, unverified_token: str) -> AccessToken | None:
    return storage.get_access_token(secrets_at_rest.digest(unverified_token))


def revoke_access_token(storage: Storage, token: str) -> bool:
    """False when no live token matches. Revoking an AAT revokes the RPTs issued under it."""
    digest = secrets_at_rest.digest(token)
    with storage.transaction():
        revoked = storage.revoke_access_token(digest)
        storage.revoke_rpts_of(digest)
    return revoked
