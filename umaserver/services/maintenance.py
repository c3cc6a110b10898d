"""Forgetting what has expired: tickets and RPTs a day after their expiry (an expired ticket is
remembered that long so that it can be told apart from an unknown one), assertion uses at their
expiry. Deletes in bounded batches, so no single write holds the lock for long."""

from __future__ import annotations

from ..storage import Storage

# Seconds an expired ticket is remembered (to answer expired_ticket), and an expired RPT kept.
EXPIRED_MEMORY = 24 * 3600
BATCH = 500


def prune_tickets(storage: Storage, now: int) -> None:
    storage.delete_tickets_expired_before(now - EXPIRED_MEMORY, BATCH)
    storage.delete_assertion_uses_expired_before(now, BATCH)


def prune_rpts(storage: Storage, now: int) -> None:
    storage.delete_rpts_expired_before(now - EXPIRED_MEMORY, BATCH)
