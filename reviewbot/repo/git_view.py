"""One commit of a local git repository as a RepositoryView: a CI job's checkout or a bare clone
of the host's repository cache, read from the object database (``git ls-tree -r -l``, ``git
cat-file``), never from a working tree, whose files may differ from the commit.

Owns: turning the tree's lines into entries (mode 120000 a symlink, type commit a submodule) and
reading files through the one check of :class:`reviewbot.repo.tree.Tree`. Must not: fetch
(the checkout and the cache do) or decide where a commit comes from (`reviewbot.repo.source`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from reviewbot.repo.localgit import COMMIT_TYPE, SYMLINK_MODE, TreeLine, list_tree, read_blobs
from reviewbot.repo.tree import SHORT_SHA, Tree
from reviewbot.repo.view import Entry, EntryKind, PathRefused

__all__ = ["GitTreeView"]


class GitTreeView:
    """The tree of commit ``sha`` in the repository at ``repo`` (which holds the commit);
    its listing is read once, on first use. GitError when git cannot read it."""

    def __init__(self, repo: Path, sha: str) -> None:
        self.repo = repo
        self._sha = sha
        self._tree: Tree | None = None

    @property
    def sha(self) -> str:
        return self._sha

    def _listing(self) -> Tree:
        if self._tree is None:
            self._tree = Tree(self._sha, [_entry(line) for line in list_tree(self.repo, self._sha)])
        return self._tree

    def entries(self) -> Sequence[Entry]:
        return self._listing().entries

    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        """The blob at ``path`` (its size is listed, so ``limit`` is checked before reading by
        the caller)."""
        self._listing().file(path)
        found = read_blobs(self.repo, self._sha, [path]).get(path)
        if found is None:
            raise PathRefused(f"no such file at {self._sha[:SHORT_SHA]}")
        return found

    def read_many(self, paths: Sequence[str]) -> dict[str, bytes]:
        """The regular files among ``paths`` in one git call; the others are absent."""
        tree = self._listing()
        readable = []
        for path in paths:
            try:
                readable.append(tree.file(path).path)
            except PathRefused:
                continue
        return read_blobs(self.repo, self._sha, readable)


def _entry(line: TreeLine) -> Entry:
    if line.type == COMMIT_TYPE:
        return Entry(line.path, EntryKind.SUBMODULE)
    if line.mode == SYMLINK_MODE:
        return Entry(line.path, EntryKind.SYMLINK, line.size)
    return Entry(line.path, EntryKind.FILE, line.size)
