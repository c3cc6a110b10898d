"""Where the server's time comes from: one clock, passed in.

`create_app(config, clock=...)` takes it; services, bearer validation and the command line read the
time only through it, so a test moves time by moving its clock, never by writing to tables.
Intervals between background jobs (key fetches, rule-file checks) are measured with
`time.monotonic`, which no deployment wants to move.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> int:
        """Seconds since the epoch."""
        ...


class SystemClock:
    def now(self) -> int:
        return int(time.time())
