"""A review's findings with an ``AnalyzerRun`` merged in: the seam between the model's review
and the analyzers' findings (None: analyzers off, the review unchanged).

Owns: applying the merge to a review result and the facts the summary needs about it.
Must not: read reports, run analyzers, post or store anything.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from reviewbot.analyzer_findings import AnalyzerRun
from reviewbot.analyzer_merge import merge_with_model
from reviewbot.analyzer_summary import AnalyzerFacts
from reviewbot.diff import FileDiff
from reviewbot.findings import FindingsOptions, reselected
from reviewbot.review import ReviewResult

__all__ = ["with_analyzers"]


def with_analyzers(
    result: ReviewResult,
    run: AnalyzerRun | None,
    files: Sequence[FileDiff],
    options: FindingsOptions,
) -> tuple[ReviewResult, AnalyzerFacts | None]:
    """``result`` with ``run``'s findings merged (selected again), and the summary's facts."""
    if run is None:
        return result, None
    by_path = {file.new_path: file for file in files}
    merge = merge_with_model(result.findings.findings, run, by_path)
    findings = reselected(result.findings, merge.findings, options)
    off_diff = {tool: n.summary_only for tool, n in merge.counts.items() if n.summary_only}
    problems = [problem.sentence() for problem in run.problems]
    facts = AnalyzerFacts(used=run.used, problems=problems, off_diff=off_diff)
    return dataclasses.replace(result, findings=findings), facts
