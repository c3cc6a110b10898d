"""The operator's line for each decision (issue 27, item 9), shared by UMA 1.0's authorization
request, UMA 2.0's grant and Keycloak's ticketless grant: who asked (the requesting party as operators know them), for what,
of whom, and which rules decided. Never a claim value: the party is named by username, or by
subject@issuer of a verified or gathered claim, or as the token names them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .. import events
from ..storage import Storage
from ..storage.records import Claim, RequestedPermission


def requesting_party(party: str, username: str | None, claims: Iterable[Claim]) -> str:
    """`username` when the party is a local person; else the subject of the first claim that has
    one, at its issuer; else `party` as recorded (a sub, or `client:<id>` for a client acting for
    itself)."""
    if username:
        return username
    for claim in claims:
        if claim.subject is not None:
            return f"{claim.subject}@{claim.issuer}"
    return party


def party_of(storage: Storage, party: str, claims: Iterable[Claim]) -> str:
    """`requesting_party` for a party recorded as a sub (or `client:<id>`): its username read."""
    username = None if party.startswith("client:") else storage.get_username(party)
    return requesting_party(party, username, claims)


def report(
    outcome: str,
    owner: str,
    permissions: Sequence[RequestedPermission],
    client: str,
    party: str,
    rules: Iterable[str],
    *,
    grant: str | None = None,
    requests: int | None = None,
) -> None:
    events.decision(
        outcome,
        grant=grant,
        owner=owner,
        resource_sets=(pair.resource_set_id for pair in permissions),
        scopes=(pair.scopes for pair in permissions),
        client=client,
        party=party,
        rules=rules,
        requests=requests,
    )
