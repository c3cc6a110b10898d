"""The query string of a list of resource sets: Keycloak's filters and page, which the realm face's
list reads as Keycloak does and the standard list as an extension.

`name` (a substring, case aside; with `exactName=true`, the whole name), `uri`, `owner` (a
username), `type`, `scope`, `first` and `max` (whole numbers from 0); `deep=true` (the realm face:
representations instead of ids) and `matchingUri` (accepted and, as Keycloak's pattern matching of
URIs is not offered, treated as false). An empty value is no filter, as in Keycloak; a repeated
parameter, a flag other than true or false, or a page that is not a whole number in range is
refused (400 `invalid_request`).
"""

from __future__ import annotations

from dataclasses import dataclass

from werkzeug.datastructures import MultiDict

from ..errors import InvalidRequest, echo
from ..storage.records import PAGE_LIMIT, ResourceSetQuery

_TEXTS = ("name", "uri", "owner", "type", "scope")
_FLAGS = ("exactName", "deep", "matchingUri")
_NUMBERS = ("first", "max")
_READ = (*_TEXTS, *_FLAGS, *_NUMBERS)


@dataclass(frozen=True)
class ListRequest:
    query: ResourceSetQuery
    owner: str | None = None  # a username, or the resource server's own client id
    deep: bool = False


EVERY_SET = ListRequest(ResourceSetQuery())


def read_list_request(args: MultiDict[str, str]) -> ListRequest:
    """The list the query string `args` asks for (parameters not of this module are ignored)."""
    if not args:
        return EVERY_SET
    for name in _READ:
        if len(args.getlist(name)) > 1:
            raise InvalidRequest(f"The parameter '{name}' is repeated.")
    text = {name: args.get(name) or None for name in _TEXTS}
    flags = {name: _flag(name, args.get(name)) for name in _FLAGS}
    first = _number("first", args.get("first"))
    query = ResourceSetQuery(
        name=text["name"],
        exact_name=flags["exactName"],
        uri=text["uri"],
        type=text["type"],
        scope=text["scope"],
        first=first or 0,
        max=_number("max", args.get("max")),
    )
    return ListRequest(query, text["owner"], flags["deep"])


def _flag(name: str, value: str | None) -> bool:
    if value is None or value == "":
        return False
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise InvalidRequest(f"The parameter '{name}' must be true or false, not {echo(value)}.")


def _number(name: str, value: str | None) -> int | None:
    if value is None or value == "":
        return None
    # ASCII digits alone: int() would take " 7", "+7", "7_0" and other scripts' digits.
    if not (value.isascii() and value.isdigit()) or len(value) > 10 or int(value) > PAGE_LIMIT:
        raise InvalidRequest(
            f"The parameter '{name}' must be a whole number from 0 to {PAGE_LIMIT},"
            f" not {echo(value)}."
        )
    return int(value)
