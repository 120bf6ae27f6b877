"""Read a SARIF 2.1.0 log (Semgrep's, gitleaks', any tool's) into analyzer findings.

The fields read (OASIS SARIF 2.1.0,
https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html):

* ``version`` must be ``"2.1.0"`` (section 3.13.2); ``runs[]`` (3.13.4), each with
  ``tool.driver.name`` (3.19.8) and ``tool.driver.rules[]`` (3.19.23);
* a result's rule: ``ruleId`` (3.27.5) or ``rule.id`` (3.27.7), else the rule at
  ``ruleIndex``; its level: ``level`` (3.27.10), else the rule's
  ``defaultConfiguration.level`` (3.49.14), else ``warning`` (the spec's default);
* ``message.text`` (3.11.8), else the rule's ``shortDescription.text``;
* ``locations[0].physicalLocation.artifactLocation.uri`` (3.4.3; relative to ``uriBaseId``,
  which is dropped: the paths are the checkout's), ``region.startLine`` / ``endLine`` /
  ``snippet.text`` (3.30.5, 3.30.7, 3.30.13);
* ``versionControlProvenance[].revisionId`` (3.14.14, 3.23.5): a report for another commit is
  not used.

Levels: ``error`` -> major, ``warning`` -> minor, ``note`` / ``none`` -> info. Category: a
secret scanner's result (gitleaks, or any tool named ``*secret*``) is security and critical,
its message masked and its snippet (the secret itself) dropped; a rule tagged ``security`` or
with a ``CWE`` tag (``properties.tags``, Semgrep's and CodeQL's habit) is security; another
``error`` is bug; the rest style.

Owns: the SARIF reading. Must not: read a file.
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

__all__ = ["SARIF_VERSION", "looks_like_sarif", "read_sarif_data"]

SARIF_VERSION = "2.1.0"
DEFAULT_LEVEL = "warning"  # SARIF 2.1.0 section 3.27.10: a result without a level is a warning
LEVEL_SEVERITY = {
    "error": Severity.MAJOR,
    "warning": Severity.MINOR,
    "note": Severity.INFO,
    "none": Severity.INFO,
}
SECRET_TOOL_WORDS = ("gitleaks", "secret", "trufflehog")
SECURITY_TAGS = ("security",)
CWE_TAG_PREFIX = "cwe"


def looks_like_sarif(data: object) -> bool:
    return isinstance(data, Mapping) and "runs" in data and "version" in data


def read_sarif_data(name: str, log: Mapping[str, Any], context: ReportContext) -> AnalyzerRun:
    """The findings of the SARIF log ``log`` (parsed JSON) named ``name``: a problem when it
    is no SARIF 2.1.0 log or for another commit; used, with 0 findings, when it has none."""
    version = log.get("version")
    if version != SARIF_VERSION:
        return problem_run(name, f"not read: SARIF version {version!r}, not {SARIF_VERSION}")
    runs = log.get("runs")
    if not isinstance(runs, list) or not all(isinstance(r, Mapping) for r in runs):
        return problem_run(name, 'not read: "runs" is not a list of runs')
    revisions = [
        str(p.get("revisionId", ""))
        for run in runs
        for p in _objects(run.get("versionControlProvenance"))
    ]
    if reason := commit_problem(name, revisions, context):
        return problem_run(name, reason)
    findings: list[AnalyzerFinding] = []
    for run in runs:
        findings += _run_findings(name, run, context)
    return AnalyzerRun(findings=tuple(findings), used=(f"SARIF {name} ({counted(len(findings))})",))


def _objects(value: object) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _run_findings(
    name: str, run: Mapping[str, Any], context: ReportContext
) -> list[AnalyzerFinding]:
    driver = _mapping(_mapping(run.get("tool")).get("driver"))
    tool = field_text(driver, "name") or "sarif"
    rules = _objects(driver.get("rules"))
    by_id = {str(r.get("id")): r for r in rules if r.get("id")}
    secret = any(word in tool.lower() for word in SECRET_TOOL_WORDS)
    found = []
    for result in _objects(run.get("results")):
        finding = _finding(name, tool, secret, result, rules, by_id, context)
        if finding is not None:
            found.append(finding)
    return found


def _result_rule(
    result: Mapping[str, Any],
    rules: list[Mapping[str, Any]],
    by_id: Mapping[str, Mapping[str, Any]],
) -> tuple[str, Mapping[str, Any]]:
    rule_id = field_text(result, "ruleId") or field_text(_mapping(result.get("rule")), "id")
    index = result.get("ruleIndex", _mapping(result.get("rule")).get("index"))
    if rule_id in by_id:
        return rule_id, by_id[rule_id]
    if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(rules):
        rule = rules[index]
        return rule_id or str(rule.get("id", "")), rule
    return rule_id, {}


def _finding(
    name: str,
    tool: str,
    secret: bool,
    result: Mapping[str, Any],
    rules: list[Mapping[str, Any]],
    by_id: Mapping[str, Mapping[str, Any]],
    context: ReportContext,
) -> AnalyzerFinding | None:
    locations = _objects(result.get("locations"))
    physical = _mapping(locations[0].get("physicalLocation")) if locations else {}
    uri = field_text(_mapping(physical.get("artifactLocation")), "uri")
    region = _mapping(physical.get("region"))
    line = line_number(region.get("startLine"))
    if not uri or line is None:
        return None  # a result with no place in a file (a run-level notification)
    rule_id, rule = _result_rule(result, rules, by_id)
    level = str(
        result.get("level")
        or _mapping(rule.get("defaultConfiguration")).get("level")
        or DEFAULT_LEVEL
    )
    message = field_text(_mapping(result.get("message")), "text") or field_text(
        _mapping(rule.get("shortDescription")), "text"
    )
    snippet = field_text(_mapping(region.get("snippet")), "text")
    end = line_number(region.get("endLine"))
    severity, category = _judged(level, rule, secret)
    return AnalyzerFinding(
        tool=tool,
        rule=rule_id or "unnamed",
        path=repository_path(uri, context),
        line=line,
        end_line=end if end is not None and end > line else None,
        severity=severity,
        category=category,
        message=mask_secrets(message) if secret else message,
        snippet="" if secret else snippet,  # a secret scanner's snippet is the secret
        secret=secret,
        origin=f"SARIF {name}",
    )


def _judged(level: str, rule: Mapping[str, Any], secret: bool) -> tuple[Severity, Category]:
    if secret:
        return Severity.CRITICAL, Category.SECURITY
    severity = LEVEL_SEVERITY.get(level, Severity.MINOR)
    tags = [str(t).lower() for t in _mapping(rule.get("properties")).get("tags", []) or []]
    if any(t in SECURITY_TAGS or t.startswith(CWE_TAG_PREFIX) for t in tags):
        return severity, Category.SECURITY
    return severity, Category.BUG if level == "error" else Category.STYLE
