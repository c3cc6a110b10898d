"""A person's persisted claims tokens (UMA 2.0): what they shared, kept for a client's later
tickets, as their account page shows it, and withdrawing one."""

from __future__ import annotations

from dataclasses import dataclass

from ..storage import Storage


@dataclass(frozen=True)
class KeptClaims:
    """One live PCT about the person: which client may use it, what it holds, until when."""

    digest: str  # names it in the withdraw form (a digest: no use as a token)
    client_id: str
    client_name: str
    claims: tuple[str, ...]  # the claim names, never their values
    created_at: int
    expires_at: int


def kept_claims(storage: Storage, user_sub: str, now: int) -> list[KeptClaims]:
    """The person's live PCTs, newest first."""
    found = []
    for pct in storage.pcts_of(user_sub):
        if not pct.is_live(now):
            continue
        client = storage.get_client(pct.client_id)
        names = tuple(sorted({claim.name for claim in storage.pct_claims(pct.digest, now)}))
        found.append(
            KeptClaims(
                pct.digest,
                pct.client_id,
                client.name if client is not None else pct.client_id,
                names,
                pct.created_at,
                pct.expires_at,
            )
        )
    return found


def withdraw(storage: Storage, user_sub: str, digest: str) -> bool:
    """Revokes the PCT when it is about this person; False otherwise (unknown, another's, or
    withdrawn already)."""
    pct = storage.get_pct(digest)
    if pct is None or pct.user_sub != user_sub:
        return False
    return storage.revoke_pct(digest)
