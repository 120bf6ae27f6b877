"""Read a Code Quality (Code Climate) report, ``gl-code-quality-report.json``, into analyzer
findings.

The fields read (https://docs.gitlab.com/ci/testing/code_quality/#code-quality-report-format,
a subset of https://github.com/codeclimate/platform/blob/master/spec/analyzers/SPEC.md): a JSON
array of issues, each with ``description``, ``check_name``, ``fingerprint``, ``severity``
(``info``, ``minor``, ``major``, ``critical``, ``blocker``: reviewbot's own severities),
``location.path`` and ``location.lines.begin`` / ``end`` or
``location.positions.begin.line`` / ``end.line``; ``categories`` when present.

Issues whose ``check_name`` starts with ``reviewbot/`` are reviewbot's own
(``reviewbot.codequality`` writes them): never read back. The format names no commit.

Category, from Code Climate's ``categories``: Security -> security, Bug Risk -> bug,
Performance -> performance, Complexity / Duplication -> maintainability, otherwise style.

Owns: the Code Quality reading. Must not: read a file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reviewbot.analyzer_findings import AnalyzerFinding, AnalyzerRun
from reviewbot.analyzers.report_json import (
    ReportContext,
    counted,
    field_text,
    line_number,
    problem_run,
    repository_path,
)
from reviewbot.codequality import CHECK_NAME_PREFIX
from reviewbot.findings import Category, Severity

__all__ = ["CODE_QUALITY_TOOL", "looks_like_code_quality", "read_code_quality_data"]

CODE_QUALITY_TOOL = "codequality"
OWN_CHECK_PREFIX = f"{CHECK_NAME_PREFIX}/"
CATEGORIES = {
    "security": Category.SECURITY,
    "bug risk": Category.BUG,
    "performance": Category.PERFORMANCE,
    "complexity": Category.MAINTAINABILITY,
    "duplication": Category.MAINTAINABILITY,
}


def looks_like_code_quality(data: object) -> bool:
    return isinstance(data, list)


def read_code_quality_data(name: str, issues: Sequence[Any], context: ReportContext) -> AnalyzerRun:
    """The findings of the Code Quality report ``issues`` (parsed JSON), reviewbot's own
    issues left out."""
    if not all(isinstance(i, Mapping) for i in issues):
        return problem_run(name, "not read: a Code Quality report is a list of issue objects")
    if issues and not any("check_name" in i or "description" in i for i in issues):
        return problem_run(name, "not read: no issue has a check_name or a description")
    theirs = [i for i in issues if not str(i.get("check_name", "")).startswith(OWN_CHECK_PREFIX)]
    findings = [f for i in theirs if (f := _finding(name, i, context)) is not None]
    own = len(issues) - len(theirs)
    skipped = f", {own} of reviewbot's own left out" if own else ""
    return AnalyzerRun(
        findings=tuple(findings),
        used=(f"Code Quality report {name} ({counted(len(findings))}{skipped})",),
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _lines(location: Mapping[str, Any]) -> tuple[int | None, int | None]:
    lines = _mapping(location.get("lines"))
    if lines:
        return line_number(lines.get("begin")), line_number(lines.get("end"))
    positions = _mapping(location.get("positions"))
    begin = line_number(_mapping(positions.get("begin")).get("line"))
    return begin, line_number(_mapping(positions.get("end")).get("line"))


def _finding(name: str, issue: Mapping[str, Any], context: ReportContext) -> AnalyzerFinding | None:
    location = _mapping(issue.get("location"))
    path = field_text(location, "path")
    line, end = _lines(location)
    if not path or line is None:
        return None
    check = field_text(issue, "check_name")
    tool, _, rule = check.partition("/") if "/" in check else (CODE_QUALITY_TOOL, "", check)
    severity_text = str(issue.get("severity", "")).lower()
    severity = Severity(severity_text) if severity_text in set(Severity) else Severity.MINOR
    categories = [str(c).lower() for c in issue.get("categories", []) or []]
    category = next((CATEGORIES[c] for c in categories if c in CATEGORIES), Category.STYLE)
    return AnalyzerFinding(
        tool=tool or CODE_QUALITY_TOOL,
        rule=rule or "unnamed",
        path=repository_path(path, context),
        line=line,
        end_line=end if end is not None and end > line else None,
        severity=severity,
        category=category,
        message=field_text(issue, "description"),
        origin=f"Code Quality {name}",
    )
