"""Account claims: this server's own word about the person a request's token was issued to.

When a request carries a token issued to a person (an AAT at the 1.0 authorization request, a
person's Bearer token at the uma-ticket grant), the person already consented to that client on
the consent page, so the server vouches, without a redirect, for the account's `username`, its
`email` when it has a verified one, and the account attributes `roles` and `groups` (always
arrays: a single value is an array of one), as claims of type `ACCOUNT_CLAIM_TYPE` with this
server's issuer as issuer and the account's `sub` as subject. They are computed for each request
from the account as it is then, never stored with a ticket, never pushed by a client, never asked
for (need_claims / need_info) and never gathered by redirect.
"""

from __future__ import annotations

from typing import Any

from ..claims.model import ACCOUNT_CLAIM_TYPE, email_key
from ..storage import Storage
from ..storage.records import Claim, User

# The account attributes shared as lists, as Keycloak's roles and groups are.
LIST_ATTRIBUTES = ("roles", "groups")


def account_values(user: User) -> dict[str, Any]:
    """The account claims' names and values for `user`: `username`; `email` (lowercased,
    `email_key`) when the account has one that is not marked unverified (an operator's
    `--claim email=...` counts as verified, and so does an address an invitation was accepted at);
    `roles` and `groups` when the account has them, as lists of strings."""
    values: dict[str, Any] = {"username": user.username}
    email = user.claims.get("email")
    if isinstance(email, str) and email and user.claims.get("email_verified", True) is True:
        values["email"] = email_key(email)
    for name in LIST_ATTRIBUTES:
        found = user.claims.get(name)
        items = found if isinstance(found, list) else [found]
        listed = [item for item in items if isinstance(item, str) and item]
        if listed:
            values[name] = listed
    return values


def account_claims(
    storage: Storage, user_sub: str, issuer: str, *, client_id: str = "", now: int = 0
) -> list[Claim]:
    """The account claims about the user `user_sub` (none when there is no such user), vouched for
    by `issuer` (this server's), for a request of `client_id` at `now`."""
    user = storage.get_user(user_sub)
    if user is None:
        return []
    return [
        Claim(ACCOUNT_CLAIM_TYPE, name, value, issuer, client_id, now, subject=user.sub)
        for name, value in account_values(user).items()
    ]
