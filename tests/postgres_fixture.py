"""The tests' PostgreSQL cluster (`tests.postgres_cluster`): `postgres_cluster`, started once per
session and removed at its end. Without PostgreSQL's binaries the fixture fails with a sentence
saying what to install: `make test` installs them (system-deps), and never skips these tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .postgres_cluster import (
    PREPARED_AT,
    TEMPLATE,
    ClusterError,
    PostgresCluster,
    start_cluster,
    stop_cluster,
)

__all__ = ["PREPARED_AT", "TEMPLATE", "PostgresCluster", "postgres_cluster"]


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    try:
        cluster, server = start_cluster()
    except ClusterError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield cluster
    finally:
        stop_cluster(cluster, server)
