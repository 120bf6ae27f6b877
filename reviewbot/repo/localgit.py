"""A local git repository, read-only: a diff range (``--git BASE..HEAD``), file contents at a
commit, and a CI job's checkout that serves the commits it has (fetching one a shallow clone
lacks); the tree and blobs of a commit (``git ls-tree``/``git cat-file``, never the working
tree's files) and the bare clones of the host's repository cache (``init --bare``, a fetch by
SHA with the token in the environment only: :func:`fetch_commit`).

Owns: every ``git`` command reviewbot runs, each bounded by a timeout, never asking for
credentials. Must not: know about GitLab, merge requests or the database; decide where
contents come from when the checkout cannot serve them (that is `reviewbot.repo.files`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

__all__ = [
    "Checkout",
    "CommitSource",
    "GitError",
    "GitTimeoutError",
    "LocalDiff",
    "TreeLine",
    "fetch_commit",
    "git_version",
    "has_commit",
    "init_bare",
    "list_tree",
    "read_blobs",
    "read_files_at",
    "read_range",
]

GIT_TIMEOUT_S = 120
MAX_CONTENT_BYTES = 2_000_000  # head files larger than this are not used for context
BINARY_SNIFF_BYTES = 8000  # a NUL byte this near the start: a binary file, as git judges it
REMOTE = "origin"


class GitError(RuntimeError):
    """git failed or the range is not valid; the message is one line for the user."""


class GitTimeoutError(GitError):
    """git did not finish within its timeout (and was killed)."""


@dataclass(frozen=True)
class LocalDiff:
    base: str
    head: str
    head_sha: str
    diff: bytes
    repo: Path


def _run_git(
    repo: Path,
    *args: str,
    stdin: bytes | None = None,
    timeout_s: float = GIT_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """``git -C repo args``; GitError when git cannot be run (not installed, too slow).
    ``env`` adds to the process's environment (never to the command line, which ``ps``
    shows)."""
    given: dict[str, Any] = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            timeout=timeout_s,
            check=False,
            # fail, never ask for credentials
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})},
            **given,
        )
    except FileNotFoundError:
        raise GitError("git is not installed or not on PATH") from None
    except subprocess.TimeoutExpired:
        raise GitTimeoutError(f"git {args[0]} took longer than {timeout_s:g} s") from None
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


FATAL = "fatal: "


def _git_reason(stderr: bytes) -> str | None:
    """git's own reason for a refusal: its ``fatal:`` line, and its advice (the last line)
    when it gave some, e.g. the ``safe.directory`` command after "dubious ownership"."""
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").strip().splitlines()]
    fatal = next(
        (line.removeprefix("fatal: ") for line in lines if line.startswith("fatal: ")), None
    )
    if fatal is None:
        return lines[-1] if lines else None
    advice = lines[-1] if len(lines) > 1 and not lines[-1].startswith(FATAL) else None
    return f"{fatal}; {advice}" if advice else fatal


def work_tree_problem(repo: Path) -> str | None:
    """None when ``repo`` is a work tree git can use, else why not, in git's words: not a
    repository, or one git refuses (a checkout owned by another user: "dubious ownership")."""
    done = _run_git(repo, "rev-parse", "--is-inside-work-tree")
    if done.returncode == 0 and done.stdout.strip() == b"true":
        return None
    reason = _git_reason(done.stderr)
    if reason is None or reason.startswith("not a git repository"):
        return f"{repo} is not a git repository"
    return f"git cannot use {repo}: {reason}"


def read_range(spec: str, repo: str | Path = ".") -> LocalDiff:
    """The diff of ``BASE..HEAD`` (or ``BASE...HEAD``: from the merge base) in ``repo``."""
    repo = Path(repo)
    separator = "..." if "..." in spec else ".."
    if separator not in spec:
        raise GitError(f"bad range {spec!r}: expected BASE..HEAD or BASE...HEAD")
    base, head = spec.split(separator, 1)
    base, head = base or "HEAD", head or "HEAD"
    problem = work_tree_problem(repo)
    if problem:
        raise GitError(problem)
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
    """Text contents of ``paths`` at ``sha`` in one ``git cat-file --batch`` call (read_blobs);
    missing, binary (a NUL byte near the start) or larger than MAX_CONTENT_BYTES are absent."""
    blobs = read_blobs(Path(repo), sha, list(paths))
    return {
        path: blob.decode("utf-8", errors="replace")
        for path, blob in blobs.items()
        if len(blob) <= MAX_CONTENT_BYTES and b"\0" not in blob[:BINARY_SNIFF_BYTES]
    }


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
        self._problem: str | None = None  # why git cannot use the path, once checked
        self._checked = False

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
        if not self._checked:
            self._problem, self._checked = work_tree_problem(self.path), True
        if self._problem:
            raise GitError(self._problem)
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
            "reading files from the repository cache or the GitLab API"
        )
        return CommitSource.MISSING


def _has_commit(repo: Path, sha: str) -> bool:
    return _run_git(repo, "cat-file", "-e", f"{sha}^{{commit}}").returncode == 0


# --- a commit's tree and blobs, and the bare clones of the repository cache ------------------

GIT_VERSION_TIMEOUT_S = 10
SYMLINK_MODE = "120000"
BLOB_TYPE = "blob"
COMMIT_TYPE = "commit"  # a submodule's entry in its parent's tree
REDACTED = "***"


@dataclass(frozen=True)
class TreeLine:
    """One line of ``git ls-tree -r -l``: mode, type (blob or commit), size (None for a
    submodule) and path."""

    mode: str
    type: str
    size: int | None
    path: str


def list_tree(repo: Path, sha: str) -> list[TreeLine]:
    """Every entry of the tree of commit ``sha`` (files, symlinks, submodules), recursively,
    from the object database: never the working tree's files, which may differ from ``sha``."""
    output = _git(repo, "ls-tree", "-r", "-l", "-z", "--full-tree", f"{sha}^{{commit}}")
    lines = []
    for record in output.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, kind, _object, size = meta.decode().split()
        known_size = None if size == "-" else int(size)
        lines.append(TreeLine(mode, kind, known_size, path.decode("utf-8", "replace")))
    return lines


def read_blobs(repo: Path, sha: str, paths: Sequence[str]) -> dict[str, bytes]:
    """The bytes of the blobs at ``paths`` of commit ``sha`` in one ``git cat-file --batch``;
    a path that is no blob there is absent. Paths hold no newline (the batch's separator)."""
    wanted = [path for path in dict.fromkeys(paths) if "\n" not in path]
    if not wanted:
        return {}
    request = "".join(f"{sha}:{path}\n" for path in wanted).encode()
    output = _git(repo, "cat-file", "--batch", stdin=request)
    blobs: dict[str, bytes] = {}
    position = 0
    for path in wanted:
        end = output.index(b"\n", position)
        header = output[position:end].split()
        position = end + 1
        if len(header) < 3 or header[-1] == b"missing":
            continue
        size = int(header[2])
        if header[1] == BLOB_TYPE.encode():
            blobs[path] = output[position : position + size]
        position += size + 1
    return blobs


def has_commit(repo: Path, sha: str) -> bool:
    """Whether ``repo`` holds commit ``sha`` (False as well when git cannot read it)."""
    try:
        return _run_git(repo, "cat-file", "-e", f"{sha}^{{commit}}").returncode == 0
    except GitError:
        return False


def git_version() -> str:
    """``git version 2.39.5``; GitError when git is not installed."""
    done = _run_git(Path("."), "--version", timeout_s=GIT_VERSION_TIMEOUT_S)
    return done.stdout.decode("utf-8", "replace").strip()


def init_bare(path: Path) -> None:
    """A bare repository at ``path`` that nobody works in: no automatic gc (a detached gc must
    not run while the cache evicts the clone)."""
    _git(path.parent, "init", "--bare", "--quiet", str(path))
    _git(path, "config", "gc.auto", "0")
    _git(path, "config", "maintenance.auto", "false")


def fetch_commit(
    repo: Path, url: str, sha: str, ref: str, *, header: str | None, timeout_s: float
) -> None:
    """``git fetch --depth=1 url +sha:ref`` into ``repo``, with ``header`` (an
    ``Authorization`` header) given to git through ``GIT_CONFIG_*`` variables of its
    environment only: never on the command line (``ps`` shows it) nor in a file. No credential
    helper is asked, no hook runs. The whole process group is killed after ``timeout_s``
    (git's HTTP helper is a child of its own). GitTimeoutError or GitError, one line, never
    the header's value."""
    config = [("credential.helper", ""), ("core.hooksPath", os.devnull)]
    if header is not None:
        config.append(("http.extraHeader", header))
    env = {"GIT_CONFIG_COUNT": str(len(config)), "GIT_ASKPASS": ""}  # no askpass program
    for index, (key, value) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    args = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--depth=1", url]
    done = _run_in_own_group(repo, [*args, f"+{sha}:{ref}"], env, timeout_s)
    if done.returncode != 0:
        said = _last_line(done.stderr) or f"exit {done.returncode}"
        raise GitError(f"git fetch failed: {_without(said, header)}")


def _without(text: str, header: str | None) -> str:
    if header is None:
        return text
    secret = header.split(" ")[-1]
    return text.replace(header, REDACTED).replace(secret, REDACTED)


def _run_in_own_group(
    repo: Path, args: list[str], env: Mapping[str, str], timeout_s: float
) -> subprocess.CompletedProcess[bytes]:
    """``git -C repo args`` in a process group of its own, killed whole after ``timeout_s``
    (``subprocess.run`` kills only git itself, and a helper still holding the pipes keeps
    the wait going)."""
    try:
        process = subprocess.Popen(
            ["git", "-C", str(repo), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **env},
            start_new_session=True,
        )
    except FileNotFoundError:
        raise GitError("git is not installed or not on PATH") from None
    except OSError as error:
        raise GitError(f"git could not be run: {error.strerror or error}") from None
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise GitTimeoutError(f"git {args[0]} took longer than {timeout_s:g} s") from None
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended on its own meanwhile
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()
