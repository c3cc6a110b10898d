"""A job on daemon threads of its own, started and stopped with the app (the rule file's watcher,
the pruning job, the fetch job's workers): `start` is idempotent, `stop` sets the event the job
waits on and joins its threads."""

from __future__ import annotations

import threading
import time

STOP_WAIT = 10.0  # seconds `stop` waits for the job's threads, all together


class BackgroundJob:
    """Subclasses call `__init__` with their thread's name (and how many threads run `_run`, one
    by default) and define `_run`, which loops `while not self._stopping.wait(seconds)`."""

    def __init__(self, thread_name: str, threads: int = 1) -> None:
        self._thread_name = thread_name
        self._thread_count = threads
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def _run(self) -> None:
        raise NotImplementedError

    @property
    def _thread(self) -> threading.Thread | None:
        """The job's thread while it runs (the first, for a job of several)."""
        return self._threads[0] if self._threads else None

    def start(self) -> None:
        if self._threads:
            return
        self._threads = [
            threading.Thread(
                target=self._run,
                name=self._thread_name if self._thread_count == 1 else f"{self._thread_name}-{n}",
                daemon=True,
            )
            for n in range(1, self._thread_count + 1)
        ]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stopping.set()
        threads, self._threads = self._threads, []
        deadline = time.monotonic() + STOP_WAIT
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
