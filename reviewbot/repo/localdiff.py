"""The diff a local command reviews (`reviewbot plan|review|loadtest`): a diff file, stdin or a
range of a local git repository, with the head files that give hunks their context.

Owns: reading those inputs into FileDiffs and head contents, and the review context
(title and file summaries) of a local diff. Head contents come from git for ``--git`` and
from a head tree (``--head-dir``) for ``--diff``; a head tree is read only inside its folder
(no ``..``, no absolute path, no symbolic link that leads out of it), and a file that is
missing, not a regular file, binary or over-large just gives no context. Bad input is a
`BadInputError` or a `GitError` (one line, exit 2).

Review rules of a local diff (:func:`local_rules`) come from the repository at BASE for
``--git`` (the target side, as for a merge request) and from ``--head-dir`` for ``--diff``.

Must not: talk to GitLab, the model or the database.
"""

from __future__ import annotations

import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from reviewbot.config import Settings
from reviewbot.diff import FileDiff, parse_git_diff
from reviewbot.errors import BadInputError
from reviewbot.exclusions import ExclusionRules, skip_reason
from reviewbot.prompts import ReviewContext, file_summaries
from reviewbot.repo.localgit import (
    MAX_CONTENT_BYTES,
    Checkout,
    read_blobs,
    read_files_at,
    read_range,
)
from reviewbot.rules.ruleset import GroupRuleTexts, RuleSet
from reviewbot.rules.sources import review_rules

__all__ = [
    "MAX_DIFF_BYTES",
    "LoadedDiff",
    "load_diff",
    "local_context",
    "local_rules",
    "read_head_tree",
    "read_head_tree_bytes",
    "wants_head_contents",
]

# A diff file or stdin larger than this is refused (a generated dump, or /dev/zero), not read.
MAX_DIFF_BYTES = 64 * 2**20
BINARY_SNIFF_BYTES = 8000  # a NUL in the first bytes marks a binary file (as git decides)


@dataclass
class LoadedDiff:
    files: list[FileDiff]
    contents: dict[str, str]
    label: str
    base: str | None = None  # --git: the BASE revision (the target side)
    repo: Path | None = None  # --git: the repository; --diff: the --head-dir


def load_diff(
    diff_path: str | None,
    git_range: str | None,
    repo: str | Path,
    with_contents: bool,
    stdin: BinaryIO | None = None,
    head_dir: Path | None = None,
) -> LoadedDiff:
    """The diff to plan or review; ``with_contents`` reads head files too: from git for
    ``git_range``, from ``head_dir`` for ``diff_path``. ``diff_path`` ``-`` reads ``stdin``
    (default: this process's)."""
    if bool(diff_path) == bool(git_range):
        raise BadInputError("give exactly one of --diff PATH (or -) and --git BASE..HEAD")
    if head_dir is not None and git_range:
        raise BadInputError("--head-dir goes with --diff: with --git the head is read from git")
    if diff_path:
        files = _read_diff_file(diff_path, stdin)
        label = "stdin" if diff_path == "-" else diff_path
        contents = {}
        if with_contents and head_dir is not None:
            contents = read_head_tree(head_dir, changed_head_paths(files))
        return LoadedDiff(files, contents, label, repo=head_dir)
    assert git_range is not None
    local = read_range(git_range, repo)
    files = parse_git_diff(local.diff)
    contents = {}
    if with_contents:
        contents = read_files_at(repo, local.head_sha, changed_head_paths(files))
    return LoadedDiff(files, contents, git_range, base=local.base, repo=Path(repo))


def _read_diff_file(diff_path: str, stdin: BinaryIO | None) -> list[FileDiff]:
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
        return parse_git_diff(raw)
    except ValueError as error:
        raise BadInputError(f"{diff_path}: {error}") from None


def read_head_tree(head_dir: Path, paths: Iterable[str]) -> dict[str, str]:
    """The text of each of ``paths`` under ``head_dir``; a path that leads out of it, or a
    file that is missing, not regular, binary or larger than MAX_CONTENT_BYTES, is absent."""
    return {
        path: data.decode("utf-8", errors="replace")
        for path, data in read_head_tree_bytes(head_dir, paths).items()
        if b"\0" not in data[:BINARY_SNIFF_BYTES]
    }


def read_head_tree_bytes(head_dir: Path, paths: Iterable[str]) -> dict[str, bytes]:
    """The bytes of each of ``paths`` under ``head_dir``, whatever they hold; a path that
    leads out of it, or a file that is missing, not regular or larger than MAX_CONTENT_BYTES,
    is absent."""
    root = head_dir.resolve(strict=True)
    found = {path: _bytes_inside(root, path) for path in dict.fromkeys(paths)}
    return {path: data for path, data in found.items() if data is not None}


def _bytes_inside(root: Path, path: str) -> bytes | None:
    try:
        found = (root / path).resolve(strict=True)
        if not found.is_relative_to(root):
            return None  # "..", an absolute path or a symbolic link out of the tree
        details = found.stat()
        if not stat.S_ISREG(details.st_mode) or details.st_size > MAX_CONTENT_BYTES:
            return None
        return found.read_bytes()
    except (OSError, RuntimeError, ValueError):  # missing, a link loop, a NUL in the name
        return None


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


def local_rules(
    settings: Settings, loaded: LoadedDiff, groups: Sequence[GroupRuleTexts] = ()
) -> RuleSet:
    """The review rules of a local diff: the instance's, its groups' (``groups``, when the
    caller read them), and the repository's at BASE (``--git``) or in the head tree
    (``--diff --head-dir``); none from the repository when the diff came without either."""
    changed = {path for f in loaded.files for path in (f.new_path, f.old_path)}
    if loaded.repo is None:
        return review_rules(settings, lambda _paths: {}, changed_paths=changed, groups=groups)
    repo, base = loaded.repo, loaded.base
    if base is None:
        return review_rules(
            settings,
            lambda paths: read_head_tree_bytes(repo, paths),
            changed_paths=changed,
            groups=groups,
        )
    return review_rules(
        settings,
        lambda paths: read_blobs(repo, base, list(paths)),
        changed_paths=changed,
        repository_paths=Checkout(repo).paths(base),
        groups=groups,
    )
