"""The diff a local command reviews (`reviewbot plan|review|loadtest`): a diff file, stdin or a
range of a local git repository, with the head files that give hunks their context.

Owns: reading those inputs into FileDiffs and head contents, and the review context
(title and file summaries) of a local diff. Bad input is a `BadInputError` or a `GitError`
(one line, exit 2).

Must not: talk to GitLab, the model or the database.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from reviewbot.config import Settings
from reviewbot.diff import FileDiff, parse_git_diff
from reviewbot.errors import BadInputError
from reviewbot.exclusions import ExclusionRules, skip_reason
from reviewbot.localgit import read_files_at, read_range
from reviewbot.prompts import ReviewContext, file_summaries

__all__ = ["MAX_DIFF_BYTES", "LoadedDiff", "load_diff", "local_context", "wants_head_contents"]

# A diff file or stdin larger than this is refused (a generated dump, or /dev/zero), not read.
MAX_DIFF_BYTES = 64 * 2**20


@dataclass
class LoadedDiff:
    files: list[FileDiff]
    contents: dict[str, str]
    label: str


def load_diff(
    diff_path: str | None,
    git_range: str | None,
    repo: str | Path,
    with_contents: bool,
    stdin: BinaryIO | None = None,
) -> LoadedDiff:
    """The diff to plan or review; ``with_contents`` reads head files too (``--git`` only).
    ``diff_path`` ``-`` reads ``stdin`` (default: this process's)."""
    if bool(diff_path) == bool(git_range):
        raise BadInputError("give exactly one of --diff PATH (or -) and --git BASE..HEAD")
    if diff_path:
        try:
            if diff_path == "-":
                raw = (stdin or sys.stdin.buffer).read(MAX_DIFF_BYTES + 1)
            else:
                with Path(diff_path).open("rb") as diff_file:
                    raw = diff_file.read(MAX_DIFF_BYTES + 1)
        except OSError as error:
            raise BadInputError(f"cannot read {diff_path}: {error.strerror}") from None
        if len(raw) > MAX_DIFF_BYTES:
            name = "stdin" if diff_path == "-" else diff_path
            raise BadInputError(f"{name}: the diff is larger than {MAX_DIFF_BYTES:,} bytes")
        try:
            files = parse_git_diff(raw)
        except ValueError as error:
            raise BadInputError(f"{diff_path}: {error}") from None
        return LoadedDiff(files, {}, "stdin" if diff_path == "-" else diff_path)
    assert git_range is not None
    local = read_range(git_range, repo)
    files = parse_git_diff(local.diff)
    contents = {}
    if with_contents:
        contents = read_files_at(repo, local.head_sha, changed_head_paths(files))
    return LoadedDiff(files, contents, git_range)


def changed_head_paths(files: list[FileDiff]) -> list[str]:
    """The head paths whose contents can give context: changed files that still exist."""
    return [f.new_path for f in files if f.status.value != "deleted" and f.hunks]


def wants_head_contents(settings: Settings) -> bool:
    """Head files are read only when some context is asked for."""
    return settings.context_lines > 0 or settings.scope_context_tokens > 0


def local_context(title: str, files: list[FileDiff], rules: ExclusionRules) -> ReviewContext:
    """The MR-level context of a local diff: its title and the summary of every file."""
    skipped = {f.path: reason for f in files if (reason := skip_reason(f, rules))}
    return ReviewContext(title=title, files=file_summaries(files, skipped))
