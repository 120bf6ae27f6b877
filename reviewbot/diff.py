"""Unified diffs as data: files -> hunks -> lines, each line with its old and new number.

Two inputs share one model:

* a full git diff (``git diff`` output with ``diff --git`` headers, or a plain ``diff -u``);
* GitLab's per-file diff entries (``old_path``, ``new_path``, ``new_file``, ``renamed_file``,
  ``deleted_file``, ``diff``), whose ``diff`` starts at the first ``@@`` (headers are accepted too).
  An entry GitLab sends without its diff (``too_large``, or ``collapsed`` and empty) is diffed
  from the file's texts at base and head instead (:func:`rebuild_diff`).

Hunks are read by their header counts, so a content line such as ``--- x`` or ``@@`` inside a hunk
is content, not a header. Bytes that are not UTF-8 are replaced, never fatal; CRLF endings are
stripped from the text. Nothing here does I/O.

Owns: the diff's data model (``FileDiff``, ``Hunk``, ``DiffLine``, ``Side``) and reading both inputs
into it. Must not: read a file or GitLab: the caller hands in the diff text, GitLab's entries and,
for a rebuilt diff, the two texts.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "DiffLine",
    "FileDiff",
    "FileStatus",
    "Hunk",
    "LineKind",
    "Side",
    "nearest_changed_line",
    "needs_rebuild",
    "parse_git_diff",
    "parse_gitlab_diffs",
    "rebuild_diff",
]

SUBMODULE_MODE = "160000"
HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")
NO_NEWLINE_PREFIX = "\\"
DEV_NULL = "/dev/null"
SUBMODULE_LINE = re.compile(r"^Subproject commit [0-9a-f]{7,64}(-dirty)?$")
UNIFIED_CONTEXT_LINES = 3
NO_NEWLINE = "\\ No newline at end of file\n"
C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


class LineKind(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    CONTEXT = "context"


class Side(StrEnum):
    NEW = "new"
    OLD = "old"


class FileStatus(StrEnum):
    ADDED = "added"
    DELETED = "deleted"
    MODIFIED = "modified"
    RENAMED = "renamed"


@dataclass(frozen=True, slots=True)
class DiffLine:
    kind: LineKind
    old_no: int | None
    new_no: int | None
    text: str
    no_newline: bool = False

    @property
    def is_change(self) -> bool:
        return self.kind is not LineKind.CONTEXT

    def number_on(self, side: Side) -> int | None:
        return self.new_no if side is Side.NEW else self.old_no

    @property
    def side(self) -> Side:
        """The side a reviewer addresses this line on: removed lines live on the old side."""
        return Side.OLD if self.kind is LineKind.REMOVED else Side.NEW

    @property
    def number(self) -> int:
        number = self.number_on(self.side)
        assert number is not None
        return number


@dataclass(frozen=True, slots=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    section: str
    lines: tuple[DiffLine, ...]

    @property
    def changed_count(self) -> int:
        return sum(1 for line in self.lines if line.is_change)

    def range_on(self, side: Side) -> tuple[int, int]:
        """First and last line number (inclusive) this hunk spans on ``side``."""
        start, count = (
            (self.new_start, self.new_count)
            if side is Side.NEW
            else (self.old_start, self.old_count)
        )
        # A hunk that adds to an empty file reads "-0,0": its range starts at line 1.
        first = max(start, 1) if count == 0 else start
        return first, first + count - 1

    def header(self) -> str:
        suffix = f" {self.section}" if self.section else ""
        return (
            f"@@ -{self.old_start},{self.old_count} +{self.new_start},{self.new_count} @@{suffix}"
        )


@dataclass(eq=False)
class FileDiff:
    old_path: str
    new_path: str
    status: FileStatus
    hunks: tuple[Hunk, ...] = ()
    is_binary: bool = False
    is_submodule: bool = False
    old_mode: str | None = None
    new_mode: str | None = None
    similarity: int | None = None
    too_large: bool = False
    generated: bool = False
    warnings: tuple[str, ...] = ()
    _index: dict[tuple[Side, int], DiffLine] | None = field(default=None, repr=False)

    @property
    def path(self) -> str:
        """The path a reviewer knows the file by: the new path unless the file was deleted."""
        return self.old_path if self.status is FileStatus.DELETED else self.new_path

    @property
    def added_count(self) -> int:
        return sum(1 for h in self.hunks for line in h.lines if line.kind is LineKind.ADDED)

    @property
    def removed_count(self) -> int:
        return sum(1 for h in self.hunks for line in h.lines if line.kind is LineKind.REMOVED)

    @property
    def changed_count(self) -> int:
        return sum(h.changed_count for h in self.hunks)

    @property
    def mode_changed(self) -> bool:
        return bool(self.old_mode and self.new_mode and self.old_mode != self.new_mode)

    def lines(self) -> Iterator[DiffLine]:
        for hunk in self.hunks:
            yield from hunk.lines

    def line_at(self, side: Side, number: int) -> DiffLine | None:
        """The diff line shown as ``number`` on ``side``, or None when the diff does not show it."""
        if self._index is None:
            index: dict[tuple[Side, int], DiffLine] = {}
            for line in self.lines():
                if line.new_no is not None:
                    index[(Side.NEW, line.new_no)] = line
                if line.old_no is not None:
                    index[(Side.OLD, line.old_no)] = line
            self._index = index
        return self._index.get((side, number))


# ---------------------------------------------------------------------------------------------
# Nearby lines


def nearest_changed_line(
    file: FileDiff, side: Side, number: int, *, max_distance: int = 0
) -> DiffLine | None:
    """The changed line of the hunk around (``side``, ``number``) that is closest to it.

    The line must fall inside a hunk's span on that side, or at most ``max_distance`` lines
    outside it (context shown around a hunk). Lines on the asked side are preferred by one step;
    ties go to the line after, then to added lines.
    Returns None when no hunk is that close or the hunk has no changed line.
    """
    best: tuple[int, int, DiffLine] | None = None
    for hunk in file.hunks:
        first, last = hunk.range_on(side)
        if not first - max_distance <= number <= last + max_distance:
            continue
        target = _index_in_hunk(hunk, side, number)
        for index, line in enumerate(hunk.lines):
            if not line.is_change:
                continue
            # a line on the asked side counts as one step nearer than one on the other side
            distance = abs(index - target) + (0 if line.side is side else 1)
            tie_break = (0 if index >= target else 1) + (0 if line.kind is LineKind.ADDED else 2)
            candidate = (distance, tie_break, line)
            if best is None or candidate[:2] < best[:2]:
                best = candidate
    return best[2] if best else None


def _index_in_hunk(hunk: Hunk, side: Side, number: int) -> int:
    """Position in ``hunk.lines`` where line ``number`` of ``side`` is (or would be)."""
    last_seen = -1
    for index, line in enumerate(hunk.lines):
        line_number = line.number_on(side)
        if line_number is None:
            continue
        if line_number >= number:
            return index
        last_seen = index
    return last_seen + 1 if last_seen >= 0 else 0


# ---------------------------------------------------------------------------------------------
# Parsing


def _decode(diff: str | bytes) -> str:
    if isinstance(diff, bytes):
        return diff.decode("utf-8", errors="replace")
    return diff


def _split_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def unquote_git_path(raw: str) -> str:
    """Undo git's C-style quoting of unusual paths (``"a/na\\303\\257ve.txt"``)."""
    if not (len(raw) >= 2 and raw.startswith('"') and raw.endswith('"')):
        return raw
    body = raw[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        char = body[i]
        if char != "\\" or i + 1 >= len(body):
            out += char.encode("utf-8")
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in C_ESCAPES:
            out.append(C_ESCAPES[nxt])
            i += 2
        elif body[i + 1 : i + 4].isdigit():
            out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
            i += 4
        else:
            out += nxt.encode("utf-8")
            i += 2
    return out.decode("utf-8", errors="replace")


def _strip_prefix(path: str) -> str:
    path = unquote_git_path(path.split("\t", 1)[0])
    if path == DEV_NULL:
        return path
    if len(path) > 2 and path[1] == "/" and path[0] in "abciwo":
        return path[2:]
    return path


def _split_diff_git_paths(rest: str) -> tuple[str, str]:
    """Paths of a ``diff --git a/x b/y`` line; the halves are equal unless renamed."""
    if rest.startswith('"'):
        end = rest.find('"', 1)
        while end > 0 and rest[end - 1] == "\\":
            end = rest.find('"', end + 1)
        return _strip_prefix(rest[: end + 1]), _strip_prefix(rest[end + 1 :].strip())
    if ' "' in rest:
        left, right = rest.split(' "', 1)
        return _strip_prefix(left), _strip_prefix('"' + right)
    # Unquoted: for an unrenamed file both halves are the same, so split in the middle.
    half = len(rest) // 2
    if rest[half] == " " and rest[:half][2:] == rest[half + 1 :][2:]:
        return _strip_prefix(rest[:half]), _strip_prefix(rest[half + 1 :])
    left, _, right = rest.partition(" b/")
    return _strip_prefix(left), _strip_prefix("b/" + right)


@dataclass
class _FileBuilder:
    old_path: str = ""
    new_path: str = ""
    new_file: bool = False
    deleted_file: bool = False
    renamed: bool = False
    is_binary: bool = False
    old_mode: str | None = None
    new_mode: str | None = None
    similarity: int | None = None
    index_mode: str | None = None
    hunks: list[Hunk] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def build(self, *, too_large: bool = False, generated: bool = False) -> FileDiff:
        old_path = self.old_path if self.old_path != DEV_NULL else self.new_path
        new_path = self.new_path if self.new_path != DEV_NULL else old_path
        if self.new_file or self.old_path == DEV_NULL:
            status = FileStatus.ADDED
        elif self.deleted_file or self.new_path == DEV_NULL:
            status = FileStatus.DELETED
        elif self.renamed or old_path != new_path:
            status = FileStatus.RENAMED
        else:
            status = FileStatus.MODIFIED
        is_submodule = SUBMODULE_MODE in (self.old_mode, self.new_mode, self.index_mode) or (
            bool(self.hunks)
            and all(SUBMODULE_LINE.match(line.text) for h in self.hunks for line in h.lines)
        )
        return FileDiff(
            old_path=old_path,
            new_path=new_path,
            status=status,
            hunks=tuple(self.hunks),
            is_binary=self.is_binary,
            is_submodule=is_submodule,
            old_mode=self.old_mode,
            new_mode=self.new_mode,
            similarity=self.similarity,
            too_large=too_large,
            generated=generated,
            warnings=tuple(self.warnings),
        )


def _parse_hunk(
    lines: list[str], start: int, header: re.Match[str]
) -> tuple[Hunk, int, str | None]:
    """Read one hunk whose header matched at ``lines[start]``; return it and the next index."""
    old_start = int(header.group(1))
    old_count = int(header.group(2)) if header.group(2) is not None else 1
    new_start = int(header.group(3))
    new_count = int(header.group(4)) if header.group(4) is not None else 1
    old_no, new_no = old_start, new_start
    old_left, new_left = old_count, new_count
    body: list[DiffLine] = []
    warning = None
    i = start + 1
    while i < len(lines) and (old_left > 0 or new_left > 0):
        raw = lines[i]
        marker, text = (raw[:1], raw[1:]) if raw else (" ", "")
        if marker == " " and old_left > 0 and new_left > 0:
            body.append(DiffLine(LineKind.CONTEXT, old_no, new_no, text))
            old_no, new_no, old_left, new_left = old_no + 1, new_no + 1, old_left - 1, new_left - 1
        elif marker == "-" and old_left > 0:
            body.append(DiffLine(LineKind.REMOVED, old_no, None, text))
            old_no, old_left = old_no + 1, old_left - 1
        elif marker == "+" and new_left > 0:
            body.append(DiffLine(LineKind.ADDED, None, new_no, text))
            new_no, new_left = new_no + 1, new_left - 1
        elif marker == NO_NEWLINE_PREFIX and body:
            body[-1] = _without_final_newline(body[-1])
        else:
            warning = (
                f"hunk {lines[start]!r} ends early: {old_left} old and {new_left} new lines missing"
            )
            break
        i += 1
    if warning is None and (old_left > 0 or new_left > 0):
        warning = (
            f"hunk {lines[start]!r} is cut off: {old_left} old and {new_left} new lines missing"
        )
    while i < len(lines) and lines[i].startswith(NO_NEWLINE_PREFIX) and body:
        body[-1] = _without_final_newline(body[-1])
        i += 1
    hunk = Hunk(
        old_start,
        old_count - old_left,
        new_start,
        new_count - new_left,
        header.group(5).strip(),
        tuple(body),
    )
    return hunk, i, warning


def _without_final_newline(line: DiffLine) -> DiffLine:
    return DiffLine(line.kind, line.old_no, line.new_no, line.text, no_newline=True)


def _parse_hunks(lines: list[str], start: int, builder: _FileBuilder) -> int:
    """Read consecutive hunks into ``builder``; stop at the first line that starts a new file."""
    i = start
    while i < len(lines):
        header = HUNK_HEADER.match(lines[i])
        if header is None:
            if lines[i].startswith(("diff --git ", "--- ")) or _starts_plain_file(lines, i):
                return i
            i += 1  # stray text between hunks (e.g. email trailers): ignore
            continue
        hunk, i, warning = _parse_hunk(lines, i, header)
        builder.hunks.append(hunk)
        if warning:
            builder.warnings.append(warning)
    return i


def _starts_plain_file(lines: list[str], i: int) -> bool:
    return lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")


def _read_extended_headers(lines: list[str], i: int, builder: _FileBuilder) -> int:
    """Consume git's extended header lines after ``diff --git``; return the first other index."""
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git ") or HUNK_HEADER.match(line):
            return i
        if _starts_plain_file(lines, i):
            builder.old_path = _strip_prefix(line[4:])
            builder.new_path = _strip_prefix(lines[i + 1][4:])
            return i + 2
        _apply_extended_header(line, builder)
        i += 1
    return i


def _apply_extended_header(line: str, builder: _FileBuilder) -> None:
    key, _, value = line.partition(" ")
    if line.startswith("new file mode "):
        builder.new_file, builder.new_mode = True, line.rsplit(" ", 1)[-1]
    elif line.startswith("deleted file mode "):
        builder.deleted_file, builder.old_mode = True, line.rsplit(" ", 1)[-1]
    elif line.startswith("old mode "):
        builder.old_mode = line.rsplit(" ", 1)[-1]
    elif line.startswith("new mode "):
        builder.new_mode = line.rsplit(" ", 1)[-1]
    elif line.startswith(("rename from ", "copy from ")):
        builder.renamed, builder.old_path = True, unquote_git_path(line.split(" ", 2)[2])
    elif line.startswith(("rename to ", "copy to ")):
        builder.renamed, builder.new_path = True, unquote_git_path(line.split(" ", 2)[2])
    elif line.startswith(("similarity index ", "dissimilarity index ")):
        digits = line.rsplit(" ", 1)[-1].rstrip("%")
        builder.similarity = int(digits) if digits.isdigit() else None
    elif key == "index":
        parts = value.split(" ")
        builder.index_mode = parts[1] if len(parts) > 1 else None
    elif line.startswith("Binary files ") or line == "GIT binary patch":
        builder.is_binary = True


def parse_git_diff(diff: str | bytes) -> list[FileDiff]:
    """Parse ``git diff`` (or ``diff -u``) output into files. Text before the first file is ignored.

    Raises ValueError when non-empty input contains no file diff at all.
    """
    lines = _split_lines(_decode(diff))
    files: list[FileDiff] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        builder = _FileBuilder()
        if line.startswith("diff --git "):
            builder.old_path, builder.new_path = _split_diff_git_paths(line[len("diff --git ") :])
            i = _read_extended_headers(lines, i + 1, builder)
        elif _starts_plain_file(lines, i):
            builder.old_path = _strip_prefix(line[4:])
            builder.new_path = _strip_prefix(lines[i + 1][4:])
            i += 2
        else:
            i += 1
            continue
        i = _parse_hunks(lines, i, builder)
        files.append(builder.build())
    if not files and any(line.strip() for line in lines):
        raise ValueError("input is not a unified diff: no 'diff --git' or '---/+++' file header")
    return files


def parse_gitlab_diffs(entries: Iterable[Mapping[str, object]]) -> list[FileDiff]:
    """Parse GitLab's per-file diff entries (``/merge_requests/:iid/diffs`` or ``/changes``)."""
    return [parse_gitlab_diff_entry(entry) for entry in entries]


def parse_gitlab_diff_entry(entry: Mapping[str, object]) -> FileDiff:
    try:
        old_path = str(entry["old_path"])
        new_path = str(entry["new_path"])
    except KeyError as missing:
        raise ValueError(f"GitLab diff entry without {missing.args[0]!r}") from None
    builder = _FileBuilder(
        old_path=old_path,
        new_path=new_path,
        new_file=bool(entry.get("new_file")),
        deleted_file=bool(entry.get("deleted_file")),
        renamed=bool(entry.get("renamed_file")),
        old_mode=_mode(entry.get("a_mode")),
        new_mode=_mode(entry.get("b_mode")),
    )
    text = entry.get("diff") or ""
    lines = _split_lines(_decode(text if isinstance(text, str | bytes) else str(text)))
    start = _read_extended_headers(lines, 0, builder) if lines else 0
    builder.old_path, builder.new_path = old_path, new_path  # entry fields win over headers
    if any(line.startswith(("Binary files ", "GIT binary patch")) for line in lines[:3]):
        builder.is_binary = True
    _parse_hunks(lines, start, builder)
    too_large = bool(entry.get("too_large")) or (
        bool(entry.get("collapsed")) and not builder.hunks and not builder.is_binary
    )
    return builder.build(too_large=too_large, generated=bool(entry.get("generated_file")))


def _mode(value: object) -> str | None:
    if value in (None, "", "0"):
        return None
    return str(value)


def rebuild_diff(entry: Mapping[str, Any], old_text: str, new_text: str) -> FileDiff:
    """A file GitLab sent without its diff (:func:`needs_rebuild`), diffed here from its raw
    texts at base and head (difflib, 3 lines of context), with the entry's paths and modes."""
    old_path, new_path = str(entry["old_path"]), str(entry["new_path"])
    header = [f"diff --git a/{old_path} b/{new_path}\n"]
    if entry.get("new_file"):
        header.append(f"new file mode {entry.get('b_mode') or '100644'}\n")
    elif entry.get("deleted_file"):
        header.append(f"deleted file mode {entry.get('a_mode') or '100644'}\n")
    elif entry.get("renamed_file"):
        header += [f"rename from {old_path}\n", f"rename to {new_path}\n"]
    body = difflib.unified_diff(
        old_text.splitlines(keepends=True),
        new_text.splitlines(keepends=True),
        fromfile=f"a/{old_path}" if not entry.get("new_file") else DEV_NULL,
        tofile=f"b/{new_path}" if not entry.get("deleted_file") else DEV_NULL,
        n=UNIFIED_CONTEXT_LINES,
    )
    lines = [line if line.endswith("\n") else line + "\n" + NO_NEWLINE for line in body]
    files = parse_git_diff("".join(header + lines))
    rebuilt = files[0]
    rebuilt.old_path, rebuilt.new_path = old_path, new_path
    rebuilt.warnings = (*rebuilt.warnings, "diff rebuilt from raw files: GitLab sent none")
    return rebuilt


def needs_rebuild(entry: Mapping[str, Any]) -> bool:
    """GitLab sent this entry without its diff: too large, or collapsed with none."""
    empty = not entry.get("diff")
    return bool(entry.get("too_large")) or (bool(entry.get("collapsed")) and empty)
