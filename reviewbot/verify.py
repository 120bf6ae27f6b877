"""The verification pass of a review: one model call per chunk over its candidate findings, and
its pure part: which findings go to the verifier, what it is asked, how its verdicts are read
and which findings the bar lets it drop (docs/verification.md tells the behaviour).

One verification call per chunk: the chunk's own messages (so the cached prefix of tools,
system prompt, MR context, rules and diff is the one the review sent), then one user turn
with the candidate list, and the ``verdict`` tool (one call per finding: id, keep|drop,
reason, confidence 0..1). A drop counts only at or above ``min_confidence``. A candidate
without a readable verdict is kept, ``unverified``; a verdict for an id not in the list is
ignored and counted. Nothing here invents a finding: the output is the input, each with a
verdict.

A chunk with no candidate (nothing at or above ``min_severity``) costs no call. A call that
fails (after the runner's retries), an unreadable or incomplete answer: the candidates left
without a verdict are kept ``unverified`` and the chunk counts one failed verification; it
stays reviewed. Calls run one chunk after the other, after every chunk's review, so the
review's chunks are never held back by verification.

Owns: the verdict tool's schema, the candidate list's text, reading verdict calls, the bar,
building each chunk's verification request and calling the :class:`Verifier`, the figures.
Must not: speak HTTP (the llm layer does), store or post a finding (the caller does, with
:class:`Verification`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from reviewbot.findings import Finding, FindingState, Severity
from reviewbot.model import CallRecord, ChunkRequest, ModelAnswer
from reviewbot.states import Verdict
from reviewbot.stored_findings import StoredFinding

__all__ = [
    "DEFAULT_MIN_CONFIDENCE",
    "DEFAULT_MIN_SEVERITY",
    "VERDICT_TOOL",
    "Checked",
    "Judged",
    "VerdictOf",
    "Verification",
    "Verifier",
    "VerifyOptions",
    "VerifyOutcome",
    "apply_verdicts",
    "candidates",
    "read_verdicts",
    "verdict_schema",
    "verification_messages",
    "verify_findings",
    "with_verdicts",
]

VERDICT_TOOL = "verdict"
KEEP = "keep"
DROP = "drop"
DEFAULT_MIN_SEVERITY = Severity.MINOR
# A drop counts from this confidence up. 0.7: the verifier must be clearly more sure than not
# that a finding is wrong before it is withheld; a doubtful verifier (0.5..0.7) keeps the
# finding, as a lost true finding costs a reviewer more than one more wrong comment to dismiss.
DEFAULT_MIN_CONFIDENCE = 0.7
REASON_MAX_CHARS = 500  # a verdict's reason as stored and shown
BODY_SHOWN_CHARS = 600  # of each candidate's body in the list the verifier reads


def verdict_schema() -> dict[str, Any]:
    """The ``verdict`` tool, in the OpenAI tools format."""
    return {
        "type": "function",
        "function": {
            "name": VERDICT_TOOL,
            "description": (
                "Only when asked to check candidate findings, never while reviewing: give "
                "your verdict on one of them, keep it if the diff shows the problem is real, "
                "drop it if the code does not have it. Call once per candidate."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "description": "the finding's id in the list"},
                    "verdict": {"type": "string", "enum": [KEEP, DROP]},
                    "reason": {"type": "string", "description": "one sentence: why"},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["id", "verdict", "reason", "confidence"],
            },
        },
    }


def candidates(findings: Sequence[Finding], min_severity: Severity) -> list[Finding]:
    """The findings the verifier is asked about: those at or above ``min_severity``."""
    return [finding for finding in findings if finding.severity.rank <= min_severity.rank]


def candidate_list(findings: Sequence[Finding]) -> str:
    """The user turn that asks for the verdicts; ids are the findings' places, from 1."""
    lines = [
        "Check each candidate finding below against the diff above. For each one call the "
        f"`{VERDICT_TOOL}` tool exactly once: keep it when the code shown really has the "
        "problem, drop it when it does not (wrong line, hallucinated code, already handled). "
        "Report no new findings.",
        "",
    ]
    for number, finding in enumerate(findings, start=1):
        body = finding.body[:BODY_SHOWN_CHARS]
        where = f"{finding.path}:{finding.line}" if finding.line else finding.path
        lines.append(f"{number}. [{finding.severity}/{finding.category}] {where}: {finding.title}")
        lines.append(f"   {body}")
    return "\n".join(lines)


def verification_messages(chunk_messages: Sequence[dict], findings: Sequence[Finding]) -> list:
    """The chunk's own messages (the cached prefix), then the candidate list."""
    return [*chunk_messages, {"role": "user", "content": candidate_list(findings)}]


@dataclass(frozen=True)
class VerdictOf:
    """One readable verdict."""

    verdict: str  # keep | drop
    reason: str
    confidence: float


@dataclass
class Checked:
    """What one verification answer said: readable verdicts by id, and what could not be read."""

    verdicts: dict[int, VerdictOf] = field(default_factory=dict)
    unreadable: int = 0  # calls that are no readable verdict
    unknown_ids: int = 0  # readable verdicts for an id not in the list (ignored)


def read_verdicts(answer: ModelAnswer, count: int) -> Checked:
    """The verdict calls of an answer about ``count`` candidates (ids 1..count). The first
    readable verdict of an id counts; a later one is ignored."""
    checked = Checked()
    for call in answer.tool_calls:
        arguments = _arguments(call.arguments) if call.name == VERDICT_TOOL else None
        verdict = _verdict(arguments) if arguments is not None else None
        if verdict is None:
            checked.unreadable += 1
            continue
        number, value = verdict
        if not 1 <= number <= count:
            checked.unknown_ids += 1
            continue
        checked.verdicts.setdefault(number, value)
    return checked


def _arguments(text: str) -> Mapping[str, Any] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _verdict(arguments: Mapping[str, Any]) -> tuple[int, VerdictOf] | None:
    number, verdict = arguments.get("id"), arguments.get("verdict")
    reason, confidence = arguments.get("reason", ""), arguments.get("confidence")
    if not isinstance(number, int) or isinstance(number, bool):
        return None
    if verdict not in (KEEP, DROP) or not isinstance(reason, str):
        return None
    if not isinstance(confidence, int | float) or isinstance(confidence, bool):
        return None
    if not math.isfinite(confidence) or not 0 <= confidence <= 1:
        return None
    return number, VerdictOf(verdict, reason.strip()[:REASON_MAX_CHARS], float(confidence))


@dataclass(frozen=True)
class Judged:
    """One finding with the verifier's word on it (``verdict`` None: not a candidate)."""

    finding: Finding
    verdict: str | None
    reason: str | None = None
    confidence: float | None = None

    @property
    def dropped(self) -> bool:
        return self.verdict == DROP


@dataclass
class VerifyOutcome:
    """A chunk's findings after verification, and its figures for the run details."""

    judged: list[Judged] = field(default_factory=list)
    verified: int = 0  # candidates with a readable verdict
    failed: bool = False  # the answer left some candidate without a verdict (or was lost)
    unknown_ids: int = 0

    @property
    def kept(self) -> list[Finding]:
        return [judged.finding for judged in self.judged if not judged.dropped]

    @property
    def dropped(self) -> list[Judged]:
        return [judged for judged in self.judged if judged.dropped]


def apply_verdicts(
    findings: Sequence[Finding],
    asked: Sequence[Finding],
    checked: Checked | None,
    min_confidence: float,
) -> VerifyOutcome:
    """Every finding of the chunk, judged. ``asked``: the candidates in list order; ``checked``
    None: no answer (the call failed). A drop under ``min_confidence`` is kept, with the
    verifier's reason; a candidate without a verdict is kept ``unverified``."""
    outcome = VerifyOutcome(unknown_ids=checked.unknown_ids if checked else 0)
    number_of = {id(finding): number for number, finding in enumerate(asked, start=1)}
    for finding in findings:
        number = number_of.get(id(finding))
        if number is None:
            outcome.judged.append(Judged(finding, None))
            continue
        said = checked.verdicts.get(number) if checked else None
        if said is None:
            outcome.failed = True
            outcome.judged.append(Judged(finding, Verdict.UNVERIFIED))
            continue
        outcome.verified += 1
        verdict = DROP if said.verdict == DROP and said.confidence >= min_confidence else KEEP
        outcome.judged.append(Judged(finding, verdict, said.reason, said.confidence))
    if checked is not None and checked.unreadable:
        outcome.failed = True  # an unreadable verdict call is a failed verification
    return outcome


class Verifier(Protocol):
    """What the pass needs of the model client (reviewbot.llm.runner.ChunkRunner)."""

    def verify_chunk(self, request: ChunkRequest) -> tuple[ModelAnswer | None, CallRecord]: ...


@dataclass(frozen=True)
class VerifyOptions:
    enabled: bool = False  # as the VERIFY setting: off by default (docs/verification.md)
    min_severity: Severity = Severity.MINOR
    min_confidence: float = 0.7


@dataclass
class Verification:
    """What the pass did over a review: every judged finding and its cost."""

    enabled: bool = False
    judged: list[Judged] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    verified: int = 0  # findings with a readable verdict
    failed: int = 0  # chunks whose verification left a candidate unverified
    unknown_ids: int = 0  # verdicts for an id not in the list (ignored)

    @property
    def dropped(self) -> list[Judged]:
        return [judged for judged in self.judged if judged.dropped]

    @property
    def verdict_of(self) -> dict[str, Judged]:
        """The verdicts by finding fingerprint (a finding never judged is absent)."""
        return {j.finding.fingerprint: j for j in self.judged if j.verdict is not None}

    def line(self) -> str:
        """The run details' line."""
        if not self.enabled:
            return "off"
        return (
            f"{self.verified} verified, {len(self.dropped)} dropped, "
            f"{self.failed} failed verification(s), {len(self.calls)} call(s)"
        )

    def add(self, outcome: VerifyOutcome) -> None:
        self.judged += outcome.judged
        self.verified += outcome.verified
        self.failed += int(outcome.failed)
        self.unknown_ids += outcome.unknown_ids


def verify_findings(
    findings: Sequence[Finding],
    messages_of: Mapping[int, list[dict]],
    tools: list[dict],
    verifier: Verifier,
    options: VerifyOptions,
    max_model_len: int | None = None,
    *,
    session: str | None = None,
    priority: int | None = None,
) -> Verification:
    """Judge ``findings`` chunk by chunk. ``messages_of``: each chunk's review messages (the
    cached prefix); ``tools``: the review's tools (the verdict tool goes after them);
    ``session``: the review's key, so a router sends the verdict call where the prefix is;
    ``priority``: the review's, so its second look waits no longer than its first."""
    verification = Verification(enabled=options.enabled)
    if not options.enabled:
        return verification
    by_chunk: dict[int, list[Finding]] = {}
    for finding in findings:
        by_chunk.setdefault(finding.chunk_index, []).append(finding)
    for chunk_index, chunk_findings in sorted(by_chunk.items()):
        asked = candidates(chunk_findings, options.min_severity)
        messages = messages_of.get(chunk_index)
        if not asked or messages is None:
            verification.add(apply_verdicts(chunk_findings, [], None, options.min_confidence))
            continue
        request = ChunkRequest(
            chunk_index,
            verification_messages(messages, asked),
            _with_verdict_tool(tools),
            max_model_len=max_model_len,
            session=session,
            priority=priority,
        )
        answer, record = verifier.verify_chunk(request)
        verification.calls.append(record)
        checked = read_verdicts(answer, len(asked)) if answer is not None else None
        verification.add(apply_verdicts(chunk_findings, asked, checked, options.min_confidence))
    return verification


def _with_verdict_tool(tools: list[dict]) -> list[dict]:
    """The review's tools as they are when they offer the verdict tool (the review of a
    verified run does: reviewbot.review), else with it last."""
    if any((tool.get("function") or {}).get("name") == VERDICT_TOOL for tool in tools):
        return tools
    return [*tools, verdict_schema()]


def with_verdicts(
    stored: Sequence[StoredFinding], verification: Verification
) -> list[StoredFinding]:
    """The review's stored findings with their verdicts, then one ``dropped`` row for each
    finding the pass dropped (never posted)."""
    verdict_of = verification.verdict_of
    judged = [_with_verdict(finding, verdict_of.get(finding.fingerprint)) for finding in stored]
    dropped = [
        _with_verdict(StoredFinding.of(j.finding, FindingState.DROPPED), j)
        for j in verification.dropped
    ]
    return [*judged, *dropped]


def _with_verdict(stored: StoredFinding, judged: Judged | None) -> StoredFinding:
    if judged is None or judged.verdict is None:
        return stored
    return dataclasses.replace(
        stored,
        verdict=judged.verdict,
        verdict_reason=judged.reason,
        verdict_confidence=judged.confidence,
    )
