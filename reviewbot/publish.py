"""Publishing a review on a merge request: the Publisher seam and its three implementations.

reviewdog's shape: the findings are filtered first (:mod:`reviewbot.findings`), then handed to a
comment service that posts and flushes. :func:`publish` is the one algorithm; a
:class:`Publisher` is how it reaches the MR:

- :class:`DiscussionsPublisher` opens one diff discussion per finding as it goes;
- :class:`DraftsPublisher` creates draft notes and publishes them in one ``bulk_publish`` (one
  notification for the author), then checks which drafts GitLab really turned into threads;
- :class:`DryRunPublisher` posts nothing: it reads what is on the MR (when it can), records
  what would be posted, and can write it to a stream like reviewdog's ``local`` reporter.

The algorithm, whatever the publisher:

1. read the bot's threads on the MR (hidden markers, every page); what is on the MR is the
   truth for idempotency, so a finding whose fingerprint is there is not posted again;
2. apply each suggestion to its head file (:mod:`reviewbot.suggestions`): one that does not
   apply or parse is left out, its finding kept and the drop counted for the run details;
   post the rest and flush; a position GitLab refuses goes to the summary with its reason;
3. resolve the bot's unresolved threads whose finding is gone and whose line changed
   (:func:`threads_whose_line_changed`);
4. write the one summary note (edited in place) with counts of what is really on the MR.

It returns a :class:`PublishResult`; recording it in the database is the caller's business.

Owns: the algorithm above and the three publishers. Must not: write a comment's text
(`reviewbot.comments`) or a position (`reviewbot.positions`), talk to GitLab but through the
``GitLabClient`` handed in, or record anything in the database (the caller does).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TextIO

from reviewbot.analyzer_summary import AnalyzerFacts, analyzer_lines
from reviewbot.chunking import Coverage
from reviewbot.comments import (
    IncrementalNote,
    LatencyStats,
    SummaryData,
    TokenUsage,
    UnplacedFinding,
    UnplacedReason,
    Withheld,
    finding_body,
    line_text_hash,
    summary_body,
)
from reviewbot.diff import LineKind, Side
from reviewbot.findings import Finding, Selection, Severity
from reviewbot.gitlab import GitLabClient, PositionRefusedError
from reviewbot.mergerequest import BotThread, MergeRequestSnapshot
from reviewbot.positions import diff_link
from reviewbot.review import CarriedOver
from reviewbot.suggestions import SuggestionProblem, VettedFindings, vet_suggestions
from reviewbot.walkthrough import Walkthrough

__all__ = [
    "STALE_REPLY",
    "DiscussionsPublisher",
    "DraftsPublisher",
    "DryRunPublisher",
    "Flushed",
    "PublishResult",
    "Publisher",
    "ReviewFacts",
    "ThreadRef",
    "publish",
    "publisher_for",
    "threads_whose_line_changed",
]

STALE_REPLY = (
    "The code this comment was about has changed in the latest push, so this thread is "
    "resolved. _(reviewbot)_"
)
DROPPED_DRAFT = "GitLab dropped the draft note when publishing"
MS_PER_SECOND = 1000.0
MR_URL_PART = "/-/merge_requests/"


@dataclass(frozen=True)
class ThreadRef:
    """Where a finding lives on the MR."""

    discussion_id: str
    note_id: int


@dataclass(frozen=True)
class Flushed:
    """What a flush put on the MR: threads by fingerprint, and what GitLab refused (why)."""

    posted: Mapping[str, ThreadRef | None]  # None: a dry run, nothing was created
    refused: Sequence[tuple[Finding, str]] = ()


class Publisher(Protocol):
    """How :func:`publish` reaches one merge request."""

    @property
    def dry_run(self) -> bool: ...

    def existing_threads(self) -> list[BotThread]:
        """The bot's finding threads on the MR (every page)."""
        ...

    def has_summary(self) -> bool:
        """Whether the bot's summary note is on the MR."""
        ...

    def post(self, finding: Finding) -> ThreadRef | None:
        """Post ``finding`` now (its thread), or queue it for :meth:`flush` (None); a refusal
        is reported by :meth:`flush`."""
        ...

    def flush(self) -> Flushed:
        """Finish posting; report every finding given to :meth:`post` since the last flush."""
        ...

    def resolve(self, thread: BotThread) -> None:
        """Reply why, then resolve a thread whose line changed."""
        ...

    def upsert_summary(self, markdown: str) -> int | None:
        """Edit the summary note in place or create it; its note id (None in a dry run)."""
        ...


# ---------------------------------------------------------------------------------------------
# Implementations


class DiscussionsPublisher:
    """One diff discussion per finding, posted as soon as it is given."""

    dry_run = False

    def __init__(self, gitlab: GitLabClient, snapshot: MergeRequestSnapshot) -> None:
        self._gitlab = gitlab
        self._snapshot = snapshot
        self._posted: dict[str, ThreadRef | None] = {}
        self._refused: list[tuple[Finding, str]] = []

    def existing_threads(self) -> list[BotThread]:
        return self._gitlab.bot_threads(self._snapshot.project_id, self._snapshot.iid)

    def has_summary(self) -> bool:
        snapshot = self._snapshot
        return self._gitlab.summary_note_id(snapshot.project_id, snapshot.iid) is not None

    def post(self, finding: Finding) -> ThreadRef | None:
        try:
            discussion_id, note_id = self._gitlab.post_finding(
                self._snapshot, finding, finding_body(finding)
            )
        except PositionRefusedError as error:
            self._refused.append((finding, str(error)))
            return None
        ref = self._posted[finding.fingerprint] = ThreadRef(discussion_id, note_id)
        return ref

    def flush(self) -> Flushed:
        flushed = Flushed(dict(self._posted), list(self._refused))
        self._posted.clear()
        self._refused.clear()
        return flushed

    def resolve(self, thread: BotThread) -> None:
        snapshot = self._snapshot
        self._gitlab.resolve_thread(
            snapshot.project_id, snapshot.iid, thread.discussion_id, STALE_REPLY
        )

    def upsert_summary(self, markdown: str) -> int | None:
        return self._gitlab.upsert_summary(self._snapshot.project_id, self._snapshot.iid, markdown)


class DraftsPublisher(DiscussionsPublisher):
    """Draft notes, published together by one ``bulk_publish``, then verified on the MR."""

    def __init__(self, gitlab: GitLabClient, snapshot: MergeRequestSnapshot) -> None:
        super().__init__(gitlab, snapshot)
        self._queued: list[Finding] = []

    def post(self, finding: Finding) -> ThreadRef | None:
        self._queued.append(finding)
        return None

    def flush(self) -> Flushed:
        queued, self._queued = self._queued, []
        if not queued:
            return Flushed({})
        report = self._gitlab.publish_drafts(
            self._snapshot, [(finding, finding_body(finding)) for finding in queued]
        )
        posted = {
            fingerprint: ThreadRef(thread.discussion_id, thread.note_id)
            for fingerprint, thread in report.published.items()
        }
        return Flushed(posted, [(finding, DROPPED_DRAFT) for finding in report.missing])


class DryRunPublisher:
    """Posts nothing. Reads the MR's threads through ``reader`` when given (so "would post"
    leaves out what is already there) and writes each would-be comment to ``out``."""

    dry_run = True

    def __init__(
        self,
        reader: Callable[[], list[BotThread]] | None = None,
        out: TextIO | None = None,
        summary_reader: Callable[[], bool] | None = None,
    ) -> None:
        self._reader = reader
        self._summary_reader = summary_reader
        self._out = out
        self._queued: list[Finding] = []
        self.resolved: list[BotThread] = []
        self.summary: str | None = None

    def existing_threads(self) -> list[BotThread]:
        return self._reader() if self._reader is not None else []

    def has_summary(self) -> bool:
        return self._summary_reader() if self._summary_reader is not None else False

    def post(self, finding: Finding) -> ThreadRef | None:
        self._queued.append(finding)
        self._write(local_report_line(finding))
        return None

    def flush(self) -> Flushed:
        queued, self._queued = self._queued, []
        return Flushed(dict.fromkeys((finding.fingerprint for finding in queued), None))

    def resolve(self, thread: BotThread) -> None:
        self.resolved.append(thread)
        marker = thread.marker
        self._write(f"{marker.path}:{marker.line}: would resolve thread {thread.discussion_id}")

    def upsert_summary(self, markdown: str) -> int | None:
        self.summary = markdown
        return None

    def _write(self, line: str) -> None:
        if self._out is not None:
            self._out.write(line + "\n")


def local_report_line(finding: Finding) -> str:
    """``path:line: [severity] category: title`` (reviewdog's local format, one line)."""
    where = finding.path if finding.line is None else f"{finding.path}:{finding.line}"
    side = " (old)" if finding.side is Side.OLD and finding.line is not None else ""
    return f"{where}{side}: [{finding.severity}] {finding.category}: {finding.title}"


def publisher_for(
    mode: str, gitlab: GitLabClient, snapshot: MergeRequestSnapshot, *, dry_run: bool
) -> Publisher:
    """The publisher for ``Settings.publish_mode`` (``discussions`` or ``drafts``)."""
    if dry_run:
        return DryRunPublisher(
            lambda: gitlab.bot_threads(snapshot.project_id, snapshot.iid),
            summary_reader=lambda: (
                gitlab.summary_note_id(snapshot.project_id, snapshot.iid) is not None
            ),
        )
    if mode == "drafts":
        return DraftsPublisher(gitlab, snapshot)
    return DiscussionsPublisher(gitlab, snapshot)


# ---------------------------------------------------------------------------------------------
# The algorithm


@dataclass(frozen=True)
class ReviewFacts:
    """What the summary says about the review itself (not about publishing)."""

    model: str
    prompt_version: str
    counts: Mapping[Severity, int]
    coverage: Coverage
    chunks: int
    tokens: TokenUsage = field(default_factory=TokenUsage)
    total_time_s: float = 0.0
    ttft_p50_ms: float | None = None
    ttft_p95_ms: float | None = None
    invalid_model_calls: int = 0
    model_tool_calls: int = 0  # calls the model's answers held, readable or not
    repaired_model_calls: int = 0  # unreadable calls the model resent readably when told why
    unreviewed: Sequence[str] = ()  # one line per chunk the model never answered readably
    errors: Sequence[str] = ()  # warnings
    ci_job_url: str | None = None
    carried: CarriedOver | None = None  # an incremental review: what was kept from before
    tools: str = ""  # the repository tools in words (ReviewResult.tools)
    effort: str = ""  # the effort and its vote in words (reviewbot.passes.Voting.line)
    verification: str = ""  # the verification pass in words ("": off, not shown)
    withheld: Sequence[Withheld] = ()  # per learning, the findings it kept off the MR
    unknown_rules: int = 0  # findings that named a rule the review does not have (name dropped)
    missing_context: Sequence[str] = ()  # context the review meant to show and could not read
    checks: Sequence[tuple[str, str, str]] = ()  # the named checks: (name, outcome, reason)
    check_status: str = ""  # the commit status they make, in words ("": none posted)
    analyzers: AnalyzerFacts | None = None  # None: no analyzers configured (nothing shown)
    walkthrough: Walkthrough | None = None  # None: not asked for
    requirements: Sequence[str] = ()  # the requirements check, a line per issue ("": off)


@dataclass
class PublishResult:
    """What :func:`publish` did; the counts are what is on the MR."""

    posted: list[Finding] = field(default_factory=list)
    already_posted: list[Finding] = field(default_factory=list)
    refused: list[tuple[Finding, str]] = field(default_factory=list)
    summary_only: list[Finding] = field(default_factory=list)
    resolved: list[BotThread] = field(default_factory=list)
    deleted: list[Finding] = field(default_factory=list)  # its comment was deleted earlier
    # The MR had lost every comment the database recorded (see publish): posted again.
    history_lost: bool = False
    threads: dict[str, ThreadRef] = field(default_factory=dict)  # by fingerprint
    on_mr: frozenset[str] = frozenset()  # fingerprints of the bot's threads found on the MR
    summary_note_id: int | None = None
    summary_markdown: str = ""
    dry_run: bool = False
    suggestions_checked: int = 0  # inline findings' suggestions applied to the head file
    # the suggestions dropped (their findings kept), by why (reviewbot.suggestions)
    suggestions_dropped: dict[SuggestionProblem, int] = field(default_factory=dict)

    @property
    def inline_on_mr(self) -> int:
        """Findings of this review that have a thread on the MR (new or already there)."""
        return len(self.posted) + len(self.already_posted)


def publish(
    publisher: Publisher,
    snapshot: MergeRequestSnapshot,
    selection: Selection,
    current: Iterable[Finding],
    facts: ReviewFacts,
    read_head: Callable[[list[str]], Mapping[str, str]],
    on_posted: Callable[[Finding, ThreadRef | None], None] | None = None,
    recorded: Collection[str] = (),
) -> PublishResult:
    """Post ``selection`` on the MR through ``publisher`` (see the module notes).

    ``current``: every finding of this review (a thread whose finding is among them is not
    stale); ``read_head(paths)``: head contents of paths, for the stale-thread check;
    ``on_posted``: told of each finding once it is on the MR, so a caller can record what was
    posted even when a later step fails. ``recorded``: fingerprints the database says were
    posted on this MR before; one of them missing from the MR was deleted (by a reviewer,
    most likely), and is not posted again (the summary says so). When the MR holds none of the
    bot's threads and no summary note although the database recorded some, the MR lost them
    (a GitLab restored from a backup, an MR recreated): they are posted again.
    """
    result = PublishResult(dry_run=publisher.dry_run, summary_only=list(selection.summary_only))
    threads = publisher.existing_threads()
    on_mr = {t.marker.fingerprint: t for t in threads if t.marker.fingerprint}
    result.on_mr = frozenset(on_mr)
    if recorded and not on_mr and not publisher.has_summary():
        result.history_lost = True
        recorded = ()
    vetted = _vetted(snapshot, selection.inline, read_head)
    result.suggestions_checked = vetted.offered
    result.suggestions_dropped = dict(vetted.dropped)
    fresh: list[Finding] = []
    told: set[str] = set()
    for finding in vetted.findings:
        thread = on_mr.get(finding.fingerprint)
        if thread is None and finding.fingerprint in recorded:
            result.deleted.append(finding)
            continue
        if thread is None:
            fresh.append(finding)
            ref = publisher.post(finding)
            if ref is not None and on_posted is not None:
                on_posted(finding, ref)
                told.add(finding.fingerprint)
            continue
        result.already_posted.append(finding)
        result.threads[finding.fingerprint] = ThreadRef(thread.discussion_id, thread.note_id)
    flushed = publisher.flush()
    for finding in fresh:
        if finding.fingerprint not in flushed.posted:
            continue  # refused: listed in flushed.refused
        result.posted.append(finding)
        ref = flushed.posted[finding.fingerprint]
        if ref is not None:
            result.threads[finding.fingerprint] = ref
        if on_posted is not None and finding.fingerprint not in told:
            on_posted(finding, ref)
    result.refused = list(flushed.refused)
    fingerprints = {finding.fingerprint for finding in current}
    stale = [t for t in threads if not t.resolved and t.marker.fingerprint not in fingerprints]
    for thread in threads_whose_line_changed(snapshot, stale, _head_of(stale, read_head)):
        publisher.resolve(thread)
        result.resolved.append(thread)
    result.summary_markdown = summary_body(_summary_data(snapshot, facts, result))
    result.summary_note_id = publisher.upsert_summary(result.summary_markdown)
    return result


def _vetted(
    snapshot: MergeRequestSnapshot,
    inline: Sequence[Finding],
    read_head: Callable[[list[str]], Mapping[str, str]],
) -> VettedFindings:
    """``inline`` with each suggestion applied to its head file first: one that does not apply
    or parse is dropped, its finding kept (reviewbot.suggestions)."""
    paths = sorted({f.path for f in inline if f.suggestion is not None and f.line is not None})
    heads = read_head(paths) if paths else {}
    diffs = {path: file for path in paths if (file := snapshot.file(path)) is not None}
    return vet_suggestions(inline, diffs, heads)


def _head_of(
    threads: Sequence[BotThread], read_head: Callable[[list[str]], Mapping[str, str]]
) -> Mapping[str, str]:
    paths = sorted({t.marker.path for t in threads if t.marker.side is Side.NEW})
    return read_head(paths) if paths else {}


def threads_whose_line_changed(
    snapshot: MergeRequestSnapshot, threads: Iterable[BotThread], head: Mapping[str, str]
) -> list[BotThread]:
    """Bot threads whose anchored line no longer exists as it was in the latest version.

    ``head`` holds the head text of every path a new-side thread is on (absent: file gone).
    An old-side thread is on a removed line: it stays while the diff still removes that text.
    """
    threads = list(threads)
    head_hashes = {
        path: {line_text_hash(line) for line in text.splitlines()} for path, text in head.items()
    }
    gone = []
    for thread in threads:
        marker = thread.marker
        if marker.side is Side.NEW:
            still_there = marker.text_hash in head_hashes.get(marker.path, set())
        else:
            still_there = marker.text_hash in _removed_hashes(snapshot, marker.path)
        if not still_there:
            gone.append(thread)
    return gone


def _removed_hashes(snapshot: MergeRequestSnapshot, path: str) -> set[str]:
    file = snapshot.file(path)
    if file is None:
        return set()
    return {line_text_hash(line.text) for line in file.lines() if line.kind is LineKind.REMOVED}


def _diff_link(snapshot: MergeRequestSnapshot, finding: Finding) -> str | None:
    return diff_link(snapshot.web_url, snapshot.file(finding.path), finding)


def _summary_data(
    snapshot: MergeRequestSnapshot, facts: ReviewFacts, result: PublishResult
) -> SummaryData:
    unplaced = [
        UnplacedFinding(
            finding,
            UnplacedReason.FILE_LEVEL if finding.is_file_level else UnplacedReason.OVER_CAP,
            _diff_link(snapshot, finding),
        )
        for finding in result.summary_only
    ]
    unplaced += [
        UnplacedFinding(finding, UnplacedReason.REFUSED, _diff_link(snapshot, finding), reason)
        for finding, reason in result.refused
    ]
    return SummaryData(
        head_sha=snapshot.diff_refs.head_sha,
        model=facts.model,
        prompt_version=facts.prompt_version,
        mr_web_url=snapshot.web_url,
        counts=facts.counts,
        inline_count=result.inline_on_mr,
        coverage=facts.coverage,
        chunks=facts.chunks,
        tokens=facts.tokens,
        total_time_s=facts.total_time_s,
        first_token=LatencyStats(_seconds(facts.ttft_p50_ms), _seconds(facts.ttft_p95_ms)),
        invalid_model_calls=facts.invalid_model_calls,
        model_tool_calls=facts.model_tool_calls,
        repaired_model_calls=facts.repaired_model_calls,
        unplaced=unplaced,
        deleted_by_reviewers=len(result.deleted),
        history_lost=result.history_lost,
        incremental=_incremental_note(snapshot, facts),
        unreviewed=facts.unreviewed,
        errors=facts.errors,
        ci_job_url=facts.ci_job_url,
        tools=facts.tools,
        effort=facts.effort,
        verification=facts.verification,
        withheld=facts.withheld,
        masked=sum(finding.masked for finding in _this_reviews_findings(result)),
        unknown_rules=facts.unknown_rules,
        missing_context=facts.missing_context,
        checks=facts.checks,
        check_status=facts.check_status,
        suggestions_checked=result.suggestions_checked,
        suggestions_dropped={str(k): v for k, v in result.suggestions_dropped.items()},
        analyzers=analyzer_lines(
            facts.analyzers, [*result.posted, *result.already_posted], result.summary_only
        ),
        walkthrough=facts.walkthrough,
        requirements=facts.requirements,
    )


def _this_reviews_findings(result: PublishResult) -> list[Finding]:
    """Every finding of the review, on the MR or in the summary only."""
    refused = [finding for finding, _reason in result.refused]
    return [*result.posted, *result.already_posted, *result.summary_only, *refused]


def _incremental_note(snapshot: MergeRequestSnapshot, facts: ReviewFacts) -> IncrementalNote | None:
    carried = facts.carried
    if carried is None:
        return None
    project_url = snapshot.web_url.split(MR_URL_PART)[0] if MR_URL_PART in snapshot.web_url else ""
    compare_url = (
        f"{project_url}/-/compare/{carried.since_head}...{snapshot.diff_refs.head_sha}"
        if project_url and carried.since_head != snapshot.diff_refs.head_sha
        else None
    )
    coverage = facts.coverage
    return IncrementalNote(
        since_head=carried.since_head,
        compare_url=compare_url,
        files_reviewed_now=coverage.files_reviewed - carried.files,
        files_unchanged=carried.files,
        findings_kept=carried.findings,
        files_not_reviewed=coverage.files_total - coverage.files_reviewed - len(coverage.skipped),
    )


def _seconds(milliseconds: float | None) -> float | None:
    return None if milliseconds is None else milliseconds / MS_PER_SECOND
