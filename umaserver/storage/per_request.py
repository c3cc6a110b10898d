"""The Flask glue: one storage handle per request, taken on first use, given back on teardown (to
the opener's pool when it keeps one, else closed)."""

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
    """Gives the request's handle back to its opener's pool when it has one, else closes it."""
    handle = g.pop("storage", None)
    if handle is None:
        return
    release = getattr(current_app.extensions[_OPENER], "release", None)
    if release is not None:
        release(handle)
    else:
        handle.close()
