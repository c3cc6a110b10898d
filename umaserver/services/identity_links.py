"""Linking identities at external OpenID Connect providers to local users: what `user link` and
`user unlink` decide (the provider must be configured; an identity is linked to one user at most),
in one place. Plain Python over the storage contract."""

from __future__ import annotations

from collections.abc import Sequence

from ..claims.oidc_issuers import OidcIssuer
from ..storage import Storage

MAX_SUBJECT_LENGTH = 255  # OpenID Connect Core 1.0, 2: sub "MUST NOT exceed 255 ASCII characters"


def link_problem(
    store: Storage,
    issuers: Sequence[OidcIssuer],
    now: int,
    username: str,
    issuer: str,
    subject: str,
) -> str | None:
    """Links the identity `subject` at `issuer` to the user; a sentence saying why not, else None."""
    problem = identity_problem(issuers, issuer, subject)
    if problem is not None:
        return problem
    user = store.get_user_by_username(username)
    if user is None:
        return f"There is no user {username!r}."
    with store.transaction():
        if store.link_identity(issuer, subject, user.sub, now):
            return None
        holder = store.linked_user(issuer, subject)
    if holder == user.sub:
        return f"The identity {subject!r} at {issuer} is linked to {username!r} already."
    return elsewhere_problem(store, holder, issuer, subject)


def elsewhere_problem(store: Storage, holder: str | None, issuer: str, subject: str) -> str:
    """The sentence for an identity linked to another user than the one asked for: `holder`."""
    other = store.get_username(holder) if holder is not None else None
    return (
        f"The identity {subject!r} at {issuer} is linked to another user ({other!r});"
        " unlink it there first."
    )


def unlink_problem(store: Storage, username: str, issuer: str, subject: str) -> str | None:
    """Unlinks the identity from the user; a sentence saying why not, else None."""
    user = store.get_user_by_username(username)
    if user is None:
        return f"There is no user {username!r}."
    with store.transaction():
        if store.linked_user(issuer, subject) != user.sub:
            return f"The identity {subject!r} at {issuer} is not linked to {username!r}."
        store.unlink_identity(issuer, subject)
    return None


def identity_problem(issuers: Sequence[OidcIssuer], issuer: str, subject: str) -> str | None:
    """Why the identity `subject` at `issuer` cannot be linked to anyone here; None when it can."""
    if not any(entry.issuer == issuer for entry in issuers):
        configured = ", ".join(entry.issuer for entry in issuers) or "none"
        return (
            f"The issuer {issuer!r} is not configured in [[oidc_issuers]] (configured: "
            f"{configured}); the issuer is compared exactly, as with the tokens' iss."
        )
    if not subject or len(subject) > MAX_SUBJECT_LENGTH or not subject.isprintable():
        return f"The subject must be 1 to {MAX_SUBJECT_LENGTH} printable characters."
    return None
