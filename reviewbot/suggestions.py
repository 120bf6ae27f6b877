"""A suggestion, applied to the head file in memory before it is posted: does it apply and parse?

GitLab's suggestion block ``suggestion:-N+M`` replaces the lines from N above to M below the
line the comment is anchored on with the block's content
(https://docs.gitlab.com/user/project/merge_requests/reviews/suggestions/#multi-line-suggestions,
and gitlab-org/gitlab-foss!25211: "``suggestion:-3+4`` replaces from 3 lines above the commented
line to 4 lines below"). reviewbot anchors a multi-line comment on the range's first line
(:func:`reviewbot.positions.note_position`), so a finding over new lines ``first..last`` gets
``-0+(last-first)``. An empty block deletes the lines.

:func:`check_suggestion` applies a suggestion over exactly those lines of the head file and
answers a :class:`SuggestionCheck`: the block's range, the patched file and a verdict, ``OK`` or
one :class:`SuggestionProblem`:

- the head file was not read (a suggestion that cannot be checked is never posted unchecked);
- the range runs outside the file;
- the head's lines differ from the diff's added lines;
- the suggestion is identical to the lines it replaces;
- it repeats the unchanged line just above or below its range (the range is off by one);
- the patched file has more tree-sitter ``ERROR``/``MISSING`` nodes than the head file, for
  every grammar :mod:`reviewbot.scope` ships, and, for Python, ``compile()`` fails where the
  head compiled. A file with no grammar gets the line checks only.

Line ends: git numbers lines on ``\\n``; a CRLF file's replacement lines get ``\\r\\n``; a file
whose last line has no newline (``\\ No newline at end of file``) keeps that end.

Owns: applying one suggestion and judging it. Must not: read a file, post, or decide what a
dropped suggestion does to its finding (the publisher's business).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from reviewbot.diff import FileDiff, Side
from reviewbot.findings import Finding
from reviewbot.scope import GRAMMARS, MAX_PARSE_BYTES, language_of, load_language

if TYPE_CHECKING:
    import tree_sitter

__all__ = [
    "SuggestionCheck",
    "SuggestionProblem",
    "VettedFindings",
    "block_range",
    "check_suggestion",
    "parse_problems",
    "suggestion_lines",
    "vet_suggestions",
]

PYTHON = "python"
CRLF = "\r\n"
LF = "\n"
CR = "\r"


class SuggestionProblem(StrEnum):
    """Why a suggestion was dropped (the run details count them by these words)."""

    HEAD_NOT_READ = "head file not read"
    OUTSIDE_FILE = "range outside the file"
    LINES_DIFFER = "lines differ from the diff"
    NO_OP = "identical to the lines it replaces"
    OFF_BY_ONE = "repeats the line next to its range"
    DOES_NOT_PARSE = "does not parse"


@dataclass(frozen=True, slots=True)
class SuggestionCheck:
    """One suggestion applied: the block's ``-lines_above+lines_below``, the patched file
    (None when it could not be applied) and the verdict (``problem`` None: ok)."""

    lines_above: int
    lines_below: int
    patched: str | None
    problem: SuggestionProblem | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.problem is None


def block_range(first: int, last: int | None) -> tuple[int, int]:
    """``(N, M)`` of ``suggestion:-N+M`` for new lines ``first..last``, anchored on ``first``."""
    return 0, (last - first) if last is not None and last > first else 0


@dataclass(frozen=True, slots=True)
class _Lines:
    """A text split the way git numbers it: lines without their ends, and how they end."""

    lines: list[str]
    crlf: list[bool]
    final_newline: bool

    @classmethod
    def of(cls, text: str) -> _Lines:
        parts = text.split(LF)
        final_newline = text.endswith(LF) or text == ""
        if final_newline:
            parts.pop()
        crlf = [part.endswith(CR) for part in parts]
        return cls(
            [p[:-1] if c else p for p, c in zip(parts, crlf, strict=True)], crlf, final_newline
        )

    def join(self) -> str:
        ends = [CRLF if c else LF for c in self.crlf]
        if ends and not self.final_newline:
            ends[-1] = ""
        return "".join(line + end for line, end in zip(self.lines, ends, strict=True))


def suggestion_lines(suggestion: str) -> list[str]:
    """The lines a block's content writes: one trailing newline is the block's own; empty
    content deletes the lines."""
    text = suggestion.replace(CRLF, LF)
    if text.endswith(LF):
        text = text[:-1]
    return [] if suggestion == "" else text.split(LF)


def check_suggestion(
    path: str,
    head: str | None,
    first: int,
    last: int | None,
    suggestion: str,
    diff_lines: Sequence[str] | None = None,
) -> SuggestionCheck:
    """Apply ``suggestion`` over new lines ``first..last`` (1-based, ``last`` None: one line) of
    ``head`` (the file at ``path`` at the MR's head; None: not read) and judge it (module notes).
    ``diff_lines``: the diff's added lines over that range, which the head's must equal."""
    above, below = block_range(first, last)
    end = first + below
    if head is None:
        return SuggestionCheck(above, below, None, SuggestionProblem.HEAD_NOT_READ)
    source = _Lines.of(head)
    if first < 1 or end > len(source.lines):
        detail = f"lines {first}-{end} of a file of {len(source.lines)} line(s)"
        return SuggestionCheck(above, below, None, SuggestionProblem.OUTSIDE_FILE, detail)
    replaced = source.lines[first - 1 : end]
    if diff_lines is not None and [d.rstrip(CR) for d in diff_lines] != replaced:
        return SuggestionCheck(above, below, None, SuggestionProblem.LINES_DIFFER)
    new = suggestion_lines(suggestion)
    if new == replaced:
        return SuggestionCheck(above, below, None, SuggestionProblem.NO_OP)
    patched = _patched(source, first, end, new)
    repeated = _repeated_neighbour(source.lines, first, end, new)
    if repeated:
        return SuggestionCheck(above, below, patched, SuggestionProblem.OFF_BY_ONE, repeated)
    problem = parse_problems(path, head, patched)
    if problem:
        return SuggestionCheck(above, below, patched, SuggestionProblem.DOES_NOT_PARSE, problem)
    return SuggestionCheck(above, below, patched)


def _patched(source: _Lines, first: int, end: int, new: list[str]) -> str:
    crlf = any(source.crlf[first - 1 : end])
    lines = source.lines[: first - 1] + new + source.lines[end:]
    flags = source.crlf[: first - 1] + [crlf] * len(new) + source.crlf[end:]
    return _Lines(lines, flags, source.final_newline).join()


def _repeated_neighbour(lines: list[str], first: int, end: int, new: list[str]) -> str:
    """A suggestion that starts with the kept line above its range, or ends with the kept
    line below it, writes that line twice: it was written for a range one line off."""
    if not new:
        return ""
    above = lines[first - 2] if first >= 2 else None
    below = lines[end] if end < len(lines) else None
    if above is not None and above.strip() and new[0] == above and lines[first - 1] != above:
        return f"its first line repeats line {first - 1}"
    if below is not None and below.strip() and new[-1] == below and lines[end - 1] != below:
        return f"its last line repeats line {end + 1}"
    return ""


def parse_problems(path: str, head: str, patched: str) -> str:
    """Why ``patched`` parses worse than ``head`` ("" when it does not): new tree-sitter
    ``ERROR``/``MISSING`` nodes, or for Python a ``compile()`` error the head did not have."""
    language = language_of(path)
    if language is None:
        return ""
    if language == PYTHON:
        head_error = _compile_error(head, path)
        if not head_error:
            return _compile_error(patched, path)
    grammar = load_language(GRAMMARS[language])
    if grammar is None:
        return ""
    before, after = _broken_nodes(grammar, head), _broken_nodes(grammar, patched)
    if after > before:
        return f"{language} parser: {after - before} new ERROR/MISSING node(s)"
    return ""


def _compile_error(text: str, path: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(text, path, "exec", dont_inherit=True)
        except SyntaxError as error:  # IndentationError and TabError are SyntaxErrors
            return f"compile(): {type(error).__name__}: {error.msg} (line {error.lineno})"
        except (ValueError, RecursionError, MemoryError) as error:
            return f"compile(): {type(error).__name__}: {error}"
    return ""


def _broken_nodes(language: tree_sitter.Language, text: str) -> int:
    """ERROR and MISSING nodes in ``text``'s tree (the parser recovers, counting is enough)."""
    import tree_sitter

    source = text.encode("utf-8", errors="replace")
    if len(source) > MAX_PARSE_BYTES:
        return 0
    root = tree_sitter.Parser(language).parse(source).root_node
    count = 0
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            count += 1
        if node.has_error:
            stack.extend(node.children)
    return count


@dataclass(frozen=True, slots=True)
class VettedFindings:
    """Findings whose suggestions were checked: a failing one is dropped (the finding stays),
    and ``dropped`` counts them by reason; ``offered`` counts the suggestions checked."""

    findings: list[Finding]
    offered: int = 0
    dropped: Mapping[SuggestionProblem, int] = field(default_factory=dict)


def vet_suggestions(
    findings: Sequence[Finding],
    diffs: Mapping[str, FileDiff],
    heads: Mapping[str, str],
) -> VettedFindings:
    """Check each finding's suggestion against its file's head text (``heads``, by new path;
    absent: not read) and the diff's added lines (``diffs``, by new path)."""
    kept: list[Finding] = []
    dropped: Counter[SuggestionProblem] = Counter()
    offered = 0
    for finding in findings:
        if finding.suggestion is None or finding.line is None:
            kept.append(finding)
            continue
        offered += 1
        check = check_suggestion(
            finding.path,
            heads.get(finding.path),
            finding.line,
            finding.end_line,
            finding.suggestion,
            _diff_lines(diffs.get(finding.path), finding.line, finding.end_line),
        )
        if check.ok:
            kept.append(finding)
            continue
        dropped[check.problem] += 1
        kept.append(dataclasses.replace(finding, suggestion=None))
    return VettedFindings(kept, offered, dict(dropped))


def _diff_lines(file: FileDiff | None, first: int, last: int | None) -> list[str] | None:
    """The diff's text of new lines ``first..last`` (None: the diff does not show them all)."""
    if file is None:
        return None
    texts = []
    for number in range(first, (last or first) + 1):
        line = file.line_at(Side.NEW, number)
        if line is None:
            return None
        texts.append(line.text)
    return texts
