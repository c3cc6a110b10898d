"""Errors are values: each class carries its code, status and description.

They are plain Python, raised by the protocol code as well as by blueprints; `error_responses` is
the one place that writes them as HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The most characters of untrusted input an error message quotes.
ECHO_LENGTH = 64


def echo(untrusted: str) -> str:
    """`untrusted` as an error message may quote it: in quotes, cut to `ECHO_LENGTH` characters
    with an ellipsis, control and other unprintable characters escaped (`repr` style), so that an
    error never carries a client's megabyte back, nor a line break or a terminal escape into a log.
    Every message that echoes input uses this one function."""
    if len(untrusted) > ECHO_LENGTH:
        untrusted = untrusted[:ECHO_LENGTH] + "\u2026"
    return repr(untrusted)


class APIError(Exception):
    status = 400
    error = "invalid_request"
    description = "The request is invalid."

    def __init__(
        self,
        description: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(description or self.description)
        if description is not None:
            self.description = description
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})


class InvalidRequest(APIError):
    pass


class NotFound(APIError):
    status = 404
    error = "not_found"
    description = "The resource set does not exist."


class UnsupportedMethod(APIError):
    status = 405
    error = "unsupported_method_type"
    description = "This method is not supported here."


class RequestTooLarge(APIError):
    status = 413
    error = "invalid_request"


class ServerError(APIError):
    status = 500
    error = "server_error"
    description = "The server met an unexpected condition."


# RFC 6750 section 3.1: token problems get the bearer errors, never an UMA code.
class InvalidToken(APIError):
    status = 401
    error = "invalid_token"
    description = "The access token is unknown, expired or revoked."


class InvalidClient(APIError):
    """401 invalid_client (RFC 6749 5.2): the client is unknown or its credentials are wrong."""

    status = 401
    error = "invalid_client"
    description = "The client is unknown or its credentials are wrong."


class InsufficientScope(APIError):
    status = 403
    error = "insufficient_scope"
    description = "The access token does not have the scope this endpoint needs."


class MissingToken(APIError):
    status = 401
    error = "invalid_token"
    description = "This endpoint needs a bearer access token."


# -- permission registration -------------------------------------------------------------------


class InvalidResourceSetId(APIError):
    error = "invalid_resource_set_id"
    description = "No resource set with this id is registered for this owner and resource server."


class InvalidResourceId(APIError):
    """UMA 2.0's name for `InvalidResourceSetId` (Federated Authorization 4.3)."""

    error = "invalid_resource_id"
    description = "No resource with this id is registered for this owner and resource server."


class InvalidScope(APIError):
    error = "invalid_scope"
    description = "A scope is not registered on the resource set."


# -- authorization request -----------------------------------------------------------------------


class InvalidTicket(APIError):
    error = "invalid_ticket"
    description = "The ticket is unknown, already used or finished."


class ExpiredTicket(APIError):
    error = "expired_ticket"
    description = "The ticket has expired; ask the resource server for a new one."


class NotAuthorized(APIError):
    status = 403
    error = "not_authorized_permission"
    description = "The resource owner's policies do not allow this access."


class RequestSubmitted(APIError):
    """403 request_submitted (UMA 2.0 Grant 3.3.6, and its 1.0 counterpart here): the owner has
    been asked; the client polls with the ticket no faster than `interval` seconds (`extra`)."""

    status = 403
    error = "request_submitted"
    description = (
        "The resource owner has been asked for access; poll with the ticket no faster than"
        " the interval."
    )


class TemporarilyUnavailable(APIError):
    """A pushed claim could not be checked now for a reason on this side (an identity provider's
    keys are not fetched yet); nothing was recorded and the client may try again (Retry-After)."""

    status = 503
    error = "temporarily_unavailable"
    description = "The claims cannot be checked right now; try again shortly."


class TooManyRequests(APIError):
    """A limit on requests from one address is reached (open registration's per hour); nothing
    was done, and the same request may succeed after Retry-After seconds."""

    status = 429
    error = "temporarily_unavailable"
    description = "Too many requests from this address; try again later."


class StorageUnavailableError(APIError):
    """The database cannot be read or written right now (read-only, a full disk, an I/O error);
    nothing was changed, and the same request may succeed shortly."""

    status = 503
    error = "temporarily_unavailable"
    description = "The server cannot store or read data right now; try again shortly."

    def __init__(self) -> None:
        super().__init__(headers={"Retry-After": "5"})
