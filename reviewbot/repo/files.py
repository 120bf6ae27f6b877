"""The repository's files at the commits of one review run: the one reader every step uses.

Owns: reading paths at a SHA as text (or as bytes, for a reader that decodes them itself), each
path once per SHA (contents at a commit never change), through the run's repository view of
that commit (``views``:
:meth:`reviewbot.repo.source.RepositorySource.at`: the CI checkout, the host's cache or the
GitLab API, whichever serves it), in one batch where the view reads several files at once; and
what counts as text worth showing (not binary, not larger than
:data:`~reviewbot.repo.localgit.MAX_CONTENT_BYTES`). Must not: know about merge requests, settings
or the database; choose the source or fetch commits (`reviewbot.repo.source` does) or retry
the API (the GitLab adapter does), or hide a tree it could not list (the caller says what that
left out).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from reviewbot.repo.localgit import MAX_CONTENT_BYTES
from reviewbot.repo.view import PathRefused, RepositoryView, TreeUnavailable

__all__ = ["BINARY_SNIFF_BYTES", "RepoFiles", "read_files", "text_of"]

BINARY_SNIFF_BYTES = 8000  # git's own test: a NUL in the first 8,000 bytes is binary


def text_of(data: bytes) -> str | None:
    """The file's text, or None when it is binary or too large to use for context."""
    if len(data) > MAX_CONTENT_BYTES or b"\0" in data[:BINARY_SNIFF_BYTES]:
        return None
    return data.decode("utf-8", errors="replace")


def read_files(view: RepositoryView, paths: Sequence[str]) -> dict[str, bytes]:
    """The regular files among ``paths`` in ``view``: in one batch when the view can."""
    many = getattr(view, "read_many", None)
    if callable(many):
        return dict(many(paths))
    found = {}
    for path in paths:
        try:
            found[path] = view.read_bytes(path)
        except PathRefused:
            continue
    return found


class RepoFiles:
    """Contents of paths at a SHA, read through ``views(sha)``."""

    def __init__(self, views: Callable[[str], RepositoryView]) -> None:
        self._views = views
        self._at: dict[str, dict[str, str | None]] = {}  # sha -> path -> text (None: absent)
        self._bytes_at: dict[str, dict[str, bytes | None]] = {}  # sha -> path -> bytes
        self._unlisted: dict[str, TreeUnavailable] = {}  # sha -> why its tree is not listed

    def unlisted(self, sha: str) -> str:
        """Why the tree of ``sha`` could not be listed when a read found so ("": it could, or
        nothing was read at ``sha``)."""
        unlisted = self._unlisted.get(sha)
        return "" if unlisted is None else str(unlisted)

    def read_bytes(self, sha: str, paths: Sequence[str]) -> dict[str, bytes]:
        """The paths of ``paths`` that are regular files at ``sha``, with their bytes, whatever
        they hold (a rules file is decoded by its reader: reviewbot.repo_policy.rules_file_text).
        :class:`~reviewbot.repo.view.TreeUnavailable` as :meth:`read`."""
        known = self._bytes_at.setdefault(sha, {})
        wanted = [path for path in dict.fromkeys(paths) if path not in known]
        if wanted:
            found = self._fetch(sha, wanted)
            known.update({path: found.get(path) for path in wanted})
        return {path: data for path in paths if (data := known.get(path)) is not None}

    def _fetch(self, sha: str, wanted: Sequence[str]) -> dict[str, bytes]:
        """The regular files among ``wanted`` at ``sha``; TreeUnavailable, remembered, when the
        tree of ``sha`` cannot be listed."""
        if sha in self._unlisted:
            raise self._unlisted[sha]
        try:
            return read_files(self._views(sha), wanted)
        except TreeUnavailable as unlisted:
            self._unlisted[sha] = unlisted
            raise

    def read(self, sha: str, paths: Sequence[str]) -> dict[str, str]:
        """The paths of ``paths`` that exist at ``sha`` as text files, with their text.
        :class:`~reviewbot.repo.view.TreeUnavailable` when the source cannot list the tree of
        ``sha`` (asked once: later reads at ``sha`` raise it again without asking)."""
        known = self._at.setdefault(sha, {})
        wanted = [path for path in dict.fromkeys(paths) if path not in known]
        if wanted:
            found = self._fetch(sha, wanted)
            for path in wanted:
                data = found.get(path)
                known[path] = None if data is None else text_of(data)
        return {path: text for path in paths if (text := known.get(path)) is not None}
