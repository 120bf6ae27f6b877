"""Where GitLab wants a note on a diff line: positions, line codes and links (pure).

Owns: the arithmetic between a parsed diff (``reviewbot.diff``) and GitLab's ``position``
object: which of ``old_line``/``new_line`` a line is addressed by, the ``line_code`` of a
line, the ``line_range`` of a multi-line note, and the link to a line in the MR's Changes tab.
Takes data (the diff version's SHAs, a :class:`~reviewbot.diff.FileDiff`, a
:class:`~reviewbot.findings.Finding`) and returns data. Must not: do I/O, import an HTTP
client or know which server it talks to: ``reviewbot.gitlab`` sends what is built here.

GitLab's rules (https://docs.gitlab.com/api/discussions/#create-a-new-thread-in-the-merge-request-diff):

* ``position_type`` "text" and the SHAs of the MR's latest diff version (:class:`DiffRefs`).
* An added line is addressed by ``new_line`` only, a removed line by ``old_line`` only, an
  unchanged line by both, even where its two numbers differ (the page leaves this implicit;
  gitlab-org/gitlab#325161 and gitlab-org/gitlab#35935 spell it out).
* A multi-line note adds ``line_range`` whose ``start`` and ``end`` each hold a ``line_code``
  and a ``type`` ("old"/"new")
  (https://docs.gitlab.com/api/discussions/#parameters-for-multiline-comments). The draft
  notes API refuses ``old_line``/``new_line`` inside ``line_range`` (gitlab-org/gitlab#571619),
  so a draft's range carries only ``line_code`` and ``type``.
* A line code is ``sha1(path)_old_new`` (lib/gitlab/git.rb ``diff_line_code``, explained in
  gitlab-org/gitlab#323760), with the path the file has after the change, and ``old``/``new``
  GitLab's diff parser counters (lib/gitlab/diff/parser.rb), not the line numbers: an added
  line carries the old counter where it stands (the number the next old line would have), a
  removed line the new one. Commenting on added line 5 right after a removed line 5 gives
  ``_6_5``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from reviewbot.diff import FileDiff, LineKind, Side
from reviewbot.findings import Finding
from reviewbot.mergerequest import DiffRefs

__all__ = [
    "POSITION_TYPE_TEXT",
    "LinePosition",
    "diff_link",
    "line_code",
    "line_code_for",
    "note_position",
    "position_for",
]

POSITION_TYPE_TEXT = "text"
LINE_RANGE_ENDS = ("start", "end")


@dataclass(frozen=True, slots=True)
class LinePosition:
    """Where GitLab expects a note on one diff line: the line keys of a ``position`` object."""

    old_path: str
    new_path: str
    old_line: int | None
    new_line: int | None
    kind: LineKind


def position_for(file: FileDiff, side: Side, number: int) -> LinePosition | None:
    """GitLab position of line ``number`` on ``side``, or None if that line is not in the diff.

    An added line is addressed by ``new_line`` only, a removed line by ``old_line`` only, an
    unchanged line by both (see the module notes).
    """
    line = file.line_at(side, number)
    if line is None:
        return None
    old_line = line.old_no if line.kind is not LineKind.ADDED else None
    new_line = line.new_no if line.kind is not LineKind.REMOVED else None
    return LinePosition(file.old_path, file.new_path, old_line, new_line, line.kind)


def line_code(path: str, old_pos: int, new_pos: int) -> str:
    """GitLab's line code ``sha1(path)_old_new`` (lib/gitlab/git.rb ``diff_line_code``).

    ``old_pos``/``new_pos`` are the diff parser's counters (lib/gitlab/diff/parser.rb): an
    added line keeps the current old counter and a removed line the current new counter.
    """
    return f"{hashlib.sha1(path.encode('utf-8')).hexdigest()}_{old_pos}_{new_pos}"


def line_code_for(file: FileDiff, side: Side, number: int) -> str | None:
    """The line code of line ``number`` on ``side`` of ``file``'s diff, or None if not shown."""
    for hunk in file.hunks:
        old_pos, new_pos = hunk.old_start, hunk.new_start
        for line in hunk.lines:
            if line.number_on(side) == number:
                return line_code(file.new_path, old_pos, new_pos)
            if line.kind is not LineKind.ADDED:
                old_pos += 1
            if line.kind is not LineKind.REMOVED:
                new_pos += 1
    return None


def note_position(
    refs: DiffRefs, file: FileDiff | None, finding: Finding, *, draft: bool = False
) -> dict[str, Any]:
    """The ``position`` object of a note on ``finding``'s line of ``file`` (module notes).

    A line the diff does not show keeps the number the finding names, on its side: GitLab
    refuses such a position (the adapter's ``PositionRefusedError``), as it should."""
    position: dict[str, Any] = {
        "position_type": POSITION_TYPE_TEXT,
        "base_sha": refs.base_sha,
        "start_sha": refs.start_sha,
        "head_sha": refs.head_sha,
        "old_path": finding.old_path,
        "new_path": finding.path,
    }
    point = (
        position_for(file, finding.side, finding.line)
        if file is not None and finding.line is not None
        else None
    )
    if point is None:
        position.update(_position_outside_diff(finding))
    else:
        if point.old_line is not None:
            position["old_line"] = point.old_line
        if point.new_line is not None:
            position["new_line"] = point.new_line
    line_range = _line_range(file, finding, draft=draft)
    if line_range is not None:
        position["line_range"] = line_range
    return position


def diff_link(web_url: str, file: FileDiff | None, finding: Finding) -> str | None:
    """A link to the finding's line in the MR's Changes tab (``web_url``: the MR's page), or
    None when it has no line the diff shows."""
    if file is None or finding.line is None or not web_url:
        return None
    code = line_code_for(file, finding.side, finding.line)
    return f"{web_url}/diffs#{code}" if code else None


def _line_range(file: FileDiff | None, finding: Finding, *, draft: bool) -> dict[str, Any] | None:
    """Both ends of a multi-line finding, or None when it has one line or an end not shown."""
    if finding.end_line is None or finding.line is None or file is None:
        return None
    ends = {}
    for end, number in zip(LINE_RANGE_ENDS, (finding.line, finding.end_line), strict=True):
        code = line_code_for(file, finding.side, number)
        point = position_for(file, finding.side, number)
        if code is None or point is None:
            return None
        ends[end] = {"line_code": code, "type": "old" if finding.side is Side.OLD else "new"}
        if not draft:
            ends[end].update({"old_line": point.old_line, "new_line": point.new_line})
    return ends


def _position_outside_diff(finding: Finding) -> dict[str, int]:
    """The line as the finding names it, for a line the diff does not show."""
    if finding.line is None:
        return {}
    return {"old_line" if finding.side is Side.OLD else "new_line": finding.line}
