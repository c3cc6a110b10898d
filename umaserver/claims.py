"""Claims about a requesting party, and where they came from.

Every claim the server gathers, pushed by a client or vouched for by an identity provider, becomes a
`Claim`: one name and its value, with its provenance (claim type, issuer, client, time). The rule
engine sees nothing else. Plain Python: no Flask here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Claim:
    """One claim about the requesting party of a ticket.

    `type` is the claim type of the claim object it arrived in (a deployment's custom type,
    `claim-client-claims-oidc-1.0`, `claim-client-assertion-saml-1.0`); `issuer` is who vouches for it:
    the pushing client's id for plain pushed claims, the identity provider's entity id or OIDC issuer
    for verified ones.
    """

    type: str
    name: str
    value: Any
    issuer: str
    client_id: str
    gathered_at: int


class ClaimsError(Exception):
    """A claim object was refused; the message says which check failed (400 invalid_request)."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description
