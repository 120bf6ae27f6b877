"""Analyzer findings merged with the model's: which are posted inline, which are only counted, and
which are the same problem the model reported (one comment, both sources named).

Rules (docs/analyzers.md, "How duplicates are merged"):

* two analyzer findings with the same fingerprint (tool + rule + path + normalised snippet, no
  line number) are one: the first is kept;
* an analyzer finding whose line is an ADDED line of the MR's diff (a line GitLab accepts for an
  inline comment) becomes a finding posted inline, fingerprint = the analyzer's fingerprint, with
  the tool and rule named; every other one (an unchanged line, a file outside the diff) is
  counted in the summary by tool, never posted;
* a model finding and an inline analyzer finding are the same problem when they are on the same
  path and side, their line ranges overlap, and their categories match or one of them is a
  security finding (a secret scanner's finding is one). They become ONE finding, source
  ``both``, that keeps the model's text and the analyzer's fingerprint (stable across re-runs
  whether or not the model reports it again); the more severe severity wins;
* a secret finding is posted naming its kind (the rule) and the line, never its value: the
  message and snippet are masked, and a model finding merged with it loses its suggestion.

Owns: turning analyzer findings into findings, the merge rule and the per-tool counts.
Must not: read reports, run tools, post or store anything.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reviewbot.analyzer_findings import AnalyzerFinding, AnalyzerRun, FindingSource
from reviewbot.diff import FileDiff, LineKind, Side
from reviewbot.findings import DEFAULT_MAX_BODY_CHARS, AnchorKind, Category, Finding
from reviewbot.markdown import sanitize_markdown, sanitize_title
from reviewbot.redaction import mask_secrets

__all__ = [
    "ANALYZER_CHUNK_INDEX",
    "AnalyzerCounts",
    "AnalyzerMerge",
    "analyzer_findings_on_diff",
    "merge_with_model",
    "same_problem",
    "unique_analyzer_findings",
]

ANALYZER_CHUNK_INDEX = -1  # an analyzer finding belongs to no chunk of the model's review
MAX_ANALYZER_TITLE_CHARS = 120
SECRET_MESSAGE = "A secret ({rule}) is committed on this line; its value is masked here."


@dataclass(frozen=True, slots=True)
class AnalyzerCounts:
    """One tool's findings as they end up on the MR."""

    inline: int = 0  # posted as an analyzer-only inline comment
    merged: int = 0  # merged into a model finding's comment (source both)
    summary_only: int = 0  # not on a changed line: only counted in the summary


@dataclass(slots=True)
class AnalyzerMerge:
    """The merged findings and what became of each analyzer finding."""

    findings: list[Finding]
    counts: dict[str, AnalyzerCounts] = field(default_factory=dict)
    collapsed: int = 0  # analyzer findings dropped as a duplicate of another (same fingerprint)


def unique_analyzer_findings(
    findings: Sequence[AnalyzerFinding],
) -> tuple[list[AnalyzerFinding], int]:
    """The findings with one per fingerprint (the first kept), and how many were dropped."""
    seen: set[str] = set()
    kept: list[AnalyzerFinding] = []
    for finding in findings:
        if finding.fingerprint in seen:
            continue
        seen.add(finding.fingerprint)
        kept.append(finding)
    return kept, len(findings) - len(kept)


def _file_for(path: str, files: Mapping[str, FileDiff]) -> FileDiff | None:
    for file in files.values():
        if file.new_path == path:
            return file
    return None


def _on_added_line(finding: AnalyzerFinding, files: Mapping[str, FileDiff]) -> FileDiff | None:
    file = _file_for(finding.path, files)
    if file is None:
        return None
    line = file.line_at(Side.NEW, finding.line)
    return file if line is not None and line.kind is LineKind.ADDED else None


def _end_line(finding: AnalyzerFinding, file: FileDiff) -> int | None:
    """The end line where every line of the range is an added line of the diff, else None."""
    if finding.end_line is None or finding.end_line <= finding.line:
        return None
    for number in range(finding.line + 1, finding.end_line + 1):
        line = file.line_at(Side.NEW, number)
        if line is None or line.kind is not LineKind.ADDED:
            return None
    return finding.end_line


def analyzer_name(finding: AnalyzerFinding) -> str:
    """How a comment names the analyzer: its tool and rule."""
    return f"{finding.tool} {finding.rule}".strip()


def _texts(finding: AnalyzerFinding) -> tuple[str, str]:
    """The title and body of the comment; a secret is named by kind, its value never shown."""
    if finding.secret:
        return f"Secret committed: {finding.rule}", SECRET_MESSAGE.format(rule=finding.rule)
    message, _ = mask_secrets(finding.message)
    first_line = message.strip().splitlines()[0] if message.strip() else finding.rule
    return first_line, message


def as_finding(finding: AnalyzerFinding, file: FileDiff) -> Finding:
    """An analyzer finding on an added line, as a finding posted inline."""
    title, body = _texts(finding)
    line = file.line_at(Side.NEW, finding.line)
    assert line is not None
    category = Category.SECURITY if finding.secret else finding.category
    return Finding(
        path=file.new_path,
        old_path=file.old_path,
        side=Side.NEW,
        line=finding.line,
        end_line=_end_line(finding, file),
        severity=finding.severity,
        category=category,
        title=sanitize_title(title, max_chars=MAX_ANALYZER_TITLE_CHARS),
        body=sanitize_markdown(body, max_chars=DEFAULT_MAX_BODY_CHARS),
        suggestion=None,
        anchor=AnchorKind.EXACT,
        anchor_note="",
        line_text=line.text,
        fingerprint=finding.fingerprint,
        chunk_index=ANALYZER_CHUNK_INDEX,
        reported_line=finding.line,
        reported_side=Side.NEW,
        masked=finding.secret,
        source=FindingSource.ANALYZER.value,
        analyzers=(analyzer_name(finding),),
    )


def analyzer_findings_on_diff(
    run: AnalyzerRun, files: Mapping[str, FileDiff]
) -> tuple[list[Finding], dict[str, AnalyzerCounts], int]:
    """The inline findings (on added lines), per-tool counts of the others, and the number of
    duplicates collapsed."""
    unique, collapsed = unique_analyzer_findings(run.findings)
    inline: list[Finding] = []
    counts: dict[str, AnalyzerCounts] = {}
    for finding in unique:
        file = _on_added_line(finding, files)
        tool = counts.get(finding.tool, AnalyzerCounts())
        if file is None:
            counts[finding.tool] = dataclasses.replace(tool, summary_only=tool.summary_only + 1)
            continue
        inline.append(as_finding(finding, file))
        counts[finding.tool] = dataclasses.replace(tool, inline=tool.inline + 1)
    return inline, counts, collapsed


def _span(finding: Finding) -> tuple[int, int]:
    start = finding.line or 0
    return start, finding.end_line or start


def same_problem(model: Finding, analyzer: Finding) -> bool:
    """Same path and side, overlapping lines, and the same category or one of them security."""
    if model.is_file_level or analyzer.is_file_level:
        return False
    if (model.path, model.side) != (analyzer.path, analyzer.side):
        return False
    (model_start, model_end), (start, end) = _span(model), _span(analyzer)
    if model_start > end or start > model_end:
        return False
    security = Category.SECURITY in (model.category, analyzer.category)
    return security or model.category == analyzer.category


def _combined(model: Finding, analyzer: Finding) -> Finding:
    secret = analyzer.masked and analyzer.category is Category.SECURITY
    severity = min(model.severity, analyzer.severity, key=lambda value: value.rank)
    return dataclasses.replace(
        model,
        severity=severity,
        fingerprint=analyzer.fingerprint,
        suggestion=None if secret else model.suggestion,
        masked=model.masked or secret,
        source=FindingSource.BOTH.value,
        analyzers=model.analyzers + analyzer.analyzers,
    )


def merge_with_model(
    model_findings: Sequence[Finding], run: AnalyzerRun, files: Mapping[str, FileDiff]
) -> AnalyzerMerge:
    """The model's findings with the analyzer findings merged in (see the module's rules)."""
    inline, counts, collapsed = analyzer_findings_on_diff(run, files)
    tools = {finding.fingerprint: finding.tool for finding in run.findings}
    merged = list(model_findings)
    for analyzer in inline:
        tool = tools[analyzer.fingerprint]
        carried = next((f for f in merged if f.fingerprint == analyzer.fingerprint), None)
        if carried is not None:  # carried over from an earlier review: already merged there
            if carried.source == FindingSource.BOTH.value:
                counts[tool] = _moved_to_merged(counts[tool])
            continue
        match = next(
            (index for index, model in enumerate(merged) if _mergeable(model, analyzer)), None
        )
        if match is None:
            merged.append(analyzer)
            continue
        merged[match] = _combined(merged[match], analyzer)
        counts[tool] = _moved_to_merged(counts[tool])
    return AnalyzerMerge(merged, counts, collapsed)


def _moved_to_merged(tally: AnalyzerCounts) -> AnalyzerCounts:
    return dataclasses.replace(tally, inline=tally.inline - 1, merged=tally.merged + 1)


def _mergeable(model: Finding, analyzer: Finding) -> bool:
    return model.source == FindingSource.MODEL.value and same_problem(model, analyzer)
