"""Throw-away test databases, and the migrated templates they start from.

Migrating a blank database through every Alembic revision takes most of a second. So each run
migrates one template per backend, and a test that wants a migrated store gets it from that
template:

- **SQLite: a copy of a file.** Each test copies the run's migrated file (milliseconds). The
  template is checkpointed (``wal_checkpoint(TRUNCATE)``) after migrating, so its main file
  holds everything and a copy needs no ``-wal`` file.
- **PostgreSQL: a copy per module, a reset per test.** ``CREATE DATABASE … TEMPLATE …`` copies
  the whole catalog and took 0.2-0.6 s here, as long as migrating: so each test module gets one
  copy of the template (a throw-away database of its own, as before), and each test gets that
  database put back to the template's state (:func:`reset_to_template`): the other sessions
  ended, every row deleted, every sequence restarted; tens of milliseconds. The reset first
  compares a fingerprint of the catalog and the recorded revision (:func:`catalog_fingerprint`)
  with the template's; a test that changed the schema, the revision or anything else the
  fingerprint reads gets a fresh copy instead.
- **Once per run.** The first process of a run (an xdist worker, or the only process) to ask
  builds the template under a file lock in the run's shared directory
  (:func:`tests.run_lock.built_once`); the others read which it is from the state file beside
  the lock. Another run, side by side on the same machine, has its own directory and so its own
  templates: runs never share a template, a file or a database.
- **Keyed by the migrations.** A template's name carries :func:`migrations_key`, a digest of
  every file of ``migrations/``: a changed or added revision gets a new template.
- **Never connected to while copied.** PostgreSQL refuses to copy a database another session is
  connected to: the template is migrated over one engine that is disposed before anything is
  copied, then closed to connections (``ALLOW_CONNECTIONS false``), so nothing can connect to it
  by mistake. The xdist controller (or the only process) drops the run's PostgreSQL templates
  when the run ends (:func:`drop_run_templates`); the SQLite template is a file in the run's
  temporary directory.
"""

from __future__ import annotations

import functools
import graphlib
import hashlib
import json
import secrets
import shutil
import sqlite3
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, make_url, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from reviewbot.store import normalize_database_url, upgrade
from reviewbot.store.migrate import MIGRATIONS_DIR
from tests.run_lock import built_once

DATABASE_NAME_PREFIX = "reviewbot_test_"
TEMPLATE_NAME_PREFIX = DATABASE_NAME_PREFIX + "template_"
DATABASE_NAME_RANDOM_BYTES = 6
# Enough of the digest to tell two versions of migrations/ apart; PostgreSQL names stop at 63
# bytes.
MIGRATIONS_KEY_CHARS = 16
MIGRATION_FILE_SUFFIXES = {".py", ".mako"}
TEMPLATES_FOLDER = "store-templates"
SQLITE_TEMPLATE_STATE = "sqlite-{key}"
POSTGRES_TEMPLATE_STATE = "postgresql-{key}"
POSTGRES_TEMPLATE_STATE_GLOB = "postgresql-*.json"
ALEMBIC_VERSION_TABLE = "alembic_version"

_TERMINATE_OTHER_SESSIONS = (
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
)

# What a test could change beyond the rows of the tables: schemas, relations (tables, views,
# sequences, indexes) and their columns, constraints, indexes, functions, triggers, types and
# enum labels, row-level policies, the database's settings, and the recorded revision. Any
# difference from the template's makes the reset copy the template again.
_USER_SCHEMAS = "n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'"
_CATALOG_FINGERPRINT = f"""
SELECT md5(concat_ws('|',
  (SELECT string_agg(n.nspname, ',' ORDER BY n.nspname) FROM pg_namespace n
    WHERE {_USER_SCHEMAS}),
  (SELECT string_agg(n.nspname || '.' || c.relname || ':' || c.relkind::text
      || ':' || c.relrowsecurity::text, ',' ORDER BY n.nspname, c.relname)
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {_USER_SCHEMAS}),
  (SELECT string_agg(c.relname || '.' || a.attname || ':' || format_type(a.atttypid, a.atttypmod)
      || ':' || a.attnotnull::text || ':' || coalesce(pg_get_expr(d.adbin, d.adrelid), ''),
      ',' ORDER BY n.nspname, c.relname, a.attnum)
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE {_USER_SCHEMAS} AND a.attnum > 0 AND NOT a.attisdropped),
  (SELECT string_agg(k.conname || ':' || pg_get_constraintdef(k.oid), ','
      ORDER BY n.nspname, k.conname)
    FROM pg_constraint k JOIN pg_namespace n ON n.oid = k.connamespace WHERE {_USER_SCHEMAS}),
  (SELECT string_agg(indexdef, ',' ORDER BY schemaname, indexname) FROM pg_indexes n
    WHERE n.schemaname NOT LIKE 'pg\\_%' AND n.schemaname <> 'information_schema'),
  (SELECT string_agg(p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')', ','
      ORDER BY n.nspname, p.proname)
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE {_USER_SCHEMAS}),
  (SELECT string_agg(t.tgname, ',' ORDER BY t.tgname) FROM pg_trigger t WHERE NOT t.tgisinternal),
  (SELECT string_agg(n.nspname || '.' || t.typname, ',' ORDER BY n.nspname, t.typname)
    FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE {_USER_SCHEMAS}),
  (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumtypid, e.enumsortorder) FROM pg_enum e),
  (SELECT string_agg(p.polname, ',' ORDER BY p.polname) FROM pg_policy p),
  (SELECT string_agg(array_to_string(s.setconfig, ';'), ',') FROM pg_db_role_setting s
    JOIN pg_database b ON b.oid = s.setdatabase WHERE b.datname = current_database()),
  (SELECT string_agg(version_num, ',' ORDER BY version_num) FROM {ALEMBIC_VERSION_TABLE})
))
"""
_TABLES = (
    "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
    f" AND tablename <> '{ALEMBIC_VERSION_TABLE}'"
)
_FOREIGN_KEYS = (
    "SELECT k.conrelid::regclass::text, k.confrelid::regclass::text FROM pg_constraint k"
    " WHERE k.contype = 'f' AND k.connamespace = 'public'::regnamespace"
)
_RESTART_SEQUENCES = (
    "SELECT setval(s.seqrelid::regclass, s.seqstart, false) FROM pg_sequence s"
    " JOIN pg_class c ON c.oid = s.seqrelid WHERE c.relnamespace = 'public'::regnamespace"
)


@functools.cache
def migrations_key() -> str:
    """The digest of this checkout's ``migrations/`` (read once per process)."""
    return folder_digest(MIGRATIONS_DIR)


def folder_digest(folder: Path) -> str:
    """A digest of the migration files under ``folder`` (names and contents): it changes when
    a revision is added, removed or edited, and with it every template's name."""
    digest = hashlib.sha256()
    files = sorted(
        path
        for path in folder.rglob("*")
        if path.suffix in MIGRATION_FILE_SUFFIXES and "__pycache__" not in path.parts
    )
    for path in files:
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:MIGRATIONS_KEY_CHARS]


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


# -- SQLite --------------------------------------------------------------------------------


def sqlite_template(run_dir: Path) -> Path:
    """The run's migrated SQLite file (built by the first process to ask)."""
    folder = run_dir / TEMPLATES_FOLDER
    key = migrations_key()

    def build() -> dict[str, str]:
        path = folder / f"template-{key}.db"
        upgrade(sqlite_url(path))  # its engine is disposed before it returns
        _checkpoint(path)
        return {"path": str(path)}

    return Path(built_once(folder, SQLITE_TEMPLATE_STATE.format(key=key), build)["path"])


def _checkpoint(path: Path) -> None:
    """Move everything the ``-wal`` file holds into the main file, and empty the ``-wal``."""
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()


def copy_sqlite_template(run_dir: Path, target: Path) -> str:
    """A migrated SQLite database at ``target`` (a copy of the run's template); its URL."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(sqlite_template(run_dir), target)
    return sqlite_url(target)


# -- PostgreSQL: databases -----------------------------------------------------------------


def _autocommit_engine(url: str) -> Engine:
    return create_engine(
        normalize_database_url(url), isolation_level="AUTOCOMMIT", poolclass=NullPool
    )


def autocommit_execute(url: str, *statements: str) -> None:
    """Run ``statements`` on one AUTOCOMMIT connection to ``url`` (CREATE and DROP DATABASE
    cannot run in a transaction), closed afterwards."""
    engine = _autocommit_engine(url)
    try:
        with engine.connect() as connection:
            for statement in statements:
                connection.execute(text(statement))
    finally:
        engine.dispose()


def terminate_other_sessions(database_url: str) -> None:
    """End every other session on this PostgreSQL database, as a server restart would."""
    autocommit_execute(database_url, _TERMINATE_OTHER_SESSIONS)


def random_database_name(prefix: str = DATABASE_NAME_PREFIX) -> str:
    return prefix + secrets.token_hex(DATABASE_NAME_RANDOM_BYTES)


def database_url(server_url: str, name: str) -> str:
    """The URL of database ``name`` on the server of ``server_url``."""
    url = normalize_database_url(server_url).set(database=name)
    return url.render_as_string(hide_password=False)


def create_database(server_url: str, name: str, template: str | None = None) -> str:
    """Database ``name`` on the server of ``server_url``: blank, or a copy of the database
    ``template``; its URL."""
    copy = f' TEMPLATE "{template}"' if template else ""
    autocommit_execute(server_url, f'CREATE DATABASE "{name}"{copy}')
    return database_url(server_url, name)


def drop_database(server_url: str, url: str) -> None:
    """Drop the database of ``url``; WITH (FORCE) (PostgreSQL >= 13) closes the connections a
    test may have left open."""
    name = make_url(url).database
    autocommit_execute(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def postgres_template(run_dir: Path, server_url: str) -> str:
    """The name of the run's migrated PostgreSQL template (built by the first process to ask):
    a database nobody may connect to, so that it can always be copied."""
    folder = run_dir / TEMPLATES_FOLDER
    key = migrations_key()

    def build() -> dict[str, str]:
        name = random_database_name(f"{TEMPLATE_NAME_PREFIX}{key}_")
        url = create_database(server_url, name)
        try:
            upgrade(url)  # its engine is disposed before it returns
            autocommit_execute(
                server_url, f'ALTER DATABASE "{name}" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false'
            )
        except BaseException:
            drop_database(server_url, url)  # no half-built template is left behind
            raise
        return {"name": name}

    return built_once(folder, POSTGRES_TEMPLATE_STATE.format(key=key), build)["name"]


def drop_run_templates(run_dir: Path, server_url: str) -> None:
    """Drop the PostgreSQL templates this run built (called once, when the run ends)."""
    for state_file in (run_dir / TEMPLATES_FOLDER).glob(POSTGRES_TEMPLATE_STATE_GLOB):
        name = json.loads(state_file.read_text()).get("name")  # none when the build failed
        if name:
            autocommit_execute(
                server_url,
                f'ALTER DATABASE "{name}" WITH IS_TEMPLATE false',
                f'DROP DATABASE IF EXISTS "{name}"',
            )
        state_file.unlink()


# -- PostgreSQL: back to the template's state ----------------------------------------------


def catalog_fingerprint(url: str) -> str | None:
    """A digest of what a reset does not put back (the catalog, the database's settings, the
    recorded revision); None when it cannot be read (e.g. a test dropped ``alembic_version``)."""
    engine = _autocommit_engine(url)
    try:
        with engine.connect() as connection:
            return _fingerprint(connection)
    finally:
        engine.dispose()


def _fingerprint(connection: Connection) -> str | None:
    try:
        return connection.scalar(text(_CATALOG_FINGERPRINT))
    except DBAPIError:
        return None


def reset_to_template(url: str, fingerprint: str) -> bool:
    """Put a copy of the template back to the template's state: end the other sessions (and
    with them their locks and transactions), then, when the catalog still has ``fingerprint``,
    delete every row (children first) and restart every sequence. False, having changed
    nothing but the sessions, when the catalog differs: the caller copies the template again."""
    engine = _autocommit_engine(url)
    try:
        with engine.connect() as connection:
            connection.execute(text(_TERMINATE_OTHER_SESSIONS))
            if _fingerprint(connection) != fingerprint:
                return False
            tables = _children_first(connection)
            if tables is None:
                return False
            for table in tables:
                connection.execute(text(f'DELETE FROM "{table}"'))
            connection.execute(text(_RESTART_SEQUENCES))
        return True
    finally:
        engine.dispose()


def _children_first(connection: Connection) -> list[str] | None:
    """The tables of ``public`` but ``alembic_version``, each after every table whose foreign
    keys point at it; None for a cycle of foreign keys across tables."""
    order: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for (table,) in connection.execute(text(_TABLES)):
        order.add(table)
    for child, parent in connection.execute(text(_FOREIGN_KEYS)):
        if child != parent:  # a table referring to itself loses its rows in one statement
            order.add(parent.strip('"'), child.strip('"'))
    try:
        return list(order.static_order())
    except graphlib.CycleError:
        return None
