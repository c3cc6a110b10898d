"""Sign-in at external OpenID Connect providers for the requesting party claims endpoint: none yet
(the relying party lands next). The functions `rqp_claims` calls, answering "no provider"."""

from __future__ import annotations

from typing import Any


def providers() -> list[Any]:
    return []


def start_url(index: int, next_path: str) -> str:
    raise LookupError(index)


def current_identity() -> Any:
    return None
