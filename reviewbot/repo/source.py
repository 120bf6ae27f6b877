"""Where a run's repository comes from: the one factory every entry point uses.

:func:`open_repository` gives a :class:`RepositorySource`, whose :meth:`RepositorySource.at`
answers a :class:`~reviewbot.repo.view.RepositoryView` of any commit of the run (the head for
the tools and the scope context, the target for the policy file), each from the first source
that serves it:

1. the CI job's checkout (:class:`reviewbot.repo.localgit.Checkout`) when it has the commit (or
   fetches it);
2. the host's repository cache (:mod:`reviewbot.repo.cache`) when ``git`` is on ``PATH``, the
   cache is on (``repo_cache_max_bytes`` above 0) and a token is set;
3. GitLab's repository API (:mod:`reviewbot.repo.api_view`), asked lazily.

A checkout that cannot be read, or a cache that cannot fetch (a timeout, GitLab refusing), is
warned about once per run (the summary says so) and the next source serves: never a failed
review. After a cache failure the run stops asking the cache (the next fetch would most likely
fail the same way).

Owns: the order of the sources, one view per commit per run, the warnings, and closing the
views. Must not: read or fetch itself (each source does), or know about merge requests.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from reviewbot.config import Settings
from reviewbot.repo.api_view import ApiView, RepositoryApi
from reviewbot.repo.cache import CachedView, CacheError, ProjectRemote, RepoCache
from reviewbot.repo.git_view import GitTreeView
from reviewbot.repo.localgit import Checkout, CommitSource, GitError
from reviewbot.repo.view import RepositoryView

__all__ = ["RepositorySource", "SourceKind", "open_repository", "repo_cache_from"]


class SourceKind(StrEnum):
    """Which source served a commit."""

    CHECKOUT = "checkout"
    CACHE = "cache"
    API = "api"

    @property
    def words(self) -> str:
        return {"checkout": "CI checkout", "cache": "repository cache", "api": "GitLab API"}[
            self.value
        ]


def _ignore(_message: str) -> None:
    return None


def git_on_path() -> bool:
    return shutil.which("git") is not None


def repo_cache_from(settings: Settings) -> RepoCache | None:
    """The host's cache as the settings make it, or None when it is off."""
    if settings.repo_cache_max_bytes <= 0:
        return None
    return RepoCache(
        Path(settings.repo_cache_dir),
        max_bytes=settings.repo_cache_max_bytes,
        fetch_timeout_s=settings.repo_fetch_timeout_s,
    )


@dataclass
class _Sources:
    api: Callable[[str], RepositoryView]
    checkout: Checkout | None
    cache: RepoCache | None
    remote: ProjectRemote | None


class RepositorySource:
    """A run's repository at its commits: :meth:`at` gives one view per SHA."""

    def __init__(
        self,
        api: Callable[[str], RepositoryView],
        *,
        checkout: Checkout | None = None,
        cache: RepoCache | None = None,
        remote: ProjectRemote | None = None,
        warn: Callable[[str], None] = _ignore,
    ) -> None:
        self._sources = _Sources(api, checkout, cache if remote is not None else None, remote)
        self._warn = warn
        self._lock = threading.Lock()  # the tools may ask from several chunks' threads
        self._views: dict[str, RepositoryView] = {}
        self.kinds: dict[str, SourceKind] = {}  # sha -> the source that served it

    @property
    def cache(self) -> RepoCache | None:
        """The cache this run still asks (None: off, or given up after a failure)."""
        return self._sources.cache

    def at(self, sha: str) -> RepositoryView:
        """The tree of ``sha`` from the first source that serves it (see the module notes)."""
        with self._lock:
            view = self._views.get(sha)
            if view is None:
                kind, view = self._open(sha)
                self._views[sha], self.kinds[sha] = view, kind
            return view

    def _open(self, sha: str) -> tuple[SourceKind, RepositoryView]:
        from_checkout = self._from_checkout(sha)
        if from_checkout is not None:
            return SourceKind.CHECKOUT, from_checkout
        from_cache = self._from_cache(sha)
        if from_cache is not None:
            return SourceKind.CACHE, from_cache
        return SourceKind.API, self._sources.api(sha)

    def _from_checkout(self, sha: str) -> RepositoryView | None:
        checkout = self._sources.checkout
        if checkout is None:
            return None
        try:
            if checkout.source_of(sha) is CommitSource.MISSING:
                return None  # the checkout said why
            view = GitTreeView(checkout.path, sha)
            view.entries()
            return view
        except GitError as error:
            self._sources.checkout = None
            self._warn(f"local checkout not used ({error}); reading files from GitLab")
            return None

    def _from_cache(self, sha: str) -> RepositoryView | None:
        cache, remote = self._sources.cache, self._sources.remote
        if cache is None or remote is None:
            return None
        view: CachedView | None = None
        try:
            view = cache.view(remote, sha)
            view.entries()
            return view
        except (CacheError, GitError) as error:
            if view is not None:
                view.close()
            self._sources.cache = None
            self._warn(f"repository cache not used ({error}); reading files through the GitLab API")
            return None

    def close(self) -> None:
        """Let go of the cached clones (eviction may remove them again)."""
        with self._lock:
            views = list(self._views.values())
        for view in views:
            if isinstance(view, CachedView):
                view.close()


def open_repository(
    settings: Settings,
    api: RepositoryApi,
    project_id: int,
    project_path: str,
    *,
    checkout: Checkout | None = None,
    warn: Callable[[str], None] = _ignore,
) -> RepositorySource:
    """The repository of GitLab project ``project_id`` (``project_path``, e.g. ``group/app``)
    for one run: the CI ``checkout`` when given, else the host's cache when git is on PATH and
    the cache is on, else ``api`` (the run's GitLab client). ``warn`` hears, once each, that
    the checkout or the cache could not be used and why."""
    cache = repo_cache_from(settings) if git_on_path() else None
    remote = None
    if cache is not None and settings.gitlab_url:
        remote = ProjectRemote(
            settings.gitlab_url, project_id, project_path, token=settings.gitlab_token
        )
    return RepositorySource(
        lambda sha: ApiView(api, project_id, sha),
        checkout=checkout,
        cache=cache,
        remote=remote,
        warn=warn,
    )
