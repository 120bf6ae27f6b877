"""Database fixtures shared by every test module that touches the store.

Usage in another test module::

    from tests.store_fixtures import store_url  # noqa: F401

`store_url` is parametrized: every test using it runs on a blank SQLite file and, when
env `REVIEWBOT_TEST_POSTGRES_URL` is set (e.g. `postgresql://postgres@127.0.0.1:5432/test`),
on a blank PostgreSQL database too. The database is not migrated: call
`reviewbot.store.upgrade(store_url)` (or use the `migrated_store` fixture) first.

PostgreSQL isolation: each test module gets its own throw-away database (CREATE DATABASE with
a random name over an AUTOCOMMIT connection to the given URL, DROP after the module), so
concurrent runs never collide; between tests of one module its `public` schema is reset.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from reviewbot.store import Store, normalize_database_url, upgrade

POSTGRES_URL_ENV = "REVIEWBOT_TEST_POSTGRES_URL"
DATABASE_NAME_PREFIX = "reviewbot_test_"
DATABASE_NAME_RANDOM_BYTES = 6
_MODULE_DATABASE = pytest.StashKey[str]()

_without_postgres = pytest.mark.skipif(
    not os.environ.get(POSTGRES_URL_ENV), reason=f"set {POSTGRES_URL_ENV} to test PostgreSQL"
)


def _autocommit_execute(url: str, *statements: str) -> None:
    engine = create_engine(
        normalize_database_url(url), isolation_level="AUTOCOMMIT", poolclass=NullPool
    )
    try:
        with engine.connect() as connection:
            for statement in statements:
                connection.execute(text(statement))
    finally:
        engine.dispose()


def _create_database(server_url: str) -> str:
    name = DATABASE_NAME_PREFIX + secrets.token_hex(DATABASE_NAME_RANDOM_BYTES)
    _autocommit_execute(server_url, f'CREATE DATABASE "{name}"')
    database_url = normalize_database_url(server_url).set(database=name)
    return database_url.render_as_string(hide_password=False)


def _drop_database(server_url: str, database_url: str) -> None:
    name = normalize_database_url(database_url).database
    # WITH (FORCE) (PostgreSQL >= 13) closes connections a test may have left open.
    _autocommit_execute(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_TERMINATE_OTHER_SESSIONS = (
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


def terminate_other_sessions(database_url: str) -> None:
    """End every other session on this PostgreSQL database, as a server restart would."""
    _autocommit_execute(database_url, _TERMINATE_OTHER_SESSIONS)


def _reset_schema(database_url: str) -> None:
    """Blank the database: end other sessions (none may hold locks), recreate `public`."""
    _autocommit_execute(
        database_url,
        _TERMINATE_OTHER_SESSIONS,
        "DROP SCHEMA IF EXISTS public CASCADE",
        "CREATE SCHEMA public",
    )


def _module_postgres_database(request: pytest.FixtureRequest) -> str:
    """The throw-away database of the current test module, created on first use."""
    server_url = os.environ[POSTGRES_URL_ENV]
    module = request.node.getparent(pytest.Module)
    if _MODULE_DATABASE not in module.stash:
        database_url = _create_database(server_url)
        module.stash[_MODULE_DATABASE] = database_url
        module.addfinalizer(lambda: _drop_database(server_url, database_url))
    return module.stash[_MODULE_DATABASE]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=_without_postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """URL of a blank database (not migrated) on each available backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('store') / 'reviewbot.db'}"
    database_url = _module_postgres_database(request)
    _reset_schema(database_url)
    return database_url


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> str:
    """URL of a blank PostgreSQL database (not migrated), for tests of what only PostgreSQL
    serves (several processes or hosts on one queue); skipped without PostgreSQL."""
    if not os.environ.get(POSTGRES_URL_ENV):
        pytest.skip(f"set {POSTGRES_URL_ENV} to test PostgreSQL")
    database_url = _module_postgres_database(request)
    _reset_schema(database_url)
    return database_url


@pytest.fixture
def migrated_store(store_url: str) -> Iterator[Store]:
    """A `Store` on a freshly migrated database of each backend."""
    upgrade(store_url)
    store = Store.from_url(store_url)
    yield store
    store.close()
