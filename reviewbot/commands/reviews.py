"""`reviewbot reviews list|show`: what was recorded (reviews, their model calls, findings).

Owns: the commands' options; the tables are `reviewbot.commands.render`, the queries the
Store's. Must not: query the database itself.
"""

from __future__ import annotations

from typing import Any

import click

from reviewbot.commands.common import (
    INT32_MAX,
    MAX_LIST_LIMIT,
    Integer,
    config_option,
    database_url_option,
    emit_json,
    json_option,
    one_line_errors,
    project_option,
)
from reviewbot.commands.render import print_review_record, print_reviews
from reviewbot.commands.terminal import console
from reviewbot.errors import BadInputError

__all__ = ["reviews_group"]

DEFAULT_LIMIT = 20


def _open_app(config_file: str | None, database_url: str | None) -> Any:
    from reviewbot.app import App

    return App.from_config(config_file, {"database_url": database_url})


@click.group("reviews")
def reviews_group() -> None:
    """What was recorded: reviews, their model calls and their findings."""


@reviews_group.command("list")
@project_option()
@click.option(
    "--mr", "mr_iid", type=Integer(1, INT32_MAX), metavar="IID", help="Only this merge request."
)
@click.option(
    "--limit",
    type=Integer(1, MAX_LIST_LIMIT),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="How many, newest first.",
)
@config_option
@database_url_option
@json_option()
@one_line_errors
def reviews_list(
    project: str | None,
    mr_iid: int | None,
    limit: int,
    config_file: str | None,
    database_url: str | None,
    as_json: bool,
) -> None:
    """List recorded reviews, newest first."""
    with _open_app(config_file, database_url) as app:
        rows = app.store.reviews(project=project, mr_iid=mr_iid, limit=limit)
    if as_json:
        emit_json(rows)
        return
    print_reviews(rows, console(tables=True))


@reviews_group.command("show")
@click.argument("review_id", type=Integer(1, INT32_MAX))
@config_option
@database_url_option
@json_option()
@one_line_errors
def reviews_show(
    review_id: int, config_file: str | None, database_url: str | None, as_json: bool
) -> None:
    """One review: times, coverage, tokens, every model call and every finding."""
    from reviewbot.store import RecordNotFound

    with _open_app(config_file, database_url) as app:
        try:
            review = app.store.review(review_id)
        except RecordNotFound:
            raise BadInputError(f"no review {review_id} in the database") from None
        calls, findings = app.store.llm_calls(review_id), app.store.findings(review_id)
        by_chunk = app.store.tool_calls_by_chunk(review_id)
    if as_json:
        emit_json(
            {
                "review": review,
                "llm_calls": calls,
                "tool_calls_by_chunk": by_chunk,
                "findings": findings,
            }
        )
        return
    print_review_record(review, calls, by_chunk, findings, console(tables=True))
