"""The two ways analyzer findings are collected for one MR: in a checkout (``reviewbot ci``,
the host's repository cache) and from the MR head's latest pipeline through GitLab's API (the
webhook worker). Both return one :class:`AnalyzerRun`; neither raises for a report or a tool.

Owns: :func:`collect_in_checkout`, :func:`collect_from_pipeline`, the read of a report file,
and the narrowing of findings to the MR's changed lines. Must not: merge findings into the
review (the review pipeline does), or know a report's format.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from reviewbot.analyzer_findings import AnalyzerFinding, AnalyzerProblem, AnalyzerRun
from reviewbot.analyzer_settings import AnalyzerSettings, ReportJob
from reviewbot.analyzers.builtin import run_builtin_analyzers
from reviewbot.analyzers.changes import changed_lines
from reviewbot.analyzers.report_json import MAX_REPORT_BYTES, ReportContext, counted
from reviewbot.analyzers.reports import read_report
from reviewbot.diff import FileDiff
from reviewbot.gitlab.connection import GitLabError

__all__ = [
    "AnalyzerCollector",
    "ChangedLines",
    "CheckoutAnalyzers",
    "PipelineArtifacts",
    "collect_from_pipeline",
    "collect_in_checkout",
    "read_report_file",
    "within_changes",
]

# The MR's changed files of the head commit, each with its added or changed lines (1-based);
# an empty sequence stands for the whole file.
ChangedLines = Mapping[str, Sequence[int]]
SHORT_SHA = 8


class PipelineArtifacts(Protocol):
    """What :func:`collect_from_pipeline` asks GitLab (``reviewbot.gitlab``'s client does)."""

    def latest_pipeline(self, project_id: int | str, sha: str) -> dict[str, Any] | None: ...

    def pipeline_jobs(self, project_id: int | str, pipeline_id: int) -> list[dict[str, Any]]: ...

    def job_artifact(
        self, project_id: int | str, job_id: int, path: str, *, max_bytes: int
    ) -> bytes | None: ...


class AnalyzerCollector(Protocol):
    """What ``RunOptions.analyzers`` is: called by the review once the diff is read, with the
    MR's head, its ``FileDiff`` s and the run's repository (``reviewbot.repo.source``'s
    ``RepositorySource``, which the host's built-ins run on; the others ignore it)."""

    def __call__(
        self, head_sha: str, files: Iterable[FileDiff], source: Any = None
    ) -> AnalyzerRun: ...


def collect_in_checkout(
    checkout: Path,
    changed: ChangedLines,
    head_sha: str,
    settings: AnalyzerSettings,
    report_paths: Sequence[Path] = (),
    *,
    also_commits: Collection[str] = (),
) -> AnalyzerRun:
    """The reports at ``report_paths`` (relative ones: to ``checkout``) and
    ``settings.analyzer_reports``, and the built-in analyzers on the ``changed`` files, kept to
    the changed lines. A report naming another commit than ``head_sha`` or one of
    ``also_commits`` (a merged-results pipeline's merge commit) is not used."""
    context = ReportContext(
        commits=frozenset({head_sha, *also_commits} - {""}),
        roots=(str(checkout.resolve()), str(checkout)),
    )
    paths = [*report_paths, *map(Path, settings.analyzer_reports)]
    run = AnalyzerRun()
    for path in dict.fromkeys(paths):
        run = run.merged(read_report_file(path if path.is_absolute() else checkout / path, context))
    run = run.merged(run_builtin_analyzers(checkout, changed, settings))
    return within_changes(run, changed)


@dataclass(frozen=True)
class CheckoutAnalyzers:
    """The analyzers of one checkout, waiting for the MR's head and diff: what ``reviewbot ci``
    hands the review (``RunOptions.analyzers``), which calls it once the diff is read."""

    checkout: Path
    settings: AnalyzerSettings
    report_paths: tuple[Path, ...] = ()
    also_commits: tuple[str, ...] = ()

    def __call__(self, head_sha: str, files: Iterable[FileDiff], source: Any = None) -> AnalyzerRun:
        """:func:`collect_in_checkout` on the changed lines of ``files`` (``source``: unused,
        the checkout is this collector's own)."""
        return collect_in_checkout(
            self.checkout,
            changed_lines(files),
            head_sha,
            self.settings,
            self.report_paths,
            also_commits=self.also_commits,
        )


@dataclass(frozen=True)
class PipelineAnalyzers:
    """The reports of the MR head's latest pipeline (``analyzer_report_jobs``), waiting for the
    head and the diff: what the webhook worker hands the review (``RunOptions.analyzers``)."""

    gitlab: PipelineArtifacts
    project: int | str
    settings: AnalyzerSettings

    def __call__(self, head_sha: str, files: Iterable[FileDiff], source: Any = None) -> AnalyzerRun:
        """:func:`collect_from_pipeline` on the changed lines of ``files`` (``source``: unused)."""
        return collect_from_pipeline(
            self.gitlab, self.project, head_sha, self.settings, changed_lines(files)
        )


def read_report_file(path: Path, context: ReportContext) -> AnalyzerRun:
    """One report file: its findings, or the problem (missing, unreadable, too large, ...)."""
    name = path.name
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_REPORT_BYTES + 1)
    except FileNotFoundError:
        return AnalyzerRun(problems=(AnalyzerProblem(f"report {name}", f"not found at {path}"),))
    except OSError as error:
        reason = f"cannot be read: {error.strerror or error}"
        return AnalyzerRun(problems=(AnalyzerProblem(f"report {name}", reason),))
    return _named_as_report(read_report(name, data, context))


def _named_as_report(run: AnalyzerRun) -> AnalyzerRun:
    problems = tuple(AnalyzerProblem(f"report {p.name}", p.reason) for p in run.problems)
    return AnalyzerRun(run.findings, run.used, problems)


def collect_from_pipeline(
    gitlab: PipelineArtifacts,
    project: int | str,
    head_sha: str,
    settings: AnalyzerSettings,
    changed: ChangedLines | None = None,
) -> AnalyzerRun:
    """The reports ``settings.analyzer_report_jobs`` names, from the jobs of the latest
    pipeline of ``head_sha``; kept to the ``changed`` lines when given. A pipeline, job or file
    that is not there, or a GitLab error, is a problem."""
    jobs = settings.report_jobs()
    if not jobs:
        return AnalyzerRun()
    try:
        pipeline = gitlab.latest_pipeline(project, head_sha)
        if pipeline is None:
            reason = f"no pipeline for the MR's head {head_sha[:SHORT_SHA]}"
            return AnalyzerRun(problems=(AnalyzerProblem("pipeline reports", reason),))
        listed = gitlab.pipeline_jobs(project, int(pipeline["id"]))
    except (KeyError, TypeError, ValueError):
        reason = f"GitLab answered a pipeline of {head_sha[:SHORT_SHA]} without a number as id"
        return AnalyzerRun(problems=(AnalyzerProblem("pipeline reports", reason),))
    except GitLabError as error:
        return AnalyzerRun(problems=(AnalyzerProblem("pipeline reports", str(error)),))
    context = ReportContext(commits=frozenset({head_sha, str(pipeline.get("sha", ""))} - {""}))
    run = AnalyzerRun()
    for job in jobs:
        run = run.merged(_job_report(gitlab, project, pipeline, listed, job, context))
    return within_changes(run, changed) if changed is not None else run


def _job_report(
    gitlab: PipelineArtifacts,
    project: int | str,
    pipeline: Mapping[str, Any],
    listed: Sequence[Mapping[str, Any]],
    wanted: ReportJob,
    context: ReportContext,
) -> AnalyzerRun:
    name = f"report {wanted.job}:{wanted.path}"
    named = [j for j in listed if j.get("name") == wanted.job]
    if not named:
        reason = f"no job {wanted.job!r} in pipeline {pipeline.get('id')}"
        return AnalyzerRun(problems=(AnalyzerProblem(name, reason),))
    job = max(named, key=lambda j: int(j.get("id", 0)))
    try:
        data = gitlab.job_artifact(project, int(job["id"]), wanted.path, max_bytes=MAX_REPORT_BYTES)
    except GitLabError as error:
        return AnalyzerRun(problems=(AnalyzerProblem(name, str(error)),))
    if data is None:
        reason = (
            f"job {wanted.job!r} ({job.get('status', 'unknown status')}) has no artifact "
            f"{wanted.path} (not kept, expired, or the job did not write it)"
        )
        return AnalyzerRun(problems=(AnalyzerProblem(name, reason),))
    run = read_report(f"{wanted.job}:{wanted.path}", data, context)
    return _named_as_report(run)


def within_changes(run: AnalyzerRun, changed: ChangedLines) -> AnalyzerRun:
    """The run's findings on the ``changed`` lines (a file with no lines given: all of it);
    the number left out is said in ``used``, never silently dropped."""
    kept = tuple(f for f in run.findings if _on_changed_lines(f, changed))
    left_out = len(run.findings) - len(kept)
    used = run.used
    if left_out:
        used += (
            f"{counted(left_out, 'analyzer finding')} outside the MR's changed lines left out",
        )
    return AnalyzerRun(kept, used, run.problems)


def _on_changed_lines(finding: AnalyzerFinding, changed: ChangedLines) -> bool:
    if finding.path not in changed:
        return False
    lines = changed[finding.path]
    if not lines:
        return True
    last = finding.end_line or finding.line
    return any(finding.line <= line <= last for line in lines)
