"""Read a diff and head file contents from a local git repository (``--git BASE..HEAD``)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GitError", "LocalDiff", "read_range"]

GIT_TIMEOUT_S = 120
MAX_CONTENT_BYTES = 2_000_000  # head files larger than this are not used for context


class GitError(RuntimeError):
    """git failed or the range is not valid; the message is one line for the user."""


@dataclass(frozen=True)
class LocalDiff:
    base: str
    head: str
    head_sha: str
    diff: bytes
    repo: Path


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args],
            input=stdin,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise GitError("git is not installed or not on PATH") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took longer than {GIT_TIMEOUT_S} s") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed: {message[-1] if message else done.returncode}")
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
