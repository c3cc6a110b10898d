"""The identity a person brings back from a sign-in at an external OpenID Connect provider: who
(issuer, subject), and what the provider said of them (the ID token's and userinfo's claims,
without the protocol's own), bounded in size so that it fits in the browser's signed cookie.
Plain Python: no Flask here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..claims.id_tokens import TOKEN_BOOKKEEPING_CLAIMS

#: Claims about the token or the sign-in, not about the person; `sub` is `subject`.
PROTOCOL_CLAIMS = TOKEN_BOOKKEEPING_CLAIMS | {"sub", "auth_time"}
#: The claims kept, as JSON, at most: a cookie holds about 4 KiB, the sign-in's state included.
MAX_CLAIMS_BYTES = 2048


@dataclass(frozen=True)
class ExternalIdentity:
    """A person as an external provider vouched for them at `signed_at`."""

    issuer: str
    subject: str
    display_name: str  # the provider's, for people
    claims: dict[str, Any] = field(hash=False)
    signed_at: int
    # Claims left out because the identity would not fit the cookie with them.
    dropped: tuple[str, ...] = ()

    def to_session(self) -> dict[str, Any]:
        return {
            "iss": self.issuer,
            "sub": self.subject,
            "name": self.display_name,
            "claims": self.claims,
            "at": self.signed_at,
            "dropped": list(self.dropped),
        }

    @classmethod
    def from_session(cls, data: object) -> ExternalIdentity | None:
        """The identity a session held, or None for anything else (the cookie is signed, but
        may come from an older version)."""
        if not isinstance(data, Mapping):
            return None
        issuer, subject, name = data.get("iss"), data.get("sub"), data.get("name")
        claims, at, dropped = data.get("claims"), data.get("at"), data.get("dropped", [])
        if not (isinstance(issuer, str) and isinstance(subject, str) and isinstance(name, str)):
            return None
        if not isinstance(claims, dict) or not isinstance(at, int) or isinstance(at, bool):
            return None
        if not isinstance(dropped, list) or not all(isinstance(d, str) for d in dropped):
            return None
        return cls(issuer, subject, name, claims, at, tuple(dropped))


def person_claims(
    id_token: Mapping[str, Any], userinfo: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The claims about the person: the ID token's (signed, so they win) and userinfo's."""
    merged = {**(userinfo or {}), **id_token}
    return {name: value for name, value in merged.items() if name not in PROTOCOL_CLAIMS}


def bounded(
    claims: Mapping[str, Any], max_bytes: int = MAX_CLAIMS_BYTES
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The claims that fit in `max_bytes` of JSON, in their order, and the names of those that
    did not (each dropped whole: a cut value would say something the provider did not)."""
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    used = 2  # {}
    for name, value in claims.items():
        size = len(json.dumps({name: value}, separators=(",", ":"))) - 1  # one ',' each
        if used + size > max_bytes:
            dropped.append(name)
            continue
        kept[name] = value
        used += size
    return kept, tuple(dropped)
