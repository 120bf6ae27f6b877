"""Context the review meant to show and could not read is named, never lost in silence (issue 32,
item 6): a GitLab that answers 404 on ``/repository/tree`` (a proxy in front of it, a token of
narrower scope, an older GitLab), with the repository cache off so every file goes through the
API (reviewbot.repo.api_view).

Without the tree listing no file can be told from a symbolic link or a submodule, so none is
read: the head files (and with them the enclosing-scope context), ``.reviewbot.toml``, the rules
files and the repository tools are all missing. The summary says which in its run details and
why in its warnings, and never that a rules file "does not exist".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reviewbot.gitlab import GitLabClient, GitLabSettings
from reviewbot.repo.api_view import ApiView
from reviewbot.repo.files import RepoFiles
from reviewbot.repo.tools import RepositoryTools, ToolForm
from reviewbot.repo.view import PathRefused, TreeUnavailable
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.vllm_server import FakeVLLM
from tests.mr_world import BASE_APP, BOT_TOKEN, FEATURE_APP, PROJECT, World, git, init_repo
from tests.store_fixtures import store_url  # noqa: F401
from tests.test_repo_sources import PROJECT_ID, make_tree_repo

pytestmark = pytest.mark.slow  # measured: see docs/development.md

TREE_ROUTE = r"/repository/tree$"
NOT_FOUND = '{"message":"404 Not Found"}'
CACHE_OFF = 0  # repo_cache_max_bytes: every file through GitLab's API
RULES_FILE = "AGENTS.md"


def block_tree_listing(gitlab: FakeGitLab) -> None:
    """Every ``/repository/tree`` request answered 404, as a blocking proxy would."""
    gitlab.answer_with(NOT_FOUND, status=404, method="GET", path_pattern=TREE_ROUTE)


def summary_body(world: World) -> str:
    [summary] = [n for n in world.gitlab.notes(PROJECT, 1) if "reviewbot:summary" in n["body"]]
    return summary["body"]


def run_details(body: str) -> str:
    return body[body.index("Run details") :]


def warnings_of(body: str) -> str:
    return body[body.index("Warnings") : body.index("Run details")]


@pytest.fixture
def world_with_rules(tmp_path: Path, store_url: str) -> Iterator[World]:  # noqa: F811
    """MR !1 changes app.py; the target branch holds a rules context file."""
    repo = tmp_path / "repo"
    init_repo(repo)
    (repo / "app.py").write_text(BASE_APP)
    (repo / RULES_FILE).write_text("# Rules\n\nNever use eval.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "checkout", "-qb", "feature")
    (repo / "app.py").write_text(FEATURE_APP)
    git(repo, "commit", "-qam", "feature")
    with FakeGitLab() as gitlab, FakeVLLM() as vllm:
        gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        gitlab.add_project(PROJECT, project_id=7)
        gitlab.add_mr_from_git(PROJECT, repo, "main", "feature", iid=1, title="Parse")
        yield World(repo, gitlab, vllm, store_url, tmp_path / "repo-cache")


def test_a_tree_gitlab_will_not_list_is_named_in_the_run_details(world_with_rules: World) -> None:
    world = world_with_rules
    block_tree_listing(world.gitlab)
    report = world.run(repo_cache_max_bytes=CACHE_OFF, rules_context_files=[RULES_FILE], tools="on")
    body = summary_body(world)
    details = run_details(body)
    assert "| Context not read |" in details
    assert ".reviewbot.toml and the rules files of the target branch" in details
    assert "the changed files at the head and their enclosing scope" in details
    assert "the repository tools" in details
    warnings = warnings_of(body)
    assert "GitLab answered 404 when listing the repository tree" in warnings
    assert "were not read at the head" in warnings
    assert "the repository tools were not offered" in warnings
    assert "does not exist" not in body  # nothing was looked at: nothing is said missing
    assert report.review.complete  # the diff itself was reviewed
    assert report.review.tools == ""  # no tool was offered to the model


def test_the_same_review_with_the_tree_listed_names_nothing_missing(
    world_with_rules: World,
) -> None:
    world = world_with_rules
    world.run(repo_cache_max_bytes=CACHE_OFF, rules_context_files=[RULES_FILE], tools="on")
    body = summary_body(world)
    assert "Context not read" not in body
    assert "listing the repository tree" not in body
    assert "does not exist" not in body


def test_a_missing_rules_file_is_still_said_missing_when_the_tree_is_listed(
    world: World,
) -> None:
    world.run(repo_cache_max_bytes=CACHE_OFF, rules_context_files=[RULES_FILE])
    assert f"{RULES_FILE} does not exist at the target branch" in summary_body(world)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[FakeGitLab, GitLabClient, str]]:
    _repo, sha = make_tree_repo(tmp_path / "repo")
    with FakeGitLab() as gitlab:
        gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        gitlab.add_project("group/tree", project_id=PROJECT_ID)
        gitlab.add_mr_from_git("group/tree", tmp_path / "repo", "main", "main", iid=1)
        client = GitLabClient(GitLabSettings(url=gitlab.url, token=BOT_TOKEN, max_retries=0))
        yield gitlab, client, sha
        client.close()


def test_the_api_view_raises_instead_of_saying_no_such_file(served) -> None:
    gitlab, client, sha = served
    block_tree_listing(gitlab)
    view = ApiView(client, PROJECT_ID, sha)
    with pytest.raises(TreeUnavailable, match="404 when listing the repository tree"):
        view.read_bytes("src/main.py")
    with pytest.raises(TreeUnavailable):
        view.read_many(["link.txt", "src/main.py"])
    with pytest.raises(TreeUnavailable):
        view.entries()


def test_a_folder_that_is_not_there_is_still_no_such_file(served) -> None:
    _gitlab, client, sha = served
    view = ApiView(client, PROJECT_ID, sha)
    with pytest.raises(PathRefused, match="no such file"):
        view.read_bytes("nowhere/file.py")
    assert view.read_bytes("src/main.py") == b"print('main')\n"


def test_the_run_reader_asks_once_and_says_why_after(served) -> None:
    gitlab, client, sha = served
    block_tree_listing(gitlab)
    files = RepoFiles(lambda at: ApiView(client, PROJECT_ID, at))
    with pytest.raises(TreeUnavailable):
        files.read(sha, ["src/main.py"])
    asked = len(gitlab.requests)
    with pytest.raises(TreeUnavailable):
        files.read(sha, ["src/other.py"])
    assert len(gitlab.requests) == asked
    assert "404 when listing the repository tree" in files.unlisted(sha)
    assert files.unlisted("0" * 40) == ""


def test_a_tool_call_on_an_unlisted_tree_is_a_refusal_not_a_crash(served) -> None:
    gitlab, client, sha = served
    block_tree_listing(gitlab)
    tools = RepositoryTools(ApiView(client, PROJECT_ID, sha), form=ToolForm.TYPED)
    answer = tools.answer("read_file", '{"path": "src/main.py"}', 500)
    assert answer.refused
    assert "the repository cannot be read" in answer.text
