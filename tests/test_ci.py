"""The GitLab CI stage: templates, the Code Quality report and `reviewbot ci` end to end.

`reviewbot ci` runs in a REAL git checkout (full, merged-results and shallow clones of a
repository that the fake GitLab serves as MR !1) with GitLab's predefined CI variables set,
against the fake GitLab and the fake vLLM over real HTTP.

References: https://docs.gitlab.com/ci/yaml/ (rules, interruptible, timeout, allow_failure,
artifacts:reports:codequality), https://docs.gitlab.com/ci/yaml/inputs/ (spec:inputs),
https://docs.gitlab.com/ci/testing/code_quality/#code-quality-report-format,
https://docs.gitlab.com/ci/variables/predefined_variables/.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import select

from reviewbot.ci import (
    EXIT_BAD_INPUT,
    EXIT_FAILURE,
    EXIT_FINDINGS,
    EXIT_OK,
    SIGTERM_EXIT,
    NotAMergeRequestPipelineError,
    _sigterm_unwinds,
    findings_at_or_above,
    gitlab_url_from_api_url,
    read_ci_environment,
)
from reviewbot.codequality import codequality_report
from reviewbot.commands import main
from reviewbot.commands.ci import ci_command
from reviewbot.diff import Side
from reviewbot.findings import AnchorKind, Category, Finding, Severity, fingerprint
from reviewbot.store import MergeRequestKey, Store
from reviewbot.store.models import Review
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.vllm_server import FakeVLLM, MalformedCalls
from tests.gitlab_ci import INPUT_REFERENCE, load_template
from tests.mr_world import BOT_TOKEN, FEATURE_APP, PROJECT, git, make_repo

ROOT = Path(__file__).resolve().parent.parent
MR_TEMPLATE = ROOT / "ci" / "reviewbot.gitlab-ci.yml"
REPORT_TEMPLATE = ROOT / "ci" / "reviewbot-report.gitlab-ci.yml"
PROJECT_ID = 7
IID = 1
JOB_URL = "https://gitlab.example.com/group/app/-/jobs/4242"
CODEQUALITY_SEVERITIES = {"info", "minor", "major", "critical", "blocker"}
ENV_PREFIXES = ("CI_", "REVIEWBOT_", "GITLAB_")
TEST_ENV_PREFIX = "REVIEWBOT_TEST_"  # the test suite's own settings (PostgreSQL URL)
FAST_NOTES_PER_MINUTE = "60000"  # no note pacing sleeps in tests
EVERY_TRY = 20  # more stream faults than the model client tries the one chunk of MR !1
CHANGED_LINES = 16  # what MR !1 (tests.mr_world) changes


# --- templates -------------------------------------------------------------------------------


PACKAGE_INPUT = "package"


def check_inputs(path: Path, spec: dict[str, Any]) -> None:
    inputs = spec["inputs"]
    used = set(INPUT_REFERENCE.findall(path.read_text()))
    assert used <= set(inputs), f"undeclared inputs: {used - set(inputs)}"
    assert set(inputs) <= used, f"unused inputs: {set(inputs) - used}"
    for name, definition in inputs.items():
        assert "default" in definition, f"input {name} has no default"
        assert definition["description"]
    # where reviewbot is installed from is never guessed (a guessed package name could install
    # someone else's package): empty means the image holds reviewbot
    assert inputs[PACKAGE_INPUT]["default"] == ""


def check_job_shape(job: dict[str, Any]) -> None:
    assert job["stage"] and job["image"]
    assert isinstance(job["script"], list) and job["script"]
    assert all(isinstance(line, str) for line in job["script"] + job.get("before_script", []))
    assert isinstance(job["rules"], list) and all("if" in rule for rule in job["rules"])
    assert job["allow_failure"] is True
    assert job["timeout"]
    assert isinstance(job["interruptible"], bool)


def ci_options_in(script: list[str]) -> dict[str, str | None]:
    [line] = [line for line in script if line.startswith("reviewbot ci")]
    words = [w for w in shlex.split(line)[2:] if not INPUT_REFERENCE.fullmatch(w)]
    options: dict[str, str | None] = {}
    for index, word in enumerate(words):
        if word.startswith("--"):
            following = words[index + 1] if index + 1 < len(words) else None
            has_value = following is not None and not following.startswith("--")
            options[word] = following if has_value else None
    return options


def test_mr_template_runs_reviewbot_ci_in_merge_request_pipelines() -> None:
    spec, jobs = load_template(MR_TEMPLATE)
    check_inputs(MR_TEMPLATE, spec)
    job = jobs["reviewbot"]
    check_job_shape(job)
    assert any("merge_request_event" in rule["if"] for rule in job["rules"])
    assert job["interruptible"] is True  # a newer push cancels an older review
    options = ci_options_in(job["script"])
    report = options["--codequality"]
    assert report and job["artifacts"]["reports"]["codequality"] == report
    assert report in job["artifacts"]["paths"] and options["--summary"] in job["artifacts"]["paths"]
    assert job["artifacts"]["when"] == "always"  # the report is kept when --fail-on fails
    known = {opt for param in ci_command.params for opt in param.opts}
    assert set(options) <= known
    assert "pip install" in " ".join(job["before_script"])
    assert "REVIEWBOT_GITLAB_TOKEN" not in job.get("variables", {})  # a masked variable


def test_report_template_runs_the_weekly_report_on_a_schedule() -> None:
    spec, jobs = load_template(REPORT_TEMPLATE)
    check_inputs(REPORT_TEMPLATE, spec)
    [job] = jobs.values()
    check_job_shape(job)
    assert all('$CI_PIPELINE_SOURCE == "schedule"' in rule["if"] for rule in job["rules"])
    assert any(line.startswith("reviewbot report --weekly") for line in job["script"])
    assert job["artifacts"]["paths"]
    # feedback from GitLab first, so the report counts this week's votes and resolutions
    script = job["script"]
    sync = next(i for i, line in enumerate(script) if line.startswith("reviewbot feedback sync"))
    report = next(i for i, line in enumerate(script) if line.startswith("reviewbot report"))
    assert sync < report
    for line, command in ((script[sync], ["feedback", "sync"]), (script[report], ["report"])):
        help_text = CliRunner().invoke(main, [*command, "--help"]).output
        for option in re.findall(r"(?<!\w)--[a-z-]+", line):
            assert option in help_text, f"{option} is not an option of {' '.join(command)}"


# --- Code Quality report ---------------------------------------------------------------------


def make_finding(**fields: Any) -> Finding:
    values: dict[str, Any] = {
        "path": "app.py",
        "old_path": "app.py",
        "side": Side.NEW,
        "line": 12,
        "end_line": None,
        "severity": Severity.CRITICAL,
        "category": Category.SECURITY,
        "title": "eval on user input",
        "body": "Do not eval input.",
        "suggestion": None,
        "anchor": AnchorKind.EXACT,
        "anchor_note": "",
        "line_text": "    return eval(text)",
        "fingerprint": "",
        "chunk_index": 0,
        "reported_line": 12,
        "reported_side": Side.NEW,
    }
    values.update(fields)
    if not values["fingerprint"]:
        values["fingerprint"] = fingerprint(
            values["path"], values["line_text"], values["category"], values["title"]
        )
    return Finding(**values)


def check_codequality_shape(issues: Any) -> None:
    """What GitLab requires of each issue (Code Quality report format)."""
    assert isinstance(issues, list)
    for issue in issues:
        assert isinstance(issue["description"], str) and issue["description"]
        assert isinstance(issue["check_name"], str) and issue["check_name"]
        assert isinstance(issue["fingerprint"], str) and issue["fingerprint"]
        assert issue["severity"] in CODEQUALITY_SEVERITIES
        path = issue["location"]["path"]
        assert path and not path.startswith(("./", "/"))
        begin = issue["location"]["lines"]["begin"]
        assert isinstance(begin, int) and begin >= 1
    fingerprints = [issue["fingerprint"] for issue in issues]
    assert len(set(fingerprints)) == len(fingerprints)


def test_codequality_report_shape_for_every_kind_of_finding() -> None:
    findings = [
        make_finding(),
        make_finding(path="./pkg/mod.py", severity=Severity.INFO, category=Category.STYLE),
        make_finding(line=None, anchor=AnchorKind.FILE, title="whole file"),
        make_finding(side=Side.OLD, line=4, title="removed check"),
    ]
    issues = codequality_report(findings)
    check_codequality_shape(issues)
    assert len(issues) == len(findings)
    for finding, issue in zip(findings, issues, strict=True):
        assert issue["severity"] == finding.severity.value
        assert finding.category.value in issue["check_name"]
        assert finding.title in issue["description"]
        if finding.line is not None and finding.side is Side.NEW:
            assert issue["location"]["lines"]["begin"] == finding.line
    assert issues[1]["location"]["path"] == "pkg/mod.py"
    assert json.loads(json.dumps(issues)) == issues  # plain JSON


def test_codequality_fingerprints_stay_unique_and_stable() -> None:
    twin = make_finding(line=30)  # same line text, same title: same fingerprint
    first = make_finding()
    assert first.fingerprint == twin.fingerprint
    issues = codequality_report([first, twin])
    check_codequality_shape(issues)
    assert issues[0]["fingerprint"] == first.fingerprint  # line-free: survives shifted lines
    assert codequality_report([first, twin]) == issues  # deterministic across runs


def test_fail_on_threshold_counts_findings_at_or_above() -> None:
    findings = [make_finding(severity=severity) for severity in Severity]
    for threshold in Severity:
        gate = findings_at_or_above(findings, threshold)
        assert {f.severity for f in gate} == {s for s in Severity if s.rank <= threshold.rank}


# --- CI environment parsing ------------------------------------------------------------------


def mr_pipeline_env(**overrides: str) -> dict[str, str]:
    env = {
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_API_V4_URL": "https://gitlab.example.com/api/v4",
        "CI_PROJECT_ID": str(PROJECT_ID),
        "CI_MERGE_REQUEST_IID": str(IID),
        "CI_MERGE_REQUEST_DIFF_BASE_SHA": "a" * 40,
        "CI_JOB_URL": JOB_URL,
        "CI_PROJECT_DIR": "/builds/group/app",
    }
    env.update(overrides)
    return env


def test_ci_environment_from_gitlab_variables(tmp_path: Path) -> None:
    ci = read_ci_environment(mr_pipeline_env(), tmp_path)
    assert ci.gitlab_url == "https://gitlab.example.com"
    assert (ci.project_id, ci.iid, ci.job_url) == (str(PROJECT_ID), IID, JOB_URL)
    assert ci.project_dir == Path("/builds/group/app")
    without_dir = {k: v for k, v in mr_pipeline_env().items() if k != "CI_PROJECT_DIR"}
    assert read_ci_environment(without_dir, tmp_path).project_dir == tmp_path
    fork = read_ci_environment(mr_pipeline_env(CI_MERGE_REQUEST_PROJECT_ID="99"), tmp_path)
    assert fork.project_id == "99"  # the MR lives in the target project


def test_gitlab_url_keeps_a_relative_root() -> None:
    assert gitlab_url_from_api_url("https://host/gitlab/api/v4/") == "https://host/gitlab"
    assert gitlab_url_from_api_url("http://127.0.0.1:8080/api/v4") == "http://127.0.0.1:8080"


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"CI_PIPELINE_SOURCE": "push", "CI_MERGE_REQUEST_IID": ""}, "CI_MERGE_REQUEST_IID"),
        ({"CI_PIPELINE_SOURCE": "schedule"}, "schedule"),
        ({"CI_API_V4_URL": ""}, "CI_API_V4_URL"),
        ({"CI_MERGE_REQUEST_IID": "abc"}, "CI_MERGE_REQUEST_IID"),
    ],
)
def test_outside_a_merge_request_pipeline_names_what_is_missing(
    tmp_path: Path, overrides: dict[str, str], named: str
) -> None:
    with pytest.raises(NotAMergeRequestPipelineError) as raised:
        read_ci_environment(mr_pipeline_env(**overrides), tmp_path)
    assert named in raised.value.explain()


# --- `reviewbot ci` end to end ---------------------------------------------------------------


@dataclass
class CiWorld:
    origin: Path
    gitlab: FakeGitLab
    vllm: FakeVLLM
    head_sha: str
    tmp: Path

    def clone(self, name: str, *extra: str) -> Path:
        target = self.tmp / name
        git(self.tmp, "clone", "-q", *extra, f"file://{self.origin}", str(target))
        return target

    def env(self, checkout: Path, **overrides: str) -> dict[str, str]:
        env = mr_pipeline_env(
            CI_API_V4_URL=f"{self.gitlab.url}/api/v4",
            CI_PROJECT_DIR=str(checkout),
            CI_COMMIT_SHA=git(checkout, "rev-parse", "HEAD"),
            REVIEWBOT_GITLAB_TOKEN=BOT_TOKEN,
            REVIEWBOT_LLM_BASE_URL=self.vllm.base_url,
            REVIEWBOT_MIN_SEVERITY="info",
            REVIEWBOT_GITLAB_NOTES_PER_MINUTE=FAST_NOTES_PER_MINUTE,
            # the model's findings only: the built-in analyzers (ruff is installed here) would
            # post theirs too (tests/test_run_analyzers.py tests the merge)
            REVIEWBOT_ANALYZERS=",",  # an empty list (an empty value is "not set")
        )
        env.update(overrides)
        return env

    def run(self, checkout: Path, *args: str, **env: str) -> Result:
        return CliRunner().invoke(ci_command, list(args), env=self.env(checkout, **env))

    def diff_notes(self) -> list[dict[str, Any]]:
        return [
            d["notes"][0]
            for d in self.gitlab.discussions(PROJECT, IID)
            if d["notes"][0]["type"] == "DiffNote"
        ]

    def summary_notes(self) -> list[dict[str, Any]]:
        notes = self.gitlab.notes(PROJECT, IID)
        return [n for n in notes if "<!-- reviewbot:summary -->" in n["body"]]

    def raw_file_requests(self) -> list[str]:
        return [path for _, path in self.gitlab.requests if "/repository/files/" in path]


@pytest.fixture
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No CI_*, REVIEWBOT_* or user config leaks in from the machine running the tests."""
    for name in list(os.environ):
        if name.startswith(ENV_PREFIXES) and not name.startswith(TEST_ENV_PREFIX):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


@pytest.fixture
def ci_world(tmp_path: Path, isolated_env: None) -> Iterator[CiWorld]:
    origin = make_repo(tmp_path / "origin")
    head = git(origin, "rev-parse", "feature")
    with FakeGitLab() as gitlab, FakeVLLM() as vllm:
        gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        gitlab.add_project(PROJECT, project_id=PROJECT_ID)
        gitlab.add_mr_from_git(PROJECT, origin, "main", "feature", iid=IID, title="Add parsing")
        yield CiWorld(origin, gitlab, vllm, head, tmp_path)


def expected_lines() -> set[tuple[str, int]]:
    lines = FEATURE_APP.splitlines()
    return {
        ("app.py", number)
        for number, text in enumerate(lines, 1)
        if "eval(" in text or "== None" in text or "except:" in text
    }


def check_posted_on_mr_version(world: CiWorld) -> None:
    notes = world.diff_notes()
    assert {(n["position"]["new_path"], n["position"]["new_line"]) for n in notes} == (
        expected_lines()
    )
    assert {n["position"]["head_sha"] for n in notes} == {world.head_sha}


@pytest.mark.slow
def test_ci_in_a_merge_request_pipeline_posts_and_writes_reports(ci_world: CiWorld) -> None:
    checkout = ci_world.clone("checkout")
    git(checkout, "checkout", "-q", ci_world.head_sha)  # the runner checks out a detached SHA
    report, summary = checkout / "gl-code-quality-report.json", checkout / "summary.md"
    result = ci_world.run(checkout, "--codequality", str(report), "--summary", str(summary))
    assert result.exit_code == EXIT_OK, result.output
    check_posted_on_mr_version(ci_world)
    assert ci_world.raw_file_requests() == []  # contents came from the checkout
    [note] = ci_world.summary_notes()
    assert JOB_URL in note["body"]
    assert summary.read_text() == note["body"]
    issues = json.loads(report.read_text())
    check_codequality_shape(issues)
    assert {(i["location"]["path"], i["location"]["lines"]["begin"]) for i in issues} == (
        expected_lines()
    )
    rerun = ci_world.run(checkout)  # a retried job, with a new throw-away database
    assert rerun.exit_code == EXIT_OK, rerun.output
    assert len(ci_world.diff_notes()) == len(expected_lines())  # hidden markers: no repeats
    assert len(ci_world.summary_notes()) == 1


def test_ci_outside_a_merge_request_pipeline_explains_and_exits_0(ci_world: CiWorld) -> None:
    checkout = ci_world.clone("checkout")
    report = checkout / "cq.json"
    branch = {"CI_PIPELINE_SOURCE": "push", "CI_MERGE_REQUEST_IID": ""}
    result = ci_world.run(checkout, "--codequality", str(report), **branch)
    assert result.exit_code == EXIT_OK
    assert "not a merge request pipeline" in result.stderr
    assert "CI_MERGE_REQUEST_IID" in result.stderr
    assert json.loads(report.read_text()) == []
    assert ci_world.gitlab.requests == [] and ci_world.vllm.stats.requests == 0
    strict = ci_world.run(checkout, "--strict", **branch)
    assert strict.exit_code == EXIT_BAD_INPUT


@pytest.mark.slow
def test_ci_in_a_merged_results_pipeline_takes_positions_from_the_mr(ci_world: CiWorld) -> None:
    git(ci_world.origin, "checkout", "-q", "main")  # the target branch moves on
    (ci_world.origin / "README.md").write_text("# app\n\nmore docs\n")
    git(ci_world.origin, "commit", "-qam", "docs on main")
    checkout = ci_world.clone("checkout")
    git(checkout, "checkout", "-q", "--detach", "origin/main")
    git(
        checkout,
        "-c",
        "user.email=ci@example.com",
        "-c",
        "user.name=CI",
        "merge",
        "-q",
        "--no-ff",
        "-m",
        "Merge result",
        ci_world.head_sha,
    )
    merge_commit = git(checkout, "rev-parse", "HEAD")
    assert merge_commit != ci_world.head_sha
    result = ci_world.run(checkout, CI_COMMIT_SHA=merge_commit)
    assert result.exit_code == EXIT_OK, result.output
    check_posted_on_mr_version(ci_world)
    assert ci_world.raw_file_requests() == []
    assert "merged-results" in result.stderr


@pytest.mark.slow
def test_ci_in_a_shallow_clone_fetches_the_head(ci_world: CiWorld) -> None:
    checkout = ci_world.clone("shallow", "--depth", "1", "--branch", "main")
    assert git(checkout, "rev-parse", "--is-shallow-repository") == "true"
    result = ci_world.run(checkout)
    assert result.exit_code == EXIT_OK, result.output
    assert "fetching it from origin" in result.stderr
    check_posted_on_mr_version(ci_world)
    assert ci_world.raw_file_requests() == []  # the fetched head served the contents


@pytest.mark.slow
def test_ci_in_a_shallow_clone_without_fetch_reads_the_host_cache(ci_world: CiWorld) -> None:
    checkout = ci_world.clone("shallow", "--depth", "1", "--branch", "main")
    git(checkout, "remote", "set-url", "origin", f"file://{ci_world.tmp / 'gone'}")
    cache = ci_world.tmp / "repo-cache"
    result = ci_world.run(checkout, REVIEWBOT_REPO_CACHE_DIR=str(cache))
    assert result.exit_code == EXIT_OK, result.output
    assert "reading files from the repository cache or the GitLab API" in result.stderr
    check_posted_on_mr_version(ci_world)
    assert ci_world.raw_file_requests() == []  # one fetch into the cache served the contents
    assert ci_world.gitlab.git_fetches() == 1
    assert list(cache.glob("*/*.git"))


@pytest.mark.slow
def test_ci_in_a_shallow_clone_without_fetch_or_cache_falls_back_to_the_api(
    ci_world: CiWorld,
) -> None:
    checkout = ci_world.clone("shallow", "--depth", "1", "--branch", "main")
    git(checkout, "remote", "set-url", "origin", f"file://{ci_world.tmp / 'gone'}")
    result = ci_world.run(checkout, REVIEWBOT_REPO_CACHE_MAX_BYTES="0")
    assert result.exit_code == EXIT_OK, result.output
    check_posted_on_mr_version(ci_world)
    assert ci_world.raw_file_requests()  # the API served the contents
    assert ci_world.gitlab.git_fetches() == 0


@pytest.mark.slow
def test_fail_on_exits_3_when_findings_at_or_above_remain(ci_world: CiWorld) -> None:
    checkout = ci_world.clone("checkout")
    report = checkout / "cq.json"
    result = ci_world.run(checkout, "--fail-on", "major", "--codequality", str(report))
    severities = {Severity(issue["severity"]) for issue in json.loads(report.read_text())}
    gate = {s for s in severities if s.rank <= Severity.MAJOR.rank}
    assert gate, "the fake reviewer reports eval( (critical) and bare except (major)"
    assert result.exit_code == EXIT_FINDINGS, result.output
    above_all = {s for s in severities if s is Severity.BLOCKER}
    from_env = ci_world.run(checkout, REVIEWBOT_FAIL_ON="blocker")
    assert from_env.exit_code == (EXIT_FINDINGS if above_all else EXIT_OK), from_env.output


@pytest.mark.slow
def test_dry_run_writes_the_report_and_posts_nothing(ci_world: CiWorld) -> None:
    checkout = ci_world.clone("checkout")
    report = checkout / "cq.json"
    result = ci_world.run(checkout, "--no-post", "--codequality", str(report))
    assert result.exit_code == EXIT_OK, result.output
    assert ci_world.diff_notes() == [] and ci_world.summary_notes() == []
    issues = json.loads(report.read_text())
    check_codequality_shape(issues)
    assert len(issues) == len(expected_lines())


@pytest.mark.slow
def test_ci_records_to_the_shared_database(ci_world: CiWorld, store_url: str) -> None:
    checkout = ci_world.clone("checkout")
    result = ci_world.run(checkout, REVIEWBOT_DATABASE_URL=store_url)
    assert result.exit_code == EXIT_OK, result.output
    store = Store.from_url(store_url)
    with store.engine.connect() as connection:
        triggers = connection.execute(
            select(Review.trigger).where(Review.project == PROJECT, Review.mr_iid == IID)
        ).scalars()
        assert "ci" in set(triggers)
    key = MergeRequestKey(ci_world.gitlab.url, PROJECT_ID, IID)
    assert len(store.posted_findings(key)) == len(ci_world.diff_notes())


@pytest.mark.slow
def test_an_incomplete_review_fails_the_job(ci_world: CiWorld) -> None:
    """A chunk the model never answered: exit 1 and say so, never a clean pass."""
    ci_world.vllm.add_faults(*["stream_cut_mid_call"] * EVERY_TRY)
    checkout = ci_world.clone("checkout")
    result = ci_world.run(checkout)
    assert result.exit_code == EXIT_FAILURE, result.output
    assert f"incomplete review: 0 of {CHANGED_LINES} changed lines reviewed" in result.stderr
    [note] = ci_world.summary_notes()
    assert "Incomplete review" in note["body"]


@pytest.mark.slow
def test_a_model_answer_that_cannot_be_read_fails_the_job(ci_world: CiWorld) -> None:
    """Every call of the answer has arguments that do not validate, and repair turns repeat
    the mistakes: not "0 findings", but exit 1 and a summary saying why (issue 17)."""
    ci_world.vllm.malformed = MalformedCalls(kinds=("missing_line",), repair="same")
    checkout = ci_world.clone("checkout")
    result = ci_world.run(checkout)
    assert result.exit_code == EXIT_FAILURE, result.output
    assert f"incomplete review: 0 of {CHANGED_LINES} changed lines reviewed" in result.stderr
    assert "the model's answer could not be read" in result.stderr
    [note] = ci_world.summary_notes()
    assert (
        "Incomplete review" in note["body"] and "`line`: required integer, missing" in note["body"]
    )
    assert ci_world.diff_notes() == []


@pytest.mark.slow
def test_full_reviews_a_head_already_reviewed_again(ci_world: CiWorld, store_url: str) -> None:
    """With the shared database a second job at the same head makes no model call; `--full`
    asks the model again (and still posts nothing twice)."""
    checkout = ci_world.clone("checkout")
    first = ci_world.run(checkout, REVIEWBOT_DATABASE_URL=store_url)
    assert first.exit_code == EXIT_OK, first.output
    calls = ci_world.vllm.stats.requests
    assert calls > 0
    again = ci_world.run(checkout, REVIEWBOT_DATABASE_URL=store_url)
    assert again.exit_code == EXIT_OK, again.output
    assert ci_world.vllm.stats.requests == calls
    assert "no model call" in again.stderr
    full = ci_world.run(checkout, "--full", REVIEWBOT_DATABASE_URL=store_url)
    assert full.exit_code == EXIT_OK, full.output
    assert ci_world.vllm.stats.requests > calls
    assert "no model call" not in full.stderr
    assert len(ci_world.diff_notes()) == len(expected_lines())


def test_missing_token_is_a_configuration_error(ci_world: CiWorld) -> None:
    checkout = ci_world.clone("checkout")
    result = ci_world.run(checkout, REVIEWBOT_GITLAB_TOKEN="")
    assert result.exit_code == EXIT_BAD_INPUT
    assert "REVIEWBOT_GITLAB_TOKEN" in result.stderr and "CI_JOB_TOKEN" in result.stderr


def test_sigterm_unwinds_so_the_lease_is_released() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as raised, _sigterm_unwinds():
        os.kill(os.getpid(), signal.SIGTERM)
    assert raised.value.code == SIGTERM_EXIT
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.slow
def test_help_documents_the_exit_codes() -> None:
    result = CliRunner().invoke(ci_command, ["--help"])
    assert result.exit_code == EXIT_OK
    for code in (EXIT_OK, EXIT_BAD_INPUT, EXIT_FINDINGS):
        assert f"{code} " in result.output
    for option in ("--codequality", "--fail-on", "--no-post", "--strict"):
        assert option in result.output
