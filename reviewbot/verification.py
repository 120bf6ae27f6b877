"""The verification pass of a review: one model call per chunk over its candidate findings
(reviewbot.verify holds the pure part; docs/verification.md the behaviour).

A chunk with no candidate (nothing at or above ``min_severity``) costs no call. A call that
fails (after the runner's retries), an unreadable or incomplete answer: the candidates left
without a verdict are kept ``unverified`` and the chunk counts one failed verification; it
stays reviewed. Calls run one chunk after the other, after every chunk's review, so the
review's chunks are never held back by verification.

Owns: building each chunk's verification request, calling the runner, the figures.
Must not: speak HTTP, store or post findings (the caller does, with ``Verification``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from reviewbot.findings import Finding, FindingState, Severity
from reviewbot.model import CallRecord, ChunkRequest, ModelAnswer
from reviewbot.stored_findings import StoredFinding
from reviewbot.verify import (
    VERDICT_TOOL,
    Judged,
    VerifyOutcome,
    apply_verdicts,
    candidates,
    read_verdicts,
    verdict_schema,
    verification_messages,
)

__all__ = ["Verification", "Verifier", "VerifyOptions", "verify_findings", "with_verdicts"]


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
) -> Verification:
    """Judge ``findings`` chunk by chunk. ``messages_of``: each chunk's review messages (the
    cached prefix); ``tools``: the review's tools (the verdict tool goes after them);
    ``session``: the review's key, so a router sends the verdict call where the prefix is."""
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
