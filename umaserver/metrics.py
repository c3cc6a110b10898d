"""The server's Prometheus metrics (issue 27, item 8), counted from the events services report
(`events.py`) and from every request. Imported only when `[metrics] enabled = true`: it is the one
module that imports `prometheus_client`.

Each app has a registry of its own (tests build many apps in one process). Under a server of
several processes (gunicorn), `[metrics] multiprocess_dir` makes every process write its counts to
files in that folder and a scrape add them up (prometheus_client's multiprocess mode): the
environment variable that turns it on is set before `prometheus_client` is first imported
(`prepare_multiprocess`), and the folder is emptied when the server starts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# The `endpoint` label of a request no route matched: its raw path could be anything.
UNMATCHED = "unmatched"
# Counters of events with a label of their own, by event name (see `events.py`).
_ISSUED_KINDS = ("ticket", "rpt", "access_token")


class Metrics:
    """The counters of one app. `queue_length` reads the fetch queue's length at each scrape
    (None when it cannot: the gauge is left out)."""

    def __init__(
        self, multiprocess_dir: Path | None, queue_length: Callable[[], int | None]
    ) -> None:
        self.registry = CollectorRegistry()
        self.multiprocess_dir = multiprocess_dir
        self._queue = _QueueLength(queue_length)
        registry = self.registry

        def counter(name: str, help_text: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, help_text, labels, registry=registry)

        self.requests = counter(
            "umaserver_http_requests_total",
            "HTTP requests answered, by route (its rule) and status",
            ("endpoint", "status"),
        )
        self.duration = Histogram(
            "umaserver_http_request_duration_seconds",
            "Seconds from a request's start to its response, by route",
            ("endpoint",),
            registry=registry,
        )
        self.decisions = counter(
            "umaserver_decisions_total",
            "Decisions on authorization requests, by outcome",
            ("outcome",),
        )
        self.issued = {
            "ticket": counter("umaserver_tickets_issued_total", "Permission tickets issued"),
            "rpt": counter("umaserver_rpts_issued_total", "RPTs issued"),
            "access_token": counter(
                "umaserver_tokens_issued_total", "Access tokens (PATs, AATs) issued"
            ),
        }
        self.resource_sets = counter(
            "umaserver_resource_set_changes_total",
            "Resource sets registered, updated or deleted",
            ("action",),
        )
        self.storage_errors = counter(
            "umaserver_storage_errors_total", "Requests answered 503: the database was unusable"
        )
        self.signin_failures = counter("umaserver_signin_failures_total", "Failed sign-ins")
        self.lockouts = counter(
            "umaserver_signin_lockouts_total", "Sign-ins that locked an address or an account"
        )
        if multiprocess_dir is None:
            registry.register(self._queue)

    def count(self, event: str, labels: Mapping[str, str]) -> None:
        """An event of `events.py` happened."""
        if event == "decision":
            self.decisions.labels(labels["outcome"]).inc()
        elif event == "issued" and labels.get("kind") in _ISSUED_KINDS:
            self.issued[labels["kind"]].inc()
        elif event == "resource_set":
            self.resource_sets.labels(labels["action"]).inc()
        elif event == "storage_error":
            self.storage_errors.inc()
        elif event == "signin_failed":
            self.signin_failures.inc()
        elif event == "locked_out":
            self.lockouts.inc()

    def request(self, endpoint: str | None, status: int, seconds: float) -> None:
        label = endpoint or UNMATCHED
        self.requests.labels(label, str(status)).inc()
        self.duration.labels(label).observe(seconds)

    def scrape(self) -> bytes:
        """The text format: this process's counts, or with `multiprocess_dir` every process's."""
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, str(self.multiprocess_dir))  # type: ignore[no-untyped-call]
        registry.register(self._queue)
        return generate_latest(registry)


class _QueueLength(Collector):
    """The fetch queue's length, read from the database when scraped (the database is shared by
    every process: no process need count it)."""

    def __init__(self, read: Callable[[], int | None]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        length = self._read()
        if length is None:  # the database cannot be read now: the other counts still are
            return
        yield GaugeMetricFamily(
            "umaserver_fetch_queue_length",
            "URIs waiting to be fetched and checked (due now)",
            value=length,
        )

    def describe(self) -> Iterator[Metric]:
        return iter(())  # read only when scraped, never when registered


def empty_folder(folder: Path) -> None:
    """Forgets the counts a previous run left in `folder`, unless a process that is still
    running wrote some of them (a sibling worker started first: its counts stay). Only the
    files listed before the check are removed, so a sibling's file made meanwhile stays too."""
    folder.mkdir(parents=True, exist_ok=True)
    files = [(file, file.stem.rpartition("_")[2]) for file in folder.glob("*.db")]
    own = str(os.getpid())  # this process's own files (a second app of it) stay as they are
    if any(pid.isdigit() and pid != own and _running(int(pid)) for _, pid in files):
        return
    for file, pid in files:
        if pid != own:
            file.unlink(missing_ok=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True
