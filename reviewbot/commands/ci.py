"""`reviewbot ci`: review the merge request of the current GitLab CI pipeline.

Owns: the command's options, its artifacts (Code Quality report, summary), what it prints and
its exit code (``reviewbot.ci.EXIT_CODES``). The work is `reviewbot.ci` (the CI variables, the
checkout, the review).

Must not: hold any of that work itself.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from reviewbot.ci import (
    EXIT_CODES,
    NotAMergeRequestPipelineError,
    findings_at_or_above,
    read_ci_environment,
    review_pipeline_merge_request,
    write_codequality,
    write_text,
)
from reviewbot.commands.common import (
    OutputPath,
    PathName,
    config_option,
    effort_choice,
    effort_option,
    one_line_errors,
    options,
)
from reviewbot.commands.terminal import terminal_text
from reviewbot.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_FINDINGS, EXIT_OK
from reviewbot.findings import Severity

if TYPE_CHECKING:  # reviewbot.mr pulls in the model client and the database
    from reviewbot.mr import RunReport

__all__ = ["ci_command"]

SEVERITY_CHOICE = click.Choice([s.value for s in Severity])


def _say(message: str) -> None:
    click.echo(f"reviewbot: {terminal_text(message)}", err=True)


def _write(path: Path, text: str | None = None, report: RunReport | None = None) -> None:
    """An artifact: the summary's ``text``, or the Code Quality report of ``report`` (empty
    without one); a write that fails is `reviewbot.ci.ArtifactWriteError` (one line, exit 1)."""
    if text is not None:
        write_text(path, text)
    else:
        write_codequality(path, report.findings if report is not None else [])


def _outside_merge_request(
    error: NotAMergeRequestPipelineError,
    strict: bool,
    codequality: Path | None,
    summary: Path | None,
) -> NoReturn:
    explanation = error.explain()
    click.echo(terminal_text(explanation), err=True)
    if codequality is not None:
        _write(codequality)
    if summary is not None:
        _write(summary, explanation + "\n")
    sys.exit(EXIT_BAD_INPUT if strict else EXIT_OK)


def _print_outcome(report: RunReport) -> None:
    findings = report.findings
    verb = "would post" if report.dry_run else "posted"
    click.echo(
        terminal_text(
            f"reviewed {report.project_path}!{report.iid} at {report.head_sha[:8]}: "
            f"{len(findings)} findings; {verb} {len(report.posted)}, already on the MR "
            f"{len(report.already_posted)}, summary only {len(report.summary_only)}, "
            f"refused {len(report.refused)}, resolved threads {report.resolved_threads}"
        )
    )
    for finding in findings:
        where = f"{finding.path}:{finding.line}" if finding.line is not None else finding.path
        click.echo(terminal_text(f"  [{finding.severity.value}] {where}: {finding.title}"))
    for name, outcome, reason in report.checks.rows():
        click.echo(terminal_text(f"  check {name}: {outcome} ({reason})"))
    if report.checks.final is not None:
        click.echo(terminal_text(f"checks: {report.checks.status_words()}"))
    for warning in report.warnings:
        _say(f"warning: {warning}")
    if report.web_url:
        click.echo(terminal_text(report.web_url))


def _exit_code(report: RunReport, fail_on: Severity | None, fail_on_checks: bool) -> int:
    if fail_on is not None:
        gate = findings_at_or_above(report.findings, fail_on)
        if gate:
            _say(f"{len(gate)} findings at or above {fail_on.value}: failing the job (exit 3)")
            return EXIT_FINDINGS
    if report.review.unreviewed:
        coverage = report.review.coverage
        _say(
            f"incomplete review: {coverage.changed_lines_covered} of "
            f"{coverage.changed_lines_total} changed lines reviewed; not reviewed: "
            f"{report.review.unreviewed[0].describe()}"
        )
        return EXIT_FAILURE
    failed = [v.name for v in report.checks.verdicts if v.outcome.value != "pass"]
    if fail_on_checks and failed:
        _say(f"{len(failed)} check(s) did not pass ({', '.join(failed)}): failing the job (exit 3)")
        return EXIT_FINDINGS
    return EXIT_OK


CI_OPTIONS = options(
    click.option(
        "--codequality",
        type=OutputPath(),
        metavar="PATH",
        help="Write a GitLab Code Quality report (artifacts:reports:codequality).",
    ),
    click.option(
        "--summary",
        type=OutputPath(),
        metavar="PATH",
        help="Write the summary note's Markdown (a plain artifact).",
    ),
    click.option(
        "--fail-on",
        type=SEVERITY_CHOICE,
        envvar="REVIEWBOT_FAIL_ON",
        help="Exit 3 when findings at or above this severity remain "
        "(env REVIEWBOT_FAIL_ON; default: never).",
    ),
    click.option(
        "--fail-on-checks",
        is_flag=True,
        envvar="REVIEWBOT_FAIL_ON_CHECKS",
        help="Exit 3 when one of the rules file's named checks fails or cannot tell "
        "(env REVIEWBOT_FAIL_ON_CHECKS; docs/checks.md).",
    ),
    click.option(
        "--dry-run",
        "--no-post",
        "dry_run",
        is_flag=True,
        help="Review and write the reports, post nothing on the MR.",
    ),
    click.option(
        "--strict", is_flag=True, help="Exit 2 instead of 0 outside a merge request pipeline."
    ),
    click.option(
        "--full",
        is_flag=True,
        help="Review every change, not only what changed since the last review (a shared "
        "REVIEWBOT_DATABASE_URL is what makes reviews incremental in CI).",
    ),
    click.option(
        "--analyzer-report",
        "analyzer_reports",
        type=PathName(),
        multiple=True,
        metavar="PATH",
        help="A report the pipeline produced (SARIF 2.1.0, GitLab SAST / secret detection, Code "
        "Quality JSON), e.g. a `needs:` artifact; repeatable, added to the analyzer_reports "
        "setting (docs/analyzers.md). One missing or unreadable is named in the summary.",
    ),
    effort_option,
    config_option,
)


@click.command(
    "ci",
    epilog="Exit codes: "
    + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES.items())
    + ".",
)
@CI_OPTIONS
@one_line_errors
def ci_command(
    codequality: Path | None,
    summary: Path | None,
    fail_on: str | None,
    fail_on_checks: bool,
    dry_run: bool,
    strict: bool,
    full: bool,
    analyzer_reports: tuple[Path, ...],
    effort: str | None,
    config_file: str | None,
) -> None:
    """Review the merge request of this GitLab CI pipeline (reads the CI_* variables).

    Posts inline comments and one summary note like `reviewbot run`, reading files from the
    checkout. Outside a merge request pipeline it explains why and exits 0.
    """
    env = dict(os.environ)
    try:
        ci = read_ci_environment(env, Path.cwd())
    except NotAMergeRequestPipelineError as error:
        _outside_merge_request(error, strict, codequality, summary)
    threshold = Severity(fail_on) if fail_on else None
    report = review_pipeline_merge_request(
        ci,
        env,
        config_file,
        dry_run=dry_run,
        full=full,
        analyzer_reports=analyzer_reports,
        say=_say,
        effort=effort_choice(effort),
    )
    if codequality is not None:
        _write(codequality, report=report)
    if summary is not None:
        _write(summary, report.summary_markdown)
    _print_outcome(report)
    sys.exit(_exit_code(report, threshold, fail_on_checks))
