"""`reviewbot worker`: run queued reviews until stopped (or, with ``--burst``, until idle).

Owns: the command's options and its closing line of counts. The work is
`reviewbot.worker.Worker`. Must not: claim or settle a job itself.
"""

from __future__ import annotations

import logging
import sys

import click

from reviewbot.app import App
from reviewbot.commands.common import (
    MAX_WAIT_S,
    Integer,
    Number,
    config_option,
    database_url_option,
    one_line_errors,
)
from reviewbot.worker import DEFAULT_GRACE_S, DEFAULT_LEASE_S, DEFAULT_POLL_S, MIN_LEASE_S, Worker

__all__ = ["worker_command"]

# Jobs one worker process runs at once: each holds a thread and a database connection, so a
# number above this is a typo (run more workers instead).
MAX_JOBS_AT_ONCE = 1_024


@click.command("worker")
@click.option(
    "--concurrency",
    type=Integer(1, MAX_JOBS_AT_ONCE),
    default=1,
    show_default=True,
    help="Jobs (merge requests) run at once; they share the model's request budget.",
)
@click.option("--burst", is_flag=True, help="Exit when the queue is empty.")
@click.option(
    "--lease-seconds",
    type=Number(MIN_LEASE_S, MAX_WAIT_S),
    default=DEFAULT_LEASE_S,
    show_default=True,
    help="A job whose worker stops heartbeating is taken over after this long.",
)
@click.option(
    "--poll-seconds",
    type=Number(0, MAX_WAIT_S, low_open=True),
    default=DEFAULT_POLL_S,
    show_default=True,
    help="Pause between empty polls.",
)
@click.option(
    "--grace-seconds",
    type=Number(0, MAX_WAIT_S),
    default=DEFAULT_GRACE_S,
    show_default=True,
    help="On SIGTERM, time given to running jobs before they are released to the queue.",
)
@config_option
@database_url_option
@one_line_errors
def worker_command(
    concurrency: int,
    burst: bool,
    lease_seconds: float,
    poll_seconds: float,
    grace_seconds: float,
    config_file: str | None,
    database_url: str | None,
) -> None:
    """Run queued reviews (from the webhook listener) until stopped."""
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    app = App.from_config(config_file, {"database_url": database_url}, shared_model_slots=True)
    app.store  # noqa: B018 - opens and migrates the database now, with a clear error
    with app:
        worker = Worker(
            app,
            concurrency=concurrency,
            lease_s=lease_seconds,
            poll_s=poll_seconds,
            grace_s=grace_seconds,
        )
        stats = worker.run(burst=burst)
    click.echo(
        f"claimed {stats.claimed}, succeeded {stats.succeeded}, retried {stats.retried}, "
        f"postponed {stats.postponed}, failed {stats.failed}, released {stats.released}",
        err=True,
    )
