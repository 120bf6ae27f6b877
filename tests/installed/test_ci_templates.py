"""The jobs of ``ci/`` run as a GitLab runner runs them, in the built reviewbot image.

Each job is taken from its template with the inputs a team gives (``image`` = the reviewbot
image, no ``package``), its rules are evaluated for the pipeline, its variables expanded, and its
``before_script`` + ``script`` run by a shell in the container (``tests.gitlab_ci``) with the
predefined ``CI_*`` variables of that pipeline and the team's masked variables, against the fakes
on 127.0.0.1. The checkout is mounted where the runner puts it, owned by another user than the
image's and writable by all, as the runner's clone (umask 0000) leaves it.
"""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reviewbot.store import Store, upgrade
from tests.builders import FakeClock
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.vllm_server import FakeVLLM
from tests.gitlab_ci import CiJob, template_jobs
from tests.installed.artifacts import ROOT
from tests.installed.containers import Podman
from tests.installed.tier import INSTALLED
from tests.mr_world import BOT_TOKEN, PROJECT, git, make_repo
from tests.store_fixtures import postgres_url  # noqa: F401
from tests.test_ci import expected_lines, mr_pipeline_env
from tests.test_report import _review, _vote

pytestmark = INSTALLED

MR_TEMPLATE = ROOT / "ci" / "reviewbot.gitlab-ci.yml"
REPORT_TEMPLATE = ROOT / "ci" / "reviewbot-report.gitlab-ci.yml"
BUILDS_DIR = "/builds/group/app"  # where the Docker executor clones group/app
JOB_TIMEOUT_S = 300
REVIEWS_LAST_WEEK = 2


def everyone_may_write(folder: Path) -> None:
    """What the runner's clone with umask 0000 leaves: every file writable by every user."""
    for path in [folder, *folder.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode | stat.S_IRWXO | stat.S_IRWXG if path.is_dir() else mode | 0o666)


def run_job(podman: Podman, image: str, job: CiJob, env: dict[str, str], checkout: Path) -> str:
    """The job's script in its image, as the Docker executor runs it (the image's entry point
    replaced by the job's ``entrypoint: [""]``, the checkout mounted at ``CI_PROJECT_DIR``)."""
    assert job.image == image
    assert job.entrypoint == [""], "the reviewbot image's entry point is reviewbot, not a shell"
    variables = [arg for name, value in env.items() for arg in ("-e", f"{name}={value}")]
    done = podman.run(
        "run", "--rm", "--network", "host", "--entrypoint", "sh",
        "-v", f"{checkout}:{env['CI_PROJECT_DIR']}", "-w", env["CI_PROJECT_DIR"],
        *variables, image, "-c", job.shell_script(),
        timeout=JOB_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, f"job {job.name} failed:\n{done.stdout}\n{done.stderr}"
    for path in job.artifact_paths:
        assert (checkout / path).exists(), f"artifact {path} of {job.name} was not written"
    return done.stdout + done.stderr


def test_the_review_job_in_the_image_posts_and_writes_the_code_quality_report(
    podman: Podman, image: str, tmp_path: Path
) -> None:
    origin = make_repo(tmp_path / "origin")
    head = git(origin, "rev-parse", "feature")
    checkout = tmp_path / "builds"
    git(tmp_path, "clone", "-q", f"file://{origin}", str(checkout))
    git(checkout, "checkout", "-q", head)
    everyone_may_write(checkout)
    [job] = template_jobs(MR_TEMPLATE, {"image": image}).values()
    with FakeGitLab() as gitlab, FakeVLLM() as vllm:
        gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        gitlab.add_project(PROJECT, project_id=7)
        gitlab.add_mr_from_git(PROJECT, origin, "main", "feature", iid=1, title="Add parsing")
        pipeline = mr_pipeline_env(
            CI_API_V4_URL=f"{gitlab.url}/api/v4",
            CI_SERVER_URL=gitlab.url,
            CI_PROJECT_DIR=BUILDS_DIR,
            CI_COMMIT_SHA=head,
        )
        assert job.runs_in(pipeline)
        assert not job.runs_in({**pipeline, "CI_PIPELINE_SOURCE": "push"})
        masked = {
            "REVIEWBOT_GITLAB_TOKEN": BOT_TOKEN,
            "REVIEWBOT_LLM_BASE_URL": vllm.base_url,
            "REVIEWBOT_MIN_SEVERITY": "info",
            "REVIEWBOT_GITLAB_NOTES_PER_MINUTE": "60000",
        }
        output = run_job(podman, image, job, job.environment({**pipeline, **masked}), checkout)
        notes = [
            d["notes"][0]
            for d in gitlab.discussions(PROJECT, 1)
            if d["notes"][0]["type"] == "DiffNote"
        ]
    assert {(n["position"]["new_path"], n["position"]["new_line"]) for n in notes} == (
        expected_lines()
    )
    assert {n["position"]["head_sha"] for n in notes} == {head}
    report = json.loads((checkout / "gl-code-quality-report.json").read_text())
    assert {(i["location"]["path"], i["location"]["lines"]["begin"]) for i in report} == (
        expected_lines()
    )
    assert "3" in (checkout / "reviewbot-summary.md").read_text()
    # the job read the runner's checkout (owned by another user than the image's: the
    # template's safe.directory line), not the files through the API
    assert "local checkout not used" not in output, output


def last_week_monday(now: datetime) -> datetime:
    monday = (now - timedelta(days=now.weekday())).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    return monday - timedelta(days=7)


def test_the_weekly_report_job_in_the_image_reports_the_seeded_week(
    podman: Podman,
    image: str,
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    upgrade(postgres_url)
    monday = last_week_monday(datetime.now(UTC))
    clock = FakeClock(monday)
    store = Store.from_url(postgres_url)
    try:
        store = Store(store.engine, clock=clock)
        for day in range(REVIEWS_LAST_WEEK):
            [finding] = _review(
                store,
                clock,
                monday + timedelta(days=day, hours=9),
                iid=day + 1,
                ttfts=(300.0,),
                findings=({"fingerprint": f"fp{day}"},),
                gitlab_url=None,
            )
        _vote(store, finding, "alice", "thumbsup", "vote-1", monday + timedelta(days=2))
    finally:
        store.engine.dispose()
    [job] = template_jobs(REPORT_TEMPLATE, {"image": image}).values()
    project_dir = tmp_path / "project"
    project_dir.mkdir()
    everyone_may_write(project_dir)
    with FakeGitLab() as gitlab:
        gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        gitlab.add_project(PROJECT, project_id=7)
        pipeline = {
            "CI_PIPELINE_SOURCE": "schedule",
            "CI_SERVER_URL": gitlab.url,
            "CI_PROJECT_DIR": BUILDS_DIR,
            "REVIEWBOT_SCHEDULE": "weekly-report",
        }
        assert job.runs_in(pipeline)
        assert not job.runs_in({**pipeline, "REVIEWBOT_SCHEDULE": "nightly"})
        masked = {"REVIEWBOT_GITLAB_TOKEN": BOT_TOKEN, "REVIEWBOT_DATABASE_URL": postgres_url}
        run_job(podman, image, job, job.environment({**pipeline, **masked}), project_dir)
    document = json.loads((project_dir / "reviewbot-report" / "report.json").read_text())
    iso = monday.isocalendar()
    assert document["window"]["iso_week"] == f"{iso.year}-W{iso.week:02d}"
    assert document["totals"]["reviews"] == REVIEWS_LAST_WEEK
    assert document["feedback"]["thumbs_up"] == 1
    assert {p.name for p in (project_dir / "reviewbot-report").iterdir()} == {
        "report.json",
        "report.md",
        "report.html",
    }


@pytest.fixture(autouse=True)
def _no_machine_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing of the machine's own REVIEWBOT_* settings reaches the test's store calls."""
    for name in list(os.environ):
        if name.startswith("REVIEWBOT_") and not name.startswith("REVIEWBOT_TEST_"):
            monkeypatch.delenv(name)
