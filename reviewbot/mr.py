"""Review one GitLab merge request end to end: read, review, post, record.

The steps, each through an adapter passed in (or built from the settings):

1. GitLab: the MR snapshot (SHAs of the latest diff version, file diffs) and head contents
   (from a local checkout when ``repo_dir`` is given, e.g. in CI; else the repository files API).
2. ``review.review_files``: plan, prompts, model, findings.
3. Publish: skip fingerprints already on the MR (hidden markers, all pages, plus the database),
   post the rest as diff discussions (or draft notes + bulk publish), put what GitLab refuses in
   the summary, resolve the bot's stale threads, and edit the one summary note in place.
4. Store: the review, every model call, every finding and its fate.

A lease on the MR in the database serialises runs: two runs at once never double-post.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reviewbot.chunking import Plan, PlanOptions
from reviewbot.comments import (
    LatencyStats,
    SummaryData,
    TokenUsage,
    UnplacedFinding,
    UnplacedReason,
    finding_body,
    line_code_for,
    line_text_hash,
    summary_body,
)
from reviewbot.config import ConfigError, Settings, apply_repo_overrides
from reviewbot.diff import FileStatus, LineKind, Side
from reviewbot.exclusions import ExclusionRules, skip_reason
from reviewbot.findings import Category, Finding, FindingsOptions, Severity
from reviewbot.gitlab import (
    BotThread,
    GitLabClient,
    GitLabSettings,
    MergeRequestSnapshot,
    PositionRefusedError,
)
from reviewbot.llm import ChunkRunner, LLMClient, model_from_settings
from reviewbot.localgit import GitError, read_files_at
from reviewbot.prompts import ReviewContext, file_summaries
from reviewbot.review import ReviewOptions, ReviewResult, review_files
from reviewbot.slots import ModelSlots
from reviewbot.store import Store
from reviewbot.store.migrate import ensure_schema
from reviewbot.tokens import TokenCounter, local_counter

__all__ = [
    "MergeRequestBusyError",
    "ReviewIncompleteError",
    "RunOptions",
    "RunReport",
    "require_complete",
    "run_merge_request",
]

REPO_CONFIG_FILE = ".reviewbot.toml"
# The per-MR lease (Settings.mr_lock_seconds) is renewed every third of its length while a run is
# alive, so a crashed run frees the MR quickly while a slow model call never loses it.
LEASE_RENEWALS_PER_TTL = 3
STALE_REPLY = (
    "The code this comment was about has changed in the latest push, so this thread is "
    "resolved. _(reviewbot)_"
)
MS_PER_SECOND = 1000.0


class MergeRequestBusyError(RuntimeError):
    """Another run holds this MR's lease; try again later."""


class ReviewIncompleteError(RuntimeError):
    """Some chunks could not be reviewed (model down or failing); what was found is posted.

    Raised by :func:`require_complete`; a worker retries the job later (publishing is
    idempotent, so nothing is posted twice).
    """


def require_complete(report: RunReport) -> RunReport:
    """The report, or ReviewIncompleteError when part of the diff was not reviewed."""
    errors = report.review.chunk_errors
    if errors:
        first = next(iter(errors.values()))
        raise ReviewIncompleteError(
            f"{len(errors)} chunk(s) of {report.project_path}!{report.iid} could not be "
            f"reviewed: {first}"
        )
    return report


class _LeaseKeeper:
    """Renews the MR lease in the background while a run is alive."""

    def __init__(self, store: Store, project: str, iid: int, holder: str, ttl_s: float) -> None:
        self._renew = lambda: store.renew_mr_lock(project, iid, holder, ttl_s)
        self._interval = ttl_s / LEASE_RENEWALS_PER_TTL
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="mr-lease", daemon=True)

    def __enter__(self) -> _LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._renew()


@dataclass(frozen=True)
class RunOptions:
    trigger: str = "cli"
    dry_run: bool = False
    repo_dir: Path | None = None
    ci_job_url: str | None = None
    lock_ttl_s: float | None = None  # None: Settings.mr_lock_seconds


@dataclass
class RunReport:
    project_path: str
    iid: int
    head_sha: str
    web_url: str
    review_id: int | None
    review: ReviewResult
    posted: list[Finding] = field(default_factory=list)
    already_posted: list[Finding] = field(default_factory=list)
    refused: list[tuple[Finding, str]] = field(default_factory=list)
    summary_only: list[Finding] = field(default_factory=list)
    resolved_threads: int = 0
    summary_note_id: int | None = None
    summary_markdown: str = ""
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)
    threads: dict[str, tuple[str, int]] = field(default_factory=dict)  # fingerprint -> ids

    @property
    def findings(self) -> list[Finding]:
        """Every kept finding above the threshold (posted, already there, or summary only)."""
        filtered = set(map(id, self.review.findings.selection.filtered))
        return [f for f in self.review.findings.findings if id(f) not in filtered]


def gitlab_from_settings(settings: Settings) -> GitLabClient:
    if not settings.gitlab_url or not settings.gitlab_token:
        missing = [
            name
            for name, value in (
                ("REVIEWBOT_GITLAB_URL", settings.gitlab_url),
                ("REVIEWBOT_GITLAB_TOKEN", settings.gitlab_token),
            )
            if not value
        ]
        raise ConfigError(f"set {' and '.join(missing)} (a project access token with api scope)")
    return GitLabClient(GitLabSettings(url=settings.gitlab_url, token=settings.gitlab_token))


def llm_from_settings(settings: Settings, *, slots: ModelSlots | None = None) -> ChunkRunner:
    """The model client; an alias of reviewbot.llm.model_from_settings kept for callers."""
    return model_from_settings(settings, slots=slots)


def store_from_settings(settings: Settings) -> Store:
    """Open the database and bring its schema up to date (a blank database is migrated)."""
    ensure_schema(settings.database_url)
    return Store.from_url(settings.database_url)


def review_options(settings: Settings) -> ReviewOptions:
    return ReviewOptions(
        max_model_len=settings.max_model_len,
        max_output_tokens=settings.max_output_tokens,
        plan_options=PlanOptions(
            context_lines=settings.context_lines,
            exclusions=ExclusionRules(extra_globs=settings.exclude),
        ),
        findings_options=FindingsOptions(
            context_lines=settings.context_lines,
            min_severity=Severity(settings.min_severity),
            categories=frozenset(Category(c) for c in settings.categories) or None,
            max_inline=settings.max_inline,
        ),
    )


def run_merge_request(
    settings: Settings,
    project: str | int,
    iid: int,
    options: RunOptions,
    *,
    gitlab: GitLabClient | None = None,
    llm: LLMClient | None = None,
    store: Store | None = None,
    progress: Callable[[str], None] | None = None,
) -> RunReport:
    """Review MR ``iid`` of ``project`` and publish the result (see the module docstring)."""
    say = progress or (lambda _message: None)
    gitlab = gitlab or gitlab_from_settings(settings)
    # Loading the tokenizer vocabulary takes ~0.4 s: do it while GitLab answers.
    loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenizer")
    counter = loader.submit(local_counter, settings.llm_model)
    loader.shutdown(wait=False)
    say(f"reading merge request !{iid}")
    snapshot = gitlab.snapshot(project, iid)
    store = store or store_from_settings(settings)
    holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    key = snapshot.project_path
    ttl = options.lock_ttl_s or settings.mr_lock_seconds
    if not store.acquire_mr_lock(key, iid, holder, ttl):
        raise MergeRequestBusyError(
            f"another reviewbot run is reviewing {key}!{iid}; try again when it finishes"
        )
    run = _Run(settings, snapshot, options, gitlab, llm or llm_from_settings(settings), store,
               say, counter)  # fmt: skip
    try:
        with _LeaseKeeper(store, key, iid, holder, ttl):
            return _run_recorded(run)
    finally:
        store.release_mr_lock(key, iid, holder)


@dataclass
class _Run:
    """Everything one run works with."""

    settings: Settings
    snapshot: MergeRequestSnapshot
    options: RunOptions
    gitlab: GitLabClient
    llm: LLMClient
    store: Store
    say: Callable[[str], None]
    counter: Future[TokenCounter]


def _run_recorded(run: _Run) -> RunReport:
    """The run inside a review row: a failure is recorded with its error, then raised."""
    refs = run.snapshot.diff_refs
    review_id = run.store.start_review(
        project=run.snapshot.project_path,
        mr_iid=run.snapshot.iid,
        head_sha=refs.head_sha,
        base_sha=refs.base_sha,
        start_sha=refs.start_sha,
        trigger=run.options.trigger,
        model=run.settings.llm_model or "",
        prompt_version="",
    )
    try:
        return _review_and_publish(run, review_id)
    except BaseException as error:
        run.store.finish_review(
            review_id, status="failed", error=f"{type(error).__name__}: {error}"
        )
        raise


def _review_and_publish(run: _Run, review_id: int) -> RunReport:
    settings, snapshot, options = run.settings, run.snapshot, run.options
    gitlab, llm, store, say = run.gitlab, run.llm, run.store, run.say
    warnings: list[str] = []
    head = snapshot.diff_refs.head_sha
    repo_config = _head_contents(gitlab, snapshot, options, [REPO_CONFIG_FILE], warnings)
    if REPO_CONFIG_FILE in repo_config:
        try:
            settings = apply_repo_overrides(settings, repo_config[REPO_CONFIG_FILE])
        except ConfigError as error:
            warnings.append(f"ignored {REPO_CONFIG_FILE}: {error}")
    review_opts = review_options(settings)
    rules = review_opts.plan_options.exclusions
    skipped = {f.path: reason for f in snapshot.files if (reason := skip_reason(f, rules))}
    wanted = [
        f.new_path
        for f in snapshot.files
        if f.path not in skipped and f.status is not FileStatus.DELETED
    ]
    say(f"fetching {len(wanted)} files at {head[:8]}")
    contents = _head_contents(gitlab, snapshot, options, wanted, warnings)
    context = ReviewContext(
        title=snapshot.title,
        description=snapshot.description,
        files=file_summaries(snapshot.files, skipped),
        language=settings.language,
        include_style=settings.include_style,
    )

    def planned(review_plan: Plan) -> None:
        say(f"reviewing {len(review_plan.chunks)} chunks")

    result = review_files(
        snapshot.files,
        context=context,
        llm=llm,
        counter=run.counter.result(),
        options=review_opts,
        contents=contents,
        on_planned=planned,
    )
    store.record_llm_calls(review_id, [_call_row(call) for call in result.calls])
    report = RunReport(
        project_path=snapshot.project_path,
        iid=snapshot.iid,
        head_sha=head,
        web_url=snapshot.web_url,
        review_id=review_id,
        review=result,
        dry_run=options.dry_run,
        warnings=warnings,
    )
    say("publishing")
    try:
        _publish(settings, snapshot, options, gitlab, store, report, contents)
    finally:
        # Also when publishing fails midway: what was posted is on record, and the next run
        # skips it by its marker anyway.
        _record_findings(store, review_id, report)
    store.finish_review(
        review_id,
        status="failed" if result.chunk_errors else "succeeded",
        coverage=result.plan.coverage.to_dict(),
        chunks=len(result.plan.chunks),
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        cached_tokens=result.cached_tokens,
        summary_note_id=report.summary_note_id,
        error="; ".join(f"chunk {i}: {e}" for i, e in result.chunk_errors.items()) or None,
        model=result.model,
        prompt_version=result.prompt_version,
    )
    return report


def _head_contents(
    gitlab: GitLabClient,
    snapshot: MergeRequestSnapshot,
    options: RunOptions,
    paths: list[str],
    warnings: list[str],
) -> dict[str, str]:
    """Head contents of ``paths``: from the checkout when it has the head commit, else the API."""
    head = snapshot.diff_refs.head_sha
    found: dict[str, str] = {}
    if options.repo_dir is not None and paths:
        try:
            found = read_files_at(options.repo_dir, head, paths)
        except GitError as error:
            warnings.append(f"local checkout not used ({error}); reading files from GitLab")
    missing = [path for path in paths if path not in found]
    if missing:
        found.update(gitlab.file_contents(snapshot.project_id, head, missing))
    return found


# --- publishing ------------------------------------------------------------------------------


def _publish(
    settings: Settings,
    snapshot: MergeRequestSnapshot,
    options: RunOptions,
    gitlab: GitLabClient,
    store: Store,
    report: RunReport,
    contents: dict[str, str],
) -> None:
    """Post, resolve stale threads, write the summary; ``contents``: head files already read."""
    selection = report.review.findings.selection
    threads = gitlab.bot_threads(snapshot.project_id, snapshot.iid)
    on_mr = {t.marker.fingerprint: t for t in threads if t.marker.fingerprint}
    known = set(on_mr) | set(store.posted_findings(snapshot.project_path, snapshot.iid))
    fresh: list[Finding] = []
    for finding in selection.inline:
        (report.already_posted if finding.fingerprint in known else fresh).append(finding)
    report.summary_only = list(selection.summary_only)
    _remember_threads(report, {f.fingerprint: on_mr[f.fingerprint] for f in report.already_posted
                               if f.fingerprint in on_mr})  # fmt: skip
    if options.dry_run:
        report.posted = fresh
    elif settings.publish_mode == "drafts" and fresh:
        published = gitlab.publish_drafts(snapshot, [(f, finding_body(f)) for f in fresh])
        report.posted = [f for f in fresh if f.fingerprint in published.published]
        report.refused = [(f, "GitLab dropped the draft note") for f in published.missing]
        _remember_threads(report, published.published)
    else:
        for finding in fresh:
            try:
                discussion_id, note_id = gitlab.post_finding(
                    snapshot, finding, finding_body(finding)
                )
            except PositionRefusedError as error:
                report.refused.append((finding, str(error)))
                continue
            report.posted.append(finding)
            report.threads[finding.fingerprint] = (discussion_id, note_id)
    current = {f.fingerprint for f in report.review.findings.findings}
    stale = [t for t in threads if not t.resolved and t.marker.fingerprint not in current]
    paths = {t.marker.path for t in stale if t.marker.side is Side.NEW}
    missing = sorted(paths - set(contents))
    contents.update(_head_contents(gitlab, snapshot, options, missing, report.warnings))
    gone = _threads_whose_line_changed(snapshot, stale, contents)
    if not options.dry_run:
        for thread in gone:
            gitlab.resolve_thread(snapshot.project_id, snapshot.iid, thread.discussion_id,
                                  STALE_REPLY)  # fmt: skip
        _mark_outdated(store, snapshot, gone)
    report.resolved_threads = len(gone)
    report.summary_markdown = summary_body(_summary_data(snapshot, options, report))
    if not options.dry_run:
        report.summary_note_id = gitlab.upsert_summary(
            snapshot.project_id, snapshot.iid, report.summary_markdown
        )


def _remember_threads(report: RunReport, threads: dict[str, BotThread]) -> None:
    for fingerprint, thread in threads.items():
        report.threads[fingerprint] = (thread.discussion_id, thread.note_id)


def _threads_whose_line_changed(
    snapshot: MergeRequestSnapshot, threads: Iterable[BotThread], head: Mapping[str, str]
) -> list[BotThread]:
    """Bot threads whose anchored line no longer exists as it was in the latest version.

    ``head`` holds the head text of every path a new-side thread is on (absent: file gone).
    """
    threads = list(threads)
    paths = {t.marker.path for t in threads if t.marker.side is Side.NEW}
    head_hashes = {
        path: {line_text_hash(line) for line in head[path].splitlines()}
        for path in paths
        if path in head
    }
    gone = []
    for thread in threads:
        marker = thread.marker
        if marker.side is Side.NEW:
            still_there = marker.text_hash in head_hashes.get(marker.path, set())
        else:
            file = snapshot.file(marker.path)
            removed = (
                {
                    line_text_hash(line.text)
                    for line in file.lines()
                    if line.kind is LineKind.REMOVED
                }
                if file
                else set()
            )
            still_there = marker.text_hash in removed
        if not still_there:
            gone.append(thread)
    return gone


def _mark_outdated(store: Store, snapshot: MergeRequestSnapshot, gone: list[BotThread]) -> None:
    rows = store.posted_findings(snapshot.project_path, snapshot.iid)
    for thread in gone:
        row = rows.get(thread.marker.fingerprint)
        if row is not None:
            store.update_finding(row["id"], state="outdated")


def _summary_data(
    snapshot: MergeRequestSnapshot, options: RunOptions, report: RunReport
) -> SummaryData:
    result = report.review
    unplaced = [
        UnplacedFinding(f, _unplaced_reason(f), _line_code(snapshot, f))
        for f in report.summary_only
    ]
    unplaced += [
        UnplacedFinding(f, UnplacedReason.REFUSED, _line_code(snapshot, f), reason)
        for f, reason in report.refused
    ]
    p50, p95 = result.ttft_percentile(0.5), result.ttft_percentile(0.95)
    errors = [f"chunk {i + 1}: {e}" for i, e in sorted(result.chunk_errors.items())]
    return SummaryData(
        head_sha=snapshot.diff_refs.head_sha,
        model=result.model,
        prompt_version=result.prompt_version,
        mr_web_url=snapshot.web_url,
        counts=result.findings.counts,
        inline_count=len(report.posted) + len(report.already_posted),
        coverage=result.plan.coverage,
        chunks=len(result.plan.chunks),
        tokens=TokenUsage(result.prompt_tokens, result.completion_tokens, result.cached_tokens),
        total_time_s=result.seconds,
        first_token=LatencyStats(
            p50 / MS_PER_SECOND if p50 is not None else None,
            p95 / MS_PER_SECOND if p95 is not None else None,
        ),
        invalid_model_calls=len(result.invalid_calls),
        unplaced=unplaced,
        errors=errors + report.warnings,
        ci_job_url=options.ci_job_url,
    )


def _unplaced_reason(finding: Finding) -> UnplacedReason:
    return UnplacedReason.FILE_LEVEL if finding.is_file_level else UnplacedReason.OVER_CAP


def _line_code(snapshot: MergeRequestSnapshot, finding: Finding) -> str | None:
    file = snapshot.file(finding.path)
    if file is None or finding.line is None:
        return None
    return line_code_for(file, finding.side, finding.line)


# --- recording -------------------------------------------------------------------------------


def _call_row(call: Any) -> dict[str, Any]:
    return {
        "chunk_index": call.chunk_index,
        "mode": call.mode,
        "outcome": call.outcome,
        "prompt_tokens": call.prompt_tokens,
        "completion_tokens": call.completion_tokens,
        "cached_tokens": call.cached_tokens or 0,
        "ttft_ms": call.ttft_ms,
        "latency_ms": call.latency_ms,
        "slot_wait_ms": call.slot_wait_ms,
        "retries": call.retries,
        "invalid_tool_calls": call.invalid_tool_calls,
        "error": call.error,
        "started_at": call.started_at,
    }


def _record_findings(store: Store, review_id: int, report: RunReport) -> None:
    rows: list[dict[str, Any]] = []
    for state, findings in (
        ("dry_run" if report.dry_run else "posted", report.posted),
        ("duplicate", report.already_posted),
        ("summary", report.summary_only),
        ("failed", [f for f, _ in report.refused]),
    ):
        for finding in findings:
            discussion_id, note_id = report.threads.get(finding.fingerprint, (None, None))
            rows.append(
                {
                    "fingerprint": finding.fingerprint,
                    "path": finding.path,
                    "side": finding.side.value,
                    "line": finding.line,
                    "end_line": finding.end_line,
                    "severity": finding.severity.value,
                    "category": finding.category.value,
                    "title": finding.title,
                    "body": finding.body,
                    "anchor": finding.anchor.value,
                    "state": state,
                    "discussion_id": discussion_id,
                    "note_id": note_id,
                }
            )
    store.record_findings(review_id, rows)
