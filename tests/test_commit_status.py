"""The commit status adapter (reviewbot.gitlab.statuses) against the fake GitLab, whose statuses
follow GitLab's state machine and its 400 texts (tests/fakes/commit_statuses.py).

API: https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit and
https://docs.gitlab.com/api/commits/#list-the-statuses-of-a-commit.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from reviewbot.gitlab import GitLabClient, GitLabError, GitLabSettings
from reviewbot.rules.check_verdicts import CommitState, CommitStatus
from tests.fakes.gitlab_server import FakeGitLab

TOKEN = "bot-token"
PROJECT = "group/app"
PROJECT_ID = 7
NAME = "reviewbot"
STATUSES = rf"/projects/{PROJECT_ID}/statuses/"
PENDING = CommitStatus(CommitState.PENDING, "review started: 1 check(s)")
SUCCESS = CommitStatus(CommitState.SUCCESS, "all 1 checks passed")
FAILED = CommitStatus(CommitState.FAILED, "1 of 1 checks failed: c")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("repo")
    for args in (
        ["init", "-q", "-b", "main"],
        ["-c", "user.email=d@e.x", "-c", "user.name=D", "commit", "-q", "--allow-empty", "-m", "c"],
    ):
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)
    sha = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return path, sha


@pytest.fixture
def fake(repo: tuple[Path, str]) -> Iterator[FakeGitLab]:
    with FakeGitLab() as server:
        server.add_user("reviewbot", token=TOKEN, bot=True)
        server.add_project(PROJECT, project_id=PROJECT_ID)
        server.set_repository(PROJECT, repo[0], "main")
        yield server


@pytest.fixture
def client(fake: FakeGitLab) -> GitLabClient:
    return GitLabClient(
        GitLabSettings(url=fake.url, token=TOKEN, max_retries=2), sleep=lambda _: None
    )


def _states(fake: FakeGitLab, sha: str) -> list[tuple[str, str | None]]:
    return [(s["status"], s["description"]) for s in fake.commit_statuses(PROJECT_ID, sha)]


def test_the_fake_refuses_the_same_state_again_with_gitlab_s_text(
    fake: FakeGitLab, repo: tuple[Path, str]
) -> None:
    url = f"{fake.url}/api/v4/projects/{PROJECT_ID}/statuses/{repo[1]}"
    headers = {"PRIVATE-TOKEN": TOKEN}
    first = requests.post(url, data={"state": "pending", "name": NAME}, headers=headers, timeout=5)
    assert first.status_code == 201 and first.json()["status"] == "pending"
    again = requests.post(url, data={"state": "pending", "name": NAME}, headers=headers, timeout=5)
    assert again.status_code == 400
    assert again.json() == {
        "message": "Cannot transition status via :enqueue from :pending "
        '(Reason(s): Status cannot transition via "enqueue")'
    }
    bad = requests.post(url, data={"state": "done", "name": NAME}, headers=headers, timeout=5)
    assert (bad.status_code, bad.json()) == (400, {"error": "state does not have a valid value"})
    missing = requests.post(
        f"{fake.url}/api/v4/projects/{PROJECT_ID}/statuses/{'0' * 40}",
        data={"state": "pending"},
        headers=headers,
        timeout=5,
    )
    assert (missing.status_code, missing.json()) == (404, {"message": "404 Commit Not Found"})


def test_pending_then_success_and_each_write_once(
    client: GitLabClient, fake: FakeGitLab, repo: tuple[Path, str]
) -> None:
    sha = repo[1]
    client.set_commit_status(PROJECT_ID, sha, NAME, PENDING, target_url="http://x/mr/1")
    client.set_commit_status(PROJECT_ID, sha, NAME, PENDING)  # a retried job: nothing posted
    assert _states(fake, sha) == [("pending", PENDING.description)]
    client.set_commit_status(PROJECT_ID, sha, NAME, SUCCESS, target_url="http://x/mr/1#note_3")
    client.set_commit_status(PROJECT_ID, sha, NAME, SUCCESS)
    assert _states(fake, sha) == [("success", SUCCESS.description)]
    assert client.commit_status(PROJECT_ID, sha, NAME)["target_url"] == "http://x/mr/1#note_3"


def test_a_new_review_of_a_finished_head_starts_a_new_status(
    client: GitLabClient, fake: FakeGitLab, repo: tuple[Path, str]
) -> None:
    sha = repo[1]
    for status in (PENDING, FAILED, PENDING, SUCCESS):
        client.set_commit_status(PROJECT_ID, sha, NAME, status)
    assert [state for state, _ in _states(fake, sha)] == ["failed", "success"]
    assert client.commit_status(PROJECT_ID, sha, NAME)["status"] == "success"


@pytest.mark.parametrize("fault", ["stored:502", "stored:cut", "stored:500"])
def test_a_write_whose_answer_was_lost_is_not_written_twice(
    client: GitLabClient, fake: FakeGitLab, repo: tuple[Path, str], fault: str
) -> None:
    sha = repo[1]
    fake.add_fault_for("POST", STATUSES, fault)
    client.set_commit_status(PROJECT_ID, sha, NAME, PENDING)
    fake.add_fault_for("POST", STATUSES, fault)
    client.set_commit_status(PROJECT_ID, sha, NAME, FAILED)
    assert _states(fake, sha) == [("failed", FAILED.description)]


def test_the_transition_400_for_the_state_already_there_is_done(
    client: GitLabClient, fake: FakeGitLab, repo: tuple[Path, str]
) -> None:
    """The first read saw no status (a stale read, or another writer in between): the write is
    refused with GitLab's 400, which the status read back shows to be the state wanted."""
    sha = repo[1]
    client.set_commit_status(PROJECT_ID, sha, NAME, PENDING)
    fake.answer_with("[]", method="GET", path_pattern=r"/statuses$", times=1)
    client.set_commit_status(PROJECT_ID, sha, NAME, PENDING)
    assert _states(fake, sha) == [("pending", PENDING.description)]
    posts = [path for method, path in fake.requests if method == "POST"]
    assert len(posts) == 2  # the second was sent, refused, and read as done


def test_a_refused_transition_to_another_state_is_an_error(
    client: GitLabClient, fake: FakeGitLab, repo: tuple[Path, str]
) -> None:
    sha = repo[1]
    client.set_commit_status(PROJECT_ID, sha, NAME, CommitStatus(CommitState.RUNNING, "r"))
    with pytest.raises(GitLabError, match="Cannot transition status via :enqueue from :running"):
        client.set_commit_status(PROJECT_ID, sha, NAME, PENDING)
