"""The built-in analyzers on a checkout: the secrets scanner (values never kept), Ruff, Semgrep
only when configured, and each way an analyzer does not run (not installed, timed out, failed)
named as a problem, never a silent 0."""

from __future__ import annotations

import shutil
import stat
import time
from pathlib import Path

import pytest

from reviewbot.analyzer_settings import AnalyzerSettings
from reviewbot.analyzers.builtin import run_builtin_analyzers, run_ruff, run_semgrep
from reviewbot.analyzers.changes import changed_lines
from reviewbot.analyzers.collect import collect_in_checkout
from reviewbot.analyzers.secrets import MASK, mask_secrets, scan_lines, shannon_entropy
from reviewbot.config import ConfigError, Settings
from reviewbot.diff import parse_git_diff
from reviewbot.findings import Category, Severity

FIXTURES = Path(__file__).parent / "fixtures" / "analyzers"
HEAD = "0123456789abcdef0123456789abcdef01234567"
PLANTED = (
    "glpat-FAKEfakeFAKEfake0000",
    "AKIAIOSFODNN7EXAMPLE",
    "AIzaFAKEfakeFAKEfakeFAKEfakeFAKEfake012",
    "Zq8-fake-Lm2pR9zTw4Kx",
)
SLOW_TOOL_SECONDS = 30
SHORT_TIMEOUT_S = 1


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    target = tmp_path / "checkout"
    shutil.copytree(FIXTURES / "repo", target)
    return target


def executable(path: Path, script: str) -> str:
    path.write_text(script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_the_secrets_scanner_finds_each_planted_kind_and_keeps_no_value(checkout: Path) -> None:
    settings = AnalyzerSettings(analyzers=("secrets",))
    run = run_builtin_analyzers(checkout, {"config/settings.yaml": ()}, settings)
    assert {(f.rule, f.line) for f in run.findings} == {
        ("gitlab-token", 3),
        ("aws-access-key-id", 4),
        ("gcp-api-key", 5),
        ("generic-secret", 6),  # "changeme" on line 7 is too plain to be a secret
        ("private-key", 9),
    }
    assert all(f.secret and f.severity is Severity.CRITICAL for f in run.findings)
    assert all(f.category is Category.SECURITY for f in run.findings)
    for value in PLANTED:
        assert value not in repr(run)
    assert run.used == ("analyzer secrets (reviewbot-secrets, 5 findings in 1 file)",)


def test_the_secrets_scanner_reads_only_the_added_lines_when_given(checkout: Path) -> None:
    settings = AnalyzerSettings(analyzers=("secrets",))
    run = run_builtin_analyzers(checkout, {"config/settings.yaml": (4,)}, settings)
    assert [f.rule for f in run.findings] == ["aws-access-key-id"]


def test_masking_keeps_the_line_and_hides_the_value() -> None:
    line = 'token = "glpat-FAKEfakeFAKEfake0000"  # for the deploy'
    assert mask_secrets(line) == f'token = "{MASK}"  # for the deploy'
    [finding] = scan_lines("a.py", [(1, line)], origin="test")
    assert finding.snippet == mask_secrets(line)
    assert "glpat-FAKE" not in finding.message + finding.snippet


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ('password = "${DB_PASSWORD}"', False),
        ('api_key: "<your key here>"', False),
        ('secret = "aaaaaaaaaaaaaaaa"', False),
        ('API_KEY = "q9X-2mVf8Lr0TzB7wK"', True),
        ("key = 'ASIAFAKEFAKEFAKE1234'", True),
    ],
)
def test_generic_assignments_need_entropy_and_no_placeholder(line: str, found: bool) -> None:
    assert bool(scan_lines("a.py", [(1, line)], origin="test")) is found


def test_entropy_of_plain_and_random_text() -> None:
    assert shannon_entropy("") == 0.0
    assert shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("changeme") < 3.0 < shannon_entropy("q9X-2mVf8Lr0TzB7wK")


def test_ruff_finds_the_lint_errors_of_the_changed_python_file(checkout: Path) -> None:
    run = run_ruff(checkout, ["app.py", "deploy.sh"], timeout_s=60)
    assert run.problems == ()
    rules = {(f.rule, f.line): f for f in run.findings}
    assert {("F401", 1), ("F401", 3), ("F821", 10)} <= set(rules)
    undefined = rules[("F821", 10)]
    assert (undefined.severity, undefined.category) == (Severity.MAJOR, Category.BUG)
    assert undefined.snippet == "return reslt"
    assert rules[("F401", 1)].category is Category.STYLE
    assert run.used[0].startswith("analyzer ruff (") and "in 1 file)" in run.used[0]


def test_ruff_fingerprints_survive_lines_added_above(checkout: Path) -> None:
    before = run_ruff(checkout, ["app.py"], timeout_s=60)
    app = checkout / "app.py"
    app.write_text('"""A docstring."""\n\n' + app.read_text())
    after = run_ruff(checkout, ["app.py"], timeout_s=60)
    assert {f.fingerprint for f in before.findings} == {f.fingerprint for f in after.findings}
    assert {f.line + 2 for f in before.findings} == {f.line for f in after.findings}


def test_ruff_not_installed_is_named(checkout: Path) -> None:
    run = run_ruff(checkout, ["app.py"], timeout_s=60, executable=str(checkout / "no-ruff"))
    [problem] = run.problems
    assert problem.sentence().startswith("analyzer ruff: did not run: could not start")
    assert run.findings == () and run.used == ()


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for its reaper is not)."""
    status = Path(f"/proc/{pid}/status")
    try:
        return "State:\tZ" not in status.read_text()
    except FileNotFoundError:
        return False


def test_a_slow_analyzer_is_stopped_with_its_children_and_named(
    checkout: Path, tmp_path: Path
) -> None:
    child_pid = tmp_path / "child.pid"
    slow = executable(
        tmp_path / "slow-ruff",
        f"#!/bin/sh\nsleep {SLOW_TOOL_SECONDS} &\necho $! > {child_pid}\nwait\n",
    )
    started = time.monotonic()
    run = run_ruff(checkout, ["app.py"], timeout_s=SHORT_TIMEOUT_S, executable=slow)
    assert time.monotonic() - started < SLOW_TOOL_SECONDS / 2
    assert [p.sentence() for p in run.problems] == [
        f"analyzer ruff: did not run: timed out after {SHORT_TIMEOUT_S} s"
    ]
    assert run.findings == () and run.used == ()
    pid = int(child_pid.read_text())
    deadline = time.monotonic() + SHORT_TIMEOUT_S * 5
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(pid)  # the whole process group was killed, not only the tool


def test_a_failing_analyzer_is_named_with_its_error(checkout: Path, tmp_path: Path) -> None:
    broken = executable(tmp_path / "broken-ruff", "#!/bin/sh\necho 'bad config' >&2\nexit 2\n")
    [problem] = run_ruff(checkout, ["app.py"], timeout_s=60, executable=broken).problems
    assert problem.reason == "did not run: exit code 2: bad config"
    garbled = executable(tmp_path / "garbled-ruff", "#!/bin/sh\necho 'not json'\nexit 1\n")
    [problem] = run_ruff(checkout, ["app.py"], timeout_s=60, executable=garbled).problems
    assert "its output is not JSON" in problem.reason


def test_ruff_with_no_python_file_changed_says_so(checkout: Path) -> None:
    run = run_ruff(checkout, ["deploy.sh"], timeout_s=60)
    assert run.used == ("analyzer ruff (no Python file changed)",) and run.problems == ()


def test_semgrep_runs_only_with_the_teams_config(checkout: Path, tmp_path: Path) -> None:
    without = run_builtin_analyzers(
        checkout, {"app.py": ()}, AnalyzerSettings(analyzers=("semgrep",))
    )
    assert without == type(without)()  # not configured: not run, nothing to say
    sarif = (FIXTURES / "semgrep.sarif").read_text()
    fake = executable(tmp_path / "semgrep", f"#!/bin/sh\ncat <<'EOF'\n{sarif}\nEOF\n")
    run = run_semgrep(checkout, ["app.py"], "rules/", timeout_s=60, executable=fake)
    assert [f.rule.rsplit(".", 1)[-1] for f in run.findings] == [
        "subprocess-shell-true",
        "unused-total",
    ]
    assert {f.origin for f in run.findings} == {"built-in semgrep"}
    missing = run_semgrep(checkout, ["app.py"], "rules/", 60, executable=str(tmp_path / "none"))
    assert missing.problems[0].name == "analyzer semgrep"


def test_collect_in_checkout_reads_reports_and_runs_the_built_ins(checkout: Path) -> None:
    for name in ("semgrep.sarif", "gl-sast-report.json"):
        shutil.copy(FIXTURES / name, checkout / name)
    settings = AnalyzerSettings(
        analyzers=("ruff", "secrets"), analyzer_reports=("gl-sast-report.json",)
    )
    changed = {"app.py": (10, 14), "config/settings.yaml": (3,)}
    run = collect_in_checkout(
        checkout, changed, HEAD, settings, [Path("semgrep.sarif"), checkout / "missing.sarif"]
    )
    places = {(f.tool, f.path, f.line) for f in run.findings}
    assert ("Semgrep OSS", "app.py", 14) in places
    assert ("Semgrep", "app.py", 14) in places
    assert ("ruff", "app.py", 10) in places
    assert ("reviewbot-secrets", "config/settings.yaml", 3) in places
    assert all(line in changed[path] for _, path, line in places)
    assert [p.name for p in run.problems] == ["report missing.sarif"]
    assert any("outside the MR's changed lines left out" in u for u in run.used)


def test_changed_lines_are_the_added_lines_of_the_head() -> None:
    diff = parse_git_diff(
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,3 @@\n x\n-y\n+z\n+w\n"
        "diff --git a/gone.py b/gone.py\ndeleted file mode 100644\n--- a/gone.py\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-q\n"
    )
    assert changed_lines(diff) == {"a.py": (2, 3)}


def test_the_analyzer_settings_are_checked() -> None:
    assert Settings().analyzers == ("ruff", "secrets", "semgrep")
    with pytest.raises(ConfigError, match="analyzers takes"):
        Settings(analyzers=("eslint",))
    with pytest.raises(ConfigError, match="JOB:PATH"):
        Settings(analyzer_report_jobs=("no-path",))
    with pytest.raises(ConfigError, match="analyzer_timeout_s"):
        Settings(analyzer_timeout_s=0)
    jobs = Settings(analyzer_report_jobs=("sast:reports/gl-sast-report.json",)).report_jobs()
    assert [(j.job, j.path) for j in jobs] == [("sast", "reports/gl-sast-report.json")]
