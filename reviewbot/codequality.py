"""GitLab Code Quality report (``artifacts:reports:codequality``) built from review findings.

GitLab reads a JSON array of Code Climate issues, of which it uses a subset
(https://docs.gitlab.com/ci/testing/code_quality/#code-quality-report-format):

- ``description`` (shown in the MR widget), ``check_name``, ``fingerprint`` (unique per issue;
  GitLab compares the fingerprints of the base and head reports to tell new issues from fixed
  ones, so it must not depend on line numbers), ``severity`` (``info``, ``minor``, ``major``,
  ``critical`` or ``blocker``), ``location.path`` (relative to the repository root, WITHOUT a
  leading ``./``, or GitLab cannot link it) and ``location.lines.begin``.

Pure: findings in, plain JSON-ready dicts out.

Owns: the report's issues: paths as GitLab links them, severities mapped to its scale, fingerprints
unique in one report. Must not: write the file (`reviewbot.ci` does) or do any other I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from reviewbot.diff import Side
from reviewbot.findings import Finding

__all__ = ["CHECK_NAME_PREFIX", "FILE_LEVEL_LINE", "codequality_report", "report_path"]

CHECK_NAME_PREFIX = "reviewbot"
FILE_LEVEL_LINE = 1  # lines.begin is required; file-level findings point at the first line
REPEAT_FINGERPRINT_HEX_CHARS = 32
CURRENT_DIR_PREFIX = "./"


def report_path(path: str) -> str:
    """A repository-relative path as GitLab wants it: no leading ``./`` or ``/``."""
    while path.startswith(CURRENT_DIR_PREFIX):
        path = path[len(CURRENT_DIR_PREFIX) :]
    return path.lstrip("/")


def codequality_report(findings: Iterable[Finding]) -> list[dict[str, Any]]:
    """One Code Quality issue per finding, in the given order, with unique fingerprints."""
    seen: dict[str, int] = {}
    issues = []
    for finding in findings:
        issues.append(_issue(finding, _unique_fingerprint(finding.fingerprint, seen)))
    return issues


def _issue(finding: Finding, fingerprint: str) -> dict[str, Any]:
    return {
        "description": _description(finding),
        "check_name": f"{CHECK_NAME_PREFIX}/{finding.category.value}",
        "fingerprint": fingerprint,
        "severity": finding.severity.value,
        "location": {
            "path": report_path(finding.path),
            "lines": {"begin": _head_line(finding)},
        },
    }


def _head_line(finding: Finding) -> int:
    """The line in the head version: the report is shown against the MR's source branch."""
    if finding.line is not None and finding.side is Side.NEW:
        return finding.line
    return FILE_LEVEL_LINE


def _description(finding: Finding) -> str:
    if finding.is_file_level:
        return f"{finding.title} (file-level)"
    if finding.side is Side.OLD:
        return f"{finding.title} (on removed line {finding.line} of {finding.old_path})"
    return finding.title


def _unique_fingerprint(fingerprint: str, seen: dict[str, int]) -> str:
    """The finding's own fingerprint; a repeat gets a stable derived one (GitLab keeps one
    issue per fingerprint, so two identical lines flagged alike would otherwise merge)."""
    count = seen.get(fingerprint, 0)
    seen[fingerprint] = count + 1
    if count == 0:
        return fingerprint
    derived = hashlib.sha256(f"{fingerprint}#{count}".encode()).hexdigest()
    return derived[:REPEAT_FINGERPRINT_HEX_CHARS]
