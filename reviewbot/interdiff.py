"""What changed between two reviewed versions of a merge request, hunk by hunk (pure).

An incremental review looks at the MR's patch, not at commits: a hunk whose text (its lines and
their +/-/context markers, without line numbers) was already reviewed needs no model call,
wherever it moved; a rebase that leaves every file's patch the same needs none at all; a
force-push that rewrites history is judged by its patch like any other push.

- :func:`digest` records what a review saw: per file (old path, new path), each hunk's text
  hash and its line ranges, plus a key of the review settings that shape findings. It is stored
  with the review (JSON) so the next run can compare without asking GitLab for old versions.
- :func:`compare` splits the current diff into what to review now (new or changed hunks, files
  new or renamed since) and what was reviewed before, with a map from the previous line numbers
  of unchanged hunks to the current ones, so their findings carry over to the right lines.

Owns: the digest of what a review saw, and the hunk-by-hunk comparison of the current diff with it.
Must not: read the database or GitLab (the stored digest is handed in as JSON), or decide which
findings carry over (`reviewbot.incremental` does).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reviewbot.diff import FileDiff, Hunk, Side

__all__ = [
    "DIGEST_VERSION",
    "DiffDigest",
    "FileDigest",
    "HunkDigest",
    "Interdiff",
    "compare",
    "digest",
    "hunk_hash",
]

DIGEST_VERSION = 1
HASH_HEX_CHARS = 16
MARKERS = {"added": "+", "removed": "-", "context": " "}
NO_NEWLINE_MARK = "\\"


def hunk_hash(hunk: Hunk) -> str:
    """The hunk's text without its line numbers: equal for the same change anywhere."""
    text = "\n".join(
        MARKERS[line.kind.value] + line.text + (NO_NEWLINE_MARK if line.no_newline else "")
        for line in hunk.lines
    )
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:HASH_HEX_CHARS]


@dataclass(frozen=True)
class HunkDigest:
    hash: str
    old_start: int
    old_count: int
    new_start: int
    new_count: int

    def start_on(self, side: Side) -> int:
        return self.new_start if side is Side.NEW else self.old_start


@dataclass(frozen=True)
class FileDigest:
    old_path: str
    new_path: str
    hunks: tuple[HunkDigest, ...]

    @property
    def key(self) -> tuple[str, str]:
        return self.old_path, self.new_path


@dataclass(frozen=True)
class DiffDigest:
    """What one review saw; ``settings_key`` changes when the findings would differ anyway."""

    files: tuple[FileDigest, ...]
    settings_key: str
    version: int = DIGEST_VERSION

    def file(self, key: tuple[str, str]) -> FileDigest | None:
        return next((f for f in self.files if f.key == key), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "settings": self.settings_key,
            "files": [
                {
                    "old_path": f.old_path,
                    "new_path": f.new_path,
                    "hunks": [
                        [h.hash, h.old_start, h.old_count, h.new_start, h.new_count]
                        for h in f.hunks
                    ],
                }
                for f in self.files
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DiffDigest | None:
        """The digest, or None for one written by another digest version (or damaged)."""
        try:
            if data.get("version") != DIGEST_VERSION:
                return None
            files = tuple(
                FileDigest(
                    str(f["old_path"]),
                    str(f["new_path"]),
                    tuple(HunkDigest(str(h[0]), *(int(n) for n in h[1:5])) for h in f["hunks"]),
                )
                for f in data["files"]
            )
            return cls(files, str(data["settings"]))
        except (KeyError, TypeError, ValueError, IndexError):
            return None


def _hunk_digest(hunk: Hunk) -> HunkDigest:
    return HunkDigest(
        hunk_hash(hunk), hunk.old_start, hunk.old_count, hunk.new_start, hunk.new_count
    )


def digest(files: Iterable[FileDiff], settings_key: str) -> DiffDigest:
    return DiffDigest(
        tuple(
            FileDigest(f.old_path, f.new_path, tuple(_hunk_digest(h) for h in f.hunks))
            for f in files
        ),
        settings_key,
    )


@dataclass
class Interdiff:
    """The current diff split into what to review now and what was reviewed before."""

    to_review: list[FileDiff] = field(default_factory=list)  # only their new/changed hunks
    reviewed_before: list[str] = field(default_factory=list)  # paths with every hunk unchanged
    carried_lines: int = 0  # changed lines of unchanged hunks
    # (new path, side, previous line) -> current line, for the lines of unchanged hunks
    line_map: dict[tuple[str, Side, int], int] = field(default_factory=dict)
    # paths whose whole patch is as before (a file-level finding on them carries over)
    whole_files: set[str] = field(default_factory=set)

    @property
    def nothing_to_review(self) -> bool:
        return not self.to_review

    def carry(
        self, path: str, side: Side, line: int | None, end_line: int | None
    ) -> tuple[int | None, int | None] | None:
        """Where a previous finding is now: (line, end_line), or None when its hunk changed."""
        if line is None:
            return (None, None) if path in self.whole_files else None
        start = self.line_map.get((path, side, line))
        if start is None:
            return None
        if end_line is None:
            return start, None
        end = self.line_map.get((path, side, end_line))
        return (start, end) if end is not None else (start, None)


def compare(previous: DiffDigest, current: Sequence[FileDiff]) -> Interdiff:
    """Split ``current`` against the ``previous`` review's digest (see the module notes)."""
    result = Interdiff()
    for file in current:
        before = previous.file((file.old_path, file.new_path))
        if before is None:
            result.to_review.append(file)  # new, or renamed since: all of it is new work
            continue
        changed = _match_hunks(file, before, result)
        if changed:
            result.to_review.append(dataclasses.replace(file, hunks=tuple(changed), _index=None))
        else:
            result.reviewed_before.append(file.path)
            if len(file.hunks) == len(before.hunks):
                result.whole_files.add(file.new_path)
    return result


def _match_hunks(file: FileDiff, before: FileDigest, result: Interdiff) -> list[Hunk]:
    """Record the unchanged hunks of ``file`` in ``result``; return the ones to review."""
    unused = list(before.hunks)
    changed: list[Hunk] = []
    for hunk in file.hunks:
        digest_now = _hunk_digest(hunk)
        match = next((h for h in unused if h.hash == digest_now.hash), None)
        if match is None:
            changed.append(hunk)
            continue
        unused.remove(match)
        result.carried_lines += hunk.changed_count
        for line in hunk.lines:
            for side in (Side.NEW, Side.OLD):
                number = line.number_on(side)
                if number is not None:
                    previous = match.start_on(side) + number - digest_now.start_on(side)
                    result.line_map[(file.new_path, side, previous)] = number
    return changed
