"""The repository's files at the commits of one review run: the one reader every step uses.

Owns: reading paths at a SHA, each path once per SHA (contents at a commit never change):
from a local checkout (a CI job's, :class:`reviewbot.localgit.Checkout`) when it has the
commit, else through the GitLab API (a callable handed in); and the one warning when the
checkout could not be used. Must not: know about merge requests, settings or the database;
fetch commits itself (the checkout does) or retry the API (the GitLab adapter does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from reviewbot.localgit import Checkout, GitError

__all__ = ["ReadFromApi", "RepoFiles"]

# (sha, paths) -> {path: text} for the paths that exist there (GitLabClient.file_contents)
ReadFromApi = Callable[[str, Sequence[str]], Mapping[str, str]]


def _ignore(_warning: str) -> None:
    return None


class RepoFiles:
    """Contents of paths at a SHA: from ``checkout`` when it has the commit (a path it lacks
    there does not exist, or is binary or too large), else from ``from_api``.

    ``warn`` hears, once per run, that the checkout could not be read and why.
    """

    def __init__(
        self,
        from_api: ReadFromApi,
        checkout: Checkout | None = None,
        warn: Callable[[str], None] = _ignore,
    ) -> None:
        self._from_api = from_api
        self._checkout = checkout
        self._warn = warn
        self._warned = False
        self._at: dict[str, dict[str, str | None]] = {}  # sha -> path -> text (None: absent)

    def read(self, sha: str, paths: Sequence[str]) -> dict[str, str]:
        """The paths of ``paths`` that exist at ``sha``, with their text."""
        known = self._at.setdefault(sha, {})
        wanted = [path for path in dict.fromkeys(paths) if path not in known]
        if wanted:
            found = self._from_checkout(sha, wanted)
            if found is None:
                found = dict(self._from_api(sha, wanted))
            known.update({path: found.get(path) for path in wanted})
        return {path: text for path in paths if (text := known.get(path)) is not None}

    def _from_checkout(self, sha: str, paths: list[str]) -> dict[str, str] | None:
        if self._checkout is None:
            return None
        try:
            return self._checkout.read(sha, paths)
        except GitError as error:
            if not self._warned:
                self._warned = True
                self._warn(f"local checkout not used ({error}); reading files from GitLab")
            return None
