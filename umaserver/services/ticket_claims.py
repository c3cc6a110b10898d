"""The bound on what one ticket holds about its requesting party for one client (`[limits]
claims_per_ticket`), for claims pushed to the authorization request and claims gathered at
`/rqp_claims` alike: each client's claims are bounded apart, as they serve only that client."""

from __future__ import annotations

from ..config import Limits
from ..errors import InvalidRequest
from ..storage.records import Claim


def within_ticket_bound(held: list[Claim], claims: tuple[Claim, ...], limits: Limits) -> None:
    """Raises InvalidRequest (rolling the request back) when the claims the ticket holds for this
    requesting party and client (`held`) and those this request adds are more than `[limits]
    claims_per_ticket`."""
    if not claims:
        return
    keys = {(claim.type, claim.issuer, claim.name) for claim in held}
    added = {(claim.type, claim.issuer, claim.name) for claim in claims} - keys
    if len(held) + len(added) > limits.claims_per_ticket:
        raise InvalidRequest(
            f"claims: this ticket would hold {len(held) + len(added)} claims about this requesting"
            " party, more than this server accepts ([limits] claims_per_ticket ="
            f" {limits.claims_per_ticket}); ask the resource server for a new ticket."
        )
