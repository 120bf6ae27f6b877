"""`reviewbot jobs list|show|retry|cancel`: inspect and steer the review job queue.

Owns: the commands' options and tables (`reviewbot.commands.render`). The queue is
`reviewbot.queue.JobQueue`; no such job (RecordNotFound, exit 2) and a job not in a state for
what was asked (JobStateError, exit 1) are `reviewbot.errors`' to report. Must not: query the
database itself, or catch an error to print it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click
from rich.console import Console

from reviewbot.app import App
from reviewbot.commands.common import (
    INT32_MAX,
    MAX_LIST_LIMIT,
    Integer,
    config_option,
    database_url_option,
    one_line_errors,
    options,
)
from reviewbot.commands.render import print_job, print_jobs
from reviewbot.commands.terminal import console
from reviewbot.queue import DEFAULT_LIST_LIMIT, JobQueue, JobStatus

__all__ = ["jobs_group"]

JOB_ID = Integer(1, INT32_MAX)
DATABASE_OPTIONS = options(config_option, database_url_option)


@contextmanager
def _queue(config_file: str | None, database_url: str | None) -> Iterator[JobQueue]:
    """The job queue of the App's database, migrated."""
    with App.from_config(config_file, {"database_url": database_url}) as app:
        yield JobQueue(app.store)


def _console() -> Console:
    return console(tables=True)


@click.group("jobs")
def jobs_group() -> None:
    """Inspect and steer the review job queue."""


@jobs_group.command("list")
@click.option(
    "--status",
    type=click.Choice([status.value for status in JobStatus]),
    help="Only jobs in this status.",
)
@click.option(
    "--limit",
    type=Integer(1, MAX_LIST_LIMIT),
    default=DEFAULT_LIST_LIMIT,
    show_default=True,
    help="How many, newest first.",
)
@DATABASE_OPTIONS
@one_line_errors
def jobs_list(
    status: str | None, limit: int, config_file: str | None, database_url: str | None
) -> None:
    """Newest jobs first, with counts by status."""
    with _queue(config_file, database_url) as queue:
        print_jobs(queue.list(status=status, limit=limit), queue.counts(), _console())


@jobs_group.command("show")
@click.argument("job_id", type=JOB_ID)
@DATABASE_OPTIONS
@one_line_errors
def jobs_show(job_id: int, config_file: str | None, database_url: str | None) -> None:
    """Every field of one job."""
    with _queue(config_file, database_url) as queue:
        print_job(queue.get(job_id), _console())


@jobs_group.command("retry")
@click.argument("job_id", type=JOB_ID)
@DATABASE_OPTIONS
@one_line_errors
def jobs_retry(job_id: int, config_file: str | None, database_url: str | None) -> None:
    """Queue a finished job (failed, cancelled, ...) again, now."""
    with _queue(config_file, database_url) as queue:
        print_job(queue.retry(job_id), _console())


@jobs_group.command("cancel")
@click.argument("job_id", type=JOB_ID)
@DATABASE_OPTIONS
@one_line_errors
def jobs_cancel(job_id: int, config_file: str | None, database_url: str | None) -> None:
    """Cancel a queued or running job."""
    with _queue(config_file, database_url) as queue:
        print_job(queue.cancel(job_id), _console())
