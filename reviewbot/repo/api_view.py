"""One commit of a GitLab project through the repository API, as a RepositoryView: the fallback
when git cannot fetch the commit (no git on the host, the cache off, a fetch that failed).

Everything is asked lazily: :meth:`ApiView.entries` lists the whole tree (recursive, every
page) on first use; reading a file asks only for the folder that holds it (one listing per
folder, to know a symlink or a submodule from a file) and then its raw bytes. A GitLab that
lists no tree at all (a 404 for the root) makes every read raise
:class:`~reviewbot.repo.view.TreeUnavailable`, never a quiet "no such file".

Owns: turning the API's tree entries into :class:`~reviewbot.repo.view.Entry` (``mode``
120000 a symlink, ``type`` commit a submodule, ``tree`` implied) and reading through the one
check of :class:`reviewbot.repo.tree.Tree`. Must not: retry or translate GitLab's errors (the
GitLab adapter does) or decode a file's bytes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from reviewbot.repo.tree import SHORT_SHA, Tree, checked_path
from reviewbot.repo.view import Entry, EntryKind, PathRefused, TreeUnavailable

__all__ = ["ApiView", "RepositoryApi"]

SYMLINK_MODE = "120000"
READ_CONCURRENCY = 8  # raw files asked at once (as GitLabClient.file_contents does)


class RepositoryApi(Protocol):
    """What the view asks GitLab (reviewbot.gitlab.RepositoryReader)."""

    def repository_tree(
        self, project_id: int | str, sha: str, folder: str = "", *, recursive: bool = True
    ) -> list[dict[str, Any]] | None: ...

    def raw_file(
        self, project_id: int | str, sha: str, path: str, *, max_bytes: int | None = None
    ) -> bytes | None: ...


def entry_of(item: Mapping[str, Any]) -> Entry | None:
    """The entry of one item of GitLab's tree answer (None for a folder)."""
    kind, path, mode = str(item.get("type")), str(item.get("path")), str(item.get("mode"))
    if kind == "commit":
        return Entry(path, EntryKind.SUBMODULE)
    if kind != "blob":
        return None
    return Entry(path, EntryKind.SYMLINK if mode == SYMLINK_MODE else EntryKind.FILE)


class ApiView:
    """The tree of ``sha`` in GitLab project ``project_id``, asked for as it is needed."""

    def __init__(self, api: RepositoryApi, project_id: int | str, sha: str) -> None:
        self._api = api
        self._project_id = project_id
        self._sha = sha
        self._lock = threading.Lock()
        self._whole: Tree | None = None
        self._folders: dict[str, Tree] = {}

    @property
    def sha(self) -> str:
        return self._sha

    def entries(self) -> Sequence[Entry]:
        return self._whole_tree().entries

    def _whole_tree(self) -> Tree:
        with self._lock:
            if self._whole is None:
                self._whole = Tree(self._sha, self._listing("", recursive=True))
            return self._whole

    def _tree_for(self, path: str) -> Tree:
        """The whole tree when it was listed, else the listing of ``path``'s folder."""
        folder = path.rpartition("/")[0]
        with self._lock:  # each folder listed once, even when asked from several threads
            if self._whole is not None:
                return self._whole
            tree = self._folder(folder)
            if folder and not tree.entries:
                self._folder("")  # a folder that is not there, or no tree listed at all?
            return tree

    def _folder(self, folder: str) -> Tree:
        """One level of ``folder``, listed once (lock held)."""
        tree = self._folders.get(folder)
        if tree is None:
            tree = self._folders[folder] = Tree(self._sha, self._listing(folder, recursive=False))
        return tree

    def _listing(self, folder: str, *, recursive: bool) -> list[Entry]:
        items = self._api.repository_tree(self._project_id, self._sha, folder, recursive=recursive)
        if items is None:
            raise TreeUnavailable(
                f"GitLab answered 404 when listing the repository tree at {self._sha[:SHORT_SHA]}"
            )
        return _entries(items)

    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        self._tree_for(checked_path(path)).file(path)
        found = self._api.raw_file(self._project_id, self._sha, path, max_bytes=limit)
        if found is None:
            raise PathRefused(f"no such file at {self._sha[:SHORT_SHA]}")
        return found

    def read_many(self, paths: Sequence[str]) -> dict[str, bytes]:
        """The regular files among ``paths``, asked for concurrently; the others are absent."""
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return {}
        workers = max(1, min(READ_CONCURRENCY, len(wanted)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gitlab-raw") as pool:
            found = zip(wanted, pool.map(self._read_or_none, wanted), strict=True)
            return {path: data for path, data in found if data is not None}

    def _read_or_none(self, path: str) -> bytes | None:
        try:
            return self.read_bytes(path)
        except PathRefused:
            return None


def _entries(items: Sequence[Mapping[str, Any]]) -> list[Entry]:
    return [entry for item in items if (entry := entry_of(item)) is not None]
