"""The storage conformance suite's fixtures: `store_factory` gives handles on one fresh prepared
database, `store` is one of them.

Every backend the suite checks is one entry of `BACKENDS`: a context manager that prepares a fresh,
empty database (under `tmp_path`, or a scratch schema on a server), yields a callable opening a new
handle (its own connection) on it, and drops the database when it exits. `store_factory` is
parametrized over `BACKENDS`, so the whole suite runs unchanged against each. A backend whose
server is not at hand calls `pytest.skip` before it yields. PostgreSQL, later, plugs in as:

    @contextmanager
    def postgres_backend(tmp_path: Path) -> Iterator[Callable[[], Storage]]:
        dsn = os.environ.get("UMASERVER_TEST_POSTGRES") or pytest.skip("no PostgreSQL")
        ...  # create a scratch database or schema, prepare it
        yield lambda: open_postgres_storage(dsn_of_scratch)
        ...  # drop it

    BACKENDS["postgres"] = postgres_backend

The tests speak only the contract (`umaserver.storage.contract.Storage`) and the records of
`umaserver.storage.records`: no SQL, no connection attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from umaserver.storage import Storage, open_storage, prepare_database

# The moment the database is prepared at; the tests' own times are chosen around it.
PREPARED_AT = 1_700_000_000

StoreFactory = Callable[[], Storage]


@contextmanager
def sqlite_backend(tmp_path: Path) -> Iterator[StoreFactory]:
    path = tmp_path / "uma.db"
    prepare_database(path, PREPARED_AT)
    yield lambda: open_storage(path)


BACKENDS: dict[str, Callable[[Path], AbstractContextManager[StoreFactory]]] = {
    "sqlite": sqlite_backend,
}


@pytest.fixture(params=sorted(BACKENDS))
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A callable giving a new, independent handle on one fresh database per call; every handle
    is closed at teardown (closing one a test closed already must be harmless)."""
    handles: list[Storage] = []

    with BACKENDS[request.param](tmp_path) as open_handle:

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
