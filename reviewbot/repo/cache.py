"""The host's repository cache: one bare clone per GitLab project, fetched by commit SHA, shared
by every reviewbot process on the host, size-capped with least-recently-used eviction.

Layout under ``repo_cache_dir``: ``<gitlab host>/<project id>.git`` (a bare repository nobody
works in), ``<project id>.lock`` (held while the clone is created or fetched into, and whose
time of change is the clone's last use) and ``<project id>.readers`` (held shared by every
view in use, so eviction never removes a clone while someone reads it).

* A commit the clone has costs no fetch. Else ``git fetch --depth=1 <url> +<sha>:refs/
  reviewbot/<sha>`` (GitLab serves any reachable commit by SHA), with the token as HTTP basic
  auth (user ``oauth2``, the token as password: GitLab's way for access tokens over HTTP git)
  in an ``Authorization`` header handed to git through its environment only, never written
  into the clone's config or any file, never on a command line; within ``repo_fetch_timeout_s``.
  A GitLab URL that holds ``user:password@`` is given to git without them (``<url>`` is the
  bare address); without a token, they go into that header instead.
* After a fetch, clones of other projects are removed, least recently used first, until the
  cache fits ``repo_cache_max_bytes``; a clone in use (its readers lock held) or being fetched
  is skipped, and the clone just used is kept even when it alone is larger than the cap.

Owns: the layout, the locks, the fetch of a missing commit and eviction. Must not: fall back
to the API or warn (`reviewbot.repo.source` does), or put the token anywhere but git's
environment.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from urllib.parse import unquote, urlsplit

from reviewbot.redaction import scrub_secrets, without_userinfo
from reviewbot.repo.git_view import GitTreeView
from reviewbot.repo.localgit import GitError, GitTimeoutError, fetch_commit, has_commit, init_bare
from reviewbot.repo.tree import SHORT_SHA

__all__ = [
    "CacheError",
    "CachedView",
    "ProjectRemote",
    "RepoCache",
    "cache_size",
    "fetch_into",
    "probe_fetch",
]

REF_PREFIX = "refs/reviewbot/"
GIT_SUFFIX = ".git"
LOCK_SUFFIX = ".lock"
READERS_SUFFIX = ".readers"
GITLAB_GIT_USER = "oauth2"  # any user name works with an access token; oauth2 also for OAuth
SAFE_NAME = re.compile(r"[^A-Za-z0-9.-]+")
COMMIT_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1 or SHA-256
# What git says when GitLab answers 401 (it would ask for a user name, which it may not).
REFUSED_SIGNS = ("could not read Username", "Authentication failed", "HTTP Basic: Access denied")
REFUSED_TEXT = (
    "GitLab refused the token for git over HTTP (it needs the api or read_repository scope)"
)


class CacheError(RuntimeError):
    """The cache cannot serve the commit (not writable, fetch failed or too slow); one line,
    never the token."""


@dataclass(frozen=True)
class ProjectRemote:
    """Where a project's repository is fetched from: ``<gitlab_url>/<path>.git``."""

    gitlab_url: str
    project_id: int | str
    path_with_namespace: str
    token: str | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The repository's address, without the GitLab URL's ``user:password@`` (git's
        command line is shown by ``ps``, and the address is in error messages)."""
        address = without_userinfo(self.gitlab_url).rstrip("/")
        return f"{address}/{self.path_with_namespace}{GIT_SUFFIX}"

    def header(self) -> str | None:
        """The ``Authorization`` header git sends (HTTP basic auth, GitLab's for tokens): the
        token's; without one, the user and password the GitLab URL holds; else None."""
        if self.token:
            user, password = GITLAB_GIT_USER, self.token
        else:
            parts = urlsplit(self.gitlab_url)
            if parts.username is None:
                return None
            user, password = unquote(parts.username), unquote(parts.password or "")
        pair = base64.b64encode(f"{user}:{password}".encode()).decode()
        return f"Authorization: Basic {pair}"


class CachedView(GitTreeView):
    """A commit of a cached clone; holds the clone's readers lock (shared) until closed."""

    def __init__(self, repo: Path, sha: str, readers: IO[bytes]) -> None:
        super().__init__(repo, sha)
        self._readers: IO[bytes] | None = readers

    def close(self) -> None:
        readers, self._readers = self._readers, None
        if readers is not None:
            readers.close()


def _host_folder(gitlab_url: str) -> str:
    parts = urlsplit(gitlab_url)
    host = (parts.hostname or "gitlab") + (f"_{parts.port}" if parts.port else "")
    return SAFE_NAME.sub("_", host + parts.path.rstrip("/")).strip("_")


@contextlib.contextmanager
def _locked(path: Path, mode: int) -> Iterator[IO[bytes]]:
    with path.open("ab") as handle:
        fcntl.flock(handle.fileno(), mode)
        yield handle


def _tree_bytes(path: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # removed meanwhile
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def cache_size(root: Path) -> int:
    """Bytes of every clone under ``root``."""
    return sum(_tree_bytes(clone) for clone in root.glob(f"*/*{GIT_SUFFIX}"))


class RepoCache:
    """The cache directory ``root``: clones fetched within ``fetch_timeout_s``, all of them
    together kept under ``max_bytes``."""

    def __init__(self, root: Path, *, max_bytes: int, fetch_timeout_s: float) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.fetch_timeout_s = fetch_timeout_s
        self.fetches = 0  # fetches this object made (a commit already there makes none)

    def view(self, remote: ProjectRemote, sha: str) -> CachedView:
        """Commit ``sha`` of the project, fetched first when the clone lacks it; CacheError
        when the cache cannot serve it."""
        if not COMMIT_SHA.fullmatch(sha):
            raise CacheError(f"{sha[:SHORT_SHA]!r} is not a commit SHA")
        folder = self.root / _host_folder(remote.gitlab_url)
        name = str(remote.project_id)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            readers = (folder / f"{name}{READERS_SUFFIX}").open("ab")
        except OSError as error:
            raise CacheError(f"cache folder {folder} is not writable ({error.strerror})") from None
        fcntl.flock(readers.fileno(), fcntl.LOCK_SH)
        try:
            repo = folder / f"{name}{GIT_SUFFIX}"
            fetched = self._ensure(remote, repo, folder / f"{name}{LOCK_SUFFIX}", sha)
        except BaseException:
            readers.close()
            raise
        if fetched:
            self.evict()
        return CachedView(repo, sha, readers)

    def _ensure(self, remote: ProjectRemote, repo: Path, lock: Path, sha: str) -> bool:
        """Make ``repo`` hold ``sha`` (under the project's lock); whether it was fetched."""
        try:
            with _locked(lock, fcntl.LOCK_EX):
                os.utime(lock)  # the clone's last use
                if repo.exists() and has_commit(repo, sha):
                    return False
                if not repo.exists():
                    self._create(repo)
                self._fetch(remote, repo, sha)
                return True
        except OSError as error:
            raise CacheError(f"cache {repo} cannot be written ({error.strerror})") from None

    @staticmethod
    def _create(repo: Path) -> None:
        building = repo.with_name(f".{repo.name}.{os.getpid()}")
        shutil.rmtree(building, ignore_errors=True)
        try:
            init_bare(building)
        except GitError as error:
            raise CacheError(f"cannot create a clone in {repo.parent}: {error}") from None
        building.rename(repo)

    def _fetch(self, remote: ProjectRemote, repo: Path, sha: str) -> None:
        _remove_stale_locks(repo)
        fetch_into(repo, remote, sha, f"{REF_PREFIX}{sha}", self.fetch_timeout_s)
        self.fetches += 1

    def evict(self) -> list[Path]:
        """Remove clones, least recently used first, until the cache fits its cap; a clone in
        use or being fetched is skipped. The clones removed."""
        clones = sorted(self.root.glob(f"*/*{GIT_SUFFIX}"), key=_last_use)
        sizes = {clone: _tree_bytes(clone) for clone in clones}
        total = sum(sizes.values())
        removed = []
        for clone in clones:
            if total <= self.max_bytes:
                break
            if _remove_if_idle(clone):
                total -= sizes[clone]
                removed.append(clone)
        return removed


def fetch_into(repo: Path, remote: ProjectRemote, rev: str, ref: str, timeout_s: float) -> None:
    """Fetch ``rev`` (a SHA, or a branch) of ``remote`` into ``ref`` of ``repo``; CacheError,
    one line without the token, when git fails or takes longer than ``timeout_s``."""
    try:
        fetch_commit(repo, remote.url, rev, ref, header=remote.header(), timeout_s=timeout_s)
    except GitTimeoutError:
        raise CacheError(
            f"git fetch of {rev[:SHORT_SHA]} from {remote.url} took longer than {timeout_s:g} s"
        ) from None
    except GitError as error:
        text = scrub_secrets(str(error)) or ""
        if remote.token:
            text = text.replace(remote.token, "***")
        if any(sign in text for sign in REFUSED_SIGNS):
            text = REFUSED_TEXT
        raise CacheError(f"{text} ({remote.url} at {rev[:SHORT_SHA]})") from None


def probe_fetch(root: Path, remote: ProjectRemote, branch: str, timeout_s: float) -> None:
    """Fetch ``branch`` of ``remote`` (depth 1) into a throw-away bare clone under ``root``
    (``reviewbot doctor``: does a fetch work in time from this host?); CacheError if not."""
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".doctor-", dir=root) as folder:
        repo = Path(folder) / f"probe{GIT_SUFFIX}"
        try:
            init_bare(repo)
        except GitError as error:
            raise CacheError(f"cannot create a clone in {root}: {error}") from None
        fetch_into(repo, remote, branch, f"{REF_PREFIX}doctor", timeout_s)


def _remove_stale_locks(repo: Path) -> None:
    """The lock files a killed git leaves behind (``shallow.lock``, ``refs/…/x.lock``), which
    would fail every later fetch ("remove the file manually to continue"): under the project's
    lock no other git of ours works in the clone, so any lock file there is stale."""
    for stale in repo.rglob("*.lock"):
        with contextlib.suppress(OSError):
            stale.unlink()


def _companion(clone: Path, suffix: str) -> Path:
    return clone.with_name(clone.name[: -len(GIT_SUFFIX)] + suffix)


def _last_use(clone: Path) -> float:
    try:
        return _companion(clone, LOCK_SUFFIX).stat().st_mtime
    except OSError:
        return 0.0


def _remove_if_idle(clone: Path) -> bool:
    """Remove ``clone`` unless someone reads or fetches it (both locks taken without waiting)."""
    try:
        with (
            _companion(clone, READERS_SUFFIX).open("ab") as readers,
            _companion(clone, LOCK_SUFFIX).open("ab") as fetching,
        ):
            fcntl.flock(readers.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fetching.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(clone)
            return True
    except OSError:  # BlockingIOError: in use
        return False
