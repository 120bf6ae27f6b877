"""One report the pipeline produced, whatever its format: parsed once, then read by the
reader of its shape (SARIF 2.1.0, GitLab security report, Code Quality).

Owns: the choice of a reader by the report's shape. Must not: read a file.
"""

from __future__ import annotations

from reviewbot.analyzer_findings import AnalyzerProblem, AnalyzerRun
from reviewbot.analyzers.code_quality import looks_like_code_quality, read_code_quality_data
from reviewbot.analyzers.gitlab_security import looks_like_security_report, read_security_data
from reviewbot.analyzers.report_json import ReportContext, parse_report, problem_run
from reviewbot.analyzers.sarif import looks_like_sarif, read_sarif_data

__all__ = ["read_report"]


def read_report(name: str, data: bytes, context: ReportContext) -> AnalyzerRun:
    """The findings of the report ``data`` named ``name`` (its path), or the problem with it:
    never an exception."""
    parsed = parse_report(name, data)
    if isinstance(parsed, AnalyzerProblem):
        return AnalyzerRun(problems=(parsed,))
    if looks_like_sarif(parsed):
        return read_sarif_data(name, parsed, context)
    if looks_like_security_report(parsed):
        return read_security_data(name, parsed, context)
    if looks_like_code_quality(parsed):
        return read_code_quality_data(name, parsed, context)
    return problem_run(
        name, "not read: neither SARIF 2.1.0, a GitLab security report nor a Code Quality report"
    )
