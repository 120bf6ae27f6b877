"""The one place that decides how a diff looks to the model.

Every line carries the number the model must report, and its marker tells the side::

    <file path="src/app.py" status="modified">
    @@ -10,7 +10,8 @@ def handler(request):
      12 | unchanged line        (context: report side "new", line 12)
    + 13 | added line            (report side "new", line 13)
    - 11 | removed line          (report side "old", line 11)
    </file>

Context lines taken from the head file are rendered like diff context lines (a space, then their
new-side number): the lines around each hunk (:func:`expand_context`), the enclosing function or
class of a hunk (:func:`with_scope`, shown as extra context-only hunks and widened hunks, so the
line numbers say where the gaps are), or the whole file at once (:func:`whole_file`). Over-long
lines are cut, with the cut said on the line, so one minified line cannot blow a chunk.

Owns: the text of each file, hunk and context line as the model sees it, and what a line's number
and marker tell the model to report. Must not: decide which chunk a line goes in
(`reviewbot.chunking`), find a scope itself (`reviewbot.scope`), or do I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from reviewbot.diff import DiffLine, FileDiff, Hunk, LineKind, Side
from reviewbot.scope import SIGNATURE, Enclosing
from reviewbot.tokens import TokenCounter

__all__ = [
    "MAX_LINE_CHARS",
    "FileView",
    "ScopedHunks",
    "agrees_with_head",
    "expand_context",
    "head_lines",
    "render_file",
    "render_lines",
    "whole_file",
    "with_scope",
]

MAX_LINE_CHARS = 1000
MARKERS = {LineKind.ADDED: "+", LineKind.REMOVED: "-", LineKind.CONTEXT: " "}
SIGNATURE_SCAN_LIMIT = 200
# No rendered line costs fewer tokens than this ("  7 | x" is a number, a bar and a newline):
# a cheap lower bound that rules out whole files and long candidate lists before counting.
MIN_TOKENS_PER_LINE = 2


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
    return _expand(file, head_lines(head_text), context_lines)


def head_lines(text: str) -> list[str]:
    """A head file's lines as git numbers them: split at ``\\n`` only, without ``\\r`` ends.

    (``str.splitlines`` also splits at form feeds and Unicode separators, which shifts every
    later line number against the diff's.)
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _expand(file: FileDiff, head: Sequence[str], context_lines: int) -> tuple[Hunk, ...]:
    expanded: list[Hunk] = []
    shown_until = 0  # last new-side line already shown
    for position, hunk in enumerate(file.hunks):
        following = file.hunks[position + 1] if position + 1 < len(file.hunks) else None
        ceiling = following.range_on(Side.NEW)[0] if following else len(head) + 1
        widened = _widen(hunk, head, context_lines, shown_until, ceiling)
        expanded.append(widened)
        shown_until = max(shown_until, widened.range_on(Side.NEW)[1])
    return tuple(expanded)


def _first_line(start: int, count: int) -> int:
    """First line a hunk side covers; an empty side's start names the line *before* the change."""
    return start if count else start + 1


def _widen(hunk: Hunk, head: Sequence[str], context_lines: int, floor: int, ceiling: int) -> Hunk:
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


def _enclosing_signature(head: Sequence[str], first_line: int) -> str:
    """The nearest line above ``first_line`` that opens a function/class, stripped."""
    for number in range(first_line - 1, max(first_line - SIGNATURE_SCAN_LIMIT, 0), -1):
        text = head[number - 1]
        if SIGNATURE.match(text):
            return text.strip()[:MAX_LINE_CHARS]
    return ""


# --- enclosing-scope context and whole files -------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScopedHunks:
    """Hunks with their enclosing scopes added, how many hunks got any, and who found them."""

    hunks: tuple[Hunk, ...]
    scoped: int
    methods: tuple[str, ...] = ()  # Enclosing.method of the hunks that got context, sorted


def agrees_with_head(file: FileDiff, head: Sequence[str]) -> bool:
    """True when every new-side line of the diff is the head file's line of that number.

    Context from a head file that does not match the diff (stale contents, another commit)
    would show the model wrong code under right-looking numbers.
    """
    return all(
        line.new_no <= len(head) and head[line.new_no - 1] == line.text
        for line in file.lines()
        if line.new_no is not None
    )


def whole_file(file: FileDiff, head: Sequence[str]) -> Hunk | None:
    """The whole head file as one hunk, its changes marked; None if the hunks do not tile it.

    Unchanged lines are context lines with both numbers, removed lines stay where the diff has
    them. The head must agree with the diff (:func:`agrees_with_head`).
    """
    if not file.hunks or not head:
        return None
    tiles = _expand(file, head, len(head) + 1)
    merged = _join_touching(tiles)
    if len(merged) != 1:
        return None
    return Hunk(*_counts(merged[0]), "", merged[0].lines)


def with_scope(
    hunks: Sequence[Hunk],
    head: Sequence[str],
    enclosing: Callable[[int], Enclosing],
    budget: int,
    counter: TokenCounter,
) -> ScopedHunks:
    """``hunks`` (in file order, one file) with the code that encloses each, within ``budget``.

    For each hunk, head lines above it are added in this order while its ``budget`` (tokens,
    counted as rendered, an extra ``@@`` header included) allows: the innermost enclosing
    definition's signature, the outer definitions' signatures, the first lines of enclosing
    statements (``if``, ``for``...), then the body up to the hunk, nearest lines first. Lines
    already shown (by the hunk before) are not repeated. Added lines next to a hunk widen it;
    the others become context-only hunks before it; touching hunks are joined.
    """
    if budget <= 0 or not hunks:
        return ScopedHunks(tuple(hunks), 0)
    width = max((len(str(line.number)) for hunk in hunks for line in hunk.lines), default=1)
    header_tokens = counter.count("@@ -1,1 +1,1 @@\n".replace("1", "9" * width))
    out: list[Hunk] = []
    methods: list[str] = []
    floor = 0  # last new-side line shown by an earlier hunk
    for hunk in hunks:
        first = _first_line(hunk.new_start, hunk.new_count)
        anchor = _anchor_line(hunk)
        chosen: list[int] = []
        if anchor is not None and first - 1 > floor:
            found = enclosing(anchor)
            candidates = _scope_candidates(found, floor, first, budget)
            chosen = _within_budget(
                candidates, head, floor, first, width, budget, header_tokens, counter
            )
            if chosen:
                methods.append(found.method)
        if chosen:
            out += _context_hunks(hunk, chosen, head)
        else:
            out.append(hunk)
        floor = max(floor, _last_new(out[-1], floor))
    return ScopedHunks(_join_touching(out), len(methods), tuple(sorted(set(methods))))


def _anchor_line(hunk: Hunk) -> int | None:
    """The new-side line whose scope the hunk is in: its first changed line, or the one by it."""
    first_change = next((i for i, line in enumerate(hunk.lines) if line.is_change), 0)
    after = [line.new_no for line in hunk.lines[first_change:] if line.new_no is not None]
    if after:
        return after[0]
    before = [line.new_no for line in hunk.lines[:first_change] if line.new_no is not None]
    return before[-1] if before else None


def _scope_candidates(found: Enclosing, floor: int, first: int, budget: int) -> list[int]:
    """New-side lines between ``floor`` and ``first`` worth showing, most valuable first."""
    ordered: list[int] = []
    for scope in reversed(found.scopes):  # innermost signature first, then the outer ones
        ordered += range(scope.first, scope.signature_last + 1)
    ordered += reversed(found.openers)
    innermost = found.innermost
    if innermost is not None:
        body_start = max(innermost.signature_last, floor) + 1
        ordered += range(first - 1, body_start - 1, -1)
    seen: set[int] = set()
    out: list[int] = []
    for number in ordered:
        if floor < number < first and number not in seen:
            seen.add(number)
            out.append(number)
    return out[: budget // MIN_TOKENS_PER_LINE + 1]


def _within_budget(
    candidates: Sequence[int],
    head: Sequence[str],
    floor: int,
    first: int,
    width: int,
    budget: int,
    header_tokens: int,
    counter: TokenCounter,
) -> list[int]:
    """The longest prefix of ``candidates`` that fits ``budget``, in line order."""
    rendered = render_lines(
        [DiffLine(LineKind.CONTEXT, number, number, head[number - 1]) for number in candidates],
        width,
    )
    costs = counter.count_many([text + "\n" for text in rendered])
    shown = {first, floor} if floor else {first}
    chosen: list[int] = []
    used = 0
    for number, cost in zip(candidates, costs, strict=True):
        # a line touching nothing shown yet may open a new "@@" block (an upper bound: blocks
        # that later touch are joined)
        if number - 1 not in shown and number + 1 not in shown:
            cost += header_tokens
        if used + cost > budget:
            break
        used += cost
        shown.add(number)
        chosen.append(number)
    return sorted(chosen)


def _context_hunks(hunk: Hunk, chosen: Sequence[int], head: Sequence[str]) -> list[Hunk]:
    """Context-only hunks for runs of ``chosen`` lines, the last one joined to ``hunk`` if next."""
    delta = _first_line(hunk.old_start, hunk.old_count) - _first_line(
        hunk.new_start, hunk.new_count
    )
    runs: list[list[int]] = []
    for number in chosen:
        if runs and runs[-1][-1] == number - 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    out = [
        _hunk_of_lines(
            [DiffLine(LineKind.CONTEXT, n + delta, n, head[n - 1]) for n in run], "", None
        )
        for run in runs
    ]
    out.append(hunk)
    return out


def _hunk_of_lines(lines: Sequence[DiffLine], section: str, like: Hunk | None) -> Hunk:
    """A hunk whose header is computed from ``lines``; an empty side keeps ``like``'s start."""
    old = [line.old_no for line in lines if line.old_no is not None]
    new = [line.new_no for line in lines if line.new_no is not None]
    return Hunk(
        old_start=old[0] if old else (like.old_start if like else 0),
        old_count=len(old),
        new_start=new[0] if new else (like.new_start if like else 0),
        new_count=len(new),
        section=section,
        lines=tuple(lines),
    )


def _last_new(hunk: Hunk, default: int) -> int:
    numbers = [line.new_no for line in hunk.lines if line.new_no is not None]
    return numbers[-1] if numbers else default


def _numbers(hunk: Hunk, attribute: str) -> list[int]:
    return [n for line in hunk.lines if (n := getattr(line, attribute)) is not None]


def _join_touching(hunks: Sequence[Hunk]) -> list[Hunk]:
    """Join each hunk to the one before when their lines follow without a gap."""
    out: list[Hunk] = []
    for hunk in hunks:
        before = out[-1] if out else None
        if before is not None and _touches(before, hunk):
            out[-1] = _hunk_of_lines([*before.lines, *hunk.lines], before.section, before)
        else:
            out.append(hunk)
    return out


def _touches(before: Hunk, after: Hunk) -> bool:
    """No line between the two on either side that both show (and one side both show)."""
    pairs = []
    for attribute in ("old_no", "new_no"):
        ends, starts = _numbers(before, attribute), _numbers(after, attribute)
        if ends and starts:
            pairs.append((ends[-1], starts[0]))
    return bool(pairs) and all(start == end + 1 for end, start in pairs)
