"""What every command shares: the shared options (declared once), `fail` and the one error ->
exit code decorator.

Must not: import an adapter or the pipeline at load time (`reviewbot plan` starts fast), know
what any one command does, or keep its own list of error classes (`reviewbot.errors` is the one
table of exit codes).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, NoReturn, TypeVar

import click

from reviewbot.errors import disposition

__all__ = [
    "PIPED_TABLE_WIDTH",
    "base_url_option",
    "config_option",
    "database_url_option",
    "emit_json",
    "fail",
    "gitlab_url_option",
    "json_option",
    "model_option",
    "one_line_errors",
    "options",
    "table_width",
]

F = TypeVar("F", bound=Callable[..., Any])

PIPED_TABLE_WIDTH = 200  # rich tables on a pipe (not a terminal) are not cut at 80 columns


# --- errors and exit codes -------------------------------------------------------------------


def fail(message: str, code: int) -> NoReturn:
    """One line on stderr, ``reviewbot: error: ...``, and exit ``code``."""
    click.echo(f"reviewbot: error: {message}", err=True)
    sys.exit(code)


def one_line_errors(command: F) -> F:
    """Turn known errors into one line on stderr and their exit code (`reviewbot.errors`);
    an unknown error is a bug and keeps its traceback."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except Exception as error:
            known = disposition(error)
            if known is None:
                raise
            fail(known.message(error), known.exit_code)

    return wrapper  # type: ignore[return-value]


def emit_json(data: Any) -> None:
    """``--json`` output."""
    click.echo(json.dumps(data, indent=2, default=str))


def table_width() -> int | None:
    """Rich's width for tables: the terminal's, or PIPED_TABLE_WIDTH on a pipe."""
    return None if sys.stdout.isatty() else PIPED_TABLE_WIDTH


# --- shared options --------------------------------------------------------------------------


def options(*declared: Callable[[F], F]) -> Callable[[F], F]:
    """Apply several option decorators in the order written."""

    def apply(command: F) -> F:
        for option in reversed(declared):
            command = option(command)
        return command

    return apply


def config_option(command: F) -> F:
    """``--config FILE``: the TOML settings file."""
    return click.option("--config", "config_file", metavar="FILE", help="TOML settings file.")(
        command
    )


def json_option(help: str = "Machine-readable output.") -> Callable[[F], F]:
    """``--json``."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def database_url_option(command: F) -> F:
    """``--database-url URL``."""
    return click.option(
        "--database-url",
        metavar="URL",
        help="Database (default: REVIEWBOT_DATABASE_URL or the SQLite file in the user data "
        "directory).",
    )(command)


def gitlab_url_option(command: F) -> F:
    """``--gitlab-url URL``."""
    return click.option(
        "--gitlab-url", metavar="URL", help="GitLab URL (default $REVIEWBOT_GITLAB_URL)."
    )(command)


def base_url_option(
    help: str = "vLLM URL (default $REVIEWBOT_LLM_BASE_URL).",
) -> Callable[[F], F]:
    """``--base-url URL``: the model server."""
    return click.option("--base-url", metavar="URL", help=help)


def model_option(command: F) -> F:
    """``--model NAME``: the served model."""
    return click.option(
        "--model", metavar="NAME", help="Served model name (default: the server's first)."
    )(command)


def git_range_option(
    help: str = "Range in a local git repository (BASE...HEAD: from the merge base).",
) -> Callable[[F], F]:
    """``--git BASE..HEAD``."""
    return click.option("--git", "git_range", metavar="BASE..HEAD", help=help)


def repo_option(command: F) -> F:
    """``--repo DIR``: the repository of ``--git``."""
    return click.option("--repo", default=".", show_default=True, help="Repository for --git.")(
        command
    )
