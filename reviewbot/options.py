"""Command-line options shared by the long-running entry points (`serve`, `worker`, `jobs`).

Each command builds its `reviewbot.app.App` from these the same way:
``App.from_config(config_file, {"database_url": database_url})``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

__all__ = ["database_options"]


def database_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--config FILE`` and ``--database-url URL``."""
    command = click.option("--config", "config_file", metavar="FILE", help="TOML settings file.")(
        command
    )
    return click.option(
        "--database-url",
        metavar="URL",
        help="Database (default: REVIEWBOT_DATABASE_URL or the SQLite file in the user data "
        "directory).",
    )(command)
