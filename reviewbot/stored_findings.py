"""A finding as the store keeps it, and how one stored by an earlier review is put back on
the current diff (an incremental review carries it over).

Owns: :class:`StoredFinding` (the columns of a findings row the pipeline reads and writes),
:func:`restored_finding`. Must not: query (the store reads and writes rows).
"""

from __future__ import annotations

from dataclasses import dataclass

from reviewbot.diff import FileDiff, Side
from reviewbot.findings import (
    FIRST_LINE,
    AnchorKind,
    Category,
    Finding,
    FindingState,
    Severity,
)


@dataclass(frozen=True, slots=True)
class StoredFinding:
    """A finding of one review as the store keeps it: what was found, and what became of it
    on the MR (``state``; the thread it has there, if any). The line-level details that come
    from the diff (old path, line text, what the model said) are not kept: see
    :func:`restored_finding`."""

    fingerprint: str
    path: str
    side: Side
    line: int | None
    end_line: int | None
    severity: Severity
    category: Category
    title: str
    body: str
    suggestion: str | None
    anchor: AnchorKind
    state: FindingState
    discussion_id: str | None = None
    note_id: int | None = None
    rule: str | None = None  # the review rule the finding applies, as the model named it
    verdict: str | None = None  # the verification pass's (reviewbot.states.Verdict)
    verdict_reason: str | None = None
    verdict_confidence: float | None = None
    learning_id: int | None = None  # the learning that suppressed it
    source: str = "model"  # model / analyzer / both (reviewbot.analyzer_findings.FindingSource)
    analyzer_tool: str | None = None  # for an analyzer's finding: the tool and its rule
    analyzer_rule: str | None = None
    # A deep review's vote (reviewbot.effort): passes that reported it, of how many; votes/passes.
    votes: int | None = None
    passes: int | None = None
    confidence: float | None = None

    @classmethod
    def of(
        cls,
        finding: Finding,
        state: FindingState,
        *,
        discussion_id: str | None = None,
        note_id: int | None = None,
    ) -> StoredFinding:
        return cls(
            fingerprint=finding.fingerprint,
            path=finding.path,
            side=finding.side,
            line=finding.line,
            end_line=finding.end_line,
            severity=finding.severity,
            category=finding.category,
            title=finding.title,
            body=finding.body,
            suggestion=finding.suggestion,
            anchor=finding.anchor,
            state=state,
            discussion_id=discussion_id,
            note_id=note_id,
            rule=finding.rule,
            source=finding.source,
            analyzer_tool=_analyzer_part(finding, 0),
            analyzer_rule=_analyzer_part(finding, 1),
            votes=finding.votes,
            passes=finding.passes,
            confidence=finding.votes / finding.passes if finding.votes and finding.passes else None,
        )


def _analyzer_part(finding: Finding, index: int) -> str | None:
    """The first analyzer's tool (0) or rule (1) of ``finding``; None for the model's own."""
    if not finding.analyzers:
        return None
    parts = finding.analyzers[0].split(" ", 1)
    return parts[index] if index < len(parts) else None


def restored_finding(
    stored: StoredFinding,
    file: FileDiff,
    line: int | None,
    end_line: int | None,
    chunk_index: int,
) -> Finding:
    """``stored`` as a finding on ``file`` of the current diff, at ``line``..``end_line`` (where
    its unchanged lines are now; None: a file-level finding), as if the model had reported it
    there in chunk ``chunk_index``. Its text was sanitised before it was stored."""
    diff_line = file.line_at(stored.side, line) if line is not None else None
    return Finding(
        path=file.new_path,
        old_path=file.old_path,
        side=stored.side,
        line=line,
        end_line=end_line,
        severity=stored.severity,
        category=stored.category,
        title=stored.title,
        body=stored.body,
        suggestion=stored.suggestion,
        anchor=stored.anchor,
        anchor_note="",
        line_text=diff_line.text if diff_line is not None else "",
        fingerprint=stored.fingerprint,
        chunk_index=chunk_index,
        reported_line=line or FIRST_LINE,
        reported_side=stored.side,
        rule=stored.rule,
        source=stored.source,
        analyzers=(
            (f"{stored.analyzer_tool} {stored.analyzer_rule or ''}".strip(),)
            if stored.analyzer_tool
            else ()
        ),
    )
