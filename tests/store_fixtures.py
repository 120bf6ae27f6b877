"""Database fixtures shared by every test module that touches the store.

Usage in another test module::

    from tests.store_fixtures import store_url  # noqa: F401

`store_url` is parametrized: every test using it runs on SQLite and, when env
`REVIEWBOT_TEST_POSTGRES_URL` is set (e.g. `postgresql://postgres@127.0.0.1:5432/test`), on
PostgreSQL too, each time on a database that is **already migrated** and holds no rows: it
starts from the run's migrated template (`tests/store_templates.py`: a copied file, or a copied
database put back to the template's state between tests), which takes milliseconds where
migrating a blank database takes most of a second. `migrated_store` is a `Store` on it.

`blank_store_url` is the same on a **blank** database (no table, no revision), for the tests of
the migrations themselves (upgrade from blank, twice, concurrently, the schema they build) and
of whatever migrates a blank database on first use. `postgres_url` is a blank PostgreSQL
database alone, for what only PostgreSQL serves; `migrated_sqlite_url` puts a migrated SQLite
database at a path the test chooses.

Isolation: a SQLite database is a file under the test's own temporary directory. Each
PostgreSQL test module has its own throw-away databases in each process that runs one of its
tests (CREATE DATABASE with a random name over an AUTOCOMMIT connection to the given URL, a copy
of the run's template or blank, DROP after the module), so concurrent runs never collide;
between two tests of a module the migrated one is put back to the template's state and the
blank one gets a new `public` schema, both after every other session on it has been ended.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import make_url

from reviewbot.store import Store
from tests.run_lock import XDIST_WORKER_ENV, run_dir
from tests.store_templates import (
    autocommit_execute,
    catalog_fingerprint,
    copy_sqlite_template,
    create_database,
    drop_database,
    drop_run_templates,
    postgres_template,
    random_database_name,
    reset_to_template,
    sqlite_url,
    terminate_other_sessions,
)

__all__ = [
    "POSTGRES_URL_ENV",
    "blank_store_url",
    "migrated_sqlite_url",
    "migrated_store",
    "postgres_url",
    "store_url",
    "terminate_other_sessions",
]

POSTGRES_URL_ENV = "REVIEWBOT_TEST_POSTGRES_URL"
RUN_FOLDER = "store"  # the run's shared directory of the templates (tests.run_lock.run_dir)
SQLITE_FILE = "reviewbot.db"
# Per test module: its PostgreSQL databases in this process, by template (None: blank).
_MODULE_DATABASES = pytest.StashKey[dict[str | None, str]]()
# Per process: the catalog fingerprint of each template (tests.store_templates).
_TEMPLATE_FINGERPRINTS = pytest.StashKey[dict[str, str]]()

_without_postgres = pytest.mark.skipif(
    not os.environ.get(POSTGRES_URL_ENV), reason=f"set {POSTGRES_URL_ENV} to test PostgreSQL"
)
BACKENDS = ["sqlite", pytest.param("postgresql", marks=_without_postgres)]


def migrated_sqlite_url(factory: pytest.TempPathFactory, path: Path) -> str:
    """A migrated SQLite database at ``path`` (a copy of the run's template); its URL. For a
    test whose database lives at a path of its own rather than behind ``store_url``."""
    return copy_sqlite_template(run_dir(factory, RUN_FOLDER), path)


def _module_database(
    request: pytest.FixtureRequest, factory: pytest.TempPathFactory, *, migrated: bool
) -> str:
    """The current test module's throw-away PostgreSQL database of its kind (migrated or blank)
    in this process: created on first use, dropped after the module, and clean for each test
    (as the template left it, or blank)."""
    server_url = os.environ[POSTGRES_URL_ENV]
    template = postgres_template(run_dir(factory, RUN_FOLDER), server_url) if migrated else None
    module = request.node.getparent(pytest.Module)
    databases = module.stash.setdefault(_MODULE_DATABASES, {})
    if template not in databases:
        url = create_database(server_url, random_database_name(), template)
        databases[template] = url
        module.addfinalizer(lambda: drop_database(server_url, url))
        if template is not None:
            _remember_fingerprint(request.config, template, url)
        return url
    url = databases[template]
    if template is None:
        _blank_schema(url)
    elif not reset_to_template(url, request.config.stash[_TEMPLATE_FINGERPRINTS][template]):
        drop_database(server_url, url)  # a test changed more than rows: a fresh copy
        create_database(server_url, make_url(url).database, template)
    return url


def _remember_fingerprint(config: pytest.Config, template: str, fresh_copy: str) -> None:
    """Read the catalog fingerprint of ``template``, once per process, from a copy no test has
    used yet (nobody may connect to the template itself)."""
    fingerprints = config.stash.setdefault(_TEMPLATE_FINGERPRINTS, {})
    if template not in fingerprints:
        fingerprint = catalog_fingerprint(fresh_copy)
        assert fingerprint is not None, f"cannot read the catalog of a copy of {template}"
        fingerprints[template] = fingerprint


def _blank_schema(url: str) -> None:
    """Blank the database: end other sessions (none may hold locks), recreate `public`."""
    terminate_other_sessions(url)
    autocommit_execute(url, "DROP SCHEMA IF EXISTS public CASCADE", "CREATE SCHEMA public")


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """URL of a migrated database with no rows, on each available backend."""
    if request.param == "sqlite":
        return migrated_sqlite_url(tmp_path_factory, tmp_path_factory.mktemp("store") / SQLITE_FILE)
    return _module_database(request, tmp_path_factory, migrated=True)


@pytest.fixture(params=BACKENDS)
def blank_store_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """URL of a blank database (not migrated), on each available backend."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path_factory.mktemp("store") / SQLITE_FILE)
    return _module_database(request, tmp_path_factory, migrated=False)


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """URL of a blank PostgreSQL database (not migrated), for tests of what only PostgreSQL
    serves (several processes or hosts on one queue); skipped without PostgreSQL."""
    if not os.environ.get(POSTGRES_URL_ENV):
        pytest.skip(f"set {POSTGRES_URL_ENV} to test PostgreSQL")
    return _module_database(request, tmp_path_factory, migrated=False)


@pytest.fixture
def migrated_store(store_url: str) -> Iterator[Store]:
    """A `Store` on the migrated database of `store_url`, on each backend."""
    store = Store.from_url(store_url)
    yield store
    store.close()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """At the end of the run (in the xdist controller, or the only process), drop the
    PostgreSQL templates its processes built."""
    server_url = os.environ.get(POSTGRES_URL_ENV)
    if server_url and not os.environ.get(XDIST_WORKER_ENV):
        factory = session.config._tmp_path_factory  # type: ignore[attr-defined]
        drop_run_templates(run_dir(factory, RUN_FOLDER), server_url)
