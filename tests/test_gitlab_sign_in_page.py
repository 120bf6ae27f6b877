"""GitLab's URL answering a sign-in page (HTML, status 200) instead of the API (issue 17 item 3).

A login in front of GitLab (its own /users/sign_in after a redirect, or a single sign-on
proxy) or a wrong path behind a proxy answers every API call with a web page and status 200.
Every command says so in one line, with exit code 2 (a wrong setting), and writes nothing;
`reviewbot doctor` fails its gitlab check with that line; the worker fails the job at once
instead of retrying it; the listener logs one line instead of a traceback (in
tests/test_webhook.py). The fake GitLab answers like that after ``answer_sign_in_page()``.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from reviewbot.app import App
from reviewbot.commands import main
from reviewbot.gitlab.connection import NOT_THE_API
from reviewbot.queue import Job, JobQueue
from reviewbot.worker import Worker, run_job
from tests.mr_world import BOT_TOKEN, PROJECT, World, git, world  # noqa: F401
from tests.stderr_lines import error_lines

NOT_THE_API_TEXT = (
    "GitLab URL answered text/html (a sign-in page?), not the API: "
    "set REVIEWBOT_GITLAB_URL to the instance root"
)


def _env(world: World) -> dict[str, str]:  # noqa: F811
    return world.command_env(webhook_secret="sign-in-secret")


def _assert_one_line_exit_2(result: object) -> None:
    output = getattr(result, "output", "")
    assert getattr(result, "exit_code", None) == 2, output
    stderr = getattr(result, "stderr", "")
    # one error line; the progress lines said before it on a pipe are not counted
    assert error_lines(stderr) == [f"reviewbot: error: {NOT_THE_API_TEXT}"]
    assert "Traceback" not in output


def test_the_message_is_the_one_the_issue_asks_for() -> None:
    assert NOT_THE_API == NOT_THE_API_TEXT


@pytest.mark.parametrize(
    "args",
    [
        ["run", "1", "--project", PROJECT],
        ["run", "1", "--project", PROJECT, "--dry-run"],
        ["serve", "--port", "1"],  # asks GitLab who the bot is before it listens
    ],
)
def test_a_command_says_so_in_one_line_and_writes_nothing(
    world: World,  # noqa: F811
    args: list[str],
) -> None:
    world.gitlab.answer_sign_in_page()
    result = CliRunner().invoke(main, args, env=_env(world))
    _assert_one_line_exit_2(result)
    world.gitlab.answer_sign_in_page(False)
    assert world.gitlab.notes(PROJECT, 1) == [] and world.gitlab.discussions(PROJECT, 1) == []


@pytest.mark.slow
def test_feedback_sync_says_so_in_one_line(world: World) -> None:  # noqa: F811
    world.run()  # a review on record, so sync has an MR to read
    world.gitlab.answer_sign_in_page()
    result = CliRunner().invoke(main, ["feedback", "sync", "--since", "1d"], env=_env(world))
    _assert_one_line_exit_2(result)


@pytest.mark.slow
def test_doctor_fails_the_gitlab_check_with_that_line(world: World) -> None:  # noqa: F811
    world.gitlab.answer_sign_in_page()
    result = CliRunner().invoke(main, ["doctor", "--json"], env=_env(world))
    assert result.exit_code == 1, result.output
    checks = {check["name"]: check for check in json.loads(result.stdout)["checks"]}
    assert checks["gitlab"]["status"] == "fail"
    assert checks["gitlab"]["detail"] == NOT_THE_API_TEXT
    assert "REVIEWBOT_GITLAB_URL is the address you open GitLab at" in checks["gitlab"]["fix"]
    assert "gitlab token" not in checks  # nothing more is asked of a web page


def test_the_worker_fails_the_job_once_without_retrying(world: World) -> None:  # noqa: F811
    head = git(world.repo, "rev-parse", "feature")
    with App(world.settings()) as app:
        queue = JobQueue(app.store, backoff_base_s=0.01, backoff_max_s=0.01)
        queue.enqueue(project=PROJECT, mr_iid=1, head_sha=head, trigger="webhook")
        world.gitlab.answer_sign_in_page()

        def handler(job: Job) -> None:
            run_job(app, job)

        Worker(app, queue, handler=handler, poll_s=0.02).run(burst=True, handle_signals=False)
        [job] = queue.list()
    assert job.status == "failed" and job.attempts == 1
    assert job.error == f"GitLabNotAPIError: {NOT_THE_API_TEXT}"
