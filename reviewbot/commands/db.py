"""`reviewbot db upgrade`: apply the database migrations.

Owns: the command's options and its one line of output. The migrations are
`reviewbot.store.migrate`'s (run when the App opens its Store). Must not: run SQL itself.
"""

from __future__ import annotations

import click

from reviewbot.commands.common import config_option, database_url_option, one_line_errors

__all__ = ["db_group"]


@click.group("db")
def db_group() -> None:
    """Database schema commands."""


@db_group.command("upgrade")
@config_option
@database_url_option
@one_line_errors
def db_upgrade(config_file: str | None, database_url: str | None) -> None:
    """Apply all migrations (safe to run repeatedly, and by several processes at once)."""
    from reviewbot.app import App
    from reviewbot.store import redact_url
    from reviewbot.store.migrate import engine_revision

    with App.from_config(config_file, {"database_url": database_url}) as app:
        store = app.store  # migrated on first use
        click.echo(
            f"{redact_url(app.settings.database_url)} is at revision "
            f"{engine_revision(store.engine)}"
        )
