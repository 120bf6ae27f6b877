"""The analyzers' digest a chunk's prompt is to carry (reviewbot.analyzer_digest)."""

from __future__ import annotations

from reviewbot.analyzer_digest import DIGEST_HEADING, analyzer_digest
from reviewbot.analyzer_findings import AnalyzerFinding
from reviewbot.findings import Category, Severity

PLANTED = "glpat-abcdefghijklmnopqrst"


def words(text: str) -> int:
    return len(text.split())


def finding(line: int, path: str = "app.py", **overrides: object) -> AnalyzerFinding:
    values: dict[str, object] = {
        "tool": "ruff",
        "rule": "F401",
        "path": path,
        "line": line,
        "end_line": None,
        "severity": Severity.MINOR,
        "category": Category.MAINTAINABILITY,
        "message": "unused import",
    }
    values.update(overrides)
    return AnalyzerFinding(**values)  # type: ignore[arg-type]


def test_the_digest_names_tool_rule_and_line_of_the_chunks_files_only() -> None:
    text = analyzer_digest([finding(3), finding(1, path="other.py")], {"app.py"}, words)

    assert text == f"{DIGEST_HEADING}\n- ruff F401 app.py:3: unused import"


def test_a_secret_is_named_by_kind_never_by_value() -> None:
    secret = finding(2, tool="gitleaks", rule="gitlab-pat", message=PLANTED, secret=True)

    text = analyzer_digest([secret], {"app.py"}, words)

    assert PLANTED not in text and "gitleaks gitlab-pat app.py:2" in text


def test_the_digest_stays_within_its_budget_and_says_what_it_left_out() -> None:
    many = [finding(line) for line in range(1, 50)]

    text = analyzer_digest(many, {"app.py"}, words, max_tokens=40)

    assert words(text) <= 40
    assert text.splitlines()[-1].startswith("- … and ")
    kept = len(text.splitlines()) - 2
    assert text.splitlines()[-1] == f"- … and {49 - kept} more"


def test_no_findings_on_the_chunk_is_no_digest() -> None:
    assert analyzer_digest([finding(1, path="other.py")], {"app.py"}, words) == ""
