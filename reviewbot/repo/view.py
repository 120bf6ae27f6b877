"""A repository's tree at one commit, read-only: the protocol every source implements (pure).

Sources (a CI checkout, the host's cached bare clone, GitLab's repository API) live in their own
modules; :class:`MemoryView` holds files given as data (an eval item's head files, tests).

Owns: the shape of a tree entry, the one error for a path that is not read, and the in-memory
view. Must not: decide what the model may read (the tools confine paths and cap answers) or
do any I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

__all__ = ["Entry", "EntryKind", "MemoryView", "PathRefused", "RepositoryView", "TreeUnavailable"]


class EntryKind(StrEnum):
    FILE = "file"
    SYMLINK = "symlink"  # never followed: its target may lie outside the tree
    SUBMODULE = "submodule"  # another repository: never entered


@dataclass(frozen=True)
class Entry:
    """One entry of the tree: its path from the root ("/"-separated, no leading "/"), its kind,
    and its size in bytes where the source knows it (None: unknown until read)."""

    path: str
    kind: EntryKind
    size: int | None = None


class PathRefused(ValueError):
    """A path that is not read, and why in words a model and a person understand ("no such
    file at <sha>", "a symbolic link", "a submodule", "binary", "larger than N bytes")."""


class TreeUnavailable(RuntimeError):
    """The source cannot list the commit's tree at all (GitLab answered 404 on
    ``/repository/tree``: a proxy in front of it, a token of narrower scope, an older GitLab).
    Without the listing no file can be told from a symbolic link or a submodule, so none is
    read; the message says so in words for the summary's run details."""


class RepositoryView(Protocol):
    """The tree of one commit. Directories are implied by the entries' paths."""

    @property
    def sha(self) -> str: ...

    def entries(self) -> Sequence[Entry]:
        """Every file, symlink and submodule of the tree, in path order."""
        ...

    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        """The bytes of the regular file at ``path``; PathRefused if the tree holds none there
        (or holds a symlink or a submodule). With ``limit``, a source that does not know the
        file's size first may stop after ``limit + 1`` bytes: a longer result means a file
        larger than ``limit``."""
        ...


class MemoryView:
    """A tree held in memory: ``files`` maps each path to its text (UTF-8 when read)."""

    def __init__(self, sha: str, files: Mapping[str, str]) -> None:
        self._sha = sha
        self._files = dict(sorted(files.items()))

    @property
    def sha(self) -> str:
        return self._sha

    def entries(self) -> Sequence[Entry]:
        return [
            Entry(path, EntryKind.FILE, len(text.encode())) for path, text in self._files.items()
        ]

    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        text = self._files.get(path)
        if text is None:
            raise PathRefused(f"no such file at {self._sha[:12]}")
        return text.encode()
