"""Named checks: their form in the rules file, their deterministic verdicts and the commit status
they make (reviewbot.rules.checks, reviewbot.rules.check_verdicts; docs/checks.md)."""

from __future__ import annotations

import dataclasses

import pytest

from reviewbot.analyzer_findings import AnalyzerFinding, AnalyzerProblem, AnalyzerRun
from reviewbot.config import ConfigError, Settings
from reviewbot.diff import Side, parse_git_diff
from reviewbot.diffview import FileView, render_file
from reviewbot.findings import AnchorKind, Category, Finding, Severity
from reviewbot.model import ModelAnswer, ToolCallText
from reviewbot.rules.check_questions import (
    check_messages,
    limited_by,
    read_check_verdict,
    shown_diff,
)
from reviewbot.rules.check_verdicts import (
    MAX_DESCRIPTION_CHARS,
    CheckEvidence,
    CheckOutcome,
    CheckVerdict,
    CommitState,
    commit_state,
    judge,
    judge_all,
)
from reviewbot.rules.checks import Check, CheckKind
from reviewbot.rules.ruleset import RuleSource, RuleTexts, merge_rules, parse_yaml_rules
from reviewbot.tokens import ByteEstimateCounter
from reviewbot.unreviewed import UnreviewedPart

RULES = """
rules:
  - name: payments-clean
    paths: ["src/payments/**"]
    check:
      no_findings: {min_severity: major}
  - name: no-secrets
    check: {no_secrets: true}
  - name: ruff-clean
    check: {no_new_analyzer_findings: ruff}
  - name: reversible
    paths: ["migrations/**"]
    check:
      ask: Does every new migration define a downgrade?
  - name: prose rule
    instructions: Prefer small functions.
"""
FAKE_TOKEN = "glpat-" + "a" * 20  # a GitLab token's shape (reviewbot.redaction)


def _checks(text: str = RULES) -> tuple[tuple[Check, ...], tuple[str, ...]]:
    rule_set = merge_rules(RuleTexts(repo_yaml=text))
    return rule_set.checks, rule_set.problems


def _diff(path: str, added: list[str]) -> str:
    body = "".join(f"+{line}\n" for line in added)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(added)} @@\n{body}"
    )


def _files(*diffs: str):
    return parse_git_diff("".join(diffs))


def _finding(path: str, severity: Severity, *, masked: bool = False) -> Finding:
    return Finding(
        path=path,
        old_path=path,
        side=Side.NEW,
        line=1,
        end_line=None,
        severity=severity,
        category=Category.BUG,
        title="Wrong total",
        body="b",
        suggestion=None,
        anchor=AnchorKind.EXACT,
        anchor_note="",
        line_text="x",
        fingerprint=f"fp-{path}-{severity}",
        chunk_index=0,
        reported_line=1,
        reported_side=Side.NEW,
        masked=masked,
    )


def _check(name: str, checks: tuple[Check, ...]) -> Check:
    return next(check for check in checks if check.name == name)


def test_the_rules_file_s_checks_are_checks_and_its_rules_stay_rules() -> None:
    checks, problems = _checks()
    assert problems == ()
    assert [c.name for c in checks] == ["payments-clean", "no-secrets", "ruff-clean", "reversible"]
    assert _check("payments-clean", checks).min_severity is Severity.MAJOR
    assert _check("payments-clean", checks).paths == ("src/payments/**",)
    assert _check("ruff-clean", checks).tool == "ruff"
    assert _check("reversible", checks).model_judged
    rules, _ = parse_yaml_rules(RULES, "r.yaml", RuleSource.REPOSITORY)
    assert [rule.name for rule in rules] == ["prose rule"]  # a check is not a prompt rule


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("{name: a, check: {no_finding: true}}", "check `a` ignored: `check.no_finding` is not a"),
        ("{name: a, check: {no_secrets: yes please}}", "`check.no_secrets` must be `true`"),
        ("{name: a, check: {no_findings: {min_severity: huge}}}", "`min_severity` must be one"),
        ("{name: a, check: {no_findings: {severity: major}}}", "has unknown key `severity`"),
        ("{name: a, check: {ask: ''}}", "`check.ask` must be a question"),
        ("{name: a, check: {ask: q, no_secrets: true}}", "exactly one of"),
        ("{name: a, paths: 7, check: {no_secrets: true}}", "`paths` must be a list of globs"),
        ("{check: {no_secrets: true}}", "check 1 ignored: `name` is missing"),
        ("{name: a, instructions: x, check: {no_secrets: true}}", "unknown key `instructions`"),
        ("{name: a, check: {no_new_analyzer_findings: 3}}", "must be an analyzer's name"),
    ],
)
def test_a_bad_check_is_a_problem_naming_the_check_and_its_field(entry: str, problem: str) -> None:
    checks, problems = _checks(
        f"rules:\n  - {entry}\n  - {{name: ok, check: {{no_secrets: true}}}}\n"
    )
    assert [c.name for c in checks] == ["ok"]  # the good check still applies
    assert len(problems) == 1
    assert problems[0].startswith(".reviewbot/rules.yaml: check")
    assert problem in problems[0]


def test_a_later_source_s_check_of_the_same_name_wins() -> None:
    instance = "rules:\n  - {name: c, check: {no_secrets: true}}\n"
    repo = "rules:\n  - {name: c, check: {no_findings: true}}\n"
    rule_set = merge_rules(RuleTexts(instance=instance, repo_yaml=repo))
    assert [(c.name, c.kind) for c in rule_set.checks] == [("c", CheckKind.NO_FINDINGS)]


def test_checks_in_reviewbot_toml() -> None:
    toml = '[[rules]]\nname = "t"\ncheck = { no_findings = { min_severity = "critical" } }\n'
    rule_set = merge_rules(RuleTexts(repo_toml=toml))
    assert rule_set.checks[0].min_severity is Severity.CRITICAL
    assert rule_set.rules == ()


def test_no_findings_fails_on_a_severe_finding_in_its_paths_only() -> None:
    check = _check("payments-clean", _checks()[0])
    files = _files(_diff("src/payments/pay.py", ["x = 1"]), _diff("src/ui/app.py", ["y = 2"]))
    minor_there = [_finding("src/payments/pay.py", Severity.MINOR)]
    major_elsewhere = [_finding("src/ui/app.py", Severity.CRITICAL)]
    assert judge(check, CheckEvidence(files, minor_there + major_elsewhere)).outcome is (
        CheckOutcome.PASS
    )
    failing = judge(
        check, CheckEvidence(files, [_finding("src/payments/pay.py", Severity.BLOCKER)])
    )
    assert failing.outcome is CheckOutcome.FAIL
    assert "src/payments/pay.py:1 blocker Wrong total" in failing.reason


def test_no_findings_cannot_tell_when_a_file_of_its_paths_was_not_reviewed() -> None:
    check = _check("payments-clean", _checks()[0])
    files = _files(_diff("src/payments/pay.py", ["x = 1"]))
    lost = UnreviewedPart(0, (("src/payments/pay.py", 1),), "model down")
    verdict = judge(check, CheckEvidence(files, [], [lost]))
    assert verdict.outcome is CheckOutcome.CANNOT_TELL
    assert "src/payments/pay.py (chunk 1 not reviewed)" in verdict.reason
    too_large = [dataclasses.replace(files[0], too_large=True)]
    assert judge(check, CheckEvidence(too_large, [])).outcome is CheckOutcome.CANNOT_TELL


def test_no_secrets_fails_on_an_added_token_and_never_names_it() -> None:
    check = _check("no-secrets", _checks()[0])
    clean = _files(_diff("app.py", ["token = read_env()"]))
    assert judge(check, CheckEvidence(clean, [])).outcome is CheckOutcome.PASS
    leaked = _files(_diff("app.py", ["x = 1", f"token = '{FAKE_TOKEN}'"]))
    verdict = judge(check, CheckEvidence(leaked, []))
    assert verdict.outcome is CheckOutcome.FAIL
    assert "app.py:2" in verdict.reason
    assert FAKE_TOKEN not in verdict.reason
    masked = [_finding("app.py", Severity.INFO, masked=True)]
    assert judge(check, CheckEvidence(clean, masked)).outcome is CheckOutcome.FAIL


def test_an_analyzer_check_cannot_tell_without_that_analyzer_s_results() -> None:
    check = _check("ruff-clean", _checks()[0])
    files = _files(_diff("app.py", ["import os"]))
    assert judge(check, CheckEvidence(files, [])).outcome is CheckOutcome.CANNOT_TELL
    other = AnalyzerRun(used=("built-in semgrep",))
    assert judge(check, CheckEvidence(files, [], (), other)).outcome is CheckOutcome.CANNOT_TELL
    broken = AnalyzerRun(used=(), problems=(AnalyzerProblem("ruff", "timed out after 30 s"),))
    verdict = judge(check, CheckEvidence(files, [], (), broken))
    assert (verdict.outcome, verdict.reason) == (
        CheckOutcome.CANNOT_TELL,
        "ruff: timed out after 30 s",
    )
    ran_clean = AnalyzerRun(used=("built-in ruff",))
    assert judge(check, CheckEvidence(files, [], (), ran_clean)).outcome is CheckOutcome.PASS
    found = AnalyzerFinding(
        "ruff", "F401", "app.py", 1, None, Severity.MINOR, Category.STYLE, "unused"
    )
    ran_found = AnalyzerRun(findings=(found,), used=("built-in ruff",))
    verdict = judge(check, CheckEvidence(files, [], (), ran_found))
    assert verdict.outcome is CheckOutcome.FAIL and "app.py:1 F401" in verdict.reason


def test_a_model_judged_check_not_asked_cannot_tell() -> None:
    checks = _checks()[0]
    files = _files(_diff("migrations/0001.py", ["op.create_table('x')"]))
    verdicts = judge_all(checks, CheckEvidence(files, []), {})
    assert verdicts[3] == CheckVerdict(
        "reversible", CheckOutcome.CANNOT_TELL, "the model was not asked"
    )
    asked = {"reversible": CheckVerdict("reversible", CheckOutcome.PASS, "downgrade() drops it")}
    assert judge_all(checks, CheckEvidence(files, []), asked)[3].outcome is CheckOutcome.PASS


def _verdicts(*outcomes: CheckOutcome) -> list[CheckVerdict]:
    return [CheckVerdict(f"c{n}", outcome, "why") for n, outcome in enumerate(outcomes)]


def test_the_status_is_success_only_for_a_complete_review_whose_checks_all_passed() -> None:
    passed = _verdicts(CheckOutcome.PASS, CheckOutcome.PASS)
    assert commit_state(passed, 4, 0).state is CommitState.SUCCESS
    incomplete = commit_state(passed, 4, 1)
    assert incomplete.state is CommitState.FAILED
    assert incomplete.description == "review incomplete: 1 of 4 chunks not reviewed"
    failed = commit_state(_verdicts(CheckOutcome.PASS, CheckOutcome.FAIL), 4, 0)
    assert (failed.state, failed.description) == (CommitState.FAILED, "1 of 2 checks failed: c1")
    unknown = commit_state(_verdicts(CheckOutcome.CANNOT_TELL), 4, 0)
    assert unknown.state is CommitState.FAILED and "cannot tell: c0" in unknown.description
    many = commit_state(
        [CheckVerdict("n" * 90 + str(i), CheckOutcome.FAIL, "") for i in range(5)], 1, 0
    )
    assert len(many.description) <= MAX_DESCRIPTION_CHARS


def _answer(*calls: tuple[str, str]) -> ModelAnswer:
    return ModelAnswer(tool_calls=[ToolCallText(name, arguments) for name, arguments in calls])


def test_a_check_verdict_is_read_from_the_first_readable_call_else_cannot_tell() -> None:
    good = '{"verdict": "fail", "reason": "  downgrade()\\n is missing "}'
    read = read_check_verdict(_answer(("check_verdict", "{broken"), ("check_verdict", good)), "c")
    assert read == CheckVerdict("c", CheckOutcome.FAIL, "the model: downgrade() is missing")
    for answer in (
        None,
        _answer(),
        _answer(("check_verdict", '{"verdict": "maybe", "reason": "r"}')),
        _answer(("report_finding", good)),
    ):
        assert read_check_verdict(answer, "c").outcome is CheckOutcome.CANNOT_TELL


def test_a_check_shown_part_of_its_diff_does_not_pass() -> None:
    files = _files(_diff("a.py", ["x = 1"]), _diff("b.py", ["y = 2"] * 200))
    counter = ByteEstimateCounter()
    first = counter.count(render_file(FileView(files[0], files[0].hunks)))
    shown = shown_diff(files, counter, first)
    assert (shown.paths, shown.not_shown) == (("a.py",), ("b.py",))
    passed = CheckVerdict("c", CheckOutcome.PASS, "the model: fine")
    limited = limited_by(passed, shown)
    assert (
        limited.outcome is CheckOutcome.CANNOT_TELL and "not shown, no room: b.py" in limited.reason
    )
    failed = CheckVerdict("c", CheckOutcome.FAIL, "the model: no")
    assert limited_by(failed, shown) == failed
    messages = check_messages(_check("reversible", _checks()[0]), "Title", shown)
    assert "Not shown (no room): b.py" in messages[1]["content"]


@pytest.mark.parametrize("name", ["", "   ", "x" * 256])
def test_a_commit_status_name_must_be_short_text(name: str) -> None:
    with pytest.raises(ConfigError, match="commit_status_name must be text of 1 to 255"):
        Settings(commit_status_name=name)
    assert Settings(commit_status_name="review / checks").commit_status_name == "review / checks"
