"""GitLab's formats for the paths of groups and projects and for usernames (pure): the one rule
the webhook (a payload's ``project.path_with_namespace``, a note author's username), the
command line (``--project``, ``--group``) and the learnings (a group's learning) check them by.

As lib/gitlab/path_regex.rb in gitlabhq/gitlabhq has them: paths and usernames are ASCII, so no
NUL, no control character, no lone surrogate, no space. A project path
(``path_with_namespace``) is one or more namespace segments and the project's own, joined by
single ``/`` (no empty segment, no leading or trailing ``/``): a namespace segment (a group, a
subgroup, a user: usernames too) is letters, digits, ``_``, ``.`` and ``-``, starts with none
of ``-``, ends with neither ``.`` nor ``.git`` nor ``.atom`` (``NAMESPACE_FORMAT_REGEX``), so
``.`` and ``..`` are never one; the project's segment has the same characters, does not start
with ``-`` and does not end in ``.git`` or ``.atom`` (``PROJECT_PATH_FORMAT_REGEX``). GitLab's
format alone would let a project be named ``.`` or ``..``; they are refused here too, as what
they mean to anything that joins paths is the folder or its parent. A group path is namespace
segments alone. A path is at most 512 characters (our ``project`` and ``group_path``
columns), a username at most 255.

Owns: the patterns and limits above and the sentence that says why a text is not such a path.
Must not: ask GitLab whether the group or project exists, or know who checks (a payload, an
option, a learning).
"""

from __future__ import annotations

import re

__all__ = [
    "GROUP_PATH",
    "MAX_PATH_CHARS",
    "MAX_USERNAME_CHARS",
    "PROJECT_PATH",
    "USERNAME",
    "group_path_problem",
    "project_path_problem",
]

MAX_PATH_CHARS = 512  # = reviewbot.store.models.PROJECT_LENGTH (project and group_path)
MAX_USERNAME_CHARS = 255  # GitLab's limit, = reviewbot.store.models.NAME_LENGTH
_NO_SUFFIX = r"(?<!\.git)(?<!\.atom)"
_NAMESPACE_SEGMENT = rf"(?:[A-Za-z0-9_.][A-Za-z0-9_.-]*[A-Za-z0-9_-]|[A-Za-z0-9_]){_NO_SUFFIX}"
_PROJECT_SEGMENT = rf"(?!\.\.?\Z)[A-Za-z0-9_.][A-Za-z0-9_.-]*{_NO_SUFFIX}"
GROUP_PATH = re.compile(rf"{_NAMESPACE_SEGMENT}(?:/{_NAMESPACE_SEGMENT})*")
PROJECT_PATH = re.compile(rf"{_NAMESPACE_SEGMENT}(?:/{_NAMESPACE_SEGMENT})*/{_PROJECT_SEGMENT}")
USERNAME = re.compile(_NAMESPACE_SEGMENT)
SEGMENT_RULE = (
    "letters, digits, '_', '.' and '-' between single '/', no segment '.' or '..', none "
    "ending in '.', '.git' or '.atom'"
)


def _problem(text: str, pattern: re.Pattern[str], kind: str) -> str | None:
    if len(text) > MAX_PATH_CHARS:
        return f"is longer than {MAX_PATH_CHARS} characters"
    if pattern.fullmatch(text) is None:
        return f"is not {kind} ({SEGMENT_RULE})"
    return None


def group_path_problem(text: str) -> str | None:
    """Why ``text`` is not the path of a GitLab group (``group``, ``group/subgroup``), as a
    predicate ("is not a group path like ..."), or None when it is one."""
    return _problem(text, GROUP_PATH, "a group path like group or group/subgroup")


def project_path_problem(text: str) -> str | None:
    """Why ``text`` is not the path of a GitLab project (``group/name``), as a predicate, or
    None when it is one."""
    return _problem(text, PROJECT_PATH, "a project path like group/name")
