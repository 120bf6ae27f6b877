"""The repository sources behind RepositoryView: GitLab's repository API (reviewbot.repo.api_view
through reviewbot.gitlab.RepositoryReader, against the fake GitLab over real HTTP) and a local
git repository's object database (reviewbot.repo.git_view, the CI checkout's and the cache's),
held to the same confinement: a symlink is a symlink and never read, a submodule is never
entered, a path that would leave the tree never reaches git or GitLab.

API references: https://docs.gitlab.com/api/repositories/#list-repository-tree (entries, keyset
pagination), https://docs.gitlab.com/api/repository_files/#get-raw-file-from-repository.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewbot.gitlab import GitLabClient, GitLabSettings
from reviewbot.repo.api_view import ApiView
from reviewbot.repo.git_view import GitTreeView
from reviewbot.repo.search import SearchLimits
from reviewbot.repo.tools import RepositoryTools, ToolForm, ToolLimits
from reviewbot.repo.tree import Tree, checked_path
from reviewbot.repo.view import Entry, EntryKind, PathRefused, RepositoryView
from tests.fakes.gitlab_server import FakeGitLab
from tests.hypothesis_profiles import examples
from tests.mr_world import BOT_TOKEN, git, init_repo

PROJECT = "group/tree"
PROJECT_ID = 11
MANY_FILES = 230  # three keyset pages of 100
HOSTILE_PATHS = (
    "../outside.txt",
    "/etc/passwd",
    "src/../../outside.txt",
    "src/./main.py",
    "src//main.py",
    "src\\main.py",
    "src/main.py\n",
    "src/\x00main.py",
    "",
    "..",
)


def make_tree_repo(path: Path) -> tuple[Path, str]:
    """A repository with files in folders, a symlink out of the tree, a submodule entry and
    many files (more than one page of the tree API)."""
    init_repo(path)
    (path / "src").mkdir()
    (path / "src" / "main.py").write_text("print('main')\n")
    (path / "many").mkdir()
    for index in range(MANY_FILES):
        (path / "many" / f"f{index:03}.txt").write_text(f"{index}\n")
    (path / "link.txt").symlink_to("../outside.txt")
    (path.parent / "outside.txt").write_text("secret outside the tree\n")
    git(path, "add", "-A")
    submodule_commit = "0123456789abcdef0123456789abcdef01234567"
    git(path, "update-index", "--add", "--cacheinfo", f"160000,{submodule_commit},vendor/lib")
    git(path, "commit", "-qm", "tree")
    return path, git(path, "rev-parse", "HEAD")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[FakeGitLab, GitLabClient, Path, str]]:
    repo, sha = make_tree_repo(tmp_path / "repo")
    with FakeGitLab() as gitlab:
        gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        gitlab.add_project(PROJECT, project_id=PROJECT_ID)
        gitlab.add_mr_from_git(PROJECT, repo, "main", "main", iid=1)
        client = GitLabClient(GitLabSettings(url=gitlab.url, token=BOT_TOKEN, max_retries=0))
        yield gitlab, client, repo, sha
        client.close()


def tree_requests(gitlab: FakeGitLab) -> list[str]:
    return [path for _, path in gitlab.requests if path.endswith("/repository/tree")]


def raw_requests(gitlab: FakeGitLab) -> list[str]:
    return [path for _, path in gitlab.requests if "/repository/files/" in path]


def expected_kinds() -> dict[str, EntryKind]:
    kinds = {f"many/f{index:03}.txt": EntryKind.FILE for index in range(MANY_FILES)}
    kinds |= {
        "src/main.py": EntryKind.FILE,
        "link.txt": EntryKind.SYMLINK,
        "vendor/lib": EntryKind.SUBMODULE,
    }
    return kinds


@pytest.mark.slow
def test_the_api_view_lists_the_whole_tree_across_keyset_pages(served) -> None:
    gitlab, client, _repo, sha = served
    view = ApiView(client, PROJECT_ID, sha)
    entries = view.entries()
    assert {entry.path: entry.kind for entry in entries} == expected_kinds()
    assert [entry.path for entry in entries] == sorted(expected_kinds())
    assert len(tree_requests(gitlab)) == 3  # 233 entries and 3 folders, 100 a page
    view.entries()
    assert len(tree_requests(gitlab)) == 3  # listed once


@pytest.mark.slow
def test_a_gitlab_that_answers_offset_pages_is_read_whole_too(served) -> None:
    gitlab, client, _repo, sha = served
    gitlab.tree_keyset = False
    entries = ApiView(client, PROJECT_ID, sha).entries()
    assert {entry.path: entry.kind for entry in entries} == expected_kinds()
    assert len(tree_requests(gitlab)) == 3  # the Link header's next page, followed


@pytest.mark.slow
def test_the_git_view_lists_the_same_tree_from_the_object_database(served) -> None:
    _gitlab, _client, repo, sha = served
    (repo / "src" / "main.py").write_text("changed in the working tree, not committed\n")
    view = GitTreeView(repo, sha)
    assert {entry.path: entry.kind for entry in view.entries()} == expected_kinds()
    assert view.read_bytes("src/main.py") == b"print('main')\n"  # the commit's, not the file's


@pytest.mark.slow
def test_reading_a_file_through_the_api_lists_only_its_folder(served) -> None:
    gitlab, client, _repo, sha = served
    view = ApiView(client, PROJECT_ID, sha)
    assert view.read_bytes("src/main.py") == b"print('main')\n"
    assert view.read_many(["src/main.py", "src/gone.py", "link.txt"]) == {
        "src/main.py": b"print('main')\n"
    }
    assert len(tree_requests(gitlab)) == 2  # src/ and the root, each once
    assert len(raw_requests(gitlab)) == 2  # the symlink and the missing file are not asked


def views(served) -> dict[str, RepositoryView]:
    _gitlab, client, repo, sha = served
    return {"api": ApiView(client, PROJECT_ID, sha), "git": GitTreeView(repo, sha)}


@pytest.mark.slow
@pytest.mark.parametrize("source", ["api", "git"])
def test_a_symlink_is_listed_as_one_and_never_read(served, source: str) -> None:
    view = views(served)[source]
    with pytest.raises(PathRefused, match="symbolic link"):
        view.read_bytes("link.txt")


@pytest.mark.slow
@pytest.mark.parametrize("source", ["api", "git"])
def test_a_submodule_is_never_entered(served, source: str) -> None:
    view = views(served)[source]
    with pytest.raises(PathRefused, match="submodule"):
        view.read_bytes("vendor/lib")
    with pytest.raises(PathRefused, match="no such file"):
        view.read_bytes("vendor/lib/setup.py")


@pytest.mark.slow
@pytest.mark.parametrize("source", ["api", "git"])
def test_a_file_that_is_not_there_is_refused_with_the_commit(served, source: str) -> None:
    sha = served[3]
    with pytest.raises(PathRefused, match=f"no such file at {sha[:12]}"):
        views(served)[source].read_bytes("src/gone.py")


@pytest.mark.slow
@pytest.mark.parametrize("source", ["api", "git"])
@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_no_path_leaves_the_tree(served, source: str, path: str) -> None:
    gitlab = served[0]
    before = len(gitlab.requests)
    with pytest.raises(PathRefused):
        views(served)[source].read_bytes(path)
    assert len(gitlab.requests) == before  # refused before anything was asked


def test_a_listed_file_gitlab_answers_404_for_is_refused_not_an_error(served) -> None:
    gitlab, client, _repo, sha = served
    view = ApiView(client, PROJECT_ID, sha)
    gitlab.add_fault_for("GET", r"/repository/files/src%2Fmain\.py/raw", "404")
    with pytest.raises(PathRefused, match="no such file"):
        view.read_bytes("src/main.py")
    assert view.read_bytes("src/main.py") == b"print('main')\n"  # a fault, not cached
    assert client.raw_file(PROJECT_ID, sha, "src/none.py") is None


ENTRIES = [
    Entry("a/b.py", EntryKind.FILE),
    Entry("a/link", EntryKind.SYMLINK),
    Entry("sub", EntryKind.SUBMODULE),
]


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=40))
def test_any_path_is_a_listed_regular_file_or_refused(path: str) -> None:
    tree = Tree("f" * 40, ENTRIES)
    try:
        entry = tree.file(path)
    except PathRefused as refused:
        assert str(refused)
        return
    assert entry == Entry("a/b.py", EntryKind.FILE) and path == "a/b.py"


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.sampled_from(["a", "..", ".", "", "b", "/", "\\", "c\x01"]), max_size=6))
def test_an_accepted_path_has_no_part_that_climbs_or_hides(parts: list[str]) -> None:
    path = "/".join(parts)
    try:
        accepted = checked_path(path)
    except PathRefused:
        return
    pieces = accepted.split("/")
    assert not accepted.startswith("/")
    assert all(piece not in ("", ".", "..") for piece in pieces)
    assert "\\" not in accepted and all(ord(char) >= 0x20 for char in accepted)


BIG_FILE_BYTES = 3_000_000
BINARY_FILES = 30


@pytest.fixture
def heavy(tmp_path: Path) -> Iterator[tuple[FakeGitLab, GitLabClient, str]]:
    """A tree of small binary files and one text file of 3 MB, served by the fake GitLab."""
    repo = init_repo(tmp_path / "heavy")
    (repo / "assets").mkdir()
    for index in range(BINARY_FILES):
        (repo / "assets" / f"b{index:02}.bin").write_bytes(b"\x00PNG" + bytes([index]))
    (repo / "big.txt").write_text("x" * BIG_FILE_BYTES)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "heavy")
    with FakeGitLab() as gitlab:
        gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        gitlab.add_project(PROJECT, project_id=PROJECT_ID)
        gitlab.add_mr_from_git(PROJECT, repo, "main", "main", iid=1)
        client = GitLabClient(GitLabSettings(url=gitlab.url, token=BOT_TOKEN, max_retries=0))
        yield gitlab, client, git(repo, "rev-parse", "HEAD")
        client.close()


def test_a_raw_file_is_read_no_further_than_asked(heavy) -> None:
    _gitlab, client, sha = heavy
    limit = 1000
    assert len(client.raw_file(PROJECT_ID, sha, "big.txt", max_bytes=limit)) == limit + 1
    assert len(client.raw_file(PROJECT_ID, sha, "big.txt")) == BIG_FILE_BYTES


def test_the_tools_through_the_api_are_bounded_in_requests_and_bytes(heavy) -> None:
    """With the cache off, one search once downloaded every file of the tree, skipped or not;
    a file over the size limit was downloaded whole before it was refused."""
    gitlab, client, sha = heavy
    limits = ToolLimits(search=SearchLimits(max_files=10))
    tools = RepositoryTools(ApiView(client, PROJECT_ID, sha), limits, form=ToolForm.TYPED)
    text = tools.answer("search_code", '{"pattern": "needle"}', 4000).text
    assert len(raw_requests(gitlab)) == 10
    assert "skipped 10 binary" in text and "touched the first 10 files" in text
    answer = tools.answer("read_file", '{"path": "big.txt"}', 4000).text
    assert "big.txt is larger than 1,000,000 bytes: not read" in answer
