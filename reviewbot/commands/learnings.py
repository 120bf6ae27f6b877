"""`reviewbot learnings add|list|remove|accept|reject`: the team's instructions to the reviewer.

Owns: the commands' options and their table. Making and listing is
``reviewbot.learnings.teaching``; the checks of text, globs and category are
``reviewbot.learnings.learning`` (a LearningError is bad input, exit 2, as is an id not in the
database). Must not: query the database itself, or catch an error to print it.
"""

from __future__ import annotations

import getpass

import click
from rich.table import Table

from reviewbot.app import App
from reviewbot.commands.common import (
    INT32_MAX,
    Checked,
    Integer,
    Text,
    config_option,
    database_url_option,
    emit_json,
    json_option,
    one_line_errors,
    options,
    project_option,
)
from reviewbot.commands.render import add_row
from reviewbot.commands.terminal import console
from reviewbot.findings import Category
from reviewbot.learnings.learning import Learning, LearningStatus, checked_globs, checked_group
from reviewbot.learnings.teaching import add_learning, project_learnings

__all__ = ["learnings_group"]

LEARNING_ID = Integer(1, INT32_MAX)
DATABASE_OPTIONS = options(config_option, database_url_option)
GROUP_OPTION = click.option(
    "--group",
    type=Checked(checked_group),
    metavar="PATH",
    help="A group's learning (every project under it) instead of one project's.",
)


def _open_app(config_file: str | None, database_url: str | None) -> App:
    return App.from_config(config_file, {"database_url": database_url})


def _local_user() -> str | None:
    """Who runs the command, for the record (None where the system cannot say)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return None


def _print(learnings: list[Learning]) -> None:
    table = Table("id", "status", "scope", "paths", "category", "suppresses", "text", "by")
    for learning in learnings:
        add_row(
            table,
            learning.id,
            learning.status.value,
            learning.scope,
            ", ".join(learning.path_globs) or "every path",
            learning.category or "any",
            "yes" if learning.excludes else "no",
            learning.text,
            learning.author or "-",
        )
    console(tables=True).print(table)


def _done(learning: Learning, what: str, as_json: bool) -> None:
    if as_json:
        emit_json(learning.to_dict())
        return
    click.echo(f"learning {learning.id} {what} ({learning.scope}): {learning.text}")


@click.group("learnings")
def learnings_group() -> None:
    """The team's learnings: short instructions the reviewer follows (docs/learnings.md)."""


@learnings_group.command("add")
@click.argument("text", type=Text())
@project_option("The project it is for (id or path).")
@GROUP_OPTION
@click.option(
    "--path",
    "globs",
    type=Checked(lambda glob: checked_globs([glob])),
    multiple=True,
    metavar="GLOB",
    help="Only files matching (repeatable; '!' excludes; none: every file).",
)
@click.option(
    "--category",
    type=click.Choice([category.value for category in Category]),
    help='Only findings of this category (needed for a "don\'t flag" learning to suppress).',
)
@DATABASE_OPTIONS
@json_option()
@one_line_errors
def learnings_add(
    text: str,
    project: str | None,
    group: str | None,
    globs: tuple[str, ...],
    category: str | None,
    config_file: str | None,
    database_url: str | None,
    as_json: bool,
) -> None:
    """Teach the reviewer TEXT for a project (or a group); in force from the next review."""
    with _open_app(config_file, database_url) as app:
        learning = add_learning(
            app.learnings(),
            app.gitlab(),
            text,
            project=project,
            group=group,
            globs=globs,
            category=category,
            author=_local_user(),
        )
    _done(learning, "added", as_json)


@learnings_group.command("list")
@project_option("Only this project's (id or path).")
@GROUP_OPTION
@click.option(
    "--status",
    "statuses",
    type=click.Choice([status.value for status in LearningStatus]),
    multiple=True,
    help="Only learnings in this status (repeatable; default: every status).",
)
@DATABASE_OPTIONS
@json_option()
@one_line_errors
def learnings_list(
    project: str | None,
    group: str | None,
    statuses: tuple[str, ...],
    config_file: str | None,
    database_url: str | None,
    as_json: bool,
) -> None:
    """The learnings, oldest first, proposals included."""
    wanted = [LearningStatus(status) for status in statuses]
    with _open_app(config_file, database_url) as app:
        learnings = project_learnings(
            app.learnings(), app.gitlab(), project=project, group=group, statuses=wanted
        )
    if as_json:
        emit_json([learning.to_dict() for learning in learnings])
        return
    _print(learnings)


def _steer(verb: str, what: str, help_text: str) -> None:
    @learnings_group.command(verb, help=help_text)
    @click.argument("learning_id", type=LEARNING_ID)
    @DATABASE_OPTIONS
    @json_option()
    @one_line_errors
    def command(
        learning_id: int, config_file: str | None, database_url: str | None, as_json: bool
    ) -> None:
        with _open_app(config_file, database_url) as app:
            book = app.learnings()
            if verb == "remove":
                learning = book.remove(learning_id)
            elif verb == "accept":
                learning = book.accept(learning_id, _local_user())
            else:
                learning = book.reject(learning_id, _local_user())
        _done(learning, what, as_json)


_steer("accept", "accepted", "Put a proposed (or rejected) learning in force.")
_steer("reject", "rejected", "Turn a proposed learning down: kept, never applied or re-proposed.")
_steer("remove", "removed", "Take a learning out of force (kept in the database for the record).")
