"""The built-in analyzers on the host's repository cache: what ``reviewbot run`` and the webhook
worker run where the run's repository (``reviewbot.repo.source``) has the MR's head as a git
tree (the host's cached clone, or a checkout), plus the worker's pipeline reports.

The cached clone is bare: the MR's changed files (and the Ruff settings files of their folders
and the root, and ``semgrep_config`` when it is a path of the tree) are written into a
temporary folder, the built-ins run there (each bounded by ``analyzer_timeout_s``, as in
``reviewbot ci``), and the folder is removed. Where the head is not at hand (the cache is off,
git is not installed, the fetch failed: the files were read through GitLab's API), the
built-ins are named as not run with the reason, never a silent 0.

Owns: :class:`HostAnalyzers` and the temporary tree. Must not: fetch (the repository source
does), read a report's format, or merge findings into the review.
"""

from __future__ import annotations

import posixpath
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

from reviewbot.analyzer_findings import AnalyzerProblem, AnalyzerRun
from reviewbot.analyzer_settings import SEMGREP
from reviewbot.analyzers.builtin import run_builtin_analyzers
from reviewbot.analyzers.changes import changed_lines
from reviewbot.analyzers.collect import PipelineAnalyzers, within_changes
from reviewbot.config import Settings
from reviewbot.diff import FileDiff
from reviewbot.repo.source import SourceKind, git_on_path
from reviewbot.repo.view import EntryKind, PathRefused, RepositoryView, TreeUnavailable

__all__ = ["BUILT_INS", "HeadSource", "HostAnalyzers", "host_analyzers"]

BUILT_INS = "built-in analyzers"
MAX_WRITTEN_FILE_BYTES = 8 * 1024 * 1024  # a larger changed file is not given to the built-ins
RUFF_SETTINGS_FILES = ("pyproject.toml", "ruff.toml", ".ruff.toml")
SHORT_SHA = 8
GIT_TREES = (SourceKind.CACHE, SourceKind.CHECKOUT)


class HeadSource(Protocol):
    """The run's repository (``reviewbot.repo.source.RepositorySource``): a view per commit and
    which source served it."""

    kinds: Mapping[str, SourceKind]

    def at(self, sha: str) -> RepositoryView: ...


def host_analyzers(settings: Settings, pipeline: PipelineAnalyzers | None) -> HostAnalyzers | None:
    """The analyzers of a ``reviewbot run`` or a worker's run: the built-ins ``settings``
    names and the ``pipeline``'s reports; None (analyzers off) when there are neither."""
    if not settings.analyzers and pipeline is None:
        return None
    return HostAnalyzers(settings, pipeline)


@dataclass(frozen=True)
class HostAnalyzers:
    """What ``RunOptions.analyzers`` calls with the MR's head, its ``FileDiff`` s and the run's
    repository: the pipeline's reports (when given) and the built-ins on the head's tree."""

    settings: Settings
    pipeline: PipelineAnalyzers | None = None

    def __call__(
        self, head_sha: str, files: Iterable[FileDiff], source: HeadSource | None = None
    ) -> AnalyzerRun:
        diffs = list(files)
        run = self.pipeline(head_sha, diffs) if self.pipeline is not None else AnalyzerRun()
        if not self.settings.analyzers:
            return run
        changed = changed_lines(diffs)
        if not changed:
            return run.merged(AnalyzerRun(used=(f"{BUILT_INS} (no changed file to scan)",)))
        tree = self._head_tree(head_sha, source)
        if isinstance(tree, str):
            return run.merged(_did_not_run(tree))
        return run.merged(self._on_tree(tree, changed))

    def _head_tree(self, head_sha: str, source: HeadSource | None) -> RepositoryView | str:
        """The head's git tree, or why it is not at hand."""
        if source is not None:
            try:
                view = source.at(head_sha)
            except TreeUnavailable as error:
                return f"the MR's head could not be listed ({error})"
            if source.kinds.get(head_sha) in GIT_TREES:
                return view
        head = head_sha[:SHORT_SHA]
        if self.settings.repo_cache_max_bytes <= 0:
            return "the host's repository cache is off (repo_cache_max_bytes is 0)"
        if not git_on_path():
            return "the host's repository cache needs git, which is not on PATH"
        if not self.settings.gitlab_url:
            return "the host's repository cache needs gitlab_url"
        return (
            f"the host's repository cache could not serve the MR's head {head} (the run details "
            "say why); its files were read through the GitLab API"
        )

    def _on_tree(self, view: RepositoryView, changed: Mapping[str, tuple[int, ...]]) -> AnalyzerRun:
        folder = Path(tempfile.mkdtemp(prefix="reviewbot-analyzers-"))
        try:
            written, problems = _write_tree(view, changed, self._extra_paths(view), folder)
            kept = {path: lines for path, lines in changed.items() if path in written}
            run = run_builtin_analyzers(folder, kept, self.settings) if kept else AnalyzerRun()
            return within_changes(run, changed).merged(AnalyzerRun(problems=problems))
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _extra_paths(self, view: RepositoryView) -> set[str]:
        """``semgrep_config`` when it is a file or folder of the tree (else a registry name)."""
        config = self.settings.semgrep_config
        if not config or SEMGREP not in self.settings.analyzers:
            return set()
        prefix = config.strip("/").removeprefix("./")
        return {
            entry.path
            for entry in view.entries()
            if entry.path == prefix or entry.path.startswith(prefix + "/")
        }


def _did_not_run(reason: str) -> AnalyzerRun:
    return AnalyzerRun(problems=(AnalyzerProblem(BUILT_INS, f"did not run: {reason}"),))


def _settings_files(paths: Iterable[str]) -> set[str]:
    """The Ruff settings files a changed file's folders and the root may hold."""
    folders = {""}
    for path in paths:
        parent = posixpath.dirname(path)
        while parent:
            folders.add(parent)
            parent = posixpath.dirname(parent)
    return {posixpath.join(folder, name) for folder in folders for name in RUFF_SETTINGS_FILES}


def _write_tree(
    view: RepositoryView,
    changed: Mapping[str, tuple[int, ...]],
    extra: set[str],
    folder: Path,
) -> tuple[set[str], tuple[AnalyzerProblem, ...]]:
    """Write the changed files that are regular files of the tree, the settings files and
    ``extra`` into ``folder``: the changed paths written, and the ones left out with why."""
    files = {entry.path for entry in view.entries() if entry.kind is EntryKind.FILE}
    wanted = (set(changed) | _settings_files(changed) | extra) & files
    written: set[str] = set()
    problems: list[AnalyzerProblem] = []
    for path in sorted(wanted):
        target = folder.joinpath(*PurePosixPath(path).parts)
        if ".." in PurePosixPath(path).parts:
            problems.append(AnalyzerProblem(f"file {path}", "not scanned: not a plain path"))
            continue
        try:
            data = view.read_bytes(path, MAX_WRITTEN_FILE_BYTES)
        except PathRefused as refused:
            problems.append(AnalyzerProblem(f"file {path}", f"not scanned: {refused}"))
            continue
        if len(data) > MAX_WRITTEN_FILE_BYTES:
            reason = f"not scanned: larger than {MAX_WRITTEN_FILE_BYTES // (1024 * 1024)} MiB"
            problems.append(AnalyzerProblem(f"file {path}", reason))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written.add(path)
    return written & set(changed), tuple(problems)
