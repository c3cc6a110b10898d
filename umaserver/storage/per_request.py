"""The Flask glue: one storage handle per request, opened on first use, closed on teardown."""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask, current_app, g

from .contract import Storage

_OPENER = "umaserver.storage"


def init_app(app: Flask, open_handle: Callable[[], Storage]) -> None:
    app.extensions[_OPENER] = open_handle
    app.teardown_appcontext(_close)


def opener(app: Flask) -> Callable[[], Storage]:
    found: Callable[[], Storage] = app.extensions[_OPENER]
    return found


def storage() -> Storage:
    """The request's storage handle."""
    if "storage" not in g:
        g.storage = current_app.extensions[_OPENER]()
    handle: Storage = g.storage
    return handle


def _close(exc: BaseException | None) -> None:
    handle = g.pop("storage", None)
    if handle is not None:
        handle.close()
