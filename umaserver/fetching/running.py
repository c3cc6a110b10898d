"""The app's fetch job: installed by `create_app`, woken by whoever queues a URI in a request."""

from __future__ import annotations

from flask import Flask, current_app

from .job import FetchJob

_KEY = "umaserver.fetch_job"


def install(app: Flask, job: FetchJob) -> None:
    app.extensions[_KEY] = job


def fetch_job(app: Flask) -> FetchJob:
    found: FetchJob = app.extensions[_KEY]
    return found


def wake() -> None:
    """Tells this process's job that something was queued (inside a request or app context)."""
    job: FetchJob | None = current_app.extensions.get(_KEY)
    if job is not None:
        job.wake()
