"""Read a GitLab SAST or secret-detection report (``gl-sast-report.json``,
``gl-secret-detection-report.json``) into analyzer findings.

The fields read (GitLab's security report schemas,
https://gitlab.com/gitlab-org/security-products/security-report-schemas, and
https://docs.gitlab.com/development/integrations/secure/#report):

* ``version`` (a schema version, ``"15.0.7"`` and the like: a major version from
  :data:`MIN_SCHEMA_MAJOR` on is read); ``scan.type`` (``sast``, ``secret_detection``, ...);
  ``scan.scanner.name``;
* ``vulnerabilities[]``: ``name``, ``message``, ``description`` (the first non-empty one is
  the message), ``severity`` (``Critical``, ``High``, ``Medium``, ``Low``, ``Info``,
  ``Unknown``), ``location.file``, ``location.start_line``, ``location.end_line``,
  ``location.commit.sha`` (secret detection: a report for another commit is not used),
  ``identifiers[0].value`` (the rule: a Semgrep rule id, a CWE), ``scanner.name``.

Severities: Critical -> critical, High -> major, Medium -> minor, Low / Info -> info, Unknown
-> minor. Category: security. A secret-detection report's findings are ``secret=True`` and
their text is masked; ``raw_source_code_extract`` (the secret itself) is never read.

Owns: the security reports' reading. Must not: read a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reviewbot.analyzer_findings import AnalyzerFinding, AnalyzerRun
from reviewbot.analyzers.report_json import (
    ReportContext,
    commit_problem,
    counted,
    field_text,
    line_number,
    problem_run,
    repository_path,
)
from reviewbot.analyzers.secrets import mask_secrets
from reviewbot.findings import Category, Severity

__all__ = ["looks_like_security_report", "read_security_data"]

MIN_SCHEMA_MAJOR = 2  # the 2.x schemas already have vulnerabilities[] with location.file
SECRET_DETECTION = "secret_detection"
SEVERITIES = {
    "critical": Severity.CRITICAL,
    "high": Severity.MAJOR,
    "medium": Severity.MINOR,
    "low": Severity.INFO,
    "info": Severity.INFO,
    "unknown": Severity.MINOR,
}


def looks_like_security_report(data: object) -> bool:
    return isinstance(data, Mapping) and "vulnerabilities" in data


def read_security_data(name: str, report: Mapping[str, Any], context: ReportContext) -> AnalyzerRun:
    """The findings of the SAST / secret-detection report ``report`` (parsed JSON)."""
    version = str(report.get("version", ""))
    major = version.split(".", 1)[0]
    if not major.isdigit() or int(major) < MIN_SCHEMA_MAJOR:
        return problem_run(name, f"not read: security report schema version {version!r} unknown")
    vulnerabilities = report.get("vulnerabilities")
    if not isinstance(vulnerabilities, list):
        return problem_run(name, 'not read: "vulnerabilities" is not a list')
    items = [v for v in vulnerabilities if isinstance(v, Mapping)]
    scan = _mapping(report.get("scan"))
    secret = scan.get("type") == SECRET_DETECTION or "secret" in name.lower()
    revisions = [
        str(_mapping(_mapping(v.get("location")).get("commit")).get("sha", "")) for v in items
    ]
    if reason := commit_problem(name, revisions, context):
        return problem_run(name, reason)
    scanner = field_text(_mapping(scan.get("scanner")), "name")
    findings = [f for v in items if (f := _finding(name, v, scanner, secret, context))]
    kind = "secret detection" if secret else "security"
    return AnalyzerRun(
        findings=tuple(findings), used=(f"GitLab {kind} report {name} ({counted(len(findings))})",)
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _finding(
    name: str, item: Mapping[str, Any], scanner: str, secret: bool, context: ReportContext
) -> AnalyzerFinding | None:
    location = _mapping(item.get("location"))
    path = field_text(location, "file")
    line = line_number(location.get("start_line"))
    if not path or line is None:
        return None  # a dependency or container finding: no line of the code
    end = line_number(location.get("end_line"))
    identifiers = [i for i in item.get("identifiers", []) or [] if isinstance(i, Mapping)]
    rule = field_text(identifiers[0], "value", "name") if identifiers else ""
    message = field_text(item, "message", "name", "description")
    tool = field_text(_mapping(item.get("scanner")), "name") or scanner or "gitlab"
    return AnalyzerFinding(
        tool=tool,
        rule=rule or field_text(item, "name") or "unnamed",
        path=repository_path(path, context),
        line=line,
        end_line=end if end is not None and end > line else None,
        severity=SEVERITIES.get(str(item.get("severity", "unknown")).lower(), Severity.MINOR),
        category=Category.SECURITY,
        message=mask_secrets(message) if secret else message,
        snippet="",
        secret=secret,
        origin=f"GitLab report {name}",
    )
