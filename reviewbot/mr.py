"""Review one GitLab merge request end to end: the order of its steps, and nothing else.

:func:`run_merge_request` reads the MR snapshot, holds the MR's lease, then runs the steps in
order, each done by the module that owns it:

1. **the team's wishes** (:mod:`reviewbot.guidance`): the target branch's ``.reviewbot.toml``,
   the review rules as the target branch has them and the learnings in force;
2. **what changed** since the MR's last complete review, and what carries over
   (:mod:`reviewbot.incremental`);
3. **read** the head files the review shows (:class:`reviewbot.repo.files.RepoFiles`, through
   the run's :class:`reviewbot.repo.source.RepositorySource`: the CI checkout when
   ``checkout`` is given and has the commit, else the host's repository cache, else the GitLab
   API; every read of the run goes through it, and ``_Run.repository()`` is the head's view);
4. **review** with ``app.model()`` (:mod:`reviewbot.review`), the model's repository tools
   reading ``_Run.repository()`` (the head's view) when the setting ``tools`` is on;
5. **checks**: the rules' named checks judged (the model-judged ones asked, one call each),
   their commit status ``pending`` since step 1 and final once the summary is posted
   (:mod:`reviewbot.check_status`);
6. **publish** through the publisher for ``publish_mode`` or the dry-run one
   (:mod:`reviewbot.publish`);
7. **record** the run: its model calls as soon as the model answered, its findings and how it
   ended once it published (``Store.record_run``, typed records of
   :mod:`reviewbot.store.records`); a failure is recorded with its error, then raised;
8. **outcomes**: what became of earlier findings (:mod:`reviewbot.feedback`).

The lease (a lock on the MR in the database) serialises runs: two runs at once never
double-post (docs/locking.md describes the project's three locking mechanisms).

Owns: the order of the steps, what one step hands the next, and the run's report. Must not:
decide anything a step owns (policy, carry-over, anchoring, posting, outcomes), hold SQL, or
talk to GitLab other than through the adapter and the publisher.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reviewbot.analyzer_findings import AnalyzerRun
from reviewbot.analyzer_review import with_analyzers
from reviewbot.analyzer_summary import AnalyzerFacts
from reviewbot.check_status import CheckRun, check_run_for, no_checks, summary_url
from reviewbot.comments import TokenUsage, Withheld
from reviewbot.config import Settings
from reviewbot.effort import EffortChoice
from reviewbot.effort_settings import choose_effort
from reviewbot.exclusions import skip_reason
from reviewbot.feedback import record_next_review_outcomes, recorded_as_posted
from reviewbot.findings import Finding, FindingState
from reviewbot.gitlab import GitLabClient
from reviewbot.guidance import TeamGuidance, read_team_guidance
from reviewbot.incremental import EarlierReview, Increment, plan_increment
from reviewbot.interdiff import DiffDigest, digest
from reviewbot.learnings.learning import learning_rules
from reviewbot.learnings.teaching import suppress, suppressed_stored, withheld_by
from reviewbot.linked_issues import LinkedIssue
from reviewbot.mergerequest import MergeRequestSnapshot
from reviewbot.model import request_priority, session_key
from reviewbot.mr_overview import Overview, OverviewRun, read_linked_issues, review_overview
from reviewbot.passes import with_effort
from reviewbot.prompts import ReviewContext, file_summaries, prompt_version
from reviewbot.publish import PublishResult, ReviewFacts, ThreadRef, publish, publisher_for
from reviewbot.repo.files import RepoFiles
from reviewbot.repo.localgit import Checkout
from reviewbot.repo.source import RepositorySource, open_repository
from reviewbot.repo.view import RepositoryView, TreeUnavailable
from reviewbot.repo_policy import REPO_CONFIG_FILE
from reviewbot.review import (
    ReviewOptions,
    ReviewResult,
    review_files,
    review_options,
    review_without_model,
    settings_key,
    with_carried_over,
)
from reviewbot.rules.check_questions import ask_checks
from reviewbot.rules.check_verdicts import CheckVerdict, evidence_of
from reviewbot.rules.ruleset import RuleSet
from reviewbot.states import ReviewStatus, Trigger, Workload
from reviewbot.store import MergeRequestKey
from reviewbot.store.mr_lock import hold_mr_lock
from reviewbot.store.records import ReviewEnding
from reviewbot.stored_findings import StoredFinding
from reviewbot.tokens import TokenCounter, local_counter
from reviewbot.verify import with_verdicts

if TYPE_CHECKING:
    from reviewbot.analyzers.collect import AnalyzerCollector
    from reviewbot.app import App
    from reviewbot.store import Store

__all__ = [
    "MergeRequestBusyError",
    "ReviewIncompleteError",
    "RunOptions",
    "RunReport",
    "require_complete",
    "run_merge_request",
]

INTERRUPTED = "interrupted: its run stopped before finishing (process killed or restarted)"


class MergeRequestBusyError(RuntimeError):
    """Another run holds this MR's lease; try again later."""


class ReviewIncompleteError(RuntimeError):
    """Some chunks could not be reviewed (model down or failing); what was found is posted.

    Raised by :func:`require_complete`; a worker retries the job later (publishing is
    idempotent, so nothing is posted twice).
    """


@dataclass(frozen=True)
class RunOptions:
    trigger: str = "cli"
    dry_run: bool = False
    checkout: Checkout | None = None  # a local clone that serves file contents (CI)
    ci_job_url: str | None = None
    lock_ttl_s: float | None = None  # None: Settings.mr_lock_seconds
    full: bool = False  # review every hunk, even those an earlier review saw unchanged
    concurrency: int | None = None  # model requests in flight for this review (None: settings)
    pipeline_id: int | None = None  # the CI pipeline the checks' commit status joins
    # the analyzers (ci's on its checkout; run's and the worker's on the host's cache and the
    # pipeline's reports): called with the head SHA, the MR's FileDiffs and the run's
    # repository, it returns an AnalyzerRun (docs/analyzers.md)
    analyzers: AnalyzerCollector | None = None
    analyzer_run: AnalyzerRun | None = None  # analyzer findings to merge, already collected
    effort: EffortChoice | None = None  # the review effort and why (None: from the settings)


@dataclass
class RunReport:
    """One run: the review, what publishing did, and warnings for the summary and the log."""

    project_path: str
    iid: int
    head_sha: str
    base_sha: str  # of the reviewed diff version
    web_url: str
    review_id: int | None
    review: ReviewResult
    published: PublishResult = field(default_factory=PublishResult)
    warnings: list[str] = field(default_factory=list)
    withheld: list[Withheld] = field(default_factory=list)  # per learning, findings kept off
    checks: CheckRun = field(default_factory=no_checks)  # the named checks and their status

    @property
    def findings(self) -> list[Finding]:
        """Every kept finding above the threshold (posted, already there, or summary only)."""
        filtered = set(map(id, self.review.findings.selection.filtered))
        return [f for f in self.review.findings.findings if id(f) not in filtered]

    @property
    def dry_run(self) -> bool:
        return self.published.dry_run

    @property
    def posted(self) -> list[Finding]:
        return self.published.posted

    @property
    def already_posted(self) -> list[Finding]:
        return self.published.already_posted

    @property
    def refused(self) -> list[tuple[Finding, str]]:
        return self.published.refused

    @property
    def summary_only(self) -> list[Finding]:
        return self.published.summary_only

    @property
    def resolved_threads(self) -> int:
        return len(self.published.resolved)

    @property
    def summary_note_id(self) -> int | None:
        return self.published.summary_note_id

    @property
    def summary_markdown(self) -> str:
        return self.published.summary_markdown

    @property
    def threads(self) -> dict[str, ThreadRef]:
        return self.published.threads


def require_complete(report: RunReport) -> RunReport:
    """The report, or ReviewIncompleteError when part of the diff was not reviewed."""
    unreviewed = report.review.unreviewed
    if unreviewed:
        raise ReviewIncompleteError(
            f"{len(unreviewed)} part(s) of {report.project_path}!{report.iid} could not be "
            f"reviewed: {unreviewed[0].describe()}"
        )
    return report


def run_merge_request(
    app: App,
    project: str | int,
    iid: int,
    options: RunOptions,
    *,
    progress: Callable[[str], None] | None = None,
) -> RunReport:
    """Review MR ``iid`` of ``project`` and publish the result: the steps in order."""
    say = progress or (lambda _message: None)
    gitlab = app.gitlab()
    counter = _load_tokenizer_meanwhile(app.settings.llm_model)
    say(f"reading merge request !{iid}")
    snapshot = gitlab.snapshot(project, iid)
    key = MergeRequestKey(gitlab.url, snapshot.project_id, snapshot.iid)
    ttl_s = options.lock_ttl_s or app.settings.mr_lock_seconds
    with _lease(app.store, key, snapshot, ttl_s) as interrupted:
        run = _Run(app, snapshot, key, options, gitlab, say, counter, interrupted=interrupted)
        review_id = _start(run)
        try:
            return _steps(run, review_id)
        except BaseException as error:
            run.checks.abort(error)
            run.store.record_run(review_id, ending=ReviewEnding.failure(error))
            raise
        finally:
            run.source.close()


def _steps(run: _Run, review_id: int) -> RunReport:
    """Policy -> what changed -> read -> review -> publish -> record -> outcomes."""
    guidance = _team_guidance(run)
    settings, rules, taught = guidance.settings, guidance.rules, guidance.learnings
    run.checks = _checks(run, settings, rules)
    run.checks.begin()
    run.checks.cancel_interrupted(run.interrupted)
    # --- team learnings (reviewbot.learnings.teaching): in the prompt, in the key, then suppressing
    learnt = learning_rules(taught)
    keyed = RuleSet((*rules.rules, *learnt.rules))  # a new learning: a full review
    increment = _what_changed(run, settings, keyed)
    wanted = increment.paths_to_read()
    run.say(f"fetching {len(wanted)} files at {run.head[:8]}")
    contents = run.read_head(wanted)
    if run.head in run.source.kinds:
        run.say(f"head files read from the {run.source.kinds[run.head].words}")
    issues = read_linked_issues(run.gitlab, run.snapshot, settings, run.warnings, run.say)
    analyzed = _analyzers(run)  # before the review: each chunk's prompt gets their digest
    result = _review(run, settings, increment, contents, (rules, learnt), issues, analyzed)
    overview = review_overview(_overview_run(run, increment), settings, issues)
    result = dataclasses.replace(result, calls=[*result.calls, *overview.calls])
    findings, suppressed = suppress(
        result.findings, taught, review_options(settings).findings_options
    )
    result, run.analyzer_facts = with_analyzers(
        dataclasses.replace(result, findings=findings),
        analyzed,
        run.snapshot.files,
        review_options(settings).findings_options,
    )
    run.warnings.extend(result.rule_notes)
    evidence = evidence_of(
        run.snapshot.files, result.findings.findings, result.unreviewed, analyzers=analyzed
    )
    asked = _ask_checks(run, review_id, settings, increment)
    run.checks.judge(evidence, asked, len(result.plan.chunks), len(result.unreviewed))
    run.store.record_run(review_id, calls=result.model_calls)
    report = RunReport(
        project_path=run.snapshot.project_path,
        iid=run.snapshot.iid,
        head_sha=run.head,
        base_sha=run.snapshot.diff_refs.base_sha,
        web_url=run.snapshot.web_url,
        review_id=review_id,
        review=result,
        warnings=run.warnings,
        withheld=withheld_by(taught, suppressed),
    )
    report.published = _publish(run, review_id, settings, result, report.withheld, overview)
    report.checks = run.checks
    seen = digest(run.snapshot.files, settings_key(settings, keyed))
    ending = _ending(result, report.published, seen)
    stored = with_verdicts(_stored_findings(report.published), result.verification)
    stored += suppressed_stored(suppressed) + (result.voting.stored() if result.voting else [])
    run.store.record_run(review_id, findings=stored, ending=ending)
    if not run.options.dry_run:
        _record_outcomes(run, report.published)
    # last: what the review did is on record before the status says it is done
    run.checks.finish(summary_url(run.snapshot.web_url, report.published.summary_note_id))
    return report


# --- the run and its lease -------------------------------------------------------------------


def _load_tokenizer_meanwhile(model: str | None) -> Future[TokenCounter]:
    """Loading the tokenizer vocabulary takes ~0.4 s: done while GitLab answers."""
    loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenizer")
    counter = loader.submit(local_counter, model)
    loader.shutdown(wait=False)
    return counter


@contextmanager
def _lease(
    store: Store, key: MergeRequestKey, snapshot: MergeRequestSnapshot, ttl_s: float
) -> Iterator[list[str]]:
    """Hold the MR for this run for ``ttl_s`` at a time (MergeRequestBusyError when another
    run does); yields the heads of the MR's runs that were interrupted."""
    with hold_mr_lock(store, str(key), ttl_s) as held:
        if not held:
            raise MergeRequestBusyError(
                f"another reviewbot run is reviewing {snapshot.project_path}!{snapshot.iid}; "
                "try again when it finishes"
            )
        # This run holds the MR: a review still `running` was interrupted.
        interrupted = [
            str(row["head_sha"])
            for row in store.reviews(project=snapshot.project_path, mr_iid=snapshot.iid)
            if row["status"] == ReviewStatus.RUNNING.value
        ]
        store.close_interrupted_reviews(key, INTERRUPTED)
        yield interrupted


@dataclass
class _Run:
    """Everything one run works with."""

    app: App
    snapshot: MergeRequestSnapshot
    key: MergeRequestKey
    options: RunOptions
    gitlab: GitLabClient
    say: Callable[[str], None]
    counter: Future[TokenCounter]
    warnings: list[str] = field(default_factory=list)
    source: RepositorySource = field(init=False)  # the repository at any of the run's SHAs
    files: RepoFiles = field(init=False)  # every file read of the run, at any of its SHAs
    tools_withheld: bool = False  # the tools were on, but the head's tree could not be listed
    checks: CheckRun = field(default_factory=no_checks)  # the named checks and their status
    interrupted: list[str] = field(default_factory=list)  # heads of runs that never finished
    analyzer_facts: AnalyzerFacts | None = None  # what the summary says of the analyzers

    def __post_init__(self) -> None:
        self.source = open_repository(
            self.app.settings,
            self.gitlab,
            self.snapshot.project_id,
            self.snapshot.project_path,
            checkout=self.options.checkout,
            warn=self.warnings.append,
        )
        self.files = RepoFiles(self.source.at)

    def repository(self) -> RepositoryView:
        """The repository at the head: what the model's tools and the scope context read."""
        return self.source.at(self.head)

    @property
    def store(self) -> Store:
        return self.app.store

    @property
    def head(self) -> str:
        return self.snapshot.diff_refs.head_sha

    def read_head(self, paths: list[str]) -> Mapping[str, str]:
        """Head contents of ``paths`` (each read once per run); none, and the run details say
        so, when the head's tree cannot be listed."""
        try:
            return self.files.read(self.head, paths)
        except TreeUnavailable as unlisted:
            self.warnings.append(
                f"the {len(paths)} changed file(s) were not read at the head ({unlisted}): the "
                "model saw the diff alone, without the files' enclosing-scope context"
            )
            return {}


def _start(run: _Run) -> int:
    """The review's row, in state `running`: its id."""
    refs = run.snapshot.diff_refs
    return run.store.start_review(
        project=run.snapshot.project_path,
        mr_iid=run.snapshot.iid,
        head_sha=refs.head_sha,
        base_sha=refs.base_sha,
        start_sha=refs.start_sha,
        trigger=run.options.trigger,
        model=run.app.settings.llm_model or "",
        prompt_version="",
        key=run.key,
        dry_run=run.options.dry_run,
    )


# --- policy, what changed, review ------------------------------------------------------------


def _checks(run: _Run, settings: Settings, rules: RuleSet) -> CheckRun:
    """The rules' named checks for this run, with their commit status (reviewbot.check_status)."""
    return check_run_for(
        rules.checks,
        settings,
        run.gitlab,
        run.snapshot,
        dry_run=run.options.dry_run,
        pipeline_id=run.options.pipeline_id,
        say=run.say,
    )


def _ask_checks(
    run: _Run, review_id: int, settings: Settings, increment: Increment
) -> dict[str, CheckVerdict]:
    """The model-judged checks' verdicts (reviewbot.rules.check_questions), their calls
    on record."""
    if not any(check.model_judged for check in run.checks.checks):
        return {}
    run.say("asking the model-judged checks")
    files = [f for f in run.snapshot.files if f.path not in increment.skipped]
    asked = ask_checks(
        run.checks.checks,
        files,
        run.app.model(),
        run.counter.result(),
        title=run.snapshot.title,
        budget_tokens=settings.check_context_tokens,
        session=session_key(run.key.gitlab_url, run.key.project_id, run.key.iid),
        priority=request_priority(review_workload(increment, run.options.trigger)),
    )
    run.store.record_run(review_id, calls=asked.calls)
    return asked.verdicts


def _analyzers(run: _Run) -> AnalyzerRun | None:
    """The analyzer findings of the run: collected already, or by its collector (docs/analyzers.md)
    on the run's repository; None: analyzers off."""
    if run.options.analyzer_run is not None:
        return run.options.analyzer_run
    if run.options.analyzers is None:
        return None
    run.say("running the analyzers")
    return run.options.analyzers(run.head, run.snapshot.files, run.source)


def _team_guidance(run: _Run) -> TeamGuidance:
    """The settings with the target branch's ``.reviewbot.toml`` applied, the review rules and
    the learnings in force (reviewbot.guidance); what could not be read goes to the summary."""
    target = run.snapshot.diff_refs.start_sha
    checkout = run.options.checkout
    guidance = read_team_guidance(
        run.app.settings,
        run.files,
        target,
        run.app.learnings(),
        run.key,
        run.snapshot.project_path,
        changed_paths={path for f in run.snapshot.files for path in (f.new_path, f.old_path)},
        repository_paths=checkout.paths(target) if checkout is not None else None,
        groups=run.app.group_settings(run.gitlab, run.snapshot.project_path),
    )
    run.warnings.extend(guidance.warnings)
    return guidance


def _what_changed(run: _Run, settings: Settings, rules: RuleSet) -> Increment:
    """What to review since the MR's last complete review (reviewbot.incremental)."""
    exclusions = review_options(settings).plan_options.exclusions
    files = run.snapshot.files
    skipped = {f.path: reason for f in files if (reason := skip_reason(f, exclusions))}
    earlier = None if run.options.full else _earlier_review(run)
    return plan_increment(files, skipped, settings_key(settings, rules), earlier)


def _earlier_review(run: _Run) -> EarlierReview | None:
    """The MR's last complete review by this model and prompt version, as stored."""
    model = run.app.settings.llm_model or run.app.model().server_info().model
    row = run.store.last_complete_review(run.key, model=model, prompt_version=prompt_version())
    if row is None:
        return None
    findings = run.store.stored_findings(row["id"])
    return EarlierReview(row["id"], row["head_sha"], model, row["diff_digest"], findings)


def _review(
    run: _Run,
    settings: Settings,
    increment: Increment,
    contents: Mapping[str, str],
    guidance: tuple[RuleSet, RuleSet],
    issues: list[LinkedIssue],
    analyzed: AnalyzerRun | None,
) -> ReviewResult:
    """The model's review of what changed, plus the findings carried over (reviewbot.review):
    ``guidance`` is the rules and the learnings as rules, ``issues`` the linked issues shown."""
    effort = choose_effort(run.options.effort, run.app.settings, settings, run.options.trigger)
    options = with_effort(review_options(settings), effort, settings)
    rules, learnings = guidance
    carried_over = increment.carried_over
    if carried_over is not None and not increment.needs_model:
        run.say(f"nothing changed since {carried_over.since_head[:8]} was reviewed: no model call")
        model = increment.earlier_model or ""
        result = review_without_model(increment.files, run.counter.result(), options, model)
    else:
        context = ReviewContext(
            title=run.snapshot.title,
            description=run.snapshot.description,
            files=file_summaries(run.snapshot.files, increment.skipped),
            language=settings.language,
            include_style=settings.include_style,
            issues=tuple(issues),
        )
        result = review_files(
            increment.files,
            context=context,
            llm=run.app.model(),
            counter=run.counter.result(),
            options=options,
            contents=contents,
            on_planned=lambda plan: run.say(f"reviewing {len(plan.chunks)} chunks"),
            concurrency=run.options.concurrency,
            whole_files=run.snapshot.files,
            repository=_tools_repository(run, options),
            rules=rules,
            learnings=learnings,
            session=session_key(run.key.gitlab_url, run.key.project_id, run.key.iid),
            priority=request_priority(review_workload(increment, run.options.trigger)),
            analyzer_findings=analyzed.findings if analyzed is not None else (),
        )
    if carried_over is None:
        return result
    return with_carried_over(result, increment.carried, carried_over, options)


def _overview_run(run: _Run, increment: Increment) -> OverviewRun:
    """What the walkthrough and the requirements check need of the run (reviewbot.mr_overview)."""
    return OverviewRun(
        run.app.model(),
        run.gitlab,
        run.snapshot,
        increment,
        run.counter.result(),
        dry_run=run.options.dry_run,
        session=session_key(run.key.gitlab_url, run.key.project_id, run.key.iid),
        priority=request_priority(review_workload(increment, run.options.trigger)),
    )


def review_workload(increment: Increment, trigger: str = Trigger.CLI.value) -> Workload:
    """A review with an earlier one to build on is incremental; the first (or a forced full
    one) runs before it, as someone is waiting for it; a second look while idle, last."""
    if trigger == Trigger.IDLE.value:
        return Workload.BACKGROUND
    if increment.carried_over is not None:
        return Workload.INCREMENTAL_REVIEW
    return Workload.FIRST_REVIEW


def _tools_repository(run: _Run, options: ReviewOptions) -> RepositoryView | None:
    """The repository the model's tools read: none when the tools are off, or when the head's
    tree could not be listed (then the run details say the tools were not offered)."""
    if not options.tools:
        return None
    unlisted = run.files.unlisted(run.head)
    if unlisted:
        run.warnings.append(f"the repository tools were not offered: {unlisted}")
        run.tools_withheld = True
        return None
    return run.repository()


# --- publish, record, outcomes ---------------------------------------------------------------


def _publish(
    run: _Run,
    review_id: int,
    settings: Settings,
    result: ReviewResult,
    withheld: list[Withheld],
    overview: Overview | None = None,
) -> PublishResult:
    """Post the review on the MR (reviewbot.publish), saying what learnings ``withheld``.
    When publishing fails midway, what was posted goes on record before the failure is raised
    (the next run skips it by its marker anyway)."""
    run.say("publishing")
    dry_run = run.options.dry_run
    publisher = publisher_for(settings.publish_mode, run.gitlab, run.snapshot, dry_run=dry_run)
    so_far = PublishResult(dry_run=dry_run)

    def posted(finding: Finding, ref: ThreadRef | None) -> None:
        so_far.posted.append(finding)
        if ref is not None:
            so_far.threads[finding.fingerprint] = ref

    try:
        return publish(
            publisher,
            run.snapshot,
            result.findings.selection,
            result.findings.findings,
            dataclasses.replace(
                _facts(result, run.options, run.warnings),
                withheld=withheld,
                missing_context=_missing_context(run),
                checks=run.checks.rows(),
                check_status=run.checks.status_words(),
                analyzers=run.analyzer_facts,
                walkthrough=overview.walkthrough if overview else None,
                requirements=overview.requirements if overview else (),
            ),
            run.read_head,
            on_posted=posted,
            recorded=recorded_as_posted(run.store.posted_findings(run.key)),
        )
    except BaseException:
        run.store.record_run(review_id, findings=_stored_findings(so_far))
        raise


def _missing_context(run: _Run) -> list[str]:
    """The context the review meant to show and could not read, for the run details (the
    warnings say why)."""
    missing = []
    if run.files.unlisted(run.snapshot.diff_refs.start_sha):
        missing.append(f"{REPO_CONFIG_FILE} and the rules files of the target branch")
    if run.files.unlisted(run.head):
        missing.append("the changed files at the head and their enclosing scope")
    if run.tools_withheld:
        missing.append("the repository tools")
    return missing


def _facts(result: ReviewResult, options: RunOptions, warnings: list[str]) -> ReviewFacts:
    """What the summary note says about the review itself."""
    return ReviewFacts(
        model=result.model,
        prompt_version=result.prompt_version,
        counts=result.findings.counts,
        coverage=result.coverage,
        chunks=len(result.plan.chunks),
        tokens=TokenUsage(result.prompt_tokens, result.completion_tokens, result.cached_tokens),
        total_time_s=result.seconds,
        ttft_p50_ms=result.ttft_percentile(0.5),
        ttft_p95_ms=result.ttft_percentile(0.95),
        invalid_model_calls=len(result.invalid_calls),
        model_tool_calls=result.tool_calls,
        repaired_model_calls=result.repaired_calls,
        tools=result.tools,
        effort=result.voting.line() if result.voting else "",
        verification=result.verification.line() if result.verification.enabled else "",
        unreviewed=[part.describe() for part in result.unreviewed],
        errors=list(warnings),
        carried=result.carried,
        ci_job_url=options.ci_job_url,
        unknown_rules=result.findings.unknown_rules,
    )


def _stored_findings(published: PublishResult) -> list[StoredFinding]:
    """What became of each finding of this review, as the store keeps it."""
    stored: list[StoredFinding] = []
    for state, findings in (
        (FindingState.DRY_RUN if published.dry_run else FindingState.POSTED, published.posted),
        (FindingState.DUPLICATE, published.already_posted),
        (FindingState.SUMMARY, published.summary_only),
        (FindingState.FAILED, [f for f, _ in published.refused]),
        (FindingState.DELETED, published.deleted),
    ):
        for finding in findings:
            thread = published.threads.get(finding.fingerprint)
            stored.append(
                StoredFinding.of(
                    finding,
                    state,
                    discussion_id=thread.discussion_id if thread else None,
                    note_id=thread.note_id if thread else None,
                )
            )
    return stored


def _ending(result: ReviewResult, published: PublishResult, seen: DiffDigest) -> ReviewEnding:
    """How the review ended: failed when part of the diff could not be reviewed."""
    return ReviewEnding(
        status=ReviewStatus.FAILED if result.chunk_errors else ReviewStatus.SUCCEEDED,
        coverage=result.coverage.to_dict(),
        chunks=len(result.plan.chunks),
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        cached_tokens=result.cached_tokens,
        summary_note_id=published.summary_note_id,
        error="; ".join(f"not reviewed: {part.describe()}" for part in result.unreviewed) or None,
        model=result.model,
        prompt_version=result.prompt_version,
        diff_digest=seen.to_json(),
        **(result.voting.columns() if result.voting else {}),
    )


def _record_outcomes(run: _Run, published: PublishResult) -> None:
    """What publishing saw became of the earlier findings (reviewbot.feedback)."""
    record_next_review_outcomes(
        run.store,
        run.key,
        resolved=[t.marker.fingerprint for t in published.resolved if t.marker.fingerprint],
        posted_now={finding.fingerprint for finding in published.posted},
        on_mr=published.on_mr,
    )
