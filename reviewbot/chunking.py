"""Cut a merge request's diff into prompts that fit the model's context, dropping nothing.

Rules, in order:

* every changed line of every reviewable file is owned by exactly one chunk; skipped files are
  listed with their reason (``Coverage``);
* a file that fits stays whole; a larger file splits at hunk boundaries; a hunk larger than a
  chunk splits into line windows that repeat a few lines of the previous window as context;
* fewest chunks first, then balanced sizes (chunks run concurrently, the largest sets the pace);
* related files travel together: files are ordered by directory, a test right after its source,
  and packed in that order whenever that costs no extra chunk;
* context comes last and only into room that is left: once the chunks are packed, each chunk's
  spare tokens are shared among its hunks, and a file is shown whole (if that costs no more than
  its share) or each hunk with its enclosing function or class (``diffview.with_scope``). Context
  never adds a chunk, splits a file or moves a changed line.

Pure: data in, data out. Token counts come from the ``TokenCounter`` passed in.

Owns: the plan: which chunk each changed line goes in, the coverage (every skipped file with its
reason) and where context fits. Must not: do I/O, count tokens its own way (the ``TokenCounter``
passed in does), or decide how a line looks to the model (`reviewbot.diffview` does).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import posixpath
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any

from reviewbot.config import DEFAULT_SCOPE_CONTEXT_TOKENS
from reviewbot.diff import DiffLine, FileDiff, FileStatus, Hunk
from reviewbot.diffview import (
    MIN_TOKENS_PER_LINE,
    FileView,
    agrees_with_head,
    expand_context,
    head_lines,
    render_file,
    render_lines,
    whole_file,
    with_scope,
)
from reviewbot.exclusions import ExclusionRules, skip_reason
from reviewbot.scope import SourceOutline
from reviewbot.tokens import TokenCounter

RESPLIT_FACTOR = 0.5  # a chunk the server found too long is cut to this share of its tokens

__all__ = [
    "Budget",
    "BudgetTooSmallError",
    "Chunk",
    "ContextKind",
    "Coverage",
    "Plan",
    "PlanOptions",
    "Segment",
    "SkippedFile",
    "plan",
    "resplit",
]

DEFAULT_MAX_MODEL_LEN = 65536
DEFAULT_OUTPUT_RESERVE = 4096
SAFETY_MARGIN_TOKENS = 256
DEFAULT_CONTEXT_LINES = 3
DEFAULT_OVERLAP_LINES = 5
# A chunk whose spare room gives each hunk less than this adds no context (and parses nothing):
# a signature and a couple of lines.
MIN_SCOPE_SHARE_TOKENS = 64
REFIT_ATTEMPTS = 8
REFIT_SHRINK_RATIO = 0.02
PART_PLACEHOLDER = 99  # a two-digit part number, for counting the part attribute
TEST_NAME = re.compile(
    r"^(?:test_(?P<a>.+)|(?P<b>.+?)(?:_test|_spec|\.test|\.spec|Test|Tests|Spec))$"
)


class BudgetTooSmallError(ValueError):
    """The budget cannot hold even one line of the diff."""


@dataclass(frozen=True)
class Budget:
    """Tokens a chunk's diff may use: the context minus output, prompt overhead and a margin."""

    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    output_reserve: int = DEFAULT_OUTPUT_RESERVE
    overhead: int = 0
    headroom: float = 0.0

    @property
    def margin(self) -> int:
        return math.ceil(self.headroom * (self.max_model_len - self.output_reserve)) + (
            SAFETY_MARGIN_TOKENS
        )

    @property
    def available(self) -> int:
        return self.max_model_len - self.output_reserve - self.overhead - self.margin

    def to_dict(self) -> dict[str, int]:
        return {
            "max_model_len": self.max_model_len,
            "output_reserve": self.output_reserve,
            "overhead": self.overhead,
            "margin": self.margin,
            "available": self.available,
        }


@dataclass(frozen=True)
class PlanOptions:
    context_lines: int = DEFAULT_CONTEXT_LINES
    overlap_lines: int = DEFAULT_OVERLAP_LINES
    exclusions: ExclusionRules = field(default_factory=ExclusionRules)
    # Enclosing-scope context per hunk (tokens, at most); 0 disables it and whole files.
    scope_tokens: int = DEFAULT_SCOPE_CONTEXT_TOKENS


class ContextKind(StrEnum):
    """What a segment shows beyond its hunks and their ``context_lines``."""

    NONE = "none"
    SCOPE = "scope"  # hunks with their enclosing functions or classes
    WHOLE = "whole"  # the whole head file, changes marked


@dataclass(frozen=True)
class Segment:
    """A file, or one part of it, rendered for the model."""

    view: FileView
    text: str
    tokens: int
    owned_changed: int  # changed lines this segment is responsible for
    context: ContextKind = ContextKind.NONE
    # tokens the context adds to this segment (slightly negative when showing the whole file
    # saves more hunk headers than its few extra lines cost)
    context_tokens: int = 0
    scoped_hunks: int = 0  # hunks shown with their enclosing scope
    # who found the scopes: "tree-sitter:<language>", "heuristic", or both joined by "+"
    parser: str = ""

    @property
    def path(self) -> str:
        return self.view.file.path


@dataclass(frozen=True)
class Chunk:
    index: int
    segments: tuple[Segment, ...]

    @property
    def tokens(self) -> int:
        # Segments start with "<file" and end with a newline, so BPE counts add up exactly.
        return sum(segment.tokens for segment in self.segments)

    @property
    def text(self) -> str:
        return "".join(segment.text for segment in self.segments)

    @property
    def files(self) -> dict[str, FileDiff]:
        """The chunk's files by every path the model may use for them (new and old)."""
        out: dict[str, FileDiff] = {}
        for segment in self.segments:
            out[segment.view.file.new_path] = segment.view.file
            out.setdefault(segment.view.file.old_path, segment.view.file)
        return out

    @property
    def changed_lines(self) -> int:
        return sum(segment.owned_changed for segment in self.segments)

    @property
    def context_tokens(self) -> int:
        """Tokens spent on enclosing-scope context and whole files in this chunk."""
        return sum(segment.context_tokens for segment in self.segments)


@dataclass(frozen=True)
class SkippedFile:
    path: str
    reason: str
    changed_lines: int


@dataclass(frozen=True)
class Coverage:
    files_total: int
    files_reviewed: int
    changed_lines_total: int
    changed_lines_covered: int
    skipped: tuple[SkippedFile, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "files_total": self.files_total,
            "files_reviewed": self.files_reviewed,
            "changed_lines_total": self.changed_lines_total,
            "changed_lines_covered": self.changed_lines_covered,
            "skipped": [
                {"path": s.path, "reason": s.reason, "changed_lines": s.changed_lines}
                for s in self.skipped
            ],
        }


@dataclass(frozen=True)
class Plan:
    budget: Budget
    chunks: tuple[Chunk, ...]
    coverage: Coverage
    counter: str

    @property
    def segments(self) -> list[Segment]:
        return [segment for chunk in self.chunks for segment in chunk.segments]

    def totals(self) -> dict[str, Any]:
        """Tokens of all chunks, how many went to context, and what kind of context."""
        segments = self.segments
        return {
            "chunks": len(self.chunks),
            "tokens": sum(chunk.tokens for chunk in self.chunks),
            "context_tokens": sum(chunk.context_tokens for chunk in self.chunks),
            "whole_files": sum(1 for s in segments if s.context is ContextKind.WHOLE),
            "scoped_hunks": sum(s.scoped_hunks for s in segments),
            "parsers": dict(sorted(Counter(s.parser for s in segments if s.parser).items())),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget_tokens": self.budget.available,
            "budget": self.budget.to_dict(),
            "token_counter": self.counter,
            "chunks": [
                {
                    "index": chunk.index,
                    "tokens": chunk.tokens,
                    "context_tokens": chunk.context_tokens,
                    "changed_lines": chunk.changed_lines,
                    "files": [
                        {
                            "path": s.path,
                            "part": s.view.part,
                            "parts": s.view.parts,
                            "hunks": len(s.view.hunks),
                            "changed_lines": s.owned_changed,
                            "tokens": s.tokens,
                            "context": s.context.value,
                            "context_tokens": s.context_tokens,
                        }
                        for s in chunk.segments
                    ],
                }
                for chunk in self.chunks
            ],
            "totals": self.totals(),
            "coverage": self.coverage.to_dict(),
        }


# ---------------------------------------------------------------------------------------------


def plan(
    files: Sequence[FileDiff],
    budget: Budget,
    counter: TokenCounter,
    *,
    contents: Mapping[str, str] | None = None,
    options: PlanOptions | None = None,
) -> Plan:
    """Plan the chunks for ``files`` within ``budget``; ``contents`` maps new paths to head text.

    Head text widens hunks by ``options.context_lines`` and, where packed chunks have room left,
    adds enclosing scopes or whole files (``options.scope_tokens`` per hunk at most).
    """
    options = options or PlanOptions()
    contents = contents or {}
    cap = budget.available
    if cap <= 0:
        raise BudgetTooSmallError(
            f"no room for the diff: the budget leaves {cap} tokens "
            f"(context {budget.max_model_len} - output {budget.output_reserve} - prompt "
            f"{budget.overhead} - margin {budget.margin})"
        )
    skipped: list[SkippedFile] = []
    segments: list[Segment] = []
    sources: dict[str, _Source] = {}
    for file in files:
        reason = skip_reason(file, options.exclusions)
        if reason:
            skipped.append(SkippedFile(file.path, reason, file.changed_count))
            continue
        head = contents.get(file.new_path)
        hunks = expand_context(file, head, options.context_lines)
        # A hunk without a change is context an earlier plan added (a chunk re-split after the
        # server found it too long re-plans what it showed): alone, it has nothing to review.
        hunks = tuple(hunk for hunk in hunks if hunk.changed_count) or hunks
        segments += _fit_file(file, hunks, cap, counter, options.overlap_lines)
        if head is not None and options.scope_tokens > 0 and file.status in CONTEXT_STATUSES:
            sources[file.new_path] = _Source(file, head)
    ordered = sorted(segments, key=_relation_key([s.path for s in segments]))
    bins = _pack(ordered, cap)
    if sources:
        bins = [
            _add_context(members, cap, sources, counter, options.scope_tokens) for members in bins
        ]
    chunks = tuple(Chunk(index, tuple(members)) for index, members in enumerate(bins))
    coverage = Coverage(
        files_total=len(files),
        files_reviewed=len(files) - len(skipped),
        changed_lines_total=sum(f.changed_count for f in files),
        changed_lines_covered=sum(chunk.changed_lines for chunk in chunks),
        skipped=tuple(skipped),
    )
    return Plan(budget, chunks, coverage, counter.name)


# --- fitting one file ------------------------------------------------------------------------


def _segment(view: FileView, counter: TokenCounter) -> Segment:
    text = render_file(view)
    owned = sum(h.changed_count for h in view.hunks)
    if view.reviewed_before:
        owned -= sum(1 for line in view.hunks[0].lines[: view.reviewed_before] if line.is_change)
    return Segment(view, text, counter.count(text), owned)


def _fit_file(
    file: FileDiff, hunks: tuple[Hunk, ...], cap: int, counter: TokenCounter, overlap: int
) -> list[Segment]:
    whole = _segment(FileView(file, hunks), counter)
    if whole.tokens <= cap:
        return [whole]
    target = cap
    for _ in range(REFIT_ATTEMPTS):
        pieces = _split_views(file, hunks, target, counter, overlap)
        views = [
            FileView(file, p.hunks, index + 1, len(pieces), p.reviewed_before)
            for index, p in enumerate(pieces)
        ]
        segments = [_segment(view, counter) for view in views]
        worst = max(s.tokens for s in segments)
        if worst <= cap:
            return segments
        # estimates were short: shrink by the overshoot (at least a little) and try again
        target -= max(worst - cap, math.ceil(cap * REFIT_SHRINK_RATIO))
    raise BudgetTooSmallError(f"cannot fit {file.path} into {cap} tokens per chunk")


def _split_views(
    file: FileDiff, hunks: tuple[Hunk, ...], cap: int, counter: TokenCounter, overlap: int
) -> list[FileView]:
    """Group hunks into parts under ``cap``; window hunks that alone are too big.

    Estimates never fall short: the frame is counted with a part attribute, and every hunk with
    the widest line numbers of the file (a part's own numbers are never wider).
    """
    frame = counter.count(render_file(FileView(file, (), PART_PLACEHOLDER, PART_PLACEHOLDER)))
    width = max((len(str(line.number)) for h in hunks for line in h.lines), default=1)
    bodies = counter.count_many(
        ["\n".join([h.header(), *render_lines(h.lines, width)]) + "\n" for h in hunks]
    )
    parts: list[FileView] = []
    group: list[Hunk] = []
    used = frame
    for hunk, body in zip(hunks, bodies, strict=True):
        if frame + body > cap:
            if group:
                parts.append(FileView(file, tuple(group)))
                group, used = [], frame
            parts += _window_views(file, hunk, cap - frame, counter, overlap)
            continue
        if used + body > cap and group:
            parts.append(FileView(file, tuple(group)))
            group, used = [], frame
        group.append(hunk)
        used += body
    if group:
        parts.append(FileView(file, tuple(group)))
    return parts


def _window_views(
    file: FileDiff, hunk: Hunk, room: int, counter: TokenCounter, overlap: int
) -> list[FileView]:
    """Split one hunk into line windows of at most ``room`` tokens (estimated per line)."""
    width = max(len(str(line.number)) for line in hunk.lines)
    line_tokens = counter.count_many([t + "\n" for t in render_lines(hunk.lines, width)])
    fixed = counter.count(hunk.header() + "\n") + counter.count(
        "(the lines above were reviewed in the previous part; context only)\n"
    )
    views: list[FileView] = []
    start = 0
    while start < len(hunk.lines):
        lead = max(0, start - overlap) if views else start
        end, used = _fill_window(line_tokens, lead, start, fixed, room)
        if used > room and lead < start:  # not even one new line with the overlap: drop it
            lead = start
            end, used = _fill_window(line_tokens, lead, start, fixed, room)
        if used > room:
            raise BudgetTooSmallError(
                f"the budget of {room} tokens cannot hold even one line of {file.path} "
                f"(line needs {line_tokens[start]} tokens)"
            )
        # a window whose own lines are all unchanged (a long run of context) has nothing to
        # review: the windows around it show the changes
        if any(line.is_change for line in hunk.lines[start:end]):
            window = _slice_hunk(hunk, lead, end)
            views.append(FileView(file, (window,), reviewed_before=start - lead or None))
        start = end
    return views


def _fill_window(
    line_tokens: Sequence[int], lead: int, start: int, fixed: int, room: int
) -> tuple[int, int]:
    """End index and tokens of a window showing ``lead:start`` as context, then new lines."""
    used = fixed + sum(line_tokens[lead:start])
    end = start
    while end < len(line_tokens) and (used + line_tokens[end] <= room or end == start):
        used += line_tokens[end]
        end += 1
    return end, used


def _slice_hunk(hunk: Hunk, start: int, end: int) -> Hunk:
    lines = hunk.lines[start:end]
    return Hunk(
        old_start=_slice_start(hunk.lines, start, end, "old_no", hunk.old_start),
        old_count=sum(1 for line in lines if line.old_no is not None),
        new_start=_slice_start(hunk.lines, start, end, "new_no", hunk.new_start),
        new_count=sum(1 for line in lines if line.new_no is not None),
        section=hunk.section,
        lines=lines,
    )


def _slice_start(lines: Sequence[DiffLine], start: int, end: int, attr: str, default: int) -> int:
    numbers = [getattr(line, attr) for line in lines[start:end] if getattr(line, attr) is not None]
    if numbers:
        return numbers[0]
    before = [getattr(line, attr) for line in lines[:start] if getattr(line, attr) is not None]
    return before[-1] if before else default


# --- context in the room that is left ---------------------------------------------------------

# Added files are whole in the diff already; deleted files have no head.
CONTEXT_STATUSES = frozenset({FileStatus.MODIFIED, FileStatus.RENAMED})


class _Source:
    """One file's head text: split, checked against the diff and outlined on first use."""

    def __init__(self, file: FileDiff, text: str) -> None:
        self.file = file
        self.text = text

    @cached_property
    def lines(self) -> list[str]:
        return head_lines(self.text)

    @cached_property
    def usable(self) -> bool:
        return agrees_with_head(self.file, self.lines)

    @cached_property
    def outline(self) -> SourceOutline:
        return SourceOutline(self.file.new_path, self.lines)


def _widenable(segment: Segment, sources: Mapping[str, _Source]) -> _Source | None:
    """The head source for a segment that may get context.

    Not for a later window of a huge hunk: its first lines repeat the window before it.
    """
    if segment.view.reviewed_before:
        return None
    return sources.get(segment.view.file.new_path)


def _add_context(
    members: Sequence[Segment],
    cap: int,
    sources: Mapping[str, _Source],
    counter: TokenCounter,
    per_hunk: int,
) -> list[Segment]:
    """A packed chunk's segments with context added in the room the chunk has left.

    The room is shared evenly among the chunk's hunks that have a head (at most ``per_hunk``
    each); the exact token count of every widened segment is checked, so the chunk never
    exceeds ``cap``. Heads are split and checked only when there is a share worth adding.
    """
    room = cap - sum(segment.tokens for segment in members)
    eligible = [(segment, _widenable(segment, sources)) for segment in members]
    hunks = sum(len(segment.view.hunks) for segment, source in eligible if source)
    share = min(per_hunk, room // hunks) if hunks else 0
    if share < MIN_SCOPE_SHARE_TOKENS:
        return list(members)
    out: list[Segment] = []
    for segment, source in eligible:
        widened = None
        if source is not None and source.usable:
            widened = _with_context(segment, source, share, room, counter)
        if widened is None:
            out.append(segment)
            continue
        room -= widened.tokens - segment.tokens
        out.append(widened)
    return out


def _with_context(
    segment: Segment, source: _Source, share: int, room: int, counter: TokenCounter
) -> Segment | None:
    """The segment shown whole or with its hunks' scopes, if that fits; else None."""
    view = segment.view
    allowance = min(room, share * len(view.hunks))
    if view.parts == 1:
        whole = _whole_segment(segment, source, allowance, counter)
        if whole is not None:
            return whole
    outline = source.outline
    scoped = with_scope(view.hunks, source.lines, outline.enclosing, share, counter)
    outline.release()  # trees are large; a later part of the same file parses again
    if not scoped.scoped:
        return None
    candidate = _segment(dataclasses.replace(view, hunks=scoped.hunks), counter)
    extra = candidate.tokens - segment.tokens
    if extra > room:
        return None
    return dataclasses.replace(
        candidate,
        context=ContextKind.SCOPE,
        context_tokens=max(0, extra),
        scoped_hunks=scoped.scoped,
        parser="+".join(scoped.methods),
    )


def _whole_segment(
    segment: Segment, source: _Source, allowance: int, counter: TokenCounter
) -> Segment | None:
    shown = {line.new_no for hunk in segment.view.hunks for line in hunk.lines}
    hidden = len(source.lines) - len(shown - {None})
    if hidden * MIN_TOKENS_PER_LINE > allowance:
        return None  # cannot fit: skip rendering and counting the whole file
    hunk = whole_file(source.file, source.lines)
    if hunk is None:
        return None
    candidate = _segment(dataclasses.replace(segment.view, hunks=(hunk,)), counter)
    extra = candidate.tokens - segment.tokens
    if extra > allowance:
        return None
    # The whole file can cost less than its hunks (one header instead of several): no context
    # cost then, never a negative one.
    return dataclasses.replace(candidate, context=ContextKind.WHOLE, context_tokens=max(0, extra))


# --- ordering and packing --------------------------------------------------------------------


def _stem(path: str) -> str:
    name = posixpath.basename(path)
    return name.split(".", 1)[0] if not name.startswith(".") else name


def _relation_key(paths: Iterable[str]) -> Callable[[Segment], tuple[str, str, int, str, int]]:
    """Sort key: by directory and name, each test file right after the source it tests."""
    sources: dict[str, str] = {}
    for path in paths:
        if not TEST_NAME.match(_stem(path)):
            sources.setdefault(_stem(path), path)

    def key(segment: Segment) -> tuple[str, str, int, str, int]:
        path = segment.path
        match = TEST_NAME.match(_stem(path))
        tested = match and (match.group("a") or match.group("b"))
        anchor = sources.get(tested, path) if tested else path
        return (
            posixpath.dirname(anchor),
            posixpath.basename(anchor),
            0 if anchor == path else 1,
            path,
            segment.view.part,
        )

    return key


def _greedy_bins(sizes: Sequence[int], limit: int) -> list[int]:
    """Start index of each bin when filling bins in order up to ``limit``."""
    starts, used = [0], 0
    for index, size in enumerate(sizes):
        if used + size > limit and used > 0:
            starts.append(index)
            used = 0
        used += size
    return starts


def _first_fit_decreasing(sizes: Sequence[int], cap: int) -> list[list[int]]:
    bins: list[list[int]] = []
    loads: list[int] = []
    for index in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        for b, load in enumerate(loads):
            if load + sizes[index] <= cap:
                bins[b].append(index)
                loads[b] += sizes[index]
                break
        else:
            bins.append([index])
            loads.append(sizes[index])
    return bins


def _worst_fit_decreasing(sizes: Sequence[int], count: int, cap: int) -> list[list[int]] | None:
    """Spread items over ``count`` bins, each to the emptiest; None if some item does not fit."""
    bins: list[list[int]] = [[] for _ in range(count)]
    loads = [0] * count
    for index in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        b = min(range(count), key=loads.__getitem__)
        if loads[b] + sizes[index] > cap:
            return None
        bins[b].append(index)
        loads[b] += sizes[index]
    return bins


def _pack(items: Sequence[Segment], cap: int) -> list[list[Segment]]:
    if not items:
        return []
    sizes = [item.tokens for item in items]
    in_order = len(_greedy_bins(sizes, cap))
    fewest = len(_first_fit_decreasing(sizes, cap))
    if in_order <= fewest:
        # Keep related files adjacent; find the smallest per-chunk limit that still needs only
        # ``in_order`` chunks, so chunks come out balanced.
        low, high = max(sizes), cap
        while low < high:
            middle = (low + high) // 2
            if len(_greedy_bins(sizes, middle)) <= in_order:
                high = middle
            else:
                low = middle + 1
        starts = [*_greedy_bins(sizes, low), len(items)]
        return [list(items[a:b]) for a, b in itertools.pairwise(starts)]
    groups = _worst_fit_decreasing(sizes, fewest, cap) or _first_fit_decreasing(sizes, cap)
    ordered = [sorted(group) for group in groups]
    ordered.sort(key=lambda group: group[0])
    return [[items[i] for i in group] for group in ordered]


def resplit(chunk: Chunk, counter: TokenCounter, first_index: int) -> list[Chunk]:
    """Split a chunk the server found too long into smaller ones, keeping every line.

    Returns [] when the chunk cannot get smaller (one line); the caller reports it as failed.
    """
    files = [
        dataclasses.replace(segment.view.file, hunks=segment.view.hunks, _index=None)
        for segment in chunk.segments
    ]
    room = max(1, math.floor(chunk.tokens * RESPLIT_FACTOR))
    smaller = Budget(
        max_model_len=room + Budget().output_reserve + Budget().margin,
        output_reserve=Budget().output_reserve,
    )
    keep_all = ExclusionRules(use_defaults=False, review_deleted_files=True)
    try:
        replanned = plan(files, smaller, counter, options=PlanOptions(0, exclusions=keep_all))
    except BudgetTooSmallError:
        return []
    if len(replanned.chunks) < 2:
        return []
    # The smaller chunks show parts of the same files: findings are anchored (and identical
    # lines counted) on the whole file, as in the chunk they came from.
    whole = {segment.view.file.new_path: segment.view.file for segment in chunk.segments}
    return [
        Chunk(
            first_index + offset,
            tuple(
                dataclasses.replace(
                    segment,
                    view=dataclasses.replace(segment.view, file=whole[segment.view.file.new_path]),
                )
                for segment in sub.segments
            ),
        )
        for offset, sub in enumerate(replanned.chunks)
    ]
