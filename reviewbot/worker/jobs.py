"""What a queued job does: a review of its MR, or an answer in one of the bot's threads.

The worker (`reviewbot.worker.loop`) runs `run_job` on each job it claims, unless it was given
another handler; which failures are retried is decided by the one error table,
`reviewbot.errors`.

Owns: the dispatch from a job's kind to the run it stands for, and a job's share of the model's
request budget. Must not: claim, heartbeat or settle a job (the loop does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from reviewbot.analyzer_findings import AnalyzerRun
from reviewbot.analyzers.collect import PipelineAnalyzers
from reviewbot.analyzers.host import host_analyzers
from reviewbot.app import App
from reviewbot.config import Settings
from reviewbot.errors import disposition
from reviewbot.gitlab import GitLabNotFoundError
from reviewbot.mr import RunOptions, require_complete, run_merge_request
from reviewbot.queue import FULL_REVIEW_KEY, Job
from reviewbot.replies.answer import run_reply
from reviewbot.states import JobKind
from reviewbot.worker.load_effort import LoadEffort

__all__ = ["is_retryable", "job_concurrency", "run_job"]

log = logging.getLogger(__name__)


def is_retryable(error: BaseException) -> bool:
    """True when the failed run may succeed later (transient outage, busy MR): see
    `reviewbot.errors.ERROR_TABLE`; an unknown error (a bug) is never retried."""
    known = disposition(error)
    return known is not None and known.retry


def run_job(
    app: App,
    job: Job,
    *,
    concurrency: int | None = None,
    collect_analyzers: Callable[[App, Job], AnalyzerRun | None] | None = None,
    load: LoadEffort | None = None,
) -> None:
    """The default handler: review the job's MR and publish, like `reviewbot run`; a reply
    job (an answer in one of the bot's threads) is `reviewbot.replies.answer.run_reply`'s.

    ``concurrency``: this job's share of the model requests in flight. A review with chunks
    the model could not answer is retried later (ReviewIncompleteError).
    ``collect_analyzers``: the analyzer findings of the job's MR to merge, collected by the
    caller; else the reports of the head's pipeline when ``analyzer_report_jobs`` names them,
    and the built-in ``analyzers`` on the host's repository cache (reviewbot.analyzers.host).
    """
    if job.kind == JobKind.REPLY.value:
        run_reply(app, job)
        return
    project = job.project_id if job.project_id is not None else job.project
    effort = load.choice_for(job) if load is not None else None
    if effort is not None:
        log.info("job %d: effort %s (%s)", job.id, effort.effort.value, effort.reason)
    options = RunOptions(
        trigger=job.trigger,
        concurrency=concurrency,
        full=bool(job.payload.get(FULL_REVIEW_KEY)),
        analyzer_run=collect_analyzers(app, job) if collect_analyzers is not None else None,
        analyzers=host_analyzers(app.settings, _pipeline_analyzers(app, project)),
        effort=effort,
    )
    try:
        require_complete(run_merge_request(app, project, job.mr_iid, options))
    except GitLabNotFoundError as error:
        if project == job.project:
            raise
        raise GitLabNotFoundError(f"{error} ({job.project})") from error


def _pipeline_analyzers(app: App, project: int | str) -> PipelineAnalyzers | None:
    """The reports of the head's pipeline that ``analyzer_report_jobs`` names (None: none)."""
    if not app.settings.analyzer_report_jobs:
        return None
    return PipelineAnalyzers(app.gitlab(), project, app.settings)


def job_concurrency(settings: Settings, jobs_at_once: int) -> int:
    """Share the model's request budget (`settings.concurrency`) among the jobs run at once."""
    return max(1, settings.concurrency // max(1, jobs_at_once))
