"""umaserver: a UMA authorization server.

`create_app` (`umaserver.app_factory`) builds the server. Importing this package loads neither
Flask nor the app: `create_app` is imported when first asked for (PEP 562), so that what needs
only the package's name or its data (a pytest plugin, `importlib.resources`) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app_factory import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .app_factory import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
