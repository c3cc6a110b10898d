"""A job on a daemon thread of its own, started and stopped with the app (the rule file's watcher,
the pruning job): `start` is idempotent, `stop` sets the event the job waits on and joins it."""

from __future__ import annotations

import threading


class BackgroundJob:
    """Subclasses call `__init__` with their thread's name and define `_run`, which loops
    `while not self._stopping.wait(seconds)`."""

    def __init__(self, thread_name: str) -> None:
        self._thread_name = thread_name
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)
