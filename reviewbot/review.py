"""The review pipeline for one diff: plan -> prompts -> model -> findings.

Used by every entry point (``reviewbot review`` on a local diff, ``reviewbot run`` on an MR).

Owns: the review's knobs from the settings (:func:`review_options`, :func:`settings_key`), the
chunk budget, sending the chunks (re-splitting one the server finds too long, never dropping
it), what could not be reviewed, and the result with every call's figures; adding the findings
an earlier review carried over. Must not: know about GitLab or the database (the MR runner,
``mr.py``, wires them around it); it takes its adapter (the LLM client) and plain data.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reviewbot.analyzer_findings import AnalyzerFinding
from reviewbot.analyzer_prompting import DigestsApplied
from reviewbot.analyzer_settings import DEFAULT_ANALYZER_DIGEST_TOKENS
from reviewbot.chunking import (
    Budget,
    Chunk,
    Coverage,
    Plan,
    PlanOptions,
    plan,
    resplit,
)
from reviewbot.config import (
    DEFAULT_LEARNINGS_TOKENS,
    DEFAULT_RULES_TOKENS,
    DEFAULT_TOOL_ROUNDS,
    DEFAULT_TOOL_TOKENS,
    TOOLS_OFF,
    TOOLS_TYPED,
    VERIFY_ON,
    Settings,
)
from reviewbot.diff import FileDiff
from reviewbot.exclusions import ExclusionRules
from reviewbot.findings import (
    Category,
    Finding,
    FindingsOptions,
    FindingsResult,
    Severity,
    process,
    reselected,
    with_carried,
)
from reviewbot.incremental import CarriedOver
from reviewbot.model import (
    MODE_TOOL_CALLS,
    CallRecord,
    ChunkRequest,
    ChunkResult,
    LLMClient,
    ServerInfo,
)
from reviewbot.passes import Pass, PassPlan, Voting, review_passes
from reviewbot.prompts import (
    ReviewContext,
    prompt_version,
    render_messages,
    tool_schemas,
)
from reviewbot.repo.tools import RepositoryTools, ToolForm, repository_tool_schemas
from reviewbot.repo.view import RepositoryView
from reviewbot.rules.applied import LEARNINGS, RulesApplied
from reviewbot.rules.ruleset import RuleSet
from reviewbot.tokens import TokenCounter
from reviewbot.unreviewed import UnreviewedPart, changed_lines_by_path, unreviewed_part
from reviewbot.verify import Verification, VerifyOptions, verdict_schema, verify_findings

__all__ = [
    "CarriedOver",
    "ModelContext",
    "ReviewOptions",
    "ReviewResult",
    "RulesApplied",
    "UnreviewedPart",
    "budget_for",
    "local_overhead",
    "model_context",
    "offered_tools",
    "plan_offline",
    "plan_with_rules",
    "review_files",
    "review_options",
    "review_tools",
    "review_without_model",
    "settings_key",
    "with_carried_over",
]

SETTINGS_KEY_CHARS = 16
MAX_RESPLIT_DEPTH = 6
# Chat-template framing the local count of messages cannot see (role markers, tool preamble).
TEMPLATE_FRAMING_TOKENS = 64
OUTCOME_MODE_UNSUPPORTED = "mode_unsupported"  # a call the server refused for its output mode


@dataclass(frozen=True)
class ReviewOptions:
    max_model_len: int | None = None  # None: from the server
    max_output_tokens: int = 4096
    plan_options: PlanOptions = field(default_factory=PlanOptions)
    findings_options: FindingsOptions = field(default_factory=FindingsOptions)
    # The model's repository tools (the settings tools, tool_rounds, tool_tokens); offered
    # only when the review is given a repository (review_files' ``repository``).
    tools: bool = False
    tool_form: ToolForm = ToolForm.COMPACT  # one command-line tool, or the four typed ones
    tool_rounds: int = DEFAULT_TOOL_ROUNDS
    tool_tokens: int = DEFAULT_TOOL_TOKENS
    rules_tokens: int = DEFAULT_RULES_TOKENS  # review rules per chunk, at most
    learnings_tokens: int = DEFAULT_LEARNINGS_TOKENS  # the team's learnings per chunk, at most
    analyzer_digest_tokens: int = DEFAULT_ANALYZER_DIGEST_TOKENS  # analyzers' digest, at most
    verify: VerifyOptions = field(default_factory=VerifyOptions)  # reviewbot.verify
    passes: PassPlan = field(default_factory=PassPlan)  # the effort's passes (reviewbot.passes)


def review_options(settings: Settings) -> ReviewOptions:
    """The review's knobs from the settings (budget, context lines, exclusions, thresholds)."""
    return ReviewOptions(
        max_model_len=settings.max_model_len,
        max_output_tokens=settings.max_output_tokens,
        plan_options=PlanOptions(
            context_lines=settings.context_lines,
            exclusions=ExclusionRules(extra_globs=settings.exclude),
            scope_tokens=settings.scope_context_tokens,
        ),
        findings_options=FindingsOptions(
            context_lines=settings.context_lines,
            min_severity=Severity(settings.min_severity),
            categories=frozenset(Category(c) for c in settings.categories) or None,
            max_inline=settings.max_inline,
        ),
        tools=settings.tools != TOOLS_OFF,
        tool_form=ToolForm.TYPED if settings.tools == TOOLS_TYPED else ToolForm.COMPACT,
        tool_rounds=settings.tool_rounds,
        tool_tokens=settings.tool_tokens,
        rules_tokens=settings.rules_tokens,
        learnings_tokens=settings.learnings_tokens,
        analyzer_digest_tokens=settings.analyzer_digest_tokens,
        verify=VerifyOptions(
            enabled=settings.verify == VERIFY_ON,
            min_severity=Severity(settings.verify_min_severity),
            min_confidence=settings.verify_min_confidence,
        ),
    )


@dataclass
class ReviewResult:
    plan: Plan
    findings: FindingsResult
    calls: list[CallRecord]
    chunk_errors: dict[int, str]
    invalid_calls: list[str]
    model: str
    prompt_version: str
    seconds: float
    chunks_reviewed: int
    unreviewed: list[UnreviewedPart] = field(default_factory=list)
    carried: CarriedOver | None = None  # an incremental review: what an earlier one covered
    # The repository tools in words, for the run details: off, not offered in the server's
    # output mode, or the rounds they took ("" when the review had no repository to read).
    tools: str = ""
    rules: RulesApplied = field(default_factory=RulesApplied)
    learnings: RulesApplied = field(default_factory=lambda: RulesApplied(kind=LEARNINGS))
    verification: Verification = field(default_factory=Verification)
    digests: DigestsApplied = field(default_factory=DigestsApplied)  # the analyzers' digests
    voting: Voting | None = None  # a deep review's vote (reviewbot.passes)

    @property
    def rule_notes(self) -> list[str]:
        """The rules and learnings left out for lack of room (warnings). Findings that named a
        rule the review does not have are no warning: the model filled an optional field, the
        finding is kept without the name and the run details count it
        (``findings.unknown_rules``)."""
        return self.rules.notes() + self.learnings.notes() + self.digests.notes()

    @property
    def complete(self) -> bool:
        return not self.chunk_errors

    @property
    def coverage(self) -> Coverage:
        """What was reviewed: the plan's coverage minus the chunks the model never answered
        (a file counts as reviewed while any of its changed lines was), plus what an earlier
        review of unchanged hunks covered."""
        planned = self._coverage_now()
        if self.carried is None:
            return planned
        return dataclasses.replace(
            planned,
            files_total=planned.files_total + self.carried.files,
            files_reviewed=planned.files_reviewed + self.carried.files,
            changed_lines_total=planned.changed_lines_total + self.carried.lines,
            changed_lines_covered=planned.changed_lines_covered + self.carried.lines,
        )

    def _coverage_now(self) -> Coverage:
        planned = self.plan.coverage
        if not self.unreviewed:
            return planned
        missed: dict[str, int] = {}
        for part in self.unreviewed:
            for path, lines in part.lines_by_path:
                missed[path] = missed.get(path, 0) + lines
        owned = changed_lines_by_path(self.plan)
        lost_files = sum(1 for path, lines in missed.items() if lines >= owned.get(path, 0))
        return dataclasses.replace(
            planned,
            files_reviewed=max(0, planned.files_reviewed - lost_files),
            changed_lines_covered=max(0, planned.changed_lines_covered - sum(missed.values())),
        )

    @property
    def tool_calls(self) -> int:
        """Calls the model's answers held, readable or not (repair turns included)."""
        return sum(c.tool_calls for c in self.calls)

    @property
    def repaired_calls(self) -> int:
        """Unreadable calls the model resent readably when told why."""
        return sum(c.repaired_tool_calls for c in self.calls)

    @property
    def model_calls(self) -> list[CallRecord]:
        """Every model call the review made: the chunks' and the verification pass's."""
        return [*self.calls, *self.verification.calls]

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens of every model call, the verification pass's included."""
        return sum(c.prompt_tokens for c in self.model_calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.model_calls)

    @property
    def cached_tokens(self) -> int:
        return sum(c.cached_tokens or 0 for c in self.model_calls)

    @property
    def reasoning_tokens(self) -> int:
        """Completion tokens spent thinking, as far as the server told (0 where it did not)."""
        return sum(c.reasoning_tokens or 0 for c in self.model_calls)

    def ttft_percentile(self, fraction: float) -> float | None:
        values = sorted(c.ttft_ms for c in self.calls if c.ttft_ms is not None)
        if not values:
            return None
        if len(values) == 1:
            return values[0]
        return statistics.quantiles(values, n=100, method="inclusive")[
            min(98, max(0, math.ceil(fraction * 100) - 1))
        ]


def settings_key(settings: Settings, rules: RuleSet | None = None) -> str:
    """Changes when the findings of the same diff could differ: the review options and the
    policy that shapes them (a new threshold or language means a full review), and the review
    rules (a changed rule too)."""
    # the same tuple as before rules existed, so a review without rules keeps its key
    shaping: tuple[Any, ...] = (
        repr(review_options(settings)),
        settings.language,
        settings.include_style,
    )
    if rules is not None and rules.rules:
        shaping += (repr([rule.to_dict() for rule in rules.rules]),)
    return hashlib.sha1(repr(shaping).encode()).hexdigest()[:SETTINGS_KEY_CHARS]


def with_carried_over(
    result: ReviewResult,
    carried: Sequence[Finding],
    carried_over: CarriedOver,
    options: ReviewOptions,
) -> ReviewResult:
    """``result`` of the hunks reviewed now, plus the ``carried`` findings of an earlier review
    of the unchanged ones (deduped and selected together, as one review's findings)."""
    return dataclasses.replace(
        result,
        findings=with_carried(result.findings, carried, options.findings_options),
        carried=carried_over,
    )


def local_overhead(
    counter: TokenCounter, context: ReviewContext, tools: list[dict] | None = None
) -> int:
    """Local estimate of the shared prompt (messages without a diff, and the tool schemas)."""
    schemas = tool_schemas() if tools is None else tools
    texts = [m["content"] for m in render_messages(context, None)] + [json.dumps(schemas)]
    return sum(counter.count_many(texts)) + TEMPLATE_FRAMING_TOKENS


def review_tools(
    options: ReviewOptions, repository: RepositoryView | None
) -> RepositoryTools | None:
    """The model's repository tools for a review: over ``repository`` when ``options.tools``
    is on and there is one, else None (every chunk is one call with report_finding only)."""
    if not options.tools or repository is None or options.tool_rounds == 0:
        return None
    return RepositoryTools(repository, form=options.tool_form)


def budget_for(
    llm: LLMClient | None,
    counter: TokenCounter,
    context: ReviewContext,
    options: ReviewOptions,
    max_model_len: int,
    tools: list[dict] | None = None,
) -> Budget:
    """The chunk budget: context - output reserve - the rendered shared prompt (``tools``'
    schemas included) - margin. Nothing is kept for tool rounds: a chunk is cut as with the
    tools off, and its rounds get what the real context leaves (reviewbot.llm.rounds). The
    shared prompt is counted by the server (``llm``'s /tokenize) when it can, else locally
    (``llm`` None: no server)."""
    schemas = tool_schemas() if tools is None else tools
    overhead = (
        llm.count_prompt_tokens(render_messages(context, None), schemas)
        if llm is not None
        else None
    )
    if overhead is None:
        overhead = local_overhead(counter, context, schemas)
    return _budget(counter, options, max_model_len, overhead)


def offered_tools(options: ReviewOptions, with_repository: bool) -> list[dict]:
    """The tools every chunk request of a review offers: report_finding, then the repository
    tools when the review reads a repository (``with_repository``, ``options.tools``, rounds),
    then the verdict tool when the review is verified: the verification call offers exactly
    these, so the server serves its whole prompt but the candidate list from the chunk's cache
    (the chat template renders the tools at the top of the prompt)."""
    repository = (
        repository_tool_schemas(options.tool_form)
        if with_repository and options.tools and options.tool_rounds
        else []
    )
    verdict = [verdict_schema()] if options.verify.enabled else []
    return [*tool_schemas(), *repository, *verdict]


@dataclass(frozen=True)
class ModelContext:
    """The context length a review's chunks are cut for, and where it comes from in words."""

    max_model_len: int
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"max_model_len": self.max_model_len, "source": self.source}


ASK_FOR_ANOTHER = "--context-tokens N to plan for another"


def model_context(
    options: ReviewOptions,
    info: ServerInfo | None,
    server: str,
    unanswered: str | None = None,
) -> ModelContext:
    """The context a review with ``options`` uses, as :func:`review_files` picks it: the
    setting, else the server's ``max_model_len`` (``info``: what ``server`` answered, None when
    it was not asked or did not answer: ``unanswered`` says why), else the default."""
    if options.max_model_len:
        return ModelContext(options.max_model_len, "the setting max_model_len")
    if info is not None and info.max_model_len:
        return ModelContext(info.max_model_len, f"the model server's max_model_len ({server})")
    if info is not None:
        why = f"the model server at {server} does not say its max_model_len"
    else:
        why = unanswered or f"the model server at {server} was not asked"
    return ModelContext(Budget().max_model_len, f"assumed: {why}; {ASK_FOR_ANOTHER}")


def _budget(
    counter: TokenCounter, options: ReviewOptions, max_model_len: int, overhead: int
) -> Budget:
    return Budget(
        max_model_len=max_model_len,
        output_reserve=options.max_output_tokens,
        overhead=overhead,
        headroom=counter.headroom,
    )


def plan_offline(
    files: Sequence[FileDiff],
    *,
    context: ReviewContext,
    counter: TokenCounter,
    options: ReviewOptions,
    contents: Mapping[str, str] | None = None,
    with_tools: bool = False,
    rules: RuleSet | None = None,
    analyzer_findings: Sequence[AnalyzerFinding] = (),
) -> Plan:
    """How ``files`` would be cut into chunks with no model server: the shared prompt is
    counted with ``counter``, the context is ``options.max_model_len`` or the default.
    ``with_tools``: as a review with a repository (each chunk offers the repository tools'
    schemas)."""
    return plan_with_rules(
        files,
        context=context,
        counter=counter,
        options=options,
        contents=contents,
        rules=rules,
        with_tools=with_tools,
        analyzer_findings=analyzer_findings,
    )[0]


def plan_with_rules(
    files: Sequence[FileDiff],
    *,
    context: ReviewContext,
    counter: TokenCounter,
    options: ReviewOptions,
    contents: Mapping[str, str] | None = None,
    rules: RuleSet | None = None,
    with_tools: bool = False,
    llm: LLMClient | None = None,
    max_model_len: int | None = None,
    analyzer_findings: Sequence[AnalyzerFinding] = (),
) -> tuple[Plan, RulesApplied, DigestsApplied]:
    """The chunks :func:`review_files` would send (``reviewbot plan``), the review rules and
    the analyzers' digest each is given: the same budget (``max_model_len``: the context
    :func:`model_context` found, else the setting or the default; ``llm``: the server that
    counts the shared prompt, None: counted locally), the same tools (``with_tools``: as a review
    with a repository, which ``run`` and ``ci`` always have), the same analyzers' digests."""
    length = max_model_len or options.max_model_len or Budget().max_model_len
    planned = _chunk_budget(
        files,
        context,
        counter,
        llm,
        options,
        length,
        offered_tools(options, with_tools),
        rules,
        None,
        analyzer_findings,
    )
    made = plan(files, planned.budget, counter, contents=contents, options=options.plan_options)
    for chunk in made.chunks:
        planned.rules.of(chunk)
        planned.digests.of(chunk)
    return made, planned.rules, planned.digests


def _chunk_budget(
    files: Sequence[FileDiff],
    context: ReviewContext,
    counter: TokenCounter,
    llm: LLMClient | None,
    options: ReviewOptions,
    max_model_len: int,
    tools: list[dict],
    rules: RuleSet | None,
    learnings: RuleSet | None,
    analyzer_findings: Sequence[AnalyzerFinding] = (),
) -> _Prompting:
    """The budget every chunk is cut for, the review rules', the learnings' and the analyzers'
    digest's reserves in it: the one of :func:`review_files` and of :func:`plan_with_rules`."""
    budget = budget_for(llm, counter, context, options, max_model_len, tools)
    applied = RulesApplied.for_review(rules or RuleSet(), files, counter, options, budget)
    budget = dataclasses.replace(budget, overhead=budget.overhead + applied.reserve)
    taught = RulesApplied.for_review(
        learnings or RuleSet(), files, counter, options, budget, LEARNINGS
    )
    budget = dataclasses.replace(budget, overhead=budget.overhead + taught.reserve)
    digests = DigestsApplied.for_review(
        analyzer_findings, files, counter, options.analyzer_digest_tokens, budget
    )
    budget = dataclasses.replace(budget, overhead=budget.overhead + digests.reserve)
    return _Prompting(context, applied, counter, budget, taught, digests)


def review_files(
    files: Sequence[FileDiff],
    *,
    context: ReviewContext,
    llm: LLMClient,
    counter: TokenCounter,
    options: ReviewOptions,
    contents: Mapping[str, str] | None = None,
    on_planned: Callable[[Plan], None] | None = None,
    on_chunk_done: Callable[[ChunkResult], None] | None = None,
    concurrency: int | None = None,
    whole_files: Sequence[FileDiff] | None = None,
    repository: RepositoryView | None = None,
    rules: RuleSet | None = None,
    learnings: RuleSet | None = None,
    session: str | None = None,
    priority: int | None = None,
    analyzer_findings: Sequence[AnalyzerFinding] = (),
) -> ReviewResult:
    """Review ``files`` with the model and return anchored findings plus every call's figures.

    ``concurrency``: chunks in flight at once (None: the model client's own setting).
    ``whole_files``: the MR's complete diff when ``files`` holds only the hunks changed since
    an earlier review, so findings get the fingerprints a full review would give them.
    ``repository``: the tree at the head, for the model's repository tools (with
    ``options.tools``; see :func:`review_tools`).
    ``rules``: the review rules (reviewbot.rules.ruleset); each chunk gets those of its files,
    within a budget the chunk planner keeps for them; ``learnings`` (the team's, as rules:
    reviewbot.learnings.learning_rules) likewise, within ``options.learnings_tokens``.
    ``session`` (the MR's key, for a router's affinity) and ``priority``
    (``model.request_priority``) go with every request of the review (None: none, the
    server's default). ``analyzer_findings``: each chunk is told those on its files
    (reviewbot.analyzer_prompting), within ``options.analyzer_digest_tokens``."""
    started = time.monotonic()
    info = llm.server_info()
    max_model_len = model_context(options, info, "").max_model_len
    sending = _Sending(options, review_tools(options, repository), session, priority)
    aids = (rules, learnings, analyzer_findings)  # what each chunk's prompt adds to the diff
    prompting = _chunk_budget(
        files, context, counter, llm, options, max_model_len, sending.tools, *aids
    )
    applied, taught = prompting.rules, prompting.learnings
    review_plan = plan(
        files, prompting.budget, counter, contents=contents, options=options.plan_options
    )
    if on_planned:
        on_planned(review_plan)
    chunks = list(review_plan.chunks)
    whole = {file.new_path: file for file in whole_files or ()}
    findings_options = dataclasses.replace(options.findings_options, rules=applied.rule_set.names)
    answers, findings, voting = review_passes(
        options.passes,
        chunks,
        lambda one: _send_chunks(chunks, prompting, llm, on_chunk_done, concurrency, sending, one),
        findings_options,
        whole,
    )
    verification = _verify(findings, answers, sending, llm, options, max_model_len)
    if verification.dropped:
        kept = [judged.finding for judged in verification.judged if not judged.dropped]
        findings = reselected(findings, kept, findings_options)
    tools_line = _tools_line(options, sending.repository, answers.records)
    return ReviewResult(
        plan=review_plan,
        findings=findings,
        calls=answers.records,
        chunk_errors=answers.errors,
        invalid_calls=answers.invalid,
        model=info.model,
        prompt_version=prompt_version(),
        seconds=time.monotonic() - started,
        chunks_reviewed=answers.reviewed,
        unreviewed=answers.unreviewed,
        tools=tools_line,
        rules=applied,
        learnings=taught,
        verification=verification,
        digests=prompting.digests,
        voting=voting,
    )


def _verify(
    findings: FindingsResult,
    answers: _Answers,
    sending: _Sending,
    llm: LLMClient,
    options: ReviewOptions,
    max_model_len: int,
) -> Verification:
    """The second look (reviewbot.verify), with the review's tools and session key."""
    return verify_findings(
        findings.findings,
        answers.messages_of,
        sending.tools,
        llm,
        options.verify,
        max_model_len,
        session=sending.session,
        priority=sending.priority,
    )


def _tools_line(
    options: ReviewOptions, tools: RepositoryTools | None, calls: Sequence[CallRecord]
) -> str:
    """What the run details say about the repository tools."""
    if not options.tools:
        return "off"
    if tools is None:
        return ""  # no repository to read (a local diff)
    modes = {call.mode for call in calls if call.outcome != OUTCOME_MODE_UNSUPPORTED}
    if modes and MODE_TOOL_CALLS not in modes:
        mode = ", ".join(sorted(modes))
        return f"not offered: the model server answers in the {mode} mode, which cannot call tools"
    rounds = sum(1 for call in calls if call.repo_tool_calls)
    asked = sum(call.repo_tool_calls for call in calls)
    answered = sum(call.tool_answer_tokens for call in calls)
    return f"{rounds} tool round(s), {asked} repository call(s), {answered:,} tokens of answers"


@dataclass(frozen=True)
class _Sending:
    """What every chunk request of a review carries besides its messages: the tools, the
    session key and the priority."""

    options: ReviewOptions
    repository: RepositoryTools | None
    session: str | None = None  # ChunkRequest.session
    priority: int | None = None  # ChunkRequest.priority
    one: Pass = field(default_factory=Pass)  # which pass of the review sends (reviewbot.passes)

    @property
    def tools(self) -> list[dict]:
        """The tools every chunk request offers (:func:`offered_tools`)."""
        return offered_tools(self.options, self.repository is not None)

    def request(
        self, index: int, messages: list[dict], tokens: int, budget: Budget
    ) -> ChunkRequest:
        return self.one.request(
            ChunkRequest(
                index,
                messages,
                self.tools,
                tokens,
                budget.max_model_len,
                repository=self.repository,
                tool_rounds=self.options.tool_rounds,
                tool_tokens=self.options.tool_tokens,
                session=self.session,
                priority=self.priority,
            )
        )


@dataclass(frozen=True)
class _Prompting:
    """What every chunk's prompt is made of: the MR context, the rules, the budget."""

    context: ReviewContext
    rules: RulesApplied
    counter: TokenCounter
    budget: Budget
    learnings: RulesApplied = field(default_factory=lambda: RulesApplied(kind=LEARNINGS))
    digests: DigestsApplied = field(default_factory=DigestsApplied)


@dataclass
class _Answers:
    """What the model answered for every chunk (re-split ones included)."""

    calls: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (chunk, arguments)
    records: list[CallRecord] = field(default_factory=list)
    errors: dict[int, str] = field(default_factory=dict)
    unreviewed: list[UnreviewedPart] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    files_by_chunk: dict[int, Mapping[str, FileDiff]] = field(default_factory=dict)
    messages_of: dict[int, list[dict]] = field(default_factory=dict)  # for the verification
    reviewed: int = 0

    def keep(self, result: ChunkResult) -> None:
        """What an answer holds: its calls (readable or not) and the requests' figures."""
        self.records += result.records
        self.invalid += [f"chunk {result.chunk_index}: {reason}" for reason in result.invalid]
        self.calls += [(result.chunk_index, arguments) for arguments in result.calls]
        if result.conversation is not None:
            # verification judges with the evidence the tool rounds brought in, as the review
            self.messages_of[result.chunk_index] = result.conversation

    def settle(self, result: ChunkResult, chunk: Chunk) -> None:
        """The chunk's last answer: reviewed, or not (and why)."""
        if result.context_overflow:
            self.errors[result.chunk_index] = "prompt too long for the model even after splitting"
        elif result.error:
            self.errors[result.chunk_index] = result.error
        else:
            self.reviewed += 1
            return
        self.unreviewed.append(unreviewed_part(chunk, self.errors[result.chunk_index]))


def _send_chunks(
    chunks: list[Chunk],
    prompting: _Prompting,
    llm: LLMClient,
    on_chunk_done: Callable[[ChunkResult], None] | None,
    concurrency: int | None,
    sending: _Sending,
    one: Pass | None = None,
) -> _Answers:
    """Send every chunk to the model, as pass ``one`` of the review (reviewbot.passes; the
    progress follows the first). A chunk the server finds too long, or whose answer was cut
    off, is split and sent again (up to MAX_RESPLIT_DEPTH times), never dropped."""
    if one is not None and one.number > 1:
        chunks, on_chunk_done = [one.reordered(chunk) for chunk in chunks], None
        sending = dataclasses.replace(sending, one=one)
    answers = _Answers()
    context, counter, budget = prompting.context, prompting.counter, prompting.budget
    pending = [(chunk, 0) for chunk in chunks]
    next_index = len(chunks)
    while pending:
        requests = []
        depth_of: dict[int, int] = {}
        for chunk, depth in pending:
            answers.files_by_chunk[chunk.index] = chunk.files
            depth_of[chunk.index] = depth
            messages = render_messages(
                context,
                chunk,
                part=chunk.index + 1,
                parts=len(chunks),
                rules=prompting.rules.of(chunk),
                learnings=prompting.learnings.of(chunk),
                analyzers=prompting.digests.of(chunk),
            )
            answers.messages_of[chunk.index] = messages
            prompt_tokens = budget.overhead + chunk.tokens
            requests.append(sending.request(chunk.index, messages, prompt_tokens, budget))
        by_index = {chunk.index: chunk for chunk, _ in pending}
        pending = []
        for result in llm.review_chunks(requests, on_done=on_chunk_done, concurrency=concurrency):
            answers.keep(result)
            chunk, depth = by_index[result.chunk_index], depth_of[result.chunk_index]
            too_big = result.context_overflow or result.truncated
            halves = (
                resplit(chunk, counter, next_index) if too_big and depth < MAX_RESPLIT_DEPTH else []
            )
            if halves:
                next_index += len(halves)
                pending += [(half, depth + 1) for half in halves]
                continue
            answers.settle(result, chunk)
    return answers


def review_without_model(
    files: Sequence[FileDiff], counter: TokenCounter, options: ReviewOptions, model: str
) -> ReviewResult:
    """The result of a review with nothing to send: ``files`` hold no hunk to review (every
    hunk was reviewed before, or the files are skipped), so no model call is made."""
    review_plan = plan(files, Budget(), counter, options=options.plan_options)
    if review_plan.chunks:
        raise ValueError("review_without_model was given changed lines to review")
    return ReviewResult(
        plan=review_plan,
        findings=process([], {}, options.findings_options),
        calls=[],
        chunk_errors={},
        invalid_calls=[],
        model=model,
        prompt_version=prompt_version(),
        seconds=0.0,
        chunks_reviewed=0,
    )
