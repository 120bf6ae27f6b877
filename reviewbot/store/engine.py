"""Opening the database: the Engine for a URL, with each backend's settings.

Owns: the choice of driver (psycopg 3 for ``postgresql://``), PostgreSQL's pool (pre-ping,
recycling) and SQLite's per-connection pragmas (WAL, busy timeout, foreign keys). Must not:
read or write a table (``reviewbot.store.store`` and the ``*_queries`` modules do) nor create
the schema (``reviewbot.store.migrate`` does).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url

from reviewbot.config import ConfigError

__all__ = ["SQLITE_BUSY_TIMEOUT_MS", "make_engine", "normalize_database_url"]

# SQLite: wait this long for another process's write lock instead of failing at once. 30 s,
# not Python's 5: on a small box busy with a review, a migration or a worker's burst of writes
# held the lock past 5 s and the other writer failed with "database is locked".
# https://www.sqlite.org/pragma.html#pragma_busy_timeout
SQLITE_BUSY_TIMEOUT_MS = 30_000
SQLITE_MEMORY_DATABASES = {None, "", ":memory:"}
POSTGRES_DRIVER = "postgresql+psycopg"
POSTGRES_POOL_SIZE = 20
POSTGRES_POOL_OVERFLOW = 20
POSTGRES_POOL_RECYCLE_S = 1800
POSTGRES_SCHEMES = {"postgres", "postgresql"}


def normalize_database_url(url: str) -> URL:
    """Parse `url`, selecting the psycopg 3 driver for `postgresql://` / `postgres://` URLs."""
    parsed = make_url(url)
    if parsed.drivername in POSTGRES_SCHEMES:
        parsed = parsed.set(drivername=POSTGRES_DRIVER)
    return parsed


def make_engine(url: str) -> Engine:
    """Create an Engine for `url`; SQLite gets its parent directory and WAL + busy_timeout."""
    parsed = normalize_database_url(url)
    if parsed.get_backend_name() != "sqlite":
        # Pre-ping: a checkout tests the connection first, so the first request after a
        # PostgreSQL restart (or a proxy dropping idle connections) gets a fresh one instead
        # of failing; a failed ping also invalidates the pool's other connections
        # (https://docs.sqlalchemy.org/en/20/core/pooling.html#disconnect-handling-pessimistic).
        # It costs about 0.05 ms per checkout on loopback. Connections are also recycled before
        # servers or proxies drop idle ones. The pool holds a burst of webhook threads without
        # opening and closing connections.
        return create_engine(
            parsed,
            pool_size=POSTGRES_POOL_SIZE,
            max_overflow=POSTGRES_POOL_OVERFLOW,
            pool_recycle=POSTGRES_POOL_RECYCLE_S,
            pool_pre_ping=True,
        )
    if parsed.database not in SQLITE_MEMORY_DATABASES:
        folder = Path(parsed.database).expanduser().parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ConfigError(
                f"cannot create the folder of the SQLite database {folder}: {error.strerror}; "
                "set REVIEWBOT_DATABASE_URL to a writable place"
            ) from None
    engine = create_engine(parsed)
    event.listen(engine, "connect", _configure_sqlite_connection)
    return engine


def _configure_sqlite_connection(dbapi_connection: Any, _record: Any) -> None:
    """WAL lets readers run beside one writer; foreign keys are off in SQLite unless asked."""
    cursor = dbapi_connection.cursor()
    try:
        # busy_timeout first: switching to WAL needs a lock another process may hold.
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        # WAL is a property of the file: switch once. Switching needs an exclusive lock, for
        # which SQLite does not always wait, so a file already in WAL is left alone.
        if cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            try:
                cursor.execute("PRAGMA journal_mode=WAL")
            except sqlite3.OperationalError as error:
                # Another connection is switching this new file right now; it works either way.
                if "locked" not in str(error):
                    raise
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()
