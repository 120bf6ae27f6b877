"""`reviewbot ci`: review the merge request of the current GitLab CI pipeline.

The job template (``ci/reviewbot.gitlab-ci.yml``) runs this command in merge request pipelines.
It reads GitLab's predefined variables
(https://docs.gitlab.com/ci/variables/predefined_variables/), reviews the MR with
:func:`reviewbot.mr.run_merge_request` like ``reviewbot run`` (same idempotency, same summary
note), reads file contents from the checked-out repository, and writes a GitLab Code Quality
report so findings show in the MR widget even when posting is disabled.

SHAs and positions always come from the MR's latest diff version in the API: in a
merged-results pipeline ``CI_COMMIT_SHA`` is a merge commit of source and target, not the MR
head (https://docs.gitlab.com/ci/pipelines/merged_results_pipelines/). The checkout
(:class:`reviewbot.repo.localgit.Checkout`) is only a faster source of file contents, the first one
the run's repository source asks (:func:`reviewbot.repo.source.open_repository`); when it lacks
a commit (shallow clone) the commit is fetched with ``git fetch --depth=1 origin <sha>``, and
if that fails the host's repository cache, else the API, serves the files.

Owns: the library side of the CI job (the CI variables, the review of the pipeline's MR with
its checkout, the artifacts). The command, its options and its output are
`reviewbot.commands.ci`. Must not: print or exit (messages go to the ``say`` callback).

Exit codes: see :data:`EXIT_CODES`.
"""

from __future__ import annotations

import contextlib
import json
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from reviewbot.analyzer_findings import AnalyzerRun
from reviewbot.analyzers.collect import CheckoutAnalyzers
from reviewbot.app import App
from reviewbot.codequality import codequality_report
from reviewbot.config import ConfigError, Settings, load_settings
from reviewbot.effort import EffortChoice
from reviewbot.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_FINDINGS, EXIT_OK
from reviewbot.findings import Finding, Severity
from reviewbot.repo.localgit import Checkout

if TYPE_CHECKING:  # reviewbot.mr pulls in the model client and the database: imported lazily
    from reviewbot.mr import RunReport

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_CODES",
    "EXIT_FAILURE",
    "EXIT_FINDINGS",
    "EXIT_OK",
    "ArtifactWriteError",
    "CiEnvironment",
    "NotAMergeRequestPipelineError",
    "findings_at_or_above",
    "gitlab_url_from_api_url",
    "pipeline_analyzers",
    "read_ci_environment",
    "review_pipeline_merge_request",
    "write_codequality",
    "write_text",
]

EXIT_CODES = {
    EXIT_OK: "reviewed (or nothing to do outside a merge request pipeline)",
    EXIT_FAILURE: "GitLab or the model failed, part of the diff could not be reviewed, or "
    "another run holds this MR",
    EXIT_BAD_INPUT: "configuration error, or not a merge request pipeline with --strict",
    EXIT_FINDINGS: "findings at or above --fail-on remain, or with --fail-on-checks a named "
    "check did not pass",
}
SIGTERM_EXIT = 128 + signal.SIGTERM  # the shell's code for a job killed by SIGTERM

MERGE_REQUEST_EVENT = "merge_request_event"
API_SUFFIX = "/api/v4"
THROWAWAY_DATABASE_NAME = "reviewbot-ci.db"
DATABASE_URL_VARIABLE = "REVIEWBOT_DATABASE_URL"


class ArtifactWriteError(Exception):
    """An artifact (the Code Quality report, the summary) cannot be written: the work failed
    (exit 1, `reviewbot.errors`)."""


# --- the CI environment ----------------------------------------------------------------------


class NotAMergeRequestPipelineError(Exception):
    """The job does not run in a merge request pipeline; ``reasons`` say what is missing."""

    def __init__(self, reasons: Sequence[str]) -> None:
        self.reasons = list(reasons)
        super().__init__("; ".join(self.reasons))

    def explain(self) -> str:
        lines = ["reviewbot ci: not a merge request pipeline, nothing to review:"]
        lines += [f"  - {reason}" for reason in self.reasons]
        lines.append(
            "  Run the job in merge request pipelines only, e.g. with\n"
            '    rules:\n      - if: $CI_PIPELINE_SOURCE == "merge_request_event"\n'
            "  (ci/reviewbot.gitlab-ci.yml does this)."
        )
        return "\n".join(lines)


@dataclass(frozen=True)
class CiEnvironment:
    """What ``reviewbot ci`` needs from GitLab's predefined CI/CD variables."""

    gitlab_url: str
    project_id: str
    iid: int
    project_dir: Path
    pipeline_source: str
    diff_base_sha: str | None = None
    commit_sha: str | None = None
    job_url: str | None = None
    pipeline_id: int | None = None  # CI_PIPELINE_ID: the checks' commit status joins it


def gitlab_url_from_api_url(api_url: str) -> str:
    """``https://gitlab.example.com/api/v4`` -> ``https://gitlab.example.com`` (relative
    URL roots such as ``https://example.com/gitlab/api/v4`` keep their prefix)."""
    url = api_url.rstrip("/")
    if url.endswith(API_SUFFIX):
        url = url[: -len(API_SUFFIX)]
    return url


def read_ci_environment(env: Mapping[str, str], cwd: Path) -> CiEnvironment:
    """Parse the CI variables, or raise :class:`NotAMergeRequestPipelineError` naming the gaps.

    The MR belongs to ``CI_MERGE_REQUEST_PROJECT_ID`` (the target project: for a fork's MR it
    differs from ``CI_PROJECT_ID``); ``CI_PROJECT_ID`` is used when it is absent.
    """

    def value(name: str) -> str | None:
        return (env.get(name) or "").strip() or None

    reasons = []
    source = value("CI_PIPELINE_SOURCE")
    if source is None:
        reasons.append("CI_PIPELINE_SOURCE is not set (not running in GitLab CI?)")
    elif source != MERGE_REQUEST_EVENT:
        reasons.append(f"CI_PIPELINE_SOURCE is {source!r}, not {MERGE_REQUEST_EVENT!r}")
    iid_text = value("CI_MERGE_REQUEST_IID")
    if iid_text is None:
        reasons.append("CI_MERGE_REQUEST_IID is not set (only merge request pipelines have it)")
    elif not iid_text.isdigit():
        reasons.append(f"CI_MERGE_REQUEST_IID is {iid_text!r}, not a number")
    api_url = value("CI_API_V4_URL")
    if api_url is None:
        reasons.append("CI_API_V4_URL is not set")
    project_id = value("CI_MERGE_REQUEST_PROJECT_ID") or value("CI_PROJECT_ID")
    if project_id is None:
        reasons.append("neither CI_MERGE_REQUEST_PROJECT_ID nor CI_PROJECT_ID is set")
    if reasons:
        raise NotAMergeRequestPipelineError(reasons)
    assert source and iid_text and api_url and project_id  # for the type checker
    project_dir = value("CI_PROJECT_DIR")
    return CiEnvironment(
        gitlab_url=gitlab_url_from_api_url(api_url),
        project_id=project_id,
        iid=int(iid_text),
        project_dir=Path(project_dir) if project_dir else cwd,
        pipeline_source=source,
        diff_base_sha=value("CI_MERGE_REQUEST_DIFF_BASE_SHA"),
        commit_sha=value("CI_COMMIT_SHA"),
        job_url=value("CI_JOB_URL"),
        pipeline_id=_pipeline_id(value("CI_PIPELINE_ID"), value("CI_COMMIT_SHA")),
    )


def _pipeline_id(text: str | None, commit_sha: str | None) -> int | None:
    """The pipeline the commit status joins: this one, when it runs on a commit (always, in
    GitLab CI); a value that is no number is left out (the status then goes on the head SHA
    alone)."""
    return int(text) if text and text.isdigit() and commit_sha else None


# --- policy and artifacts --------------------------------------------------------------------


def findings_at_or_above(findings: Sequence[Finding], threshold: Severity) -> list[Finding]:
    """The findings as severe as ``threshold`` or more (blocker is the most severe)."""
    return [f for f in findings if f.severity.rank <= threshold.rank]


def write_codequality(path: Path, findings: Sequence[Finding]) -> None:
    """The GitLab Code Quality report of ``findings`` (an empty list: none)."""
    write_text(path, json.dumps(codequality_report(findings), indent=2) + "\n")


def write_text(path: Path, text: str) -> None:
    """An artifact; its folder is made when missing. ArtifactWriteError when it cannot be."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise ArtifactWriteError(f"cannot write {path}: {error.strerror or error}") from None


# --- the review of the pipeline's merge request ---------------------------------------------


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """Turn SIGTERM (a cancelled or timed-out job) into SystemExit, so ``finally`` blocks run:
    the MR lease in a shared database is released and the review is recorded as failed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(_signum: int, _frame: FrameType | None) -> None:
        raise SystemExit(SIGTERM_EXIT)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _database(
    settings: Settings, env: Mapping[str, str], say: Callable[[str], None]
) -> Iterator[Settings]:
    """The settings with a database: the shared one if configured, else a throw-away SQLite."""
    if env.get(DATABASE_URL_VARIABLE) or settings.database_url != Settings().database_url:
        yield settings
        return
    with tempfile.TemporaryDirectory(prefix="reviewbot-ci-") as directory:
        url = f"sqlite:///{Path(directory) / THROWAWAY_DATABASE_NAME}"
        say(f"{DATABASE_URL_VARIABLE} is not set: recording to a throw-away SQLite database")
        yield replace(settings, database_url=url)


def _ci_settings(config_file: str | None, ci: CiEnvironment, env: Mapping[str, str]) -> Settings:
    settings = load_settings(env=env, config_file=config_file)
    if not settings.gitlab_url:
        settings = replace(settings, gitlab_url=ci.gitlab_url)
    if not settings.gitlab_token:
        raise ConfigError(
            "REVIEWBOT_GITLAB_TOKEN is not set: add a project access token with the api scope "
            "as a masked CI/CD variable (CI_JOB_TOKEN cannot post merge request notes)"
        )
    return settings


def review_pipeline_merge_request(
    ci: CiEnvironment,
    env: Mapping[str, str],
    config_file: str | None,
    *,
    dry_run: bool,
    full: bool = False,
    analyzer_reports: Sequence[Path] = (),
    say: Callable[[str], None],
    analyzers: AnalyzerRun | None = None,
    effort: EffortChoice | None = None,
) -> RunReport:
    """Review the pipeline's MR like `reviewbot run` (same idempotency, same summary note),
    with file contents from the checkout; ``say`` hears what happens along the way. The
    analyzers (``analyzer_reports``, the ``analyzer_reports`` setting, the built-ins) go to the
    review as ``RunOptions.analyzers`` (:func:`pipeline_analyzers`); ``analyzers``: findings
    already collected, merged too (None: none)."""
    from reviewbot.mr import RunOptions, run_merge_request

    settings = _ci_settings(config_file, ci, env)
    say(f"merge request !{ci.iid} of project {ci.project_id} on {settings.gitlab_url}")

    checkout = Checkout(ci.project_dir, say)
    options = RunOptions(
        analyzers=pipeline_analyzers(ci, settings, analyzer_reports),
        trigger="ci",
        dry_run=dry_run,
        checkout=checkout,
        ci_job_url=ci.job_url,
        full=full,
        pipeline_id=ci.pipeline_id,
        analyzer_run=analyzers,
        effort=effort,
    )
    with (
        _sigterm_unwinds(),
        _database(settings, env, say) as settings_with_db,
        App(settings_with_db) as app,
    ):
        report = run_merge_request(app, ci.project_id, ci.iid, options, progress=say)
    _check_pipeline_base(ci, checkout, report, say)
    return report


def pipeline_analyzers(
    ci: CiEnvironment, settings: Settings, analyzer_reports: Sequence[Path] = ()
) -> CheckoutAnalyzers:
    """The analyzers of the CI checkout: the reports given (relative paths: to
    ``CI_PROJECT_DIR``, where the job's ``needs:`` artifacts land) and the built-ins; a report
    for the pipeline's own commit (a merged-results pipeline's merge commit) is accepted too."""
    also = (ci.commit_sha,) if ci.commit_sha else ()
    return CheckoutAnalyzers(ci.project_dir, settings, tuple(analyzer_reports), also)


def _check_pipeline_base(
    ci: CiEnvironment, checkout: Checkout, report: RunReport, say: Callable[[str], None]
) -> None:
    """Say where the head contents came from, and when the pipeline's diff is not the one
    reviewed (a newer push, or the target branch moved since the pipeline was created)."""
    source = checkout.sources.get(report.head_sha)
    if source is not None:
        say(f"head {report.head_sha[:8]} contents: {source.value}")
    if ci.diff_base_sha and ci.diff_base_sha != report.base_sha:
        say(
            f"CI_MERGE_REQUEST_DIFF_BASE_SHA {ci.diff_base_sha[:8]} differs from the latest "
            f"diff version's base {report.base_sha[:8]}: reviewed the latest version"
        )
    if ci.commit_sha and ci.commit_sha != report.head_sha:
        say(
            f"CI_COMMIT_SHA {ci.commit_sha[:8]} is not the MR head {report.head_sha[:8]} "
            "(merged-results pipeline or a newer push): reviewed the MR's latest diff version"
        )
