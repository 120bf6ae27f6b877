"""Where a path given by the model may lead in a repository tree (pure).

Every path a repository tool receives comes from the model, which read the merge request: it
is untrusted. :func:`normalise` turns it into a path inside the tree ("/"-separated, no leading
"/", no "." or ".." parts) or refuses it with a reason the model reads; :class:`TreeIndex`
answers what a normalised path is in the tree (a file, a directory, a symbolic link, a
submodule, or inside one of the last two) without following anything. Refused, with a reason:

- an absolute path (``/etc/passwd``), a ``..`` that climbs out of the root, a NUL or another
  control character, a backslash (``..\\..\\x`` is not a Windows path here), a name longer than
  ``MAX_NAME_BYTES`` or a path longer than ``MAX_PATH_CHARS``;
- a symbolic link, or a path through one (never followed: its target may lie outside);
- a submodule, or a path inside one (another repository: never entered).

Owns: normalising a model's path and saying what it names in a tree. Must not: read a file's
bytes (the tools do, through the view) or follow a link.
"""

from __future__ import annotations

import bisect
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from reviewbot.repo.view import Entry, EntryKind

__all__ = [
    "MAX_NAME_BYTES",
    "MAX_PATH_CHARS",
    "PathProblem",
    "TreeIndex",
    "normalise",
]

MAX_PATH_CHARS = 1024  # git allows longer; no source file worth reading is named so
MAX_NAME_BYTES = 255  # one path component, as most file systems allow
ROOT = ""
ROOT_WORDS = ("", ".", "/")  # what a model writes for "the top of the repository"


@dataclass(frozen=True)
class PathProblem:
    """Why a path is refused, in words the model reads after "refused: "."""

    reason: str


def normalise(path: object, *, allow_root: bool = False) -> str | PathProblem:
    """``path`` as a tree path, or why it is refused. ``allow_root``: "", "." and "/" name the
    root (for listing a directory); otherwise a path must name something below it."""
    if not isinstance(path, str):
        return PathProblem("the path must be a string")
    if allow_root and path.strip() in ROOT_WORDS:
        return ROOT
    if not path:
        return PathProblem("the path is empty")
    if len(path) > MAX_PATH_CHARS:
        return PathProblem(f"the path is longer than {MAX_PATH_CHARS} characters")
    if any(ord(char) < ord(" ") or ord(char) == 0x7F for char in path):
        return PathProblem("the path holds a control character (NUL, a line break, ...)")
    if "\\" in path:
        return PathProblem("the path holds a backslash; separate directories with /")
    if path.startswith("/"):
        return PathProblem("absolute paths are refused; give the path from the repository root")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return PathProblem("the path leads out of the repository (..)")
            parts.pop()
            continue
        if len(part.encode("utf-8", errors="replace")) > MAX_NAME_BYTES:
            return PathProblem(f"a name in the path is longer than {MAX_NAME_BYTES} bytes")
        parts.append(part)
    if not parts:
        return ROOT if allow_root else PathProblem("the path names the repository root")
    return "/".join(parts)


class TreeIndex:
    """The entries of one tree, looked up by path without following anything."""

    def __init__(self, entries: Sequence[Entry]) -> None:
        self._entries = {entry.path: entry for entry in entries}
        self._paths = sorted(self._entries)

    @property
    def paths(self) -> list[str]:
        """Every entry's path, sorted."""
        return self._paths

    def entry(self, path: str) -> Entry | None:
        return self._entries.get(path)

    @cached_property
    def _stoppers(self) -> dict[str, EntryKind]:
        """Symlinks and submodules: a path below one of them is not in this tree."""
        return {
            path: entry.kind
            for path, entry in self._entries.items()
            if entry.kind is not EntryKind.FILE
        }

    def blocked_by(self, path: str) -> PathProblem | None:
        """Why ``path`` cannot be read or listed: it is, or lies below, a symlink or a
        submodule; None when nothing stands in the way."""
        parts = path.split("/") if path else []
        for end in range(1, len(parts) + 1):
            prefix = "/".join(parts[:end])
            kind = self._stoppers.get(prefix)
            if kind is None:
                continue
            below = end < len(parts)
            if kind is EntryKind.SYMLINK:
                where = f"{prefix} is a symbolic link" if below else "a symbolic link"
                return PathProblem(f"{where}: links are not followed")
            where = f"{prefix} is a submodule" if below else "a submodule"
            return PathProblem(f"{where}: another repository, not entered")
        return None

    def is_directory(self, path: str) -> bool:
        """Whether some entry lies below ``path`` ("" is the root)."""
        if not path:
            return bool(self._paths)
        prefix = path + "/"
        at = bisect.bisect_left(self._paths, prefix)
        return at < len(self._paths) and self._paths[at].startswith(prefix)

    def children(self, path: str) -> list[tuple[str, Entry | None]]:
        """The names directly below directory ``path``: (name, its entry) for an entry,
        (name + "/", None) for a directory, in name order."""
        prefix = f"{path}/" if path else ""
        at = bisect.bisect_left(self._paths, prefix)
        found: dict[str, Entry | None] = {}
        for full in self._paths[at:]:
            if not full.startswith(prefix):
                break
            rest = full[len(prefix) :]
            name, slash, _ = rest.partition("/")
            if slash:
                found.setdefault(name + "/", None)
            else:
                found[name] = self._entries[full]
        return sorted(found.items())

    def nearest_names(self, path: str, limit: int) -> list[str]:
        """Up to ``limit`` paths of the tree with the same file name as ``path`` (to say in a
        "no such file" answer where the model may have meant)."""
        name = posixpath.basename(path)
        return [p for p in self._paths if posixpath.basename(p) == name][:limit]
