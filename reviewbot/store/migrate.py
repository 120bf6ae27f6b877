"""Schema migrations: run Alembic from code, without an alembic.ini.

The Alembic scripts live in the top-level `migrations/` folder, installed as the package
`reviewbot.migrations`. The Config is
built here; the migration runs on a connection we open ourselves and hand to `env.py`
through `config.attributes["connection"]` (Alembic cookbook, "Sharing a Connection across
one or more programmatic migration commands":
https://alembic.sqlalchemy.org/en/latest/cookbook.html#connection-sharing).

Owns: the Alembic Config built from code, the upgrade on a connection of ours (one upgrade at a
time, across processes), and reading a database's revision. Must not: declare a table
(`reviewbot.store.models` and the revisions do) or create the schema any other way (no
``create_all``).
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

from reviewbot.store.engine import make_engine

# The top-level migrations/ folder ships as the package ``reviewbot.migrations`` (pyproject's
# package-dir); in a source checkout it is also found next to the package.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _migrations_dir() -> Path:
    """``reviewbot/migrations`` in an installed package, else ``migrations/`` of the checkout."""
    installed = Path(__file__).resolve().parents[1] / "migrations"
    for candidate in (installed, PROJECT_ROOT / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    return installed  # alembic_config() explains that it is missing


MIGRATIONS_DIR = _migrations_dir()

# Any constant works: it only has to be the same for every reviewbot process sharing a
# PostgreSQL database, so that two workers starting at once do not migrate concurrently.
# https://www.postgresql.org/docs/current/functions-admin.html#FUNCTIONS-ADVISORY-LOCKS
MIGRATION_ADVISORY_LOCK_KEY = 0x7265766965776274  # "reviewbt"


def alembic_config() -> Config:
    """An Alembic Config pointing at the packaged `migrations/` folder."""
    if not (MIGRATIONS_DIR / "env.py").is_file():
        raise FileNotFoundError(f"Alembic scripts not found in {MIGRATIONS_DIR}")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def head_revision() -> str:
    """The newest revision the code knows."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migration found in {MIGRATIONS_DIR}")
    return head


def upgrade(url: str) -> None:
    """Migrate the database at `url` to the newest revision (a no-op when already there)."""
    engine = make_engine(url)
    try:
        upgrade_engine(engine)
    finally:
        engine.dispose()


def upgrade_engine(engine: Engine) -> None:
    """Migrate the database behind `engine` to the newest revision, on one of its connections."""
    with engine.begin() as connection:
        _serialise_migrations(connection)
        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def current_revision(url: str) -> str | None:
    """The revision the database at `url` is at; None for a blank database."""
    engine = make_engine(url)
    try:
        return engine_revision(engine)
    finally:
        engine.dispose()


def engine_revision(engine: Engine) -> str | None:
    """The revision of the database behind `engine`; None for a blank database."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def ensure_schema(url_or_engine: str | Engine) -> None:
    """On start: bring the database up to date when it is behind (cheap when it is not).

    Given an Engine (one process, one Engine: see `reviewbot.app.App`), it uses that Engine's
    pool instead of opening another.
    """
    if isinstance(url_or_engine, str):
        if current_revision(url_or_engine) != head_revision():
            upgrade(url_or_engine)
        return
    if engine_revision(url_or_engine) != head_revision():
        upgrade_engine(url_or_engine)


def _serialise_migrations(connection: Connection) -> None:
    """Make concurrent upgrades wait for each other, so the second one finds nothing to do.

    PostgreSQL: a transaction-scoped advisory lock. SQLite: BEGIN IMMEDIATE takes the file's
    write lock at once (https://www.sqlite.org/lang_transaction.html); the driver would
    otherwise start the transaction lazily, after Alembic has read the current revision.
    """
    if connection.dialect.name == "postgresql":
        connection.execute(
            text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_ADVISORY_LOCK_KEY}
        )
    elif connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")
