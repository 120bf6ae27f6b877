"""Alembic environment for reviewbot.

Two ways in:
- from code (`reviewbot.store.migrate`): the caller opens the connection and passes it in
  `config.attributes["connection"]`; this file only runs the migrations on it;
- from the `alembic` command line (developers, with the root `alembic.ini`): the URL comes from
  `-x url=...`, else `sqlalchemy.url` in the ini file, else env `REVIEWBOT_DATABASE_URL`, else
  reviewbot's default SQLite file.

Owns: Alembic's environment for both ways in, and which URL the command line migrates. Must not:
declare the schema (`reviewbot.store.models` and the revisions in ``versions/`` do) or be imported
by reviewbot's code (Alembic runs it).
"""

from __future__ import annotations

import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection

from reviewbot.config import Settings
from reviewbot.store import make_engine, normalize_database_url
from reviewbot.store.models import Base

config = context.config
target_metadata = Base.metadata

if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _command_line_url() -> str:
    return (
        context.get_x_argument(as_dictionary=True).get("url")
        or config.get_main_option("sqlalchemy.url")
        or os.environ.get("REVIEWBOT_DATABASE_URL")
        or Settings().database_url  # the settings' default: the SQLite file in the data folder
    )


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things: batch mode rebuilds the table instead.
        # https://alembic.sqlalchemy.org/en/latest/batch.html
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_migrations_offline() -> None:
    """`alembic upgrade --sql`: print the SQL instead of running it."""
    context.configure(
        url=normalize_database_url(_command_line_url()),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    shared_connection = config.attributes.get("connection")
    if shared_connection is not None:
        _configure(shared_connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(_command_line_url())
    try:
        with engine.connect() as connection:
            _configure(connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
