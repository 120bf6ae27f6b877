"""The one reader of repository files at a commit (reviewbot.repo.files.RepoFiles) through the
run's repository source (reviewbot.repo.source.RepositorySource) over a local checkout
(reviewbot.repo.localgit.Checkout): real git repositories (full and shallow clones), and a stand-in
for GitLab's repository API that records what it was asked.

The API view's own behaviour (folders, symlinks, 404) is tested with the fake GitLab in
tests/test_repo_sources.py; end to end in CI: tests/test_ci.py.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from reviewbot.repo.files import RepoFiles
from reviewbot.repo.localgit import MAX_CONTENT_BYTES, Checkout, CommitSource, GitError, read_range
from reviewbot.repo.source import RepositorySource
from reviewbot.repo.view import MemoryView, RepositoryView
from tests.mr_world import BASE_APP, FEATURE_APP, UTIL, git, make_repo

API_TEXT = "from the API\n"


class RawFiles:
    """GitLab's repository API as the source sees it: every path asked for exists, with
    API_TEXT, unless it is ``missing``."""

    def __init__(self, missing: frozenset[str] = frozenset()) -> None:
        self.asked: list[tuple[str, tuple[str, ...]]] = []
        self.missing = missing

    def __call__(self, sha: str) -> RepositoryView:
        return _AskedView(self, sha)


class _AskedView(MemoryView):
    def __init__(self, api: RawFiles, sha: str) -> None:
        super().__init__(sha, {})
        self._api = api

    def read_many(self, paths: Sequence[str]) -> Mapping[str, bytes]:
        self._api.asked.append((self.sha, tuple(paths)))
        return {path: API_TEXT.encode() for path in paths if path not in self._api.missing}


def reader(
    api: RawFiles, checkout: Checkout | None = None, warn: list[str] | None = None
) -> RepoFiles:
    heard = warn if warn is not None else []
    return RepoFiles(RepositorySource(api, checkout=checkout, warn=heard.append).at)


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "origin")


def clone(origin: Path, target: Path, *extra: str) -> Path:
    git(origin.parent, "clone", "-q", *extra, f"file://{origin}", str(target))
    return target


def test_a_checkout_with_the_commit_serves_every_read(origin: Path) -> None:
    head = git(origin, "rev-parse", "feature")
    api, said = RawFiles(), []
    files = reader(api, Checkout(origin, said.append))
    assert files.read(head, ["app.py", "util.py", "gone.py"]) == {
        "app.py": FEATURE_APP,
        "util.py": UTIL,
    }
    assert api.asked == []  # absent at a commit the checkout has: absent, not asked for
    assert said == []


def test_each_path_is_read_once_per_commit(origin: Path) -> None:
    head, base = git(origin, "rev-parse", "feature"), git(origin, "rev-parse", "main")
    api = RawFiles(missing=frozenset({"gone.py"}))
    files = reader(api)
    assert files.read(head, ["app.py", "gone.py"]) == {"app.py": API_TEXT}
    assert files.read(head, ["gone.py", "app.py", "util.py"]) == {
        "app.py": API_TEXT,
        "util.py": API_TEXT,
    }
    assert files.read(base, ["app.py"]) == {"app.py": API_TEXT}  # another commit: asked again
    assert api.asked == [(head, ("app.py", "gone.py")), (head, ("util.py",)), (base, ("app.py",))]


@pytest.mark.slow
def test_a_shallow_clone_fetches_a_commit_it_lacks_once(origin: Path, tmp_path: Path) -> None:
    shallow = clone(origin, tmp_path / "shallow", "--depth", "1", "--branch", "main")
    head = git(origin, "rev-parse", "feature")
    api, said = RawFiles(), []
    checkout = Checkout(shallow, said.append)
    files = reader(api, checkout)
    assert files.read(head, ["app.py"]) == {"app.py": FEATURE_APP}
    assert files.read(head, ["util.py"]) == {"util.py": UTIL}
    assert checkout.sources == {head: CommitSource.FETCHED}
    assert said == [f"the checkout lacks {head[:8]} (shallow clone?); fetching it from origin"]
    assert api.asked == []
    base = git(origin, "rev-parse", "main")
    assert files.read(base, ["app.py"]) == {"app.py": BASE_APP}
    assert checkout.sources[base] is CommitSource.LOCAL


@pytest.mark.slow
def test_a_commit_that_cannot_be_fetched_is_read_through_the_api(
    origin: Path, tmp_path: Path
) -> None:
    shallow = clone(origin, tmp_path / "shallow", "--depth", "1", "--branch", "main")
    git(shallow, "remote", "set-url", "origin", f"file://{tmp_path / 'gone'}")
    head = git(origin, "rev-parse", "feature")
    api, said, warnings = RawFiles(), [], []
    checkout = Checkout(shallow, said.append)
    files = reader(api, checkout, warnings)
    assert files.read(head, ["app.py"]) == {"app.py": API_TEXT}
    assert files.read(head, ["util.py"]) == {"util.py": API_TEXT}
    assert checkout.sources == {head: CommitSource.MISSING}
    assert api.asked == [(head, ("app.py",)), (head, ("util.py",))]
    assert len(said) == 2 and said[1].startswith(f"could not fetch {head[:8]} (")
    assert said[1].endswith("reading files from the repository cache or the GitLab API")
    assert warnings == []  # the checkout works; it just lacks the commit


def test_a_folder_that_is_no_checkout_is_warned_about_once(tmp_path: Path) -> None:
    folder = tmp_path / "not-a-repo"
    folder.mkdir()
    api, warnings = RawFiles(), []
    files = reader(api, Checkout(folder), warnings)
    assert files.read("a" * 40, ["app.py"]) == {"app.py": API_TEXT}
    assert files.read("b" * 40, ["util.py"]) == {"util.py": API_TEXT}
    assert warnings == [
        f"local checkout not used ({folder} is not a git repository); reading files from GitLab"
    ]
    assert [paths for _, paths in api.asked] == [("app.py",), ("util.py",)]


OTHER_UID = 54321  # a user that owns nothing else here


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a folder to another user")
def test_a_checkout_git_refuses_is_warned_about_in_gits_words(origin: Path) -> None:
    """A CI runner clones as one user and the reviewbot image runs as another: git refuses such
    a checkout ("dubious ownership"), and the warning says so, with git's own advice, instead of
    calling the checkout no repository."""
    os.chown(origin, OTHER_UID, OTHER_UID)
    api, warnings = RawFiles(), []
    files = reader(api, Checkout(origin), warnings)
    assert files.read("a" * 40, ["app.py"]) == {"app.py": API_TEXT}
    [warning] = warnings
    assert f"git cannot use {origin}: detected dubious ownership" in warning
    assert f"safe.directory {origin}" in warning
    assert "is not a git repository" not in warning
    with pytest.raises(GitError, match="dubious ownership"):
        read_range("main..feature", origin)


def test_binary_and_oversized_files_give_no_contents(origin: Path) -> None:
    git(origin, "checkout", "-q", "feature")
    (origin / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    (origin / "dump.sql").write_text("x" * (MAX_CONTENT_BYTES + 1))
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "assets")
    head = git(origin, "rev-parse", "HEAD")
    api = RawFiles()
    files = reader(api, Checkout(origin))
    assert files.read(head, ["logo.png", "dump.sql", "util.py"]) == {"util.py": UTIL}
    assert api.asked == []
