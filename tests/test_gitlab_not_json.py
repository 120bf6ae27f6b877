"""GitLab's URL answering a success that is not the API's JSON (issue 17 item 3, defect D1).

The API answers every success with ``application/json`` (raw files: their own type; 204:
nothing). Whatever else answers a 2xx there (a proxy's text/plain page, XHTML, a body without a
Content-Type, JSON cut short or garbled, JSON of the wrong shape, JSON nested 100,000 deep)
is refused before python-gitlab parses it or hands it back as if it were data: one line, no
traceback, nothing written. A web page in another type is a wrong REVIEWBOT_GITLAB_URL (exit
2, never retried, like the sign-in page in tests/test_gitlab_sign_in_page.py); JSON that does
not parse is a body cut short on the way (read again, then exit 1 and the job retried); JSON
of the wrong shape or depth is GitLab's failure (exit 1, not retried).

The fake GitLab answers like that after ``answer_with(body, content_type=...)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import requests
from click.testing import CliRunner, Result

from reviewbot.app import App
from reviewbot.commands import main
from reviewbot.queue import Job, JobQueue
from reviewbot.worker import Worker, run_job
from tests.mr_world import BOT_TOKEN, PROJECT, World, git, world  # noqa: F401
from tests.stderr_lines import error_lines

NESTING = 100_000
URL_FIX = "set REVIEWBOT_GITLAB_URL to the instance root"
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2


@dataclass(frozen=True)
class Answer:
    """What stands at the GitLab URL, and the one line every entry point must give for it."""

    content_type: str | None
    body: str
    line: str  # a regex; {url} is the fake's URL
    exit_code: int
    retried: bool  # by the worker (a transient failure)

    def expected(self, url: str) -> re.Pattern[str]:
        return re.compile(self.line.replace("{url}", re.escape(url)))


def _not_the_api(what: str) -> str:
    return re.escape(f"GitLab URL answered {what}, not the API JSON: {URL_FIX}")


def _answered(problem: str) -> str:
    return r"GitLab at {url} answered (GET|POST|PUT) /api/v4/\S+ with " + re.escape(problem)


GARBLED = "JSON that does not parse (cut short on the way?)"
ANSWERS = {
    "text/plain": Answer(
        "text/plain; charset=utf-8", "OK\n", _not_the_api("text/plain"), EXIT_BAD_INPUT, False
    ),
    "xhtml": Answer(
        "application/xhtml+xml",
        '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body/></html>',
        _not_the_api("application/xhtml+xml"),
        EXIT_BAD_INPUT,
        False,
    ),
    "no content type": Answer(
        None, '{"id": 1}', _not_the_api("without a Content-Type"), EXIT_BAD_INPUT, False
    ),
    "garbage json": Answer(
        "application/json", "<<not json>>", _answered(GARBLED), EXIT_FAILURE, True
    ),
    "truncated json": Answer(
        "application/json", '{"id": 1, "username": "revi', _answered(GARBLED), EXIT_FAILURE, True
    ),
    "a list for an object": Answer(
        "application/json",
        '[{"id": 1}]',
        _answered("a JSON array where the API answers an object"),
        EXIT_FAILURE,
        False,
    ),
    "a string": Answer(
        "application/json",
        '"hello"',
        _answered("a JSON string where the API answers an object"),
        EXIT_FAILURE,
        False,
    ),
    "an object without the fields": Answer(
        "application/json",
        "{}",
        r"GitLab at {url} answered without the field '\w+' while \S.*",
        EXIT_FAILURE,
        False,
    ),
    "nested 100,000 deep": Answer(
        "application/json",
        "[" * NESTING + "]" * NESTING,
        _answered("JSON nested too deep to parse"),
        EXIT_FAILURE,
        False,
    ),
}
CASES = [pytest.param(answer, id=name) for name, answer in ANSWERS.items()]


def _env(world: World) -> dict[str, str]:  # noqa: F811
    return world.command_env(webhook_secret="not-json-secret")


def _answer_everything_with(world: World, answer: Answer) -> None:  # noqa: F811
    world.gitlab.answer_with(answer.body, content_type=answer.content_type)


def _assert_one_line(result: Result, answer: Answer, url: str) -> None:
    assert result.exit_code == answer.exit_code, result.output
    assert "Traceback" not in result.output
    [line] = error_lines(result.stderr)
    prefix = "reviewbot: error: "
    assert line.startswith(prefix), line
    assert answer.expected(url).fullmatch(line[len(prefix) :]), line


@pytest.mark.slow
@pytest.mark.parametrize("answer", CASES)
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["run", "1", "--project", PROJECT], id="run"),
        pytest.param(["serve", "--port", "1"], id="serve"),  # asks who the bot is first
    ],
)
def test_a_command_says_so_in_one_line_and_writes_nothing(
    world: World,  # noqa: F811
    args: list[str],
    answer: Answer,
) -> None:
    _answer_everything_with(world, answer)
    result = CliRunner().invoke(main, args, env=_env(world))
    world.gitlab.clear_answers()
    _assert_one_line(result, answer, world.gitlab.url)
    assert world.gitlab.notes(PROJECT, 1) == [] and world.gitlab.discussions(PROJECT, 1) == []


@pytest.mark.slow
@pytest.mark.parametrize("answer", CASES)
def test_feedback_sync_says_so_in_one_line(world: World, answer: Answer) -> None:  # noqa: F811
    world.run()  # a review on record, so sync has an MR to read
    _answer_everything_with(world, answer)
    result = CliRunner().invoke(main, ["feedback", "sync", "--since", "1d"], env=_env(world))
    _assert_one_line(result, answer, world.gitlab.url)


@pytest.mark.slow
@pytest.mark.parametrize("answer", CASES)
def test_doctor_fails_the_gitlab_check_with_that_line(
    world: World,  # noqa: F811
    answer: Answer,
) -> None:
    _answer_everything_with(world, answer)
    result = CliRunner().invoke(main, ["doctor", "--json"], env=_env(world))
    assert result.exit_code == EXIT_FAILURE, result.output
    checks = {check["name"]: check for check in json.loads(result.stdout)["checks"]}
    assert checks["gitlab"]["status"] == "fail"
    assert answer.expected(world.gitlab.url).fullmatch(checks["gitlab"]["detail"])
    assert "REVIEWBOT_GITLAB_URL" in checks["gitlab"]["fix"]
    assert "gitlab token" not in checks  # nothing more is asked of what is not the API


@pytest.mark.slow
@pytest.mark.parametrize("answer", CASES)
def test_the_worker_retries_only_what_may_pass(world: World, answer: Answer) -> None:  # noqa: F811
    head = git(world.repo, "rev-parse", "feature")
    with App(world.settings()) as app:
        queue = JobQueue(app.store, backoff_base_s=60, backoff_max_s=60)
        queue.enqueue(project=PROJECT, mr_iid=1, head_sha=head, trigger="webhook")
        _answer_everything_with(world, answer)

        def handler(job: Job) -> None:
            run_job(app, job)

        Worker(app, queue, handler=handler, poll_s=0.02).run(burst=True, handle_signals=False)
        [job] = queue.list()
    world.gitlab.clear_answers()
    assert job.attempts == 1
    assert job.status == ("queued" if answer.retried else "failed")
    kind, _, message = (job.error or "").partition(": ")
    assert kind.startswith("GitLab") and answer.expected(world.gitlab.url).fullmatch(message)
    assert world.gitlab.notes(PROJECT, 1) == [] and world.gitlab.discussions(PROJECT, 1) == []


@pytest.mark.slow
def test_a_body_cut_short_once_is_read_again(world: World) -> None:  # noqa: F811
    """A proxy cutting one answer short costs a retry, not the review."""
    world.gitlab.answer_with('[{"id": 1, "head_commit', path_pattern=r"/versions$", times=1)
    result = CliRunner().invoke(main, ["run", "1", "--project", PROJECT], env=_env(world))
    assert result.exit_code == 0, result.output
    assert world.gitlab.discussions(PROJECT, 1)
    versions = [path for method, path in world.gitlab.requests if path.endswith("/versions")]
    assert len(versions) == 2


@pytest.mark.slow
def test_an_object_where_a_list_is_answered_is_refused_once(world: World) -> None:  # noqa: F811
    """A wrong shape is not retried: the same URL gives the same answer."""
    world.gitlab.answer_with('{"id": 1}', path_pattern=r"/discussions$")
    result = CliRunner().invoke(main, ["run", "1", "--project", PROJECT], env=_env(world))
    world.gitlab.clear_answers()
    assert result.exit_code == EXIT_FAILURE, result.output
    assert error_lines(result.stderr) == [
        f"reviewbot: error: GitLab at {world.gitlab.url} answered GET "
        "/api/v4/projects/7/merge_requests/1/discussions with a JSON object where the API "
        "answers an array of objects"
    ]
    discussions = [path for method, path in world.gitlab.requests if path.endswith("/discussions")]
    assert len(discussions) == 1
    assert world.gitlab.discussions(PROJECT, 1) == []


def test_a_raw_file_keeps_its_own_type(world: World) -> None:  # noqa: F811
    """The raw file endpoint answers the file (text/plain here), never JSON: it is read."""
    with App(world.settings()) as app:
        client = app.gitlab()
        head = git(world.repo, "rev-parse", "feature")
        contents = client.file_contents(7, head, ["app.py"])
    assert "def parse(text):" in contents["app.py"]


def _api_json(world: World, path: str) -> object:  # noqa: F811
    """What the fake GitLab's API answers at ``path``, read as any client would."""
    response = requests.get(
        f"{world.gitlab.url}/api/v4{path}", headers={"PRIVATE-TOKEN": BOT_TOKEN}, timeout=10
    )
    response.raise_for_status()
    return response.json()


def _mr_with(world: World, field: str, value: object) -> str:  # noqa: F811
    mr = _api_json(world, "/projects/7/merge_requests/1")
    assert isinstance(mr, dict)
    return json.dumps({**mr, field: value})


def _diffs_without(world: World, field: str) -> str:  # noqa: F811
    entries = _api_json(world, "/projects/7/merge_requests/1/diffs")
    assert isinstance(entries, list) and entries
    return json.dumps([{k: v for k, v in entry.items() if k != field} for entry in entries])


@pytest.mark.parametrize(
    ("path_pattern", "answer", "detail"),
    [
        pytest.param(
            r"/merge_requests/1$",
            lambda w: _mr_with(w, "diff_refs", "not an object"),
            "'str' object has no attribute 'get'",
            id="diff_refs a string",
        ),
        pytest.param(
            r"/merge_requests/1$",
            lambda w: _mr_with(w, "iid", "one"),
            "invalid literal for int() with base 10: 'one'",
            id="iid not a number",
        ),
        pytest.param(
            r"/merge_requests/1/diffs$",
            lambda w: _diffs_without(w, "old_path"),
            "GitLab diff entry without 'old_path'",
            id="a diff entry without old_path",
        ),
    ],
)
def test_a_field_of_the_wrong_shape_inside_an_answer_is_one_line(
    world: World,  # noqa: F811
    path_pattern: str,
    answer: Callable[[World], str],
    detail: str,
) -> None:
    """The top-level shape is right, a field inside is not: one line naming it, exit 1, the
    worker would not retry it (GitLabBadAnswerError), nothing posted."""
    world.gitlab.answer_with(answer(world), method="GET", path_pattern=path_pattern)
    result = CliRunner().invoke(main, ["run", "1", "--project", PROJECT], env=_env(world))
    world.gitlab.clear_answers()
    assert result.exit_code == EXIT_FAILURE, result.output
    assert "Traceback" not in result.output
    assert error_lines(result.stderr) == [
        f"reviewbot: error: GitLab at {world.gitlab.url} answered a field of the wrong shape "
        f"while reading merge request !1: {detail}"
    ]
    assert world.gitlab.notes(PROJECT, 1) == [] and world.gitlab.discussions(PROJECT, 1) == []
