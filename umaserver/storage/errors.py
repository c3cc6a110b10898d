"""The storage failure a request can meet and recover from: `StorageUnavailable`.

The database could not be read or written just now (read-only storage, a full disk, an I/O error,
a lock held past the busy timeout). Nothing was changed; the same operation may succeed later, once
the file's mode is restored or space freed: the handle reopens its connection by itself. The HTTP
layer answers 503 `temporarily_unavailable` with `Retry-After`.
"""

from __future__ import annotations

from .migrations import StorageError


class StorageUnavailable(StorageError):
    """The database cannot be used right now; `str()` says why, in SQLite's words."""
