"""Forgetting everything but the parties (`db reset --keep-parties`, issue 26): what a test suite
running against one server does between its tests.

Every table of the schema is in one of the two lists below (a test in
`tests/storage/test_migrations.py` checks it): a table a new migration adds is decided here.
"""

from __future__ import annotations

from .handle import Handle

# Kept as they are: the parties (clients, users, the external identities linked to users), and
# what belongs to the server rather than to what its parties did: the schema's version and the
# keys that sign JWT RPTs (made from `secret_key`; resource servers may have cached them).
# `owner_rule_versions` is kept too, each version bumped: every process then reads the owner's
# (now empty) rules again instead of its cached ones.
KEPT = (
    "schema_migrations",
    "clients",
    "users",
    "identity_links",
    "signing_keys",
    "owner_rule_versions",
    # Which parties a seed file made (`seed apply --prune` removes only those): they stay.
    "seeded_parties",
)

# Forgotten, in this order (what points at a row goes before the row).
FORGOTTEN = (
    # The owners' own rules and what is built on them.
    "invitations",
    "shares",
    "owner_rules",
    # The people's side: their inbox and outbox, requests to owners, the access history.
    "notices",
    "requests",
    "events",
    # Claims: persisted claims tokens, claims handles, gathered claims, SAML assertions seen.
    "pct_claims",
    "pcts",
    "claims_handles",
    "gathered_claims",
    "seen_assertions",
    # RPTs and their permissions, tickets, resource sets.
    "permissions",
    "rpts",
    "ticket_resources",
    "ticket_requests",
    "tickets",
    "resource_sets",
    # OAuth: PATs and AATs, codes, refresh tokens, consents, initial access tokens.
    "access_tokens",
    "authorization_codes",
    "refresh_tokens",
    "consents",
    "initial_access_tokens",
    # Signing in.
    "sessions",
    "signin_failures",
    # What registrations pointed at, fetched.
    "fetched_uris",
    "fetched_images",
)


class Reset(Handle):
    def reset_keeping_parties(self) -> dict[str, int]:
        with self.transaction():
            forgotten = {table: self._write(f"DELETE FROM {table}") for table in FORGOTTEN}  # noqa: S608 (names from the list above)
            self._write("UPDATE owner_rule_versions SET version = version + 1")
        return forgotten
