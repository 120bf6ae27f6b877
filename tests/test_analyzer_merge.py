"""The merge of analyzer findings with the model's (reviewbot.analyzer_merge): inline on added
lines, counted otherwise, one comment for one problem, secrets never echoed."""

from __future__ import annotations

from reviewbot.analyzer_findings import AnalyzerFinding, AnalyzerRun, FindingSource
from reviewbot.analyzer_merge import merge_with_model, same_problem
from reviewbot.comments import finding_body
from reviewbot.diff import FileDiff, Side, parse_git_diff
from reviewbot.findings import Category, RawFinding, Severity, anchor

DIFF = """diff --git a/app.py b/app.py
--- a/app.py
+++ b/app.py
@@ -1,3 +1,5 @@
 import os
+import sys
+TOKEN = "glpat-abcdefghijklmnopqrst"
 def main():
     return os.getcwd()
"""
FILES: dict[str, FileDiff] = {f.new_path: f for f in parse_git_diff(DIFF)}
PLANTED = "glpat-abcdefghijklmnopqrst"


def analyzer(**overrides: object) -> AnalyzerFinding:
    values: dict[str, object] = {
        "tool": "ruff",
        "rule": "F401",
        "path": "app.py",
        "line": 2,
        "end_line": None,
        "severity": Severity.MINOR,
        "category": Category.MAINTAINABILITY,
        "message": "`sys` imported but unused",
        "snippet": "import sys",
    }
    values.update(overrides)
    return AnalyzerFinding(**values)  # type: ignore[arg-type]


def secret() -> AnalyzerFinding:
    return analyzer(
        tool="gitleaks",
        rule="gitlab-pat",
        line=3,
        severity=Severity.CRITICAL,
        category=Category.SECURITY,
        message=f"GitLab token {PLANTED}",
        snippet=f'TOKEN = "{PLANTED}"',
        secret=True,
    )


def model(line: int, category: Category, suggestion: str | None = None) -> object:
    raw = RawFinding(
        path="app.py",
        line=line,
        side=Side.NEW,
        end_line=None,
        severity=Severity.MAJOR,
        category=category,
        title="Unused import",
        body="Remove it.",
        suggestion=suggestion,
        chunk_index=0,
    )
    return anchor(raw, FILES)


def test_an_analyzer_finding_on_an_added_line_is_posted_inline_naming_tool_and_rule() -> None:
    merged = merge_with_model([], AnalyzerRun(findings=(analyzer(),)), FILES)

    [finding] = merged.findings
    assert (finding.line, finding.source, finding.analyzers) == (2, "analyzer", ("ruff F401",))
    assert finding.fingerprint == analyzer().fingerprint
    assert "_Reported by `ruff F401`._" in finding_body(finding)
    assert merged.counts["ruff"].inline == 1


def test_findings_off_the_changed_lines_are_counted_not_posted() -> None:
    run = AnalyzerRun(findings=(analyzer(line=1, snippet="import os"), analyzer(path="other.py")))

    merged = merge_with_model([], run, FILES)

    assert merged.findings == []
    assert merged.counts["ruff"].summary_only == 2
    assert merged.counts["ruff"].inline == 0


def test_the_same_fingerprint_from_two_reports_collapses_to_one() -> None:
    run = AnalyzerRun(findings=(analyzer(origin="SARIF a"), analyzer(origin="SARIF b", line=2)))

    merged = merge_with_model([], run, FILES)

    assert len(merged.findings) == 1
    assert merged.collapsed == 1


def test_the_model_and_an_analyzer_on_one_problem_make_one_comment_naming_both() -> None:
    model_finding = model(2, Category.MAINTAINABILITY, suggestion="")
    merged = merge_with_model([model_finding], AnalyzerRun(findings=(analyzer(),)), FILES)

    [finding] = merged.findings
    assert finding.source == FindingSource.BOTH.value
    assert finding.title == "Unused import"
    assert finding.fingerprint == analyzer().fingerprint
    assert "_Reported by the model and by `ruff F401`._" in finding_body(finding)
    assert (merged.counts["ruff"].inline, merged.counts["ruff"].merged) == (0, 1)


def test_a_different_category_on_the_same_line_is_not_merged() -> None:
    model_finding = model(2, Category.PERFORMANCE)
    merged = merge_with_model([model_finding], AnalyzerRun(findings=(analyzer(),)), FILES)

    assert [f.source for f in merged.findings] == ["model", "analyzer"]
    assert not same_problem(merged.findings[0], merged.findings[1])


def test_a_secret_is_named_by_kind_and_line_and_its_value_never_posted() -> None:
    model_finding = model(3, Category.BUG, suggestion=f'TOKEN = "{PLANTED}x"')
    merged = merge_with_model([model_finding], AnalyzerRun(findings=(secret(),)), FILES)

    [finding] = merged.findings
    body = finding_body(finding)
    assert PLANTED not in body
    assert finding.suggestion is None
    assert finding.source == "both"
    assert finding.severity is Severity.CRITICAL
    alone = merge_with_model([], AnalyzerRun(findings=(secret(),)), FILES).findings[0]
    assert "gitlab-pat" in alone.title and alone.line == 3
    assert PLANTED not in finding_body(alone)


def test_a_finding_carried_over_with_the_analyzer_fingerprint_is_not_added_again() -> None:
    first = merge_with_model(
        [model(2, Category.MAINTAINABILITY)], AnalyzerRun(findings=(analyzer(),)), FILES
    )

    again = merge_with_model(first.findings, AnalyzerRun(findings=(analyzer(),)), FILES)

    assert again.findings == first.findings
    assert again.counts["ruff"].merged == 1
