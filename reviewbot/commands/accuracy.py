"""Accuracy tracking: `reviewbot feedback sync`, `reviewbot report`, `reviewbot eval`.

Owns: their options, progress bars and output. The work is `reviewbot.feedback.sync_feedback`,
`reviewbot.report.document` (build, write, post) and `reviewbot.eval.evaluate`, each handed its
progress callbacks.

Must not: compute outcomes, figures or scores itself, or load the database layer at import
(`--help` stays light).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from reviewbot.commands.common import (
    INT32_MAX,
    AgeOrDate,
    Instant,
    Integer,
    Number,
    OutputPath,
    PathName,
    ProjectRef,
    Text,
    base_url_option,
    config_option,
    database_url_option,
    emit_json,
    gitlab_url_option,
    json_option,
    model_option,
    one_line_errors,
    options,
    project_option,
)
from reviewbot.commands.progress import progress_bar
from reviewbot.commands.render import print_eval
from reviewbot.commands.terminal import console, data, terminal_text
from reviewbot.errors import BadInputError
from reviewbot.redaction import instance_url
from reviewbot.window import Window, previous_iso_week

if TYPE_CHECKING:  # the database layer loads only when a command runs (module notes)
    from reviewbot.app import App
    from reviewbot.learnings.learning import Learning
    from reviewbot.learnings.proposals import AcceptedByVotes

__all__ = ["eval_command", "feedback_group", "report_command"]

DEFAULT_SYNC_AGE = "14d"
DEFAULT_REPORT_DIR = "reviewbot-report"
EXIT_INTERRUPTED = 130  # the shell's code for a process stopped by SIGINT
# reviewbot.report.DEFAULT_SLO_TTFT_MS; not imported here, as that loads the database layer
# for every --help (tests/test_report.py and test_accuracy_end_to_end.py check both are 800)
DEFAULT_SLO_TTFT_MS = 800.0
MAX_SLO_TTFT_MS = 3_600_000.0  # an hour: a first-token target beyond it is a typo
MAX_TOLERANCE_LINES = 10_000
SERVICE_OPTIONS = options(gitlab_url_option, database_url_option, config_option)


def _utc_now() -> datetime:
    return datetime.now(UTC)


# --- feedback sync ---------------------------------------------------------------------------


@click.group("feedback")
def feedback_group() -> None:
    """What became of the bot's comments: votes, resolutions, replies, addressed, ignored."""


@feedback_group.command("sync")
@project_option()
@click.option(
    "--since",
    "since_text",
    type=AgeOrDate(),
    default=DEFAULT_SYNC_AGE,
    show_default=True,
    metavar="AGE_OR_DATE",
    help="MRs reviewed since: an age (14d, 12h, 2w) or a date (2025-03-10).",
)
@SERVICE_OPTIONS
@one_line_errors
def feedback_sync(
    project: str | None,
    since_text: timedelta | datetime,
    gitlab_url: str | None,
    database_url: str | None,
    config_file: str | None,
) -> None:
    """Read the discussions and reactions of every MR reviewed in the window and record what
    became of each posted finding. Safe to interrupt and run again (each MR is committed)."""
    from reviewbot.app import App
    from reviewbot.feedback import MergeRequestSync, sync_feedback

    now = _utc_now()
    since = now - since_text if isinstance(since_text, timedelta) else since_text
    overrides = {"gitlab_url": gitlab_url, "database_url": database_url}
    out = console(soft_wrap=True)
    err = console(stderr=True)
    done: list[MergeRequestSync] = []
    with App.from_config(config_file, overrides) as app, progress_bar(err) as bar:
        task = bar.add_task("syncing merge requests", total=None)

        def finished(mr: MergeRequestSync) -> None:
            done.append(mr)
            bar.advance(task)
            outcome = (
                f"skipped: {mr.skipped}"
                if mr.skipped
                else (f"{mr.findings} findings, {mr.recorded} new outcomes")
            )
            out.print(data(f"{mr.project}!{mr.iid}: {mr.requests} requests, {outcome}"))

        try:
            report = sync_feedback(
                app.store,
                app.gitlab(),
                since=since,
                now=now,
                project=project,
                on_start=lambda total: bar.update(task, total=total),
                on_done=finished,
            )
        except KeyboardInterrupt:
            err.print(
                f"interrupted after {len(done)} merge requests (each one is saved); "
                "run the same command again to finish"
            )
            sys.exit(EXIT_INTERRUPTED)
        taught = _learn_from_feedback(app, since)
    out.print(
        f"{len(report.merge_requests)} merge requests reviewed since {since:%Y-%m-%d %H:%M} UTC, "
        f"{report.requests} GitLab requests, {report.recorded} new outcomes recorded"
    )
    _print_taught(out, *taught)


def _learn_from_feedback(
    app: App, since: datetime
) -> tuple[list[Learning], list[Learning], AcceptedByVotes]:
    """Proposals from what the team turned down, the 👍 on the posted ones, and the notes for
    the new ones (reviewbot.learnings.teaching, reviewbot.learnings.proposals)."""
    from reviewbot.learnings.proposals import accept_by_thumbs_up, post_proposal_notes
    from reviewbot.learnings.teaching import propose_learnings

    book = app.learnings()
    threshold = app.settings.learning_proposal_threshold
    proposed = propose_learnings(book, app.store, app.gitlab().url, threshold, since)
    voted = accept_by_thumbs_up(book, app.gitlab())
    noted = post_proposal_notes(book, app.gitlab()) if app.settings.learning_proposal_notes else []
    return proposed, noted, voted


def _print_taught(
    out: Any, proposed: list[Learning], noted: list[Learning], voted: AcceptedByVotes
) -> None:
    for learning in proposed:  # reviewbot.learnings.teaching: kinds of finding the team turned down
        out.print(data(f"learning {learning.id} proposed ({learning.scope}): {learning.text}"))
    for learning in noted:
        where = f"{learning.project}!{learning.mr_iid}"
        out.print(
            data(f"learning {learning.id} proposed on {where} (note {learning.proposal_note_id})")
        )
    for learning in voted.accepted:
        out.print(
            data(f"learning {learning.id} accepted by @{learning.accepted_by} (👍 on its note)")
        )
    for reason in voted.ignored:
        out.print(data(reason))
    if proposed:
        out.print(
            "accept with: reviewbot learnings accept ID, or 👍 on its note (docs/learnings.md)"
        )


# --- report ----------------------------------------------------------------------------------


def _window(weekly: bool, since: datetime | None, until: datetime | None, now: datetime) -> Window:
    if weekly and (since or until):
        raise BadInputError("give --weekly or --since/--until, not both")
    if until and not since:
        raise BadInputError("--until needs --since")
    if not since:
        return previous_iso_week(now)
    return Window(since, until or now)


def _formats(text: str) -> list[str]:
    from reviewbot.report.document import FORMATS

    chosen = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in FORMATS]
    if unknown or not chosen:
        raise BadInputError(f"--format {text!r}: a comma-separated list of {', '.join(FORMATS)}")
    return list(dict.fromkeys(chosen))


@click.command("report")
@click.option(
    "--weekly", is_flag=True, help="The last complete ISO week, Monday to Sunday UTC (the default)."
)
@click.option(
    "--since", type=Instant(), metavar="DATE", help="Window start: 2025-03-10 or an ISO time (UTC)."
)
@click.option(
    "--until", type=Instant(), metavar="DATE", help="Window end, excluded (default: now)."
)
@project_option()
@click.option(
    "--output",
    "output_dir",
    type=OutputPath(directory=True),
    default=DEFAULT_REPORT_DIR,
    show_default=True,
    metavar="DIR",
    help="Where report.json, report.md and report.html go.",
)
@click.option(
    "--format",
    "formats",
    type=Text(),
    default="md,html,json",
    show_default=True,
    metavar="LIST",
    help="Which files to write.",
)
@click.option(
    "--post-issue",
    type=ProjectRef(),
    metavar="PROJECT",
    help="Create or edit the GitLab issue 'reviewbot report <ISO week>' there.",
)
@click.option(
    "--slo-ttft-ms",
    type=Number(0, MAX_SLO_TTFT_MS, low_open=True),
    default=DEFAULT_SLO_TTFT_MS,
    show_default=True,
    help="Target for the first-token p95 (ms).",
)
@SERVICE_OPTIONS
@one_line_errors
def report_command(
    weekly: bool,
    since: datetime | None,
    until: datetime | None,
    project: str | None,
    output_dir: Path,
    formats: str,
    post_issue: str | None,
    slo_ttft_ms: float,
    gitlab_url: str | None,
    database_url: str | None,
    config_file: str | None,
) -> None:
    """Accuracy report of a window: totals, latency against the SLO, 👍/👎, addressed and
    ignored findings per category, model and prompt version, week over week (JSON, Markdown,
    HTML with charts)."""
    from reviewbot.app import App

    now = _utc_now()
    window = _window(weekly, since, until, now)
    chosen = _formats(formats)
    overrides = {"gitlab_url": gitlab_url, "database_url": database_url}
    with App.from_config(config_file, overrides) as app:
        report = _report_of(app, window, now, project, slo_ttft_ms)
        written = _write_report(report, output_dir, chosen)
        issue = _post_issue(app, post_issue, report) if post_issue else None
    _print_written(report, window, written, issue)


def _report_of(
    app: Any, window: Window, now: datetime, project: str | None, slo_ttft_ms: float
) -> dict[str, Any]:
    from reviewbot.learnings.teaching import learning_figures
    from reviewbot.report.document import build_report

    url = app.settings.gitlab_url
    instance = instance_url(url) if url else None
    learnings = learning_figures(app.learnings(), instance, window.since, window.until, project)
    return build_report(
        app.store, window, now=now, project=project, slo_ttft_ms=slo_ttft_ms, learnings=learnings
    )


def _write_report(report: dict[str, Any], output_dir: Path, chosen: Any) -> list[Path]:
    from reviewbot.report.document import write_report

    return write_report(report, output_dir, chosen)


def _post_issue(app: Any, project: str, report: dict[str, Any]) -> Any:
    from reviewbot.report.document import post_report_issue

    return post_report_issue(app.gitlab(), project, report)


def _print_written(
    report: dict[str, Any], window: Window, written: list[Path], issue: Any | None
) -> None:
    totals = report["totals"]
    click.echo(
        f"{report['window']['iso_week']} ({window.since:%Y-%m-%d %H:%M} to "
        f"{window.until:%Y-%m-%d %H:%M} UTC): "
        + (
            "no reviews"
            if report["empty"]
            else f"{totals['reviews']} reviews, {totals['findings_posted']} findings posted"
        )
    )
    for path in written:
        click.echo(f"wrote {terminal_text(path)}")
    if issue is not None:
        found, created = issue
        web_url = terminal_text(found.get("web_url", ""))
        click.echo(f"{'created' if created else 'updated'} issue {web_url}")


# --- eval ------------------------------------------------------------------------------------


@click.command("eval")
@click.argument("dataset_dir", type=PathName())  # what is there: reviewbot.eval says
# reviewbot.compare reads them
@click.argument("config_files", nargs=-1, type=PathName(), metavar="CONFIG_FILES...")
@click.option(
    "--compare",
    is_flag=True,
    help="Review the items under each configuration CONFIG_FILES names (TOML settings, at "
    "least two) and compare them: scores, cost, paired bootstrap intervals (docs/eval.md).",
)
@click.option(
    "--tolerance",
    type=Integer(0, MAX_TOLERANCE_LINES),
    default=3,
    show_default=True,
    metavar="K",
    help="A finding matches a labelled line within ±K lines.",
)
@click.option("--limit", type=Integer(1, INT32_MAX), metavar="N", help="Only the first N items.")
@json_option()
@base_url_option()
@model_option
@database_url_option
@config_option
@one_line_errors
def eval_command(
    dataset_dir: Path,
    config_files: tuple[Path, ...],
    compare: bool,
    tolerance: int,
    limit: int | None,
    as_json: bool,
    base_url: str | None,
    model: str | None,
    database_url: str | None,
    config_file: str | None,
) -> None:
    """Run the review pipeline on a labelled dataset (no GitLab) and print TP, FP, FN,
    precision, recall and F1 per item, in total and per category; the run is stored. With
    --compare, the same for each configuration CONFIG_FILES names, and which is better."""
    from reviewbot.app import App
    from reviewbot.eval import evaluate, item_reviewer, load_dataset

    overrides = {"llm_base_url": base_url, "llm_model": model, "database_url": database_url}
    if config_files and not compare:
        raise BadInputError(
            "the files after DATASET_DIR (CONFIG_FILES...) are configurations: give --compare"
        )
    if compare:
        from reviewbot.commands.compare import compare_command_run

        shared = {"tolerance": tolerance, "limit": limit, "as_json": as_json}
        compare_command_run(
            dataset_dir, config_files, **shared, config_file=config_file, overrides=overrides
        )
        return
    items = load_dataset(dataset_dir, limit)
    err = console(stderr=True)
    with App.from_config(config_file, overrides) as app, progress_bar(err, quiet=as_json) as bar:
        task = bar.add_task("reviewing items", total=len(items))
        started = _utc_now()
        result = evaluate(
            str(dataset_dir.resolve()),
            items,
            item_reviewer(app.model(), app.settings),
            tolerance=tolerance,
            on_item=lambda _: bar.advance(task),
        )
        run_id = _store_run(app, result, started)
    document = {"run_id": run_id, **result.to_json()}
    if as_json:
        emit_json(document)
        return
    print_eval(document, console())


def _store_run(app: Any, result: Any, started: datetime) -> int:
    from reviewbot.eval import eval_run_row

    return int(app.store.record_eval_run(**eval_run_row(result, started, _utc_now())))
