"""The pipeline's reports through GitLab's job artifacts API (the webhook worker's way), against
the fake GitLab serving pipelines, jobs and artifact files as GitLab does; and the `reviewbot
ci` seam that hands the checkout's analyzers to the review."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner

from reviewbot.analyzer_settings import AnalyzerSettings
from reviewbot.analyzers.collect import collect_from_pipeline
from reviewbot.ci import pipeline_analyzers, read_ci_environment
from reviewbot.commands.ci import ci_command
from reviewbot.config import Settings
from reviewbot.diff import parse_git_diff
from reviewbot.gitlab import GitLabClient, GitLabSettings
from tests.fakes.gitlab_server import FakeGitLab

FIXTURES = Path(__file__).parent / "fixtures" / "analyzers"
TOKEN = "bot-token"
PROJECT = "group/app"
PROJECT_ID = 7
HEAD = "0123456789abcdef0123456789abcdef01234567"
MERGE_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"
PLANTED_TOKEN = "glpat-FAKEfakeFAKEfake0000"
SAST = "gl-sast-report.json"
SECRETS = "gl-secret-detection-report.json"
SETTINGS = AnalyzerSettings(
    analyzer_report_jobs=(f"semgrep-sast:{SAST}", f"secret_detection:{SECRETS}")
)


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


@pytest.fixture
def fake() -> Iterator[FakeGitLab]:
    with FakeGitLab() as server:
        server.add_user("reviewbot", token=TOKEN, bot=True)
        server.add_project(PROJECT, project_id=PROJECT_ID)
        yield server


@pytest.fixture
def client(fake: FakeGitLab) -> GitLabClient:
    return GitLabClient(
        GitLabSettings(url=fake.url, token=TOKEN, max_retries=2, per_page=1),
        sleep=lambda _: None,
    )


def add_report_pipeline(fake: FakeGitLab, sha: str = HEAD) -> int:
    return fake.add_pipeline(
        PROJECT,
        sha,
        {
            "build": None,  # a job that kept no artifacts
            "semgrep-sast": {SAST: fixture(SAST)},
            "secret_detection": {SECRETS: fixture(SECRETS)},
        },
    )


def test_the_fake_serves_the_api_as_gitlab_does(fake: FakeGitLab) -> None:
    pipeline_id = add_report_pipeline(fake)
    headers = {"PRIVATE-TOKEN": TOKEN}
    base = f"{fake.url}/api/v4/projects/{PROJECT_ID}"
    listed = requests.get(f"{base}/pipelines", params={"sha": HEAD}, headers=headers, timeout=5)
    assert [p["id"] for p in listed.json()] == [pipeline_id]
    assert listed.headers["X-Total"] == "1"
    assert (
        requests.get(
            f"{base}/pipelines", params={"sha": "f" * 40}, headers=headers, timeout=5
        ).json()
        == []
    )
    jobs = requests.get(
        f"{base}/pipelines/{pipeline_id}/jobs", params={"per_page": 2}, headers=headers, timeout=5
    )
    assert jobs.headers["X-Total-Pages"] == "2" and 'rel="next"' in jobs.headers["Link"]
    sast_job = next(j for j in jobs.json() if j["name"] == "semgrep-sast")
    assert (
        sast_job["pipeline"]["sha"] == HEAD and sast_job["artifacts"][0]["file_type"] == "archive"
    )
    artifact = requests.get(
        f"{base}/jobs/{sast_job['id']}/artifacts/{SAST}", headers=headers, timeout=5
    )
    assert artifact.content == fixture(SAST)
    assert artifact.headers["Content-Type"] == "application/octet-stream"
    missing_file = requests.get(
        f"{base}/jobs/{sast_job['id']}/artifacts/nope.json", headers=headers, timeout=5
    )
    assert (missing_file.status_code, missing_file.json()) == (404, {"message": "404 Not found"})
    missing_job = requests.get(f"{base}/jobs/999999/artifacts/{SAST}", headers=headers, timeout=5)
    assert missing_job.json() == {"message": "404 Job Not Found"}
    missing_pipeline = requests.get(f"{base}/pipelines/999999/jobs", headers=headers, timeout=5)
    assert missing_pipeline.json() == {"message": "404 Pipeline Not Found"}


def test_reports_are_read_from_the_latest_pipeline_of_the_head(
    fake: FakeGitLab, client: GitLabClient
) -> None:
    add_report_pipeline(fake, sha=HEAD)  # an older pipeline of the head, then a newer one
    newest = add_report_pipeline(fake, sha=HEAD)
    run = collect_from_pipeline(client, PROJECT_ID, HEAD, SETTINGS)
    assert run.problems == ()
    assert {(f.tool, f.path, f.line) for f in run.findings} == {
        ("Semgrep", "app.py", 14),
        ("Gitleaks", "config/settings.yaml", 3),
    }
    assert PLANTED_TOKEN not in repr(run)
    assert len(run.used) == 2
    job_pages = [p for _, p in fake.requests if p.endswith(f"/pipelines/{newest}/jobs")]
    assert len(job_pages) == 3  # every page of the jobs (per_page=1), of the newest pipeline


def test_changed_lines_narrow_the_pipelines_findings(
    fake: FakeGitLab, client: GitLabClient
) -> None:
    add_report_pipeline(fake)
    run = collect_from_pipeline(client, PROJECT_ID, HEAD, SETTINGS, changed={"app.py": (14,)})
    assert [(f.path, f.line) for f in run.findings] == [("app.py", 14)]
    assert run.used[-1] == "1 analyzer finding outside the MR's changed lines left out"


def test_a_missing_pipeline_job_or_file_is_named(fake: FakeGitLab, client: GitLabClient) -> None:
    no_pipeline = collect_from_pipeline(client, PROJECT_ID, HEAD, SETTINGS)
    assert [p.sentence() for p in no_pipeline.problems] == [
        "pipeline reports: no pipeline for the MR's head 01234567"
    ]
    fake.add_pipeline(PROJECT, HEAD, {"semgrep-sast": {"other.json": b"[]"}})
    run = collect_from_pipeline(client, PROJECT_ID, HEAD, SETTINGS)
    sentences = [p.sentence() for p in run.problems]
    assert len(sentences) == 2
    assert sentences[0].startswith(
        f"report semgrep-sast:{SAST}: job 'semgrep-sast' (success) has no artifact"
    )
    assert sentences[1].startswith(f"report secret_detection:{SECRETS}: no job 'secret_detection'")
    assert run.findings == () and run.used == ()


def test_a_report_for_another_commit_or_malformed_is_named(
    fake: FakeGitLab, client: GitLabClient
) -> None:
    fake.add_pipeline(
        PROJECT,
        HEAD,
        {
            "semgrep-sast": {SAST: fixture("malformed.json")},
            "secret_detection": {SECRETS: fixture("gl-secret-detection-other-commit.json")},
        },
    )
    run = collect_from_pipeline(client, PROJECT_ID, HEAD, SETTINGS)
    reasons = [p.reason for p in run.problems]
    assert "not JSON" in reasons[0] and "for commit fedcba98" in reasons[1]


def test_a_gitlab_error_is_a_problem_not_a_crash(fake: FakeGitLab, client: GitLabClient) -> None:
    add_report_pipeline(fake)
    fake.add_fault_for("GET", r"/pipelines$", "403")
    run = collect_from_pipeline(client, PROJECT_ID, HEAD, SETTINGS)
    [problem] = run.problems
    assert problem.name == "pipeline reports" and "403" in problem.reason


def test_no_report_jobs_asks_nothing(fake: FakeGitLab, client: GitLabClient) -> None:
    assert collect_from_pipeline(client, PROJECT_ID, HEAD, AnalyzerSettings()).used == ()
    assert [p for _, p in fake.requests if "/pipelines" in p] == []


# --- reviewbot ci ---------------------------------------------------------------------------


def test_ci_hands_its_reports_and_built_ins_to_the_review(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    shutil.copytree(FIXTURES / "repo", checkout)
    shutil.copy(FIXTURES / "semgrep-other-commit.sarif", checkout / "semgrep.sarif")
    env = {
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_API_V4_URL": "https://gitlab.example.com/api/v4",
        "CI_PROJECT_ID": str(PROJECT_ID),
        "CI_MERGE_REQUEST_IID": "1",
        "CI_PROJECT_DIR": str(checkout),
        "CI_COMMIT_SHA": MERGE_COMMIT,  # a merged-results pipeline: its reports name this
    }
    ci = read_ci_environment(env, tmp_path)
    settings = Settings(analyzers=("ruff", "secrets"), analyzer_reports=(SAST,))
    analyzers = pipeline_analyzers(ci, settings, [Path("semgrep.sarif")])
    diff = parse_git_diff(
        "diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n@@ -9,1 +9,2 @@\n"
        "         result += item\n+    return reslt\n"
        "diff --git a/config/settings.yaml b/config/settings.yaml\n--- a/config/settings.yaml\n"
        "+++ b/config/settings.yaml\n@@ -2,1 +2,2 @@\n service:\n+  gitlab_token: x\n"
    )
    run = analyzers(HEAD, diff)
    assert {(f.tool, f.path, f.line) for f in run.findings} == {
        ("ruff", "app.py", 10),
        ("reviewbot-secrets", "config/settings.yaml", 3),
    }
    assert "SARIF semgrep.sarif (2 findings)" in run.used  # for the merge commit: used
    assert [p.sentence() for p in run.problems] == [
        f"report {SAST}: not found at {checkout / SAST}"
    ]
    assert PLANTED_TOKEN not in repr(run)


def test_ci_takes_repeatable_analyzer_reports() -> None:
    option = next(p for p in ci_command.params if p.name == "analyzer_reports")
    assert option.opts == ["--analyzer-report"] and option.multiple
    assert "--analyzer-report PATH" in CliRunner().invoke(ci_command, ["--help"]).output
