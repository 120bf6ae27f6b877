"""The vote of a deep review (issue 37, docs/effort.md): several passes' findings, one answer.

Findings of different passes are the same finding when they are on the same path, their lines
within ``LINE_WINDOW`` of each other (file-level findings only match file-level ones), and they
have the same normalised title or the same category; sameness is taken transitively, so the
groups do not depend on the order of the passes. A group is reported by as many passes as it
holds findings of distinct passes (its votes); it is kept when at least ``keep_at`` of the passes
that answered its path reported it, as one finding (the most severe, then the most common
title) with ``votes`` and ``passes`` set (confidence = votes / passes). The other groups are
voted out: stored as ``voted_out``, never posted.

A pass that did not answer a path (its chunk failed) neither votes on it nor counts among its
passes; where fewer than ``keep_at`` passes answered a path, nothing on it can be kept and the
review names those paths (:attr:`VoteResult.short_of_votes`) so the run reports them as not
reviewed, never as clean.

Owns: matching findings across passes, counting votes, choosing the representative. Must not:
send anything, read settings, or know how the passes were made.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from reviewbot.findings import Finding, normalize_title

__all__ = ["LINE_WINDOW", "PassFindings", "VoteResult", "confidence", "vote"]

LINE_WINDOW = 3  # two passes' lines at most this far apart name the same place
FILE_LEVEL_LINE = -1  # the sort key of a file-level finding's line


@dataclass(frozen=True)
class PassFindings:
    """One pass's findings, and the paths it did not answer (a chunk of it failed)."""

    findings: Sequence[Finding]
    unanswered: frozenset[str] = frozenset()


@dataclass(frozen=True)
class VoteResult:
    kept: list[Finding] = field(default_factory=list)  # votes >= keep_at: posted
    voted_out: list[Finding] = field(default_factory=list)  # stored, never posted
    # paths fewer than keep_at passes answered: nothing on them could be kept
    short_of_votes: frozenset[str] = frozenset()


def confidence(finding: Finding) -> float | None:
    """votes / passes of a voted finding (None: not from a vote)."""
    if finding.votes is None or not finding.passes:
        return None
    return finding.votes / finding.passes


def _same(a: Finding, b: Finding) -> bool:
    if a.path != b.path or (a.line is None) != (b.line is None):
        return False
    if a.line is not None and b.line is not None and abs(a.line - b.line) > LINE_WINDOW:
        return False
    return a.category == b.category or normalize_title(a.title) == normalize_title(b.title)


def _groups(entries: list[tuple[int, Finding]]) -> list[list[tuple[int, Finding]]]:
    """Connected components of "the same finding" (union-find: independent of order)."""
    parent = list(range(len(entries)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, (_, a) in enumerate(entries):
        for j in range(i + 1, len(entries)):
            if _same(a, entries[j][1]):
                parent[root(j)] = root(i)
    groups: dict[int, list[tuple[int, Finding]]] = {}
    for i, entry in enumerate(entries):
        groups.setdefault(root(i), []).append(entry)
    return list(groups.values())


def _representative(group: list[tuple[int, Finding]]) -> Finding:
    """The most severe finding of the group, then the most common title; ties broken by the
    finding's own fields, so the choice does not depend on the order of the passes."""
    titles = Counter(normalize_title(finding.title) for _, finding in group)

    def key(finding: Finding) -> tuple:
        line = FILE_LEVEL_LINE if finding.line is None else finding.line
        return (
            finding.severity.rank,
            -titles[normalize_title(finding.title)],
            line,
            finding.title,
            finding.body,
            finding.fingerprint,
            finding.suggestion or "",
            finding.chunk_index,
        )

    return min((finding for _, finding in group), key=key)


def vote(passes: Sequence[PassFindings], keep_at: int) -> VoteResult:
    """Merge the passes' findings by vote (see the module's docstring); ``keep_at`` is K."""
    if keep_at < 1:
        raise ValueError(f"keep_at must be at least 1, got {keep_at}")
    paths = {finding.path for one in passes for finding in one.findings}
    paths |= {path for one in passes for path in one.unanswered}
    answered = {path: sum(path not in one.unanswered for one in passes) for path in paths}
    entries = [
        (number, finding)
        for number, one in enumerate(passes)
        for finding in one.findings
        if finding.path not in one.unanswered
    ]
    result = VoteResult(
        short_of_votes=frozenset(path for path, count in answered.items() if count < keep_at)
    )
    for group in _groups(entries):
        chosen = _representative(group)
        votes = len({number for number, _ in group})
        voted = dataclasses.replace(chosen, votes=votes, passes=answered[chosen.path])
        (result.kept if votes >= keep_at else result.voted_out).append(voted)
    result.kept.sort(key=_order)
    result.voted_out.sort(key=_order)
    return result


def _order(finding: Finding) -> tuple:
    line = FILE_LEVEL_LINE if finding.line is None else finding.line
    return (finding.path, line, finding.severity.rank, finding.title, finding.fingerprint)
