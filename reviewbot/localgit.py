"""A local git repository, read-only: a diff range (``--git BASE..HEAD``), file contents at a
commit, and a CI job's checkout that serves the commits it has (fetching one a shallow clone
lacks).

Owns: every ``git`` command reviewbot runs, each bounded by a timeout, never asking for
credentials. Must not: know about GitLab, merge requests or the database; decide where
contents come from when the checkout cannot serve them (that is `reviewbot.repo_files`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

__all__ = [
    "Checkout",
    "CommitSource",
    "GitError",
    "LocalDiff",
    "read_files_at",
    "read_range",
]

GIT_TIMEOUT_S = 120
MAX_CONTENT_BYTES = 2_000_000  # head files larger than this are not used for context
REMOTE = "origin"


class GitError(RuntimeError):
    """git failed or the range is not valid; the message is one line for the user."""


@dataclass(frozen=True)
class LocalDiff:
    base: str
    head: str
    head_sha: str
    diff: bytes
    repo: Path


def _run_git(
    repo: Path, *args: str, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``git -C repo args``; GitError when git cannot be run (not installed, too slow)."""
    given: dict[str, Any] = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},  # fail, never ask for credentials
            **given,
        )
    except FileNotFoundError:
        raise GitError("git is not installed or not on PATH") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took longer than {GIT_TIMEOUT_S} s") from None
    except OSError as error:
        raise GitError(f"git could not be run: {error.strerror or error}") from None


def _last_line(stderr: bytes) -> str | None:
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else None


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    done = _run_git(repo, *args, stdin=stdin)
    if done.returncode != 0:
        raise GitError(f"git {args[0]} failed: {_last_line(done.stderr) or done.returncode}")
    return done.stdout


def _is_work_tree(repo: Path) -> bool:
    try:
        return _git(repo, "rev-parse", "--is-inside-work-tree").strip() == b"true"
    except GitError:
        return False


def read_range(spec: str, repo: str | Path = ".") -> LocalDiff:
    """The diff of ``BASE..HEAD`` (or ``BASE...HEAD``: from the merge base) in ``repo``."""
    repo = Path(repo)
    separator = "..." if "..." in spec else ".."
    if separator not in spec:
        raise GitError(f"bad range {spec!r}: expected BASE..HEAD or BASE...HEAD")
    base, head = spec.split(separator, 1)
    base, head = base or "HEAD", head or "HEAD"
    if not (repo / ".git").exists() and not _is_work_tree(repo):
        raise GitError(f"{repo} is not a git repository")
    for ref in (base, head):
        try:
            _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        except GitError:
            raise GitError(f"bad range {spec!r}: {ref!r} is not a commit in {repo}") from None
    head_sha = _git(repo, "rev-parse", f"{head}^{{commit}}").decode().strip()
    if separator == "...":
        base = _git(repo, "merge-base", base, head).decode().strip()
    diff = _git(
        repo,
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--find-renames",
        "--full-index",
        base,
        head_sha,
    )
    return LocalDiff(base, head, head_sha, diff, repo)


def read_files_at(repo: str | Path, sha: str, paths: Iterable[str]) -> dict[str, str]:
    """Contents of ``paths`` at ``sha`` in one ``git cat-file --batch`` call; missing are absent."""
    wanted = list(dict.fromkeys(paths))
    if not wanted:
        return {}
    request = "".join(f"{sha}:{path}\n" for path in wanted).encode()
    output = _git(Path(repo), "cat-file", "--batch", stdin=request)
    contents: dict[str, str] = {}
    position = 0
    for path in wanted:
        end = output.index(b"\n", position)
        header = output[position:end].split()
        position = end + 1
        if len(header) < 3 or header[-1] == b"missing":
            continue
        size = int(header[2])
        blob = output[position : position + size]
        position += size + 1
        if header[1] == b"blob" and size <= MAX_CONTENT_BYTES and b"\0" not in blob[:8000]:
            contents[path] = blob.decode("utf-8", errors="replace")
    return contents


class CommitSource(StrEnum):
    """Where a checkout's contents at one commit come from."""

    LOCAL = "local"  # the checkout already has the commit
    FETCHED = "fetched"  # fetched from origin (shallow clone)
    MISSING = "missing"  # not available: the contents come from elsewhere (the API)


def _quiet(_message: str) -> None:
    return None


class Checkout:
    """A local clone (a CI job's) that serves file contents at the commits it has.

    A commit it lacks (the clone's depth missed it) is fetched once with
    ``git fetch --depth=1 origin <sha>``: GitLab serves any reachable commit by SHA, and a
    runner's remote carries the job token. ``sources`` says where each SHA's contents came
    from; ``say`` hears each fetch and why one failed.
    """

    def __init__(self, path: Path, say: Callable[[str], None] = _quiet) -> None:
        self.path = path
        self.sources: dict[str, CommitSource] = {}
        self._say = say
        self._is_repository: bool | None = None

    def read(self, sha: str, paths: Iterable[str]) -> dict[str, str] | None:
        """Contents of ``paths`` at ``sha`` (a path absent from the result does not exist
        there, or is binary or too large), or None when the checkout lacks the commit even
        after a fetch. GitError when git cannot read the checkout (no git, not a repository)."""
        if self.source_of(sha) is CommitSource.MISSING:
            return None
        return read_files_at(self.path, sha, paths)

    def paths(self, sha: str) -> list[str] | None:
        """Every file path of the tree at ``sha`` (``git ls-tree -r``), or None when the
        checkout lacks the commit or git cannot read it (the caller then does without)."""
        try:
            if self.source_of(sha) is CommitSource.MISSING:
                return None
            listed = _git(self.path, "ls-tree", "-r", "-z", "--name-only", sha)
        except GitError:
            return None
        return [name.decode("utf-8", errors="replace") for name in listed.split(b"\0") if name]

    def source_of(self, sha: str) -> CommitSource:
        """Where the contents at ``sha`` come from (fetching the commit the first time)."""
        if self._is_repository is None:
            inside = _run_git(self.path, "rev-parse", "--is-inside-work-tree")
            self._is_repository = inside.returncode == 0 and inside.stdout.strip() == b"true"
        if not self._is_repository:
            raise GitError(f"{self.path} is not a git repository")
        if sha not in self.sources:
            self.sources[sha] = self._ensure_commit(sha)
        return self.sources[sha]

    def _ensure_commit(self, sha: str) -> CommitSource:
        if _has_commit(self.path, sha):
            return CommitSource.LOCAL
        self._say(f"the checkout lacks {sha[:8]} (shallow clone?); fetching it from {REMOTE}")
        fetched = _run_git(self.path, "fetch", "--quiet", "--no-tags", "--depth=1", REMOTE, sha)
        if fetched.returncode == 0 and _has_commit(self.path, sha):
            return CommitSource.FETCHED
        self._say(
            f"could not fetch {sha[:8]} ({_last_line(fetched.stderr) or 'git fetch failed'}); "
            "reading files through the GitLab API"
        )
        return CommitSource.MISSING


def _has_commit(repo: Path, sha: str) -> bool:
    return _run_git(repo, "cat-file", "-e", f"{sha}^{{commit}}").returncode == 0
