"""The MR's changed lines of the head commit, as the analyzers take them.

Owns: :func:`changed_lines`. Must not: read anything.
"""

from __future__ import annotations

from collections.abc import Iterable

from reviewbot.diff import FileDiff, FileStatus, LineKind

__all__ = ["changed_lines"]


def changed_lines(files: Iterable[FileDiff]) -> dict[str, tuple[int, ...]]:
    """``{path: added lines}`` of the head side: a deleted, binary or submodule file is left
    out, and so is one with only removed lines; a file too large for its diff to be shown has
    ``()`` (the whole file)."""
    changed: dict[str, tuple[int, ...]] = {}
    for diff in files:
        if diff.status is FileStatus.DELETED or diff.is_binary or diff.is_submodule:
            continue
        if diff.too_large and not diff.hunks:
            changed[diff.path] = ()
            continue
        added = tuple(
            line.new_no
            for line in diff.lines()
            if line.kind is LineKind.ADDED and line.new_no is not None
        )
        if added:
            changed[diff.path] = added
    return changed
