"""The test databases themselves (tests/store_templates.py, tests/store_fixtures.py): a migrated
store is at the newest revision with no rows, a template follows the migrations, a PostgreSQL
database put back between tests is as the template left it (or copied again when a test
changed more than rows), and two runs never share a template."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from reviewbot.store import (
    MergeRequestKey,
    Store,
    current_revision,
    head_revision,
    normalize_database_url,
)
from reviewbot.store.migrate import MIGRATIONS_DIR
from tests.store_fixtures import POSTGRES_URL_ENV, migrated_store, store_url  # noqa: F401
from tests.store_templates import (
    catalog_fingerprint,
    database_url,
    drop_run_templates,
    folder_digest,
    migrations_key,
    postgres_template,
    reset_to_template,
)

MR_IID = 42
KEY = MergeRequestKey("https://gitlab.example.com", 7, MR_IID)
REVIEW = {
    "project": "group/app",
    "mr_iid": MR_IID,
    "head_sha": "a" * 40,
    "base_sha": "b" * 40,
    "start_sha": "c" * 40,
    "trigger": "webhook",
    "model": "m",
    "prompt_version": "p",
    "key": KEY,
}
FIRST_ID = 1
TABLES_WITH_ROWS = ("reviews", "jobs", "findings", "llm_calls", "feedback")


def _postgres_only(url: str) -> None:
    if not url.startswith("postgresql"):
        pytest.skip("what only the PostgreSQL databases do")


def _count(url: str, table: str) -> int:
    engine = create_engine(normalize_database_url(url), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return connection.scalar(text(f"SELECT count(*) FROM {table}"))  # type: ignore[return-value]
    finally:
        engine.dispose()


def _execute(url: str, statement: str) -> None:
    engine = create_engine(normalize_database_url(url), poolclass=NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(text(statement))
    finally:
        engine.dispose()


@pytest.mark.slow
def test_a_migrated_store_is_at_the_newest_revision_with_no_rows(store_url: str) -> None:  # noqa: F811
    assert current_revision(store_url) == head_revision()
    assert all(_count(store_url, table) == 0 for table in TABLES_WITH_ROWS)


def test_the_key_follows_every_migration_file(tmp_path: Path) -> None:
    folder = shutil.copytree(MIGRATIONS_DIR, tmp_path / "migrations")
    assert folder_digest(folder) == migrations_key()
    revision = sorted((folder / "versions").glob("0*.py"))[-1]
    revision.write_text(revision.read_text() + "\n# edited\n")
    edited = folder_digest(folder)
    assert edited != migrations_key()
    (folder / "versions" / "9999_new.py").write_text('"""A new revision."""\n')
    assert folder_digest(folder) not in {edited, migrations_key()}


def test_a_reset_deletes_every_row_and_restarts_the_ids(
    migrated_store: Store,  # noqa: F811
    store_url: str,  # noqa: F811
) -> None:
    _postgres_only(store_url)
    fingerprint = catalog_fingerprint(store_url)
    assert fingerprint is not None
    first = migrated_store.start_review(**REVIEW)
    assert reset_to_template(store_url, fingerprint)  # the store's own session ended too
    assert _count(store_url, "reviews") == 0
    fresh = Store.from_url(store_url)
    try:
        assert fresh.start_review(**REVIEW) == first == FIRST_ID
    finally:
        fresh.close()


@pytest.mark.parametrize(
    "change",
    [
        "ALTER TABLE reviews ADD COLUMN extra integer",
        "CREATE INDEX extra ON reviews (model)",
        "UPDATE alembic_version SET version_num = 'ffffffffffff'",
        "DROP TABLE alembic_version",
        "CREATE TABLE extra (id integer)",
    ],
)
def test_a_reset_refuses_a_database_changed_beyond_its_rows(store_url: str, change: str) -> None:  # noqa: F811
    """The fixture then copies the template again."""
    _postgres_only(store_url)
    fingerprint = catalog_fingerprint(store_url)
    assert fingerprint is not None
    _execute(store_url, change)
    assert not reset_to_template(store_url, fingerprint)


@pytest.mark.skipif(not os.environ.get(POSTGRES_URL_ENV), reason=f"set {POSTGRES_URL_ENV}")
def test_two_runs_build_two_templates_nobody_can_connect_to(tmp_path: Path) -> None:
    server_url = os.environ[POSTGRES_URL_ENV]
    runs = [tmp_path / "one", tmp_path / "two"]
    try:
        names = [postgres_template(run, server_url) for run in runs]
        assert names[0] != names[1]
        assert all(migrations_key() in name for name in names)
        assert postgres_template(runs[0], server_url) == names[0]  # once per run
        with pytest.raises(OperationalError, match="not currently accepting connections"):
            catalog_fingerprint(database_url(server_url, names[0]))
    finally:
        for run in runs:
            drop_run_templates(run, server_url)
    with pytest.raises(OperationalError, match="does not exist"):
        catalog_fingerprint(database_url(server_url, names[0]))
