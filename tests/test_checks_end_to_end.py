"""Named checks end to end: `reviewbot run`, the worker and `reviewbot ci` against the fake
GitLab (which keeps commit statuses as GitLab does: tests/fakes/commit_statuses.py) and the fake
vLLM (its reviewer reports `eval(` as critical, a bare `except:` as major). The checks come from
the target branch's `.reviewbot/rules.yaml`; docs/checks.md tells the behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from reviewbot.app import App
from reviewbot.commands import main
from reviewbot.commands.ci import ci_command
from reviewbot.commands.render import run_json
from reviewbot.errors import EXIT_FAILURE, EXIT_FINDINGS, EXIT_OK
from reviewbot.mr import RunOptions, run_merge_request
from reviewbot.queue import JobQueue
from reviewbot.rules.check_verdicts import CommitState, CommitStatus
from reviewbot.store import MergeRequestKey, Store
from reviewbot.worker import Worker
from tests.mr_world import BOT_TOKEN, PROJECT, World, commit_on_feature, git
from tests.test_run_rules import commit_on_target, summary_body

pytestmark = pytest.mark.slow  # end-to-end worlds (docs/development.md)

PROJECT_ID = 7
CHECKS = """\
rules:
  - name: app-clean
    paths: ["app.py"]
    check:
      no_findings: {min_severity: major}
  - name: no-secrets
    check: {no_secrets: true}
"""
CLEAN_APP = """import json


def load(path):
    with open(path) as handle:
        return json.load(handle)
"""
EVERY_TRY = 20  # every try of the one chunk


def statuses(world: World, sha: str | None = None) -> list[tuple[str, str, str | None]]:
    """(name, state, description) of every status of ``sha`` (the MR head), oldest first."""
    head = sha or git(world.repo, "rev-parse", "feature")
    return [
        (s["name"], s["status"], s["description"])
        for s in world.gitlab.commit_statuses(PROJECT_ID, head)
    ]


def status_posts(world: World) -> list[str]:
    return [
        path for method, path in world.gitlab.requests if method == "POST" and "/statuses/" in path
    ]


def with_checks(world: World) -> None:
    commit_on_target(world, {".reviewbot/rules.yaml": CHECKS}, "checks")


def test_a_failing_check_fails_the_status_then_a_push_that_fixes_it_passes(world: World) -> None:
    with_checks(world)
    first_head = git(world.repo, "rev-parse", "feature")
    report = world.run()
    [(name, state, description)] = statuses(world)
    assert (name, state) == ("reviewbot", "failed")
    assert description == "1 of 2 checks failed: app-clean"
    posted = world.gitlab.commit_statuses(PROJECT_ID, first_head)[0]
    assert posted["target_url"] == f"{report.web_url}#note_{report.summary_note_id}"
    assert posted["ref"] == "feature"
    body = summary_body(world)
    assert "**Checks**" in body and "| app-clean | ❌ fail |" in body
    assert "| no-secrets | ✅ pass |" in body
    assert "Commit status: failed: 1 of 2 checks failed: app-clean" in body
    assert len(status_posts(world)) == 2  # pending, then failed
    data = run_json(report)["checks"]
    assert data["commit_status"] == {
        "name": "reviewbot",
        "state": "failed",
        "description": "1 of 2 checks failed: app-clean",
        "posted": True,
    }
    assert [v["outcome"] for v in data["verdicts"]] == ["fail", "pass"]

    head = commit_on_feature(world.repo, {"app.py": CLEAN_APP}, "fix app.py")
    world.gitlab.push(PROJECT, 1, head)
    world.run()
    assert statuses(world, head) == [("reviewbot", "success", "all 2 checks passed")]
    assert statuses(world, first_head)[0][1] == "failed"  # the old head keeps its verdict
    assert "| app-clean | ✅ pass |" in summary_body(world)


def test_the_same_head_again_posts_nothing_twice_and_lost_answers_change_nothing(
    world: World,
) -> None:
    with_checks(world)
    world.gitlab.add_fault_for("POST", r"/statuses/", "stored:502", times=2)
    world.run()
    world.run()  # the same head again (a retried job): pending again, then the same verdict
    # one status per run (GitLab keeps the first as an older entry), none twice for the
    # answers lost after the first run's two writes were stored
    assert [state for _, state, _ in statuses(world)] == ["failed", "failed"]
    assert len(status_posts(world)) == 4


def test_an_incomplete_review_is_never_success(world: World) -> None:
    commit_on_target(
        world, {".reviewbot/rules.yaml": "rules:\n  - {name: s, check: {no_secrets: true}}\n"}, "c"
    )
    world.vllm.add_faults(*["stream_cut_mid_call"] * EVERY_TRY)
    report = world.run()
    assert report.review.unreviewed
    [(_, state, description)] = statuses(world)
    assert state == "failed"
    assert description == "review incomplete: 1 of 1 chunks not reviewed"
    # the check itself passed (no secret in the diff): the status still is not success
    assert "| s | ✅ pass |" in summary_body(world)


def test_a_run_that_dies_fails_the_status_and_one_stopped_cancels_it(world: World) -> None:
    with_checks(world)
    with pytest.raises(Exception, match=r"127\.0\.0\.1:9"):
        world.run(llm_base_url="http://127.0.0.1:9/v1")
    [(_, state, description)] = statuses(world)
    assert state == "failed" and description.startswith("review did not complete: ")

    def stop_when(step: str) -> Callable[[str], None]:
        def say(message: str) -> None:
            if message.startswith(step):
                raise KeyboardInterrupt

        return say

    with App(world.settings()) as app, pytest.raises(KeyboardInterrupt):
        run_merge_request(app, PROJECT, 1, RunOptions(), progress=stop_when("publishing"))
    assert statuses(world)[-1][1:] == ("canceled", "review stopped before it finished")


def test_no_checks_no_status_and_the_setting_turns_it_off(world: World) -> None:
    world.run()
    assert status_posts(world) == [] and statuses(world) == []
    with_checks(world)
    world.run(commit_status=False)
    assert status_posts(world) == []
    assert "| app-clean | ❌ fail |" in summary_body(world)  # judged and shown all the same
    assert "(no commit status posted)" in summary_body(world)
    world.run(RunOptions(dry_run=True))
    assert status_posts(world) == []


def test_the_worker_posts_the_status_under_its_name(world: World) -> None:
    with_checks(world)
    with App(world.settings(commit_status_name="review / checks")) as app:
        queue = JobQueue(app.store)
        queue.enqueue(project=PROJECT, mr_iid=1, head_sha=None, trigger="webhook")
        Worker(app, queue, poll_s=0.05).run(burst=True, handle_signals=False)
        [job] = queue.list()
    assert job.status == "succeeded", job
    assert statuses(world) == [("review / checks", "failed", "1 of 2 checks failed: app-clean")]


def ci_env(world: World, checkout: Path, head: str) -> dict[str, str]:
    return {
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_MERGE_REQUEST_IID": "1",
        "CI_MERGE_REQUEST_PROJECT_ID": str(PROJECT_ID),
        "CI_PROJECT_ID": str(PROJECT_ID),
        "CI_API_V4_URL": f"{world.gitlab.url}/api/v4",
        "CI_PROJECT_DIR": str(checkout),
        "CI_COMMIT_SHA": head,
        "CI_PIPELINE_ID": "4242",
        "REVIEWBOT_CONFIG": "",
        "REVIEWBOT_GITLAB_TOKEN": BOT_TOKEN,
        "REVIEWBOT_LLM_BASE_URL": world.vllm.base_url,
        "REVIEWBOT_DATABASE_URL": world.database_url,
        "REVIEWBOT_GITLAB_NOTES_PER_MINUTE": "60000",
    }


@pytest.mark.parametrize(
    ("options", "exit_code"),
    [
        ([], EXIT_OK),
        (["--fail-on-checks"], EXIT_FINDINGS),
        (["--fail-on", "critical"], EXIT_FINDINGS),
    ],
)
def test_ci_posts_the_status_in_its_pipeline_and_fail_on_checks_fails_the_job(
    world: World, tmp_path: Path, options: list[str], exit_code: int
) -> None:
    with_checks(world)
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", f"file://{world.repo}", str(checkout))
    head = git(world.repo, "rev-parse", "feature")
    git(checkout, "checkout", "-q", head)
    result = CliRunner().invoke(ci_command, options, env=ci_env(world, checkout, head))
    assert result.exit_code == exit_code, result.output
    [status] = world.gitlab.commit_statuses(PROJECT_ID, head)
    assert (status["status"], status["pipeline_id"]) == ("failed", 4242)
    if "--fail-on-checks" in options:
        assert "1 check(s) did not pass (app-clean): failing the job" in result.output


def test_ci_with_an_incomplete_review_fails_the_job_and_the_status(
    world: World, tmp_path: Path
) -> None:
    with_checks(world)
    world.vllm.add_faults(*["stream_cut_mid_call"] * EVERY_TRY)
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", f"file://{world.repo}", str(checkout))
    head = git(world.repo, "rev-parse", "feature")
    result = CliRunner().invoke(ci_command, [], env=ci_env(world, checkout, head))
    assert result.exit_code == EXIT_FAILURE, result.output
    assert statuses(world)[-1][1:] == ("failed", "review incomplete: 1 of 1 chunks not reviewed")


def test_a_run_killed_midway_is_canceled_by_the_next_run_on_a_newer_head(world: World) -> None:
    """The process died (no `except` ran): its review stayed `running` and its status
    `pending`; the next run of the MR, on the pushed head, cancels that status."""
    with_checks(world)
    first_head = git(world.repo, "rev-parse", "feature")
    settings = world.settings()
    with App(settings) as app:
        gitlab = app.gitlab()
        snapshot = gitlab.snapshot(PROJECT, 1)
        refs = snapshot.diff_refs
        app.store.start_review(
            project=PROJECT,
            mr_iid=1,
            head_sha=first_head,
            base_sha=refs.base_sha,
            start_sha=refs.start_sha,
            trigger="webhook",
            model="",
            prompt_version="",
            key=MergeRequestKey(gitlab.url, PROJECT_ID, 1),
            dry_run=False,
        )
        gitlab.set_commit_status(
            PROJECT_ID,
            first_head,
            "reviewbot",
            CommitStatus(CommitState.PENDING, "started"),
            ref="feature",
        )
    head = commit_on_feature(world.repo, {"app.py": CLEAN_APP}, "fix app.py")
    world.gitlab.push(PROJECT, 1, head)
    world.run()
    assert statuses(world, first_head) == [
        ("reviewbot", "canceled", f"review interrupted; superseded by the review of {head[:8]}")
    ]
    assert statuses(world, head)[0][1] == "success"


ASKED = """\
rules:
  - name: parser-safe
    paths: ["app.py"]
    check:
      ask: Is every parser in app.py safe on untrusted text?
  - name: docs-ok
    paths: ["docs/**"]
    check:
      ask: Are the docs updated?
"""


def test_a_model_judged_check_is_asked_once_and_its_verdict_is_the_status(world: World) -> None:
    commit_on_target(world, {".reviewbot/rules.yaml": ASKED}, "asked checks")
    head = commit_on_feature(
        world.repo, {"util.py": "def clamp(v):\n    return v  # check-fails\n"}, "marked"
    )
    world.gitlab.push(PROJECT, 1, head)
    report = world.run()
    asked = [
        body
        for body in world.vllm.requests
        if any(t["function"]["name"] == "check_verdict" for t in body.get("tools") or [])
    ]
    assert len(asked) == 1  # docs-ok: no changed file in its paths, no call
    prompt = asked[0]["messages"][-1]["content"]
    assert "Is every parser in app.py safe" in prompt and '<file path="app.py"' in prompt
    assert '<file path="util.py"' not in prompt  # only the check's paths
    verdicts = {v.name: (v.outcome.value, v.reason) for v in report.checks.verdicts}
    assert verdicts["parser-safe"][0] == "pass"
    assert verdicts["docs-ok"] == ("pass", "no changed file in its paths")
    assert statuses(world)[-1][1:] == ("success", "all 2 checks passed")
    purposes = [c.purpose for c in report.review.calls]
    assert "check" not in purposes  # the review's calls; the check's call is stored apart
    calls = Store.from_url(world.database_url).llm_calls(report.review_id)
    assert [c["purpose"] for c in calls].count("check") == 1

    head = commit_on_feature(world.repo, {"app.py": CLEAN_APP + "# check-fails\n"}, "fails")
    world.gitlab.push(PROJECT, 1, head)
    world.run()
    assert statuses(world, head) == [("reviewbot", "failed", "1 of 2 checks failed: parser-safe")]
    assert "| parser-safe | ❌ fail | the model: app.py:7 is marked failing |" in summary_body(
        world
    )


def test_reviewbot_run_says_what_the_checks_came_to(world: World) -> None:
    with_checks(world)
    env = {**world.command_env("unused"), "REVIEWBOT_GITLAB_NOTES_PER_MINUTE": "60000"}
    result = CliRunner().invoke(main, ["run", "1", "--project", PROJECT], env=env)
    assert result.exit_code == 0, result.output
    assert (
        "Checks: failed: 1 of 2 checks failed: app-clean (commit status `reviewbot`)"
        in " ".join(result.stdout.split())
    )
