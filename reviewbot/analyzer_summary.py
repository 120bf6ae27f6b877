"""What the summary note says about the analyzers: every problem named, and per tool how many of
its findings are on the MR inline, merged into one of the model's comments, or only counted.

The counts come from what was published (a finding capped off the inline list counts as
summary-only), plus the findings that were never on a changed line.

Owns: the analyzer lines of the summary. Must not: post, merge or render the rest of the note.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from reviewbot.analyzer_findings import FindingSource
from reviewbot.findings import Finding

__all__ = ["AnalyzerFacts", "analyzer_lines"]


@dataclass(frozen=True, slots=True)
class AnalyzerFacts:
    """What the review knows of the analyzers before publishing."""

    used: Sequence[str] = ()
    problems: Sequence[str] = ()  # "analyzer ruff did not run: timed out after 60 s"
    off_diff: Mapping[str, int] = field(default_factory=dict)  # by tool: not on a changed line


def _tool(name: str) -> str:
    return name.split(" ", 1)[0]


def _tally(findings: Iterable[Finding], kind: str, counts: dict[str, dict[str, int]]) -> None:
    for finding in findings:
        for name in finding.analyzers:
            merged = finding.source == FindingSource.BOTH.value and kind == "inline"
            key = "merged" if merged else kind
            tool = counts.setdefault(_tool(name), {"inline": 0, "merged": 0, "summary": 0})
            tool[key] += 1


def analyzer_lines(
    facts: AnalyzerFacts | None, inline: Sequence[Finding], summary_only: Sequence[Finding]
) -> list[str]:
    """One line per problem and per tool; [] when no analyzers were configured."""
    if facts is None:
        return []
    counts: dict[str, dict[str, int]] = {}
    _tally(inline, "inline", counts)
    _tally(summary_only, "summary", counts)
    for tool, number in facts.off_diff.items():
        counts.setdefault(tool, {"inline": 0, "merged": 0, "summary": 0})["summary"] += number
    lines = [f"⚠️ {problem}" for problem in facts.problems]
    for tool in sorted(counts):
        tally = counts[tool]
        lines.append(
            f"`{tool}`: {tally['inline']} inline, {tally['merged']} merged with the model's, "
            f"{tally['summary']} in the summary only"
        )
    if not counts and not facts.problems:
        lines.append(f"analyzers used ({', '.join(facts.used) or 'none'}): no findings")
    return lines
