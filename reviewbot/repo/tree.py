"""A tree's entries by path, and the one check every source makes before it reads (pure).

Every source (the CI checkout, the cached bare clone, GitLab's API) builds a :class:`Tree` from
the entries of its commit and asks :meth:`Tree.file` before reading a path: only a regular file
listed in the tree is read, so a symlink is never followed, a submodule never entered and a
path with ``..``, a leading ``/``, a backslash or a control character never reaches git or the
API (the model's tools normalise paths too; a source does not rely on it).

Owns: what makes a path readable in a tree and the words for why one is not. Must not: do I/O
or decide what the model may see (size and binary limits are the tools' and the readers').
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from reviewbot.repo.view import Entry, EntryKind, PathRefused

__all__ = ["SHORT_SHA", "Tree", "checked_path"]

SHORT_SHA = 12
FIRST_PRINTABLE = 0x20
DELETE = 0x7F


def checked_path(path: str) -> str:
    """``path`` as a tree names it, or PathRefused: relative, "/"-separated, no ``.`` or
    ``..`` component, no empty component, no backslash or control character."""
    if not isinstance(path, str) or not path:
        raise PathRefused("an empty path")
    if path.startswith("/"):
        raise PathRefused("an absolute path: paths start at the repository root")
    if any(ord(char) < FIRST_PRINTABLE or ord(char) == DELETE for char in path):
        raise PathRefused("a path with a control character")
    if "\\" in path:
        raise PathRefused("a path with a backslash: use /")
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise PathRefused("a path with an empty, '.' or '..' part: it must stay in the tree")
    return path


class Tree:
    """The entries of one commit's tree, looked up by path."""

    def __init__(self, sha: str, entries: Iterable[Entry]) -> None:
        self.sha = sha
        self._by_path = {entry.path: entry for entry in sorted(entries, key=lambda e: e.path)}

    @property
    def entries(self) -> Sequence[Entry]:
        return list(self._by_path.values())

    def file(self, path: str) -> Entry:
        """The regular file at ``path``, or PathRefused saying why it is not read."""
        entry = self._by_path.get(checked_path(path))
        if entry is None:
            raise PathRefused(f"no such file at {self.sha[:SHORT_SHA]}")
        if entry.kind is EntryKind.SYMLINK:
            raise PathRefused("a symbolic link: not followed")
        if entry.kind is EntryKind.SUBMODULE:
            raise PathRefused("a submodule: another repository, not entered")
        return entry
