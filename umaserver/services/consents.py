"""A person's consents: that a client may have a scope for them. Remembered per user, client and
scope name; withdrawing one revokes what was issued under it (the access tokens, with their RPTs,
and the refresh tokens of that user at that client carrying that scope).

`scope` arguments are space-separated scope names (as a token's scope); each name is its own
consent.
"""

from __future__ import annotations

from ..storage import Storage
from ..storage.records import Consent


def _names(scope: str) -> list[str]:
    return sorted({name for name in scope.split(" ") if name})


def remember_consent(storage: Storage, now: int, user_sub: str, client_id: str, scope: str) -> None:
    with storage.transaction():
        for name in _names(scope):
            storage.put_consent(Consent(user_sub, client_id, name, now))


def consent_for(storage: Storage, user_sub: str, client_id: str, scope: str) -> bool:
    """True when the user consented to every scope name of `scope` for this client (False for an
    empty scope)."""
    names = _names(scope)
    return bool(names) and all(storage.has_consent(user_sub, client_id, name) for name in names)


def consents_of(storage: Storage, user_sub: str) -> list[Consent]:
    """Ordered by client_id, then scope."""
    return storage.consents_of(user_sub)


def withdraw_consent(storage: Storage, user_sub: str, client_id: str, scope: str) -> bool:
    """Forgets the consent to each scope name and revokes the tokens issued under it; False when
    there was no such consent (tokens are revoked all the same)."""
    withdrawn = False
    with storage.transaction():
        for name in _names(scope):
            withdrawn = storage.delete_consent(user_sub, client_id, name) or withdrawn
            for digest in storage.revoke_access_tokens_of_grant(user_sub, client_id, name):
                storage.revoke_rpts_of(digest)
            storage.revoke_refresh_tokens_of_grant(user_sub, client_id, name)
    return withdrawn
