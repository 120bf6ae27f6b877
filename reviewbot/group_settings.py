"""Rules and policy shared by a group: each group above a project may keep a settings project
(the instance's ``group_settings_project``, e.g. ``{group}/reviewbot-settings``) whose
``.reviewbot.toml`` (policy keys and ``[[rules]]``) and ``.reviewbot/rules.yaml`` (rules and
checks) apply to every project below the group.

For a project ``acme/platform/api`` the groups are ``acme`` then ``acme/platform``; each one's
settings project is read at its default branch, and the layers apply outermost first, so the
nearest group wins on a rule's name and on a policy key, and the project's own files (at the
MR's target branch, reviewbot.guidance) win over every group. A group without a settings
project has no layer: GitLab answers 404 both for a project that is not there and for one the
bot's token cannot see, so neither is a problem (docs/rules.md says how to check which layers
a review used: ``reviewbot plan --json`` names each rule's origin). Any other failure (a 403, a
5xx, GitLab unreachable, a file too large) is a problem the summary names, and that group's
layer is left out, never half applied.

What was read is kept per settings project for ``group_settings_ttl_s`` by a
:class:`GroupSettingsCache` (one per worker process, held by the App), so a busy worker does not
read the same project for every review.

Owns: which groups a project has, reading their settings projects through a small reader
protocol, the cache, and the words of what could not be read. Must not: parse a rules file or a
policy (reviewbot.rules, reviewbot.repo_policy), or say anything on the MR (the caller does).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from reviewbot.gitlab import GitLabError, GitLabNotFoundError
from reviewbot.group_config import GROUP_PLACEHOLDER
from reviewbot.repo_policy import REPO_CONFIG_FILE
from reviewbot.rules.ruleset import MAX_RULES_FILE_BYTES, REPO_RULES_FILE

__all__ = [
    "GROUP_FILES",
    "GroupLayer",
    "GroupSettings",
    "GroupSettingsCache",
    "GroupSettingsReader",
    "enclosing_groups",
    "read_group_settings",
]

GROUP_FILES = (REPO_CONFIG_FILE, REPO_RULES_FILE)


class GroupSettingsReader(Protocol):
    """What reading a settings project needs of GitLab (reviewbot.gitlab.GitLabClient)."""

    def project(self, project: int | str) -> dict[str, Any]: ...

    def raw_file(
        self, project_id: int | str, sha: str, path: str, *, max_bytes: int | None = None
    ) -> bytes | None: ...


@dataclass(frozen=True)
class GroupLayer:
    """One group's settings project as read at its default branch: the files it has."""

    group: str
    project: str
    ref: str
    files: Mapping[str, bytes] = field(default_factory=dict)

    def origin(self, path: str) -> str:
        """How the summary and ``plan --json`` name one of its files."""
        return f"group {self.group}: {self.project}@{self.ref}:{path}"


@dataclass(frozen=True)
class GroupSettings:
    """The layers of a project's groups, the outermost first, and what could not be read."""

    layers: tuple[GroupLayer, ...] = ()
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Read:
    layer: GroupLayer | None  # None: the group has no settings project (or it was not read)
    problem: str | None = None


class GroupSettingsCache:
    """What was read of each settings project, kept ``ttl_s`` seconds (thread-safe)."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], tuple[float, _Read]] = {}

    def get(self, key: tuple[str, str], load: Callable[[], _Read]) -> _Read:
        """The kept reading of ``key`` while fresh, else ``load()``'s (a failed read is not
        kept: the next review tries again)."""
        now = self._clock()
        with self._lock:
            kept = self._entries.get(key)
            if kept is not None and now - kept[0] < self.ttl_s:
                return kept[1]
        found = load()
        if found.problem is None and self.ttl_s > 0:
            with self._lock:
                self._entries[key] = (now, found)
        return found


def enclosing_groups(project_path: str) -> list[str]:
    """The groups above ``project_path``, the outermost first (``a/b/c`` → ``a``, ``a/b``)."""
    parts = [part for part in project_path.strip("/").split("/") if part]
    return ["/".join(parts[:end]) for end in range(1, len(parts))]


def read_group_settings(
    reader: GroupSettingsReader,
    project_path: str,
    pattern: str,
    cache: GroupSettingsCache | None = None,
    instance: str = "",
) -> GroupSettings:
    """The settings layers of ``project_path``'s groups (none when ``pattern`` is empty)."""
    if not pattern:
        return GroupSettings()
    layers: list[GroupLayer] = []
    problems: list[str] = []
    for group in enclosing_groups(project_path):
        settings_project = pattern.replace(GROUP_PLACEHOLDER, group)
        if settings_project == project_path:
            continue  # the settings project's own MRs: its files are the project's own
        read = (
            cache.get(
                (instance, settings_project),
                lambda p=settings_project, g=group: _read(reader, g, p),
            )
            if cache is not None
            else _read(reader, group, settings_project)
        )
        if read.layer is not None:
            layers.append(read.layer)
        if read.problem is not None:
            problems.append(read.problem)
    return GroupSettings(tuple(layers), tuple(problems))


def _read(reader: GroupSettingsReader, group: str, settings_project: str) -> _Read:
    try:
        project = reader.project(settings_project)
        ref = str(project.get("default_branch") or "")
        if not ref:
            return _Read(None)  # an empty project: no branch, no files
        files = _files(reader, project.get("id", settings_project), ref)
    except GitLabNotFoundError:
        return _Read(None)
    except GitLabError as error:
        return _Read(None, _not_read(group, settings_project, str(error)))
    too_large = [path for path, data in files.items() if len(data) > MAX_RULES_FILE_BYTES]
    if too_large:
        reason = f"{', '.join(too_large)} is larger than {MAX_RULES_FILE_BYTES:,} bytes"
        return _Read(None, _not_read(group, settings_project, reason))
    return _Read(GroupLayer(group, settings_project, ref, files))


def _files(reader: GroupSettingsReader, project_id: int | str, ref: str) -> dict[str, bytes]:
    found = {}
    for path in GROUP_FILES:
        data = reader.raw_file(project_id, ref, path, max_bytes=MAX_RULES_FILE_BYTES)
        if data is not None:
            found[path] = data
    return found


def _not_read(group: str, settings_project: str, reason: str) -> str:
    return (
        f"the settings of group {group} ({settings_project}) were not read: {reason}; its "
        "rules and policy were not applied"
    )
