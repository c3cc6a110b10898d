"""The header's navigation for a signed-in person: Resource sets, Requests (with a count),
History, Notices (with a count), Account, Sign out, the current one marked (`aria-current`).

`header_counts(user)` is the one place where the header's counts come from: a dict such as
`{"requests": N, "notices": M}`; a count that is missing or 0 shows no badge."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flask import request

from ..runtime import runtime
from ..services import notices, owner_requests
from ..storage.per_request import storage
from ..storage.records import User
from . import sessions


@dataclass(frozen=True)
class NavItem:
    key: str  # "sets", "requests", "history", "account"
    label: str
    href: str


NAV_ITEMS = (
    NavItem("sets", "Resource sets", "/policy"),
    NavItem("requests", "Requests", "/policy/requests"),
    NavItem("history", "History", "/policy/history"),
    NavItem("notices", "Notices", "/notices"),
    NavItem("account", "Account", "/account"),
)


def header_counts(user: User) -> dict[str, int]:
    """What the header counts for `user`: {"requests": pending requests to answer, "notices":
    notices not seen yet}."""
    store = storage()
    return {
        "requests": owner_requests.pending_count(store, user.sub, runtime().clock.now()),
        "notices": notices.unseen_count(store, user.sub),
    }


def current_item(path: str) -> tuple[str | None, bool]:
    """The header's item `path` belongs to, and whether it is that item's own page (`aria-current
    = "page"`) rather than a page under it (`"true"`)."""
    for item in sorted(NAV_ITEMS, key=lambda item: len(item.href), reverse=True):
        if path == item.href:
            return item.key, True
        if path.startswith(item.href + "/"):
            return item.key, False
    return None, False


@dataclass(frozen=True)
class Navigation:
    items: tuple[NavItem, ...]
    counts: dict[str, int]
    current: str | None
    exact: bool

    def aria_current(self, key: str) -> str | None:
        if key != self.current:
            return None
        return "page" if self.exact else "true"


def navigation() -> Navigation | None:
    """The header's navigation for this request; None when nobody is signed in."""
    user = sessions.current_user()
    if user is None:
        return None
    current, exact = current_item(request.path)
    return Navigation(NAV_ITEMS, header_counts(user), current, exact)


def context() -> dict[str, Callable[[], Navigation | None]]:
    """The templates' `navigation()`: computed only by a page that shows the header."""
    return {"navigation": navigation}
