"""The host's repository cache (reviewbot.repo.cache) against the fake GitLab's git over HTTP: a
real ``git http-backend`` behind GitLab's basic-auth check (tests/fakes/git_http.py), serving
the real repositories of tests/mr_world.py; and the factory's fallbacks
(reviewbot.repo.source.open_repository): a fetch that hangs or fails, git not on PATH.
"""

from __future__ import annotations

import base64
import multiprocessing
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reviewbot.config import Settings
from reviewbot.gitlab import GitLabClient, GitLabSettings
from reviewbot.mr import RunOptions
from reviewbot.repo.cache import CacheError, ProjectRemote, RepoCache, cache_size
from reviewbot.repo.source import SourceKind, open_repository
from reviewbot.repo.view import PathRefused
from tests.fakes.gitlab_server import FakeGitLab
from tests.mr_world import BOT_TOKEN, FEATURE_APP, PROJECT, UTIL, World, git, make_repo

PROJECTS = {"group/app": 7, "group/two": 8, "group/three": 9}
BIG_CAP = 1 << 30
TIMEOUT_S = 30.0
SHORT_TIMEOUT_S = 0.5
RACERS = 4


@dataclass
class Host:
    repo: Path
    gitlab: FakeGitLab
    cache_dir: Path
    head: str
    base: str

    def remote(self, project: str = "group/app", token: str | None = BOT_TOKEN) -> ProjectRemote:
        return ProjectRemote(self.gitlab.url, PROJECTS[project], project, token=token)

    def cache(self, max_bytes: int = BIG_CAP, timeout_s: float = TIMEOUT_S) -> RepoCache:
        return RepoCache(self.cache_dir, max_bytes=max_bytes, fetch_timeout_s=timeout_s)

    def settings(self, **overrides: object) -> Settings:
        values: dict[str, object] = {
            "gitlab_url": self.gitlab.url,
            "gitlab_token": BOT_TOKEN,
            "repo_cache_dir": str(self.cache_dir),
        }
        values.update(overrides)
        return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    repo = make_repo(tmp_path / "repo")
    with FakeGitLab() as gitlab:
        gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        for path, project_id in PROJECTS.items():
            gitlab.add_project(path, project_id=project_id)
            gitlab.add_mr_from_git(path, repo, "main", "feature", iid=1)
        yield Host(
            repo,
            gitlab,
            tmp_path / "cache",
            git(repo, "rev-parse", "feature"),
            git(repo, "rev-parse", "main"),
        )


@pytest.mark.slow
def test_a_commit_is_fetched_by_sha_into_a_bare_clone(host: Host) -> None:
    cache = host.cache()
    view = cache.view(host.remote(), host.head)
    assert view.read_bytes("app.py").decode() == FEATURE_APP
    assert view.read_many(["util.py", "gone.py"]) == {"util.py": UTIL.encode()}
    assert cache.fetches == 1 and host.gitlab.git_fetches() == 1
    [clone] = host.cache_dir.glob("*/7.git")
    assert git(clone, "rev-parse", "--is-bare-repository") == "true"
    assert "remote" not in (clone / "config").read_text()  # no remote, no URL stored
    view.close()


@pytest.mark.slow
def test_a_second_run_at_the_same_sha_makes_no_fetch(host: Host) -> None:
    host.cache().view(host.remote(), host.head).close()
    again = host.cache()  # another process on the host
    view = again.view(host.remote(), host.head)
    assert view.read_bytes("util.py").decode() == UTIL
    assert again.fetches == 0 and host.gitlab.git_fetches() == 1
    base = again.view(host.remote(), host.base)  # another commit: one fetch more
    assert base.read_bytes("app.py").decode() != FEATURE_APP
    assert host.gitlab.git_fetches() == 2
    view.close()
    base.close()


@pytest.mark.slow
def test_threads_fetching_one_project_at_once_make_one_fetch(host: Host) -> None:
    caches = [host.cache() for _ in range(RACERS)]
    start = threading.Barrier(RACERS)
    read: list[bytes] = []

    def fetch(cache: RepoCache) -> None:
        start.wait()
        view = cache.view(host.remote(), host.head)
        read.append(view.read_bytes("util.py"))
        view.close()

    threads = [threading.Thread(target=fetch, args=(cache,)) for cache in caches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert read == [UTIL.encode()] * RACERS
    assert sum(cache.fetches for cache in caches) == 1 == host.gitlab.git_fetches()


def _fetch_in_a_process(cache_dir: str, url: str, sha: str, done: multiprocessing.Queue) -> None:
    cache = RepoCache(Path(cache_dir), max_bytes=BIG_CAP, fetch_timeout_s=TIMEOUT_S)
    view = cache.view(ProjectRemote(url, 7, "group/app", token=BOT_TOKEN), sha)
    done.put((cache.fetches, view.read_bytes("util.py")))
    view.close()


@pytest.mark.slow
def test_processes_fetching_one_project_at_once_make_one_fetch(host: Host) -> None:
    context = multiprocessing.get_context("spawn")
    done = context.Queue()
    args = (str(host.cache_dir), host.gitlab.url, host.head, done)
    workers = [context.Process(target=_fetch_in_a_process, args=args) for _ in range(2)]
    for worker in workers:
        worker.start()
    results = [done.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join()
    assert sorted(fetches for fetches, _ in results) == [0, 1]
    assert {data for _, data in results} == {UTIL.encode()}
    assert host.gitlab.git_fetches() == 1


@pytest.mark.slow
def test_the_least_recently_used_clone_is_evicted_at_the_cap(host: Host) -> None:
    warm = host.cache()
    for project in ("group/app", "group/two"):
        warm.view(host.remote(project), host.head).close()
    one_clone = cache_size(host.cache_dir) // 2
    warm.view(host.remote("group/app"), host.head).close()  # app used again: two is the oldest
    capped = host.cache(max_bytes=one_clone * 2 + one_clone // 2)
    capped.view(host.remote("group/three"), host.head).close()
    left = sorted(clone.name for clone in host.cache_dir.glob("*/*.git"))
    assert left == ["7.git", "9.git"]
    assert cache_size(host.cache_dir) <= capped.max_bytes


@pytest.mark.slow
def test_a_clone_in_use_is_never_evicted(host: Host) -> None:
    cache = host.cache()
    reading = cache.view(host.remote("group/app"), host.head)  # held open: in use
    tiny = host.cache(max_bytes=1)
    tiny.view(host.remote("group/two"), host.head).close()
    left = sorted(clone.name for clone in host.cache_dir.glob("*/*.git"))
    assert left == ["7.git", "8.git"]  # app is read, two was just used: both stay
    assert reading.read_bytes("util.py") == UTIL.encode()
    reading.close()
    tiny.view(host.remote("group/three"), host.head).close()
    assert sorted(clone.name for clone in host.cache_dir.glob("*/*.git")) == ["9.git"]


def _every_byte_under(folder: Path) -> bytes:
    return b"".join(path.read_bytes() for path in folder.rglob("*") if path.is_file())


def test_the_token_is_never_written_to_disk(host: Host) -> None:
    cache = host.cache()
    cache.view(host.remote(), host.head).close()
    cache.view(host.remote(), host.base).close()
    stored = _every_byte_under(host.cache_dir)
    basic = base64.b64encode(f"oauth2:{BOT_TOKEN}".encode())
    assert stored and BOT_TOKEN.encode() not in stored and basic not in stored


GIT_RECORDER = """#!/bin/sh
printf '%s\\n' "$*" >> "{log}"
exec "{git}" "$@"
"""


def recorded_git_command_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put a `git` first on PATH that writes its command line (what `ps` shows) to a file."""
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "git-command-lines.txt"
    recorder = folder / "git"
    recorder.write_text(GIT_RECORDER.format(log=log, git=shutil.which("git")))
    recorder.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return log


@pytest.mark.slow
@pytest.mark.parametrize(
    ("userinfo", "token"),
    [(f"oauth2:{BOT_TOKEN}@", None), ("someone:s3cret-pass@", BOT_TOKEN)],
    ids=["the-token-in-the-url", "a-password-and-the-token"],
)
def test_credentials_in_the_gitlab_url_reach_git_through_its_environment_never_its_argv(
    host: Host,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    userinfo: str,
    token: str | None,
) -> None:
    """REVIEWBOT_GITLAB_URL=http://user:pass@host (issue 32): git's command line (``ps``) and
    the clone hold neither the user nor the password; the fetch still authenticates."""
    log = recorded_git_command_lines(tmp_path, monkeypatch)
    scheme, rest = host.gitlab.url.split("://", 1)
    remote = ProjectRemote(f"{scheme}://{userinfo}{rest}", 7, "group/app", token=token)
    view = host.cache().view(remote, host.head)
    assert view.read_bytes("util.py").decode() == UTIL
    view.close()
    command_lines = log.read_text()
    assert "fetch" in command_lines and f"{rest}/group/app.git" in command_lines
    secret = userinfo.rstrip("@").split(":", 1)[1]
    assert secret not in command_lines and userinfo not in command_lines
    assert secret.encode() not in _every_byte_under(host.cache_dir)


def test_a_failed_fetch_never_shows_the_password_of_the_gitlab_url(host: Host) -> None:
    scheme, rest = host.gitlab.url.split("://", 1)
    remote = ProjectRemote(f"{scheme}://someone:s3cret-pass@{rest}", 7, "group/app", token=None)
    with pytest.raises(CacheError) as refused:
        host.cache().view(remote, host.head)
    assert "s3cret-pass" not in str(refused.value) and "someone" not in str(refused.value)


def test_a_refused_token_is_one_line_that_never_shows_it(host: Host) -> None:
    wrong = "glpat-wrong-token-0000000000"
    with pytest.raises(CacheError) as refused:
        host.cache().view(host.remote(token=wrong), host.head)
    text = str(refused.value)
    assert "refused the token" in text and "\n" not in text
    assert wrong not in text and base64.b64encode(f"oauth2:{wrong}".encode()).decode() not in text
    assert host.gitlab.git_requests  # GitLab was asked, and said 401


@pytest.mark.slow
def test_a_fetch_killed_at_its_timeout_leaves_a_clone_the_next_fetch_can_use(
    host: Host,
) -> None:
    host.gitlab.stall_git()
    with pytest.raises(CacheError, match="took longer than"):
        host.cache(timeout_s=SHORT_TIMEOUT_S).view(host.remote(), host.head)
    [clone] = host.cache_dir.glob("*/7.git")
    (clone / "shallow.lock").write_bytes(b"")  # as a git killed while writing leaves it
    host.gitlab.stall_git(on=False)
    view = host.cache().view(host.remote(), host.head)
    assert view.read_bytes("util.py") == UTIL.encode()
    assert not list(clone.rglob("*.lock"))
    view.close()


def client(host: Host) -> GitLabClient:
    return GitLabClient(GitLabSettings(url=host.gitlab.url, token=BOT_TOKEN, max_retries=0))


@pytest.mark.slow
def test_a_fetch_that_hangs_falls_back_to_the_api_with_one_warning(host: Host) -> None:
    host.gitlab.stall_git()
    warnings: list[str] = []
    source = open_repository(
        host.settings(repo_fetch_timeout_s=SHORT_TIMEOUT_S),
        client(host),
        7,
        "group/app",
        warn=warnings.append,
    )
    assert source.at(host.head).read_bytes("util.py").decode() == UTIL
    assert source.at(host.base).read_bytes("app.py")
    assert source.kinds == {host.head: SourceKind.API, host.base: SourceKind.API}
    [warning] = warnings  # the run gives the cache up after the first failure
    assert warning.startswith("repository cache not used (git fetch of ")
    assert f"took longer than {SHORT_TIMEOUT_S:g} s" in warning
    assert BOT_TOKEN not in warning
    source.close()


def test_without_git_on_path_the_api_serves(host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(host.cache_dir / "no-git-here"))
    warnings: list[str] = []
    source = open_repository(host.settings(), client(host), 7, "group/app", warn=warnings.append)
    assert source.cache is None
    assert source.at(host.head).read_bytes("util.py").decode() == UTIL
    assert source.kinds == {host.head: SourceKind.API}
    assert warnings == [] and host.gitlab.git_requests == []
    assert not host.cache_dir.exists()


def test_the_cache_off_reads_the_api(host: Host) -> None:
    source = open_repository(host.settings(repo_cache_max_bytes=0), client(host), 7, "group/app")
    with pytest.raises(PathRefused):
        source.at(host.head).read_bytes("../repo/app.py")
    assert source.at(host.head).read_bytes("app.py").decode() == FEATURE_APP
    assert source.kinds == {host.head: SourceKind.API} and host.gitlab.git_requests == []


@pytest.mark.slow
def test_a_run_reads_every_file_from_one_fetch_and_a_rerun_fetches_nothing(world: World) -> None:
    first = world.run()
    raw = [path for _, path in world.gitlab.requests if "/repository/files/" in path]
    assert first.review.findings.findings and raw == []
    fetched = world.gitlab.git_fetches()
    assert fetched == 2  # the target (policy file) and the head
    again = world.run(RunOptions(full=True))
    assert again.warnings == [] and world.gitlab.git_fetches() == fetched


@pytest.mark.slow
def test_a_run_whose_fetch_hangs_is_reviewed_through_the_api_and_says_so(world: World) -> None:
    world.gitlab.stall_git()
    report = world.run(repo_fetch_timeout_s=SHORT_TIMEOUT_S)
    assert report.review.findings.findings
    [warning] = [w for w in report.warnings if w.startswith("repository cache not used")]
    assert warning in report.summary_markdown
    assert [path for _, path in world.gitlab.requests if "/repository/files/" in path]
    assert PROJECT in world.gitlab.git_requests[0][1]
