"""Running a review's chunks N times: the passes of a deep review (issue 37, docs/effort.md).

Pass 1 is the standard request, at the review's own priority and temperature, so its prompt
is byte for byte a standard review's (one prefix cache for both). Passes 2..N send the same
prefix (tools, system prompt, MR context, the chunk's rules) with their own ``seed`` (a fixed
base plus the pass number) and the ``deep_temperature``, at the lowest priority
(``Workload.BACKGROUND``: a deep pass never delays a fresh MR), and show the chunk's files in
another order (rotated by the pass number: only the diff, the prompt's variable tail, changes).
The passes run at once, each sending its chunks through the same model client, whose slots
bound the requests in flight (``concurrency``) whatever the number of passes.

Owns: the plan of the passes (how many, which seed, temperature and priority), sending them,
and merging their answers by vote (reviewbot.votes) into one set of findings, with the chunks
too few passes answered reported as not reviewed. Must not: render prompts, parse answers or
touch GitLab and the database (review.py sends, findings.py reads).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from reviewbot.chunking import Chunk
from reviewbot.effort import Effort, EffortChoice
from reviewbot.findings import (
    Finding,
    FindingsOptions,
    FindingsResult,
    FindingState,
    process,
    reselected,
)
from reviewbot.model import CallRecord, ChunkRequest, request_priority
from reviewbot.states import Workload
from reviewbot.stored_findings import StoredFinding
from reviewbot.unreviewed import UnreviewedPart, unreviewed_part
from reviewbot.votes import PassFindings, vote

if TYPE_CHECKING:
    from reviewbot.config import Settings
    from reviewbot.review import ReviewOptions

__all__ = [
    "Pass",
    "PassPlan",
    "Voting",
    "pass_plan",
    "passes_of",
    "review_passes",
    "run_passes",
    "voted",
    "with_effort",
]

PASS_SEED_BASE = 1_000  # pass p sends seed PASS_SEED_BASE + p (p >= 2): the same on every run
T = TypeVar("T")


@dataclass(frozen=True)
class PassPlan:
    """How a review's chunks are sent: ``count`` passes, a finding kept at ``keep_at`` votes;
    ``temperature`` of the passes after the first."""

    count: int = 1
    keep_at: int = 1
    temperature: float | None = None
    effort: EffortChoice | None = None  # what the run details say
    seeded: bool = True  # passes after the first send a seed (the setting deep_seed)

    def describe(self) -> str:
        """``effort deep (3 passes, keep at 2 votes): reason`` (empty without an effort)."""
        if self.effort is None:
            return ""
        how = f" ({self.count} passes, keep at {self.keep_at} votes)" if self.count > 1 else ""
        return f"effort {self.effort.effort.value}{how}: {self.effort.reason}"


def with_effort(options: ReviewOptions, choice: EffortChoice, settings: Settings) -> ReviewOptions:
    """The review's options at ``choice``'s effort: ``quick`` without repository tools or
    verification; ``deep`` with its passes, verified only with ``deep_verify``."""
    plan = pass_plan(choice, settings.deep_passes, settings.deep_votes, settings.deep_temperature)
    plan = dataclasses.replace(plan, seeded=settings.deep_seed)
    if choice.effort is Effort.QUICK:
        verify = dataclasses.replace(options.verify, enabled=False)
        return dataclasses.replace(options, tools=False, verify=verify, passes=plan)
    if choice.effort is Effort.DEEP:
        verify = dataclasses.replace(options.verify, enabled=settings.deep_verify)
        return dataclasses.replace(options, verify=verify, passes=plan)
    return dataclasses.replace(options, passes=plan)


def pass_plan(choice: EffortChoice, passes: int, votes: int, temperature: float) -> PassPlan:
    """The passes of an effort: deep's ``passes`` at ``votes``; one for quick and standard."""
    if choice.effort is Effort.DEEP:
        return PassPlan(passes, votes, temperature, choice)
    return PassPlan(effort=choice)


@dataclass(frozen=True)
class Pass:
    """One pass: its number (1-based) and what its requests carry besides the prompt."""

    number: int = 1
    seed: int | None = None
    temperature: float | None = None
    priority: int | None = None  # None: the review's own

    def reordered(self, chunk: Chunk) -> Chunk:
        """``chunk`` with its files rotated by the pass number (pass 1: as planned)."""
        segments = chunk.segments
        if self.number == 1 or len(segments) < 2:
            return chunk
        turn = (self.number - 1) % len(segments)
        return dataclasses.replace(chunk, segments=(*segments[turn:], *segments[:turn]))

    def request(self, request: ChunkRequest) -> ChunkRequest:
        """``request`` as this pass sends it (pass 1: unchanged)."""
        if self.number == 1:
            return request
        return dataclasses.replace(
            request, seed=self.seed, temperature=self.temperature, priority=self.priority
        )


def passes_of(plan: PassPlan) -> list[Pass]:
    """The passes of ``plan``: the standard request first, then the seeded background ones."""
    background = request_priority(Workload.BACKGROUND)
    return [Pass(1)] + [
        Pass(number, PASS_SEED_BASE + number if plan.seeded else None, plan.temperature, background)
        for number in range(2, plan.count + 1)
    ]


def run_passes(plan: PassPlan, send: Callable[[Pass], T]) -> list[T]:
    """Every pass's answers, in pass order; the passes are sent at once (the model client's
    slots bound what is in flight)."""
    passes = passes_of(plan)
    if len(passes) == 1:
        return [send(passes[0])]
    with ThreadPoolExecutor(max_workers=len(passes), thread_name_prefix="pass") as pool:
        return list(pool.map(send, passes))


def review_passes(
    plan: PassPlan,
    chunks: Sequence[Chunk],
    send: Callable[[Pass], PassAnswers],
    options: FindingsOptions,
    whole: Mapping[str, Any],
) -> tuple[Any, FindingsResult, Voting]:
    """Send the chunks once per pass (``send``), and read the findings: the one pass's, or the
    passes' vote (:func:`voted`); with the record of the effort and its vote."""
    every = run_passes(plan, send)
    if len(every) > 1:
        return voted(plan, chunks, every, options, whole)
    answers = every[0]
    return answers, process(answers.calls, answers.files_by_chunk, options, whole), Voting(plan)


class PassAnswers(Protocol):
    """What one pass answered (review.py's ``_Answers``)."""

    calls: list[tuple[int, dict[str, Any]]]
    records: list[CallRecord]
    errors: dict[int, str]
    unreviewed: list[UnreviewedPart]
    invalid: list[str]
    files_by_chunk: dict[int, Mapping[str, Any]]
    reviewed: int


@dataclass(frozen=True)
class Voting:
    """A deep review's vote, for the run details and the store."""

    plan: PassPlan
    answered: tuple[int, ...] = ()  # per pass: chunks it answered
    kept: int = 0
    voted_out: list[Finding] = field(default_factory=list)

    def describe(self) -> str:
        """``2 of 3 passes answered, 4 finding(s) kept, 2 voted out`` ("" for one pass)."""
        if self.plan.count < 2:
            return ""
        whole = sum(1 for count in self.answered if count)
        return (
            f"{whole} of {self.plan.count} passes answered, {self.kept} finding(s) kept, "
            f"{len(self.voted_out)} voted out"
        )

    def line(self) -> str:
        """The run details' line: the effort, its passes and why, then the vote ("" when the
        review was given no effort)."""
        effort = self.plan.describe()
        vote_text = self.describe()
        return f"{effort}; {vote_text}" if effort and vote_text else effort

    def stored(self) -> list[StoredFinding]:
        """The findings the vote kept off the MR, as the store keeps them (``voted_out``)."""
        return [StoredFinding.of(finding, FindingState.VOTED_OUT) for finding in self.voted_out]

    def columns(self) -> dict[str, Any]:
        """The review row's ``effort``, ``effort_reason`` and ``passes``."""
        choice = self.plan.effort
        return {
            "effort": choice.effort.value if choice else None,
            "effort_reason": choice.reason if choice else None,
            "passes": self.plan.count,
        }


def voted(
    plan: PassPlan,
    chunks: Sequence[Chunk],
    answers: Sequence[PassAnswers],
    options: FindingsOptions,
    whole: Mapping[str, Any],
) -> tuple[PassAnswers, FindingsResult, Voting]:
    """The passes' answers as one: pass 1's answers with every pass's calls' figures, the
    findings kept by the vote, and the chunks with too few answering passes not reviewed."""
    first = answers[0]
    per_pass = [process(a.calls, a.files_by_chunk, options, whole) for a in answers]
    ballots = [
        PassFindings(
            result.findings,
            frozenset(path for part in a.unreviewed for path, _ in part.lines_by_path),
        )
        for a, result in zip(answers, per_pass, strict=True)
    ]
    result = vote(ballots, plan.keep_at)
    for other in answers[1:]:
        first.records += other.records
        first.invalid += [f"pass {number}: {text}" for number, text in enumerate(other.invalid)]
    for chunk in chunks:
        paths = {segment.path for segment in chunk.segments}
        if paths <= ballots[0].unanswered or not paths & result.short_of_votes:
            continue  # pass 1 did not answer it either: already not reviewed
        reason = f"fewer than {plan.keep_at} of {plan.count} passes answered"
        first.errors[chunk.index] = reason
        first.unreviewed.append(unreviewed_part(chunk, reason))
        first.reviewed = max(0, first.reviewed - 1)
    findings = reselected(per_pass[0], result.kept, options)
    voting = Voting(plan, tuple(a.reviewed for a in answers), len(result.kept), result.voted_out)
    return first, findings, voting
