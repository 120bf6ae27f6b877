"""The readers of the pipeline's reports (reviewbot.analyzers): SARIF 2.1.0 (Semgrep's,
gitleaks'), GitLab SAST / secret detection, Code Quality, and every way a report is unusable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewbot.analyzer_findings import AnalyzerRun
from reviewbot.analyzers.collect import read_report_file, within_changes
from reviewbot.analyzers.report_json import MAX_REPORT_BYTES, ReportContext, repository_path
from reviewbot.analyzers.reports import read_report
from reviewbot.findings import Category, Severity
from tests.hypothesis_profiles import examples

FIXTURES = Path(__file__).parent / "fixtures" / "analyzers"
HEAD = "0123456789abcdef0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba9876543210fedcba98"
CONTEXT = ReportContext(commits=frozenset({HEAD}), roots=("/builds/group/app",))
PLANTED_TOKEN = "glpat-FAKEfakeFAKEfake0000"


def read(name: str, context: ReportContext = CONTEXT) -> AnalyzerRun:
    return read_report(name, (FIXTURES / name).read_bytes(), context)


def test_semgrep_sarif_gives_rule_level_place_and_snippet() -> None:
    run = read("semgrep.sarif")
    assert run.problems == ()
    assert run.used == ("SARIF semgrep.sarif (2 findings)",)
    shell, unused = run.findings
    assert shell.tool == "Semgrep OSS"
    assert shell.rule.endswith("subprocess-shell-true")
    assert (shell.path, shell.line, shell.end_line) == ("app.py", 14, None)
    assert shell.severity is Severity.MAJOR  # level from the rule's defaultConfiguration
    assert shell.category is Category.SECURITY  # tagged security / CWE
    assert shell.snippet == "return subprocess.call(command, shell=True)"
    assert "shell=True" in shell.message
    # the second result names its rule by ruleIndex, its path with ./
    assert (unused.rule, unused.path, unused.line) == (
        "python.lang.best-practice.unused-total",
        "app.py",
        6,
    )
    assert (unused.severity, unused.category) == (Severity.INFO, Category.STYLE)


def test_gitleaks_sarif_is_a_masked_secret() -> None:
    run = read("gitleaks.sarif")
    [finding] = run.findings
    assert finding.secret
    assert (finding.severity, finding.category) == (Severity.CRITICAL, Category.SECURITY)
    assert finding.path == "config/settings.yaml"  # file:// URI under the CI checkout root
    assert finding.snippet == ""
    assert PLANTED_TOKEN not in repr(run)


def test_gitlab_sast_report_maps_severity_and_skips_places_outside_the_code() -> None:
    run = read("gl-sast-report.json")
    [finding] = run.findings  # the dependency finding has no file and line
    assert (finding.tool, finding.rule) == ("Semgrep", "bandit.B602")
    assert (finding.path, finding.line) == ("app.py", 14)
    assert (finding.severity, finding.category) == (Severity.MAJOR, Category.SECURITY)
    assert run.used == ("GitLab security report gl-sast-report.json (1 finding)",)


def test_gitlab_secret_detection_report_masks_and_checks_the_commit() -> None:
    run = read("gl-secret-detection-report.json")
    [finding] = run.findings
    assert finding.secret and finding.severity is Severity.CRITICAL
    assert (finding.path, finding.line) == ("config/settings.yaml", 3)
    assert PLANTED_TOKEN not in repr(run)  # raw_source_code_extract is never read
    other = read("gl-secret-detection-other-commit.json")
    assert other.findings == () and other.used == ()
    [problem] = other.problems
    assert "for commit fedcba98" in problem.sentence()


def test_code_quality_report_skips_reviewbots_own_issues() -> None:
    run = read("gl-code-quality-report.json")
    assert [(f.tool, f.rule, f.line) for f in run.findings] == [
        ("ruff", "F401", 1),
        ("codequality", "F821", 10),  # positions.begin.line
    ]
    assert run.findings[1].category is Category.BUG  # "Bug Risk"
    assert run.findings[1].severity is Severity.MAJOR
    assert "1 of reviewbot's own left out" in run.used[0]


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("malformed.json", "not JSON"),
        ("wrong-shape.json", "neither SARIF 2.1.0"),
        ("sarif-version-1.sarif", "SARIF version '1.0.0'"),
        ("semgrep-other-commit.sarif", "for commit fedcba98"),
    ],
)
def test_an_unusable_report_is_a_problem_never_a_silent_zero(name: str, reason: str) -> None:
    run = read(name)
    assert run.findings == () and run.used == ()
    [problem] = run.problems
    assert problem.name == name and reason in problem.reason


def test_a_report_with_no_findings_is_used() -> None:
    run = read("empty.sarif")
    assert run.used == ("SARIF empty.sarif (0 findings)",) and run.problems == ()


def test_a_report_file_missing_unreadable_or_too_large_is_a_problem(tmp_path: Path) -> None:
    missing = read_report_file(tmp_path / "gl-sast-report.json", CONTEXT)
    assert [p.sentence() for p in missing.problems] == [
        f"report gl-sast-report.json: not found at {tmp_path / 'gl-sast-report.json'}"
    ]
    folder = read_report_file(tmp_path, CONTEXT)
    assert "cannot be read" in folder.problems[0].reason
    large = tmp_path / "large.json"
    large.write_bytes(b" " * (MAX_REPORT_BYTES + 1))
    assert "larger than 20 MiB" in read_report_file(large, CONTEXT).problems[0].reason
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00")
    assert "not UTF-8" in read_report_file(binary, CONTEXT).problems[0].reason


def test_an_all_zero_commit_names_none() -> None:
    data = json.loads((FIXTURES / "gl-secret-detection-other-commit.json").read_text())
    data["vulnerabilities"][0]["location"]["commit"]["sha"] = "0000000"
    run = read_report("secrets.json", json.dumps(data).encode(), CONTEXT)
    assert len(run.findings) == 1 and run.problems == ()


def test_a_report_for_the_pipelines_merge_commit_is_used() -> None:
    data = (FIXTURES / "semgrep-other-commit.sarif").read_bytes()
    both = ReportContext(commits=frozenset({HEAD, OTHER}))
    assert len(read_report("semgrep-other-commit.sarif", data, both).findings) == 2


@pytest.mark.parametrize(
    ("location", "path"),
    [
        ("src/app.py", "src/app.py"),
        ("./src/app.py", "src/app.py"),
        ("file:///builds/group/app/src/my%20app.py", "src/my app.py"),
        ("/builds/group/app/src/app.py", "src/app.py"),
        ("src%2Fapp.py", "src/app.py"),
    ],
)
def test_report_locations_become_repository_paths(location: str, path: str) -> None:
    assert repository_path(location, CONTEXT) == path


def shifted(name: str, by: int) -> bytes:
    """The report with every line number moved down by ``by`` (the code above it grew)."""
    text = (FIXTURES / name).read_text()
    data = json.loads(text)

    def move(node: object) -> object:
        if isinstance(node, dict):
            return {
                k: v + by
                if k in {"startLine", "endLine", "start_line", "end_line", "begin", "line"}
                and isinstance(v, int)
                else move(v)
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [move(v) for v in node]
        return node

    return json.dumps(move(data)).encode()


@pytest.mark.parametrize(
    "name",
    ["semgrep.sarif", "gitleaks.sarif", "gl-sast-report.json", "gl-code-quality-report.json"],
)
def test_fingerprints_do_not_depend_on_line_numbers(name: str) -> None:
    before = read(name)
    after = read_report(name, shifted(name, 7), CONTEXT)
    assert [f.line + 7 for f in before.findings] == [f.line for f in after.findings]
    assert [f.fingerprint for f in before.findings] == [f.fingerprint for f in after.findings]
    assert len({f.fingerprint for f in before.findings}) == len(before.findings)


def test_findings_outside_the_changed_lines_are_counted_not_dropped_silently() -> None:
    run = read("semgrep.sarif")
    kept = within_changes(run, {"app.py": (14,)})
    assert [f.line for f in kept.findings] == [14]
    assert kept.used[-1] == "1 analyzer finding outside the MR's changed lines left out"
    assert within_changes(run, {"app.py": ()}).findings == run.findings  # the whole file


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "version",
                    "runs",
                    "results",
                    "vulnerabilities",
                    "location",
                    "locations",
                    "check_name",
                    "lines",
                    "begin",
                    "file",
                    "start_line",
                    "ruleId",
                    "region",
                    "startLine",
                    "physicalLocation",
                    "artifactLocation",
                    "uri",
                    "tool",
                    "driver",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=examples(200), deadline=None)
@given(JSON_VALUES, st.sampled_from(["2.1.0", "15.0.7", None]))
def test_a_reader_never_raises_and_always_says_something(data: object, version: object) -> None:
    if isinstance(data, dict) and version is not None:
        data = {**data, "version": version}
    run = read_report("any.json", json.dumps(data).encode(), CONTEXT)
    assert run.used or run.problems  # never a silent 0
    for finding in run.findings:
        assert finding.line >= 1 and finding.path and not finding.path.startswith("/")
