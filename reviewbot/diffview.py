"""The one place that decides how a diff looks to the model.

Every line carries the number the model must report, and its marker tells the side::

    <file path="src/app.py" status="modified">
    @@ -10,7 +10,8 @@ def handler(request):
      12 | unchanged line        (context: report side "new", line 12)
    + 13 | added line            (report side "new", line 13)
    - 11 | removed line          (report side "old", line 11)
    </file>

Context lines taken from the head file (around hunks, and the enclosing signature) are rendered
like diff context lines. Over-long lines are cut, with the cut said on the line, so one minified
line cannot blow a chunk.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from reviewbot.diff import DiffLine, FileDiff, Hunk, LineKind, Side

__all__ = [
    "MAX_LINE_CHARS",
    "FileView",
    "expand_context",
    "head_lines",
    "render_file",
    "render_lines",
]

MAX_LINE_CHARS = 1000
MARKERS = {LineKind.ADDED: "+", LineKind.REMOVED: "-", LineKind.CONTEXT: " "}
SIGNATURE = re.compile(
    r"^\s*(?:(?:export|public|private|protected|static|async|pub(?:\(crate\))?|final|abstract)\s+)*"
    r"(?:def|class|func|fn|function|interface|struct|impl|trait|module|enum|sub|proc)\b"
)
SIGNATURE_SCAN_LIMIT = 200


@dataclass(frozen=True, slots=True)
class FileView:
    """A file (or part of one) as shown to the model."""

    file: FileDiff
    hunks: tuple[Hunk, ...]
    part: int = 1
    parts: int = 1
    reviewed_before: int | None = None  # lines up to this index of hunks[0] were owned earlier


def _attr(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def render_lines(lines: Sequence[DiffLine], width: int) -> list[str]:
    out = []
    for line in lines:
        text = line.text
        if len(text) > MAX_LINE_CHARS:
            text = f"{text[:MAX_LINE_CHARS]}… [line cut: {len(line.text)} characters]"
        out.append(f"{MARKERS[line.kind]} {line.number:>{width}} | {text}")
    return out


def render_file(view: FileView) -> str:
    file = view.file
    attrs = [f'path="{_attr(file.path)}"']
    if file.old_path != file.new_path:
        attrs.append(f'old_path="{_attr(file.old_path)}"')
    attrs.append(f'status="{file.status.value}"')
    if view.parts > 1:
        attrs.append(f'part="{view.part}/{view.parts}"')
    width = max((len(str(line.number)) for hunk in view.hunks for line in hunk.lines), default=1)
    out = [f"<file {' '.join(attrs)}>"]
    for index, hunk in enumerate(view.hunks):
        out.append(hunk.header())
        if index == 0 and view.reviewed_before:
            lines = hunk.lines
            out += render_lines(lines[: view.reviewed_before], width)
            out.append("(the lines above were reviewed in the previous part; context only)")
            out += render_lines(lines[view.reviewed_before :], width)
        else:
            out += render_lines(hunk.lines, width)
    out.append("</file>")
    return "\n".join(out) + "\n"


def expand_context(file: FileDiff, head_text: str | None, context_lines: int) -> tuple[Hunk, ...]:
    """Hunks widened with up to ``context_lines`` head-file lines on each side.

    Adds the enclosing signature to a hunk's header when git gave none. Without the head file
    (deleted files, no contents fetched), the hunks are returned as they are.
    """
    if head_text is None or context_lines <= 0 or not file.hunks:
        return file.hunks
    head = head_lines(head_text)
    expanded: list[Hunk] = []
    shown_until = 0  # last new-side line already shown
    for position, hunk in enumerate(file.hunks):
        following = file.hunks[position + 1] if position + 1 < len(file.hunks) else None
        ceiling = following.range_on(Side.NEW)[0] if following else len(head) + 1
        widened = _widen(hunk, head, context_lines, shown_until, ceiling)
        expanded.append(widened)
        shown_until = max(shown_until, widened.range_on(Side.NEW)[1])
    return tuple(expanded)


def head_lines(text: str) -> list[str]:
    """A head file's lines as git numbers them: split at ``\\n`` only, without ``\\r`` ends.

    (``str.splitlines`` also splits at form feeds and Unicode separators, which shifts every
    later line number against the diff's.)
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _first_line(start: int, count: int) -> int:
    """First line a hunk side covers; an empty side's start names the line *before* the change."""
    return start if count else start + 1


def _widen(hunk: Hunk, head: list[str], context_lines: int, floor: int, ceiling: int) -> Hunk:
    first_new = _first_line(hunk.new_start, hunk.new_count)
    first_old = _first_line(hunk.old_start, hunk.old_count)
    delta = first_old - first_new  # old number of an unchanged line = new number + delta
    last_new = first_new + hunk.new_count - 1
    before_start = max(floor + 1, first_new - context_lines, 1)
    after_end = min(ceiling - 1, last_new + context_lines, len(head))
    before = [
        DiffLine(LineKind.CONTEXT, n + delta, n, head[n - 1])
        for n in range(before_start, first_new)
    ]
    # below the hunk, the two sides are apart by what the hunk added or removed
    delta_after = delta + hunk.old_count - hunk.new_count
    after = [
        DiffLine(LineKind.CONTEXT, n + delta_after, n, head[n - 1])
        for n in range(last_new + 1, after_end + 1)
    ]
    section = hunk.section or _enclosing_signature(head, before_start)
    if not before and not after:
        return Hunk(*_counts(hunk), section, hunk.lines)
    return Hunk(
        old_start=first_old - len(before),
        old_count=hunk.old_count + len(before) + len(after),
        new_start=first_new - len(before),
        new_count=hunk.new_count + len(before) + len(after),
        section=section,
        lines=(*before, *hunk.lines, *after),
    )


def _counts(hunk: Hunk) -> tuple[int, int, int, int]:
    return hunk.old_start, hunk.old_count, hunk.new_start, hunk.new_count


def _enclosing_signature(head: list[str], first_line: int) -> str:
    """The nearest line above ``first_line`` that opens a function/class, stripped."""
    for number in range(first_line - 1, max(first_line - SIGNATURE_SCAN_LIMIT, 0), -1):
        text = head[number - 1]
        if SIGNATURE.match(text):
            return text.strip()[:MAX_LINE_CHARS]
    return ""
