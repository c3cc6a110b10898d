"""The storage conformance suite's fixtures: `store_factory` gives handles on one fresh prepared
database, `store` is one of them.

Every backend the suite checks is one entry of `BACKENDS`: a context manager that prepares a fresh,
empty database (under `tmp_path`, or a database of its own on a server), yields a callable opening
a new handle (its own connection) on it, and drops the database when it exits. `store_factory` is
parametrized over `BACKENDS`, so the whole suite runs unchanged against each.

`postgres` is a fresh database of the session's throwaway cluster (`tests/postgres_fixture.py`,
started on first use): without PostgreSQL's binaries it fails saying what to install, never skips.

The tests speak only the contract (`umaserver.storage.contract.Storage`) and the records of
`umaserver.storage.records`: no SQL, no connection attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from umaserver.storage import Storage, open_storage, prepare_database

from ..postgres_fixture import PREPARED_AT as TEMPLATE_PREPARED_AT

# The moment the database is prepared at; the tests' own times are chosen around it.
PREPARED_AT = 1_700_000_000

StoreFactory = Callable[[], Storage]


assert TEMPLATE_PREPARED_AT == PREPARED_AT  # the template database is prepared at this moment


@contextmanager
def sqlite_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    path = tmp_path / "uma.db"
    prepare_database(path, PREPARED_AT)
    yield lambda: open_storage(path)


@contextmanager
def postgres_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    cluster = request.getfixturevalue("postgres_cluster")
    url = cluster.new_database()
    try:
        yield lambda: open_storage(url)
    finally:
        cluster.drop(url)


Backend = Callable[[pytest.FixtureRequest, Path], AbstractContextManager[StoreFactory]]
BACKENDS: dict[str, Backend] = {
    "sqlite": sqlite_backend,
    "postgres": postgres_backend,
}


@pytest.fixture(params=sorted(BACKENDS))
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A callable giving a new, independent handle on one fresh database per call; every handle
    is closed at teardown (closing one a test closed already must be harmless)."""
    handles: list[Storage] = []

    with BACKENDS[request.param](request, tmp_path) as open_handle:

        def factory() -> Storage:
            handle = open_handle()
            handles.append(handle)
            return handle

        try:
            yield factory
        finally:
            for handle in handles:
                handle.close()


@pytest.fixture
def store(store_factory: StoreFactory) -> Storage:
    return store_factory()
