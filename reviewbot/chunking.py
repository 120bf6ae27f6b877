"""Cut a merge request's diff into prompts that fit the model's context, dropping nothing.

Rules, in order:

* every changed line of every reviewable file is owned by exactly one chunk; skipped files are
  listed with their reason (``Coverage``);
* a file that fits stays whole; a larger file splits at hunk boundaries; a hunk larger than a
  chunk splits into line windows that repeat a few lines of the previous window as context;
* fewest chunks first, then balanced sizes (chunks run concurrently, the largest sets the pace);
* related files travel together: files are ordered by directory, a test right after its source,
  and packed in that order whenever that costs no extra chunk.

Pure: data in, data out. Token counts come from the ``TokenCounter`` passed in.
"""

from __future__ import annotations

import itertools
import math
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reviewbot.diff import DiffLine, FileDiff, Hunk
from reviewbot.diffview import FileView, expand_context, render_file, render_lines
from reviewbot.exclusions import ExclusionRules, skip_reason
from reviewbot.tokens import TokenCounter

__all__ = [
    "Budget",
    "BudgetTooSmallError",
    "Chunk",
    "Coverage",
    "Plan",
    "PlanOptions",
    "Segment",
    "SkippedFile",
    "plan",
]

DEFAULT_MAX_MODEL_LEN = 65536
DEFAULT_OUTPUT_RESERVE = 4096
SAFETY_MARGIN_TOKENS = 256
DEFAULT_CONTEXT_LINES = 3
DEFAULT_OVERLAP_LINES = 5
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


@dataclass(frozen=True)
class Segment:
    """A file, or one part of it, rendered for the model."""

    view: FileView
    text: str
    tokens: int
    owned_changed: int  # changed lines this segment is responsible for

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget_tokens": self.budget.available,
            "budget": self.budget.to_dict(),
            "token_counter": self.counter,
            "chunks": [
                {
                    "index": chunk.index,
                    "tokens": chunk.tokens,
                    "changed_lines": chunk.changed_lines,
                    "files": [
                        {
                            "path": s.path,
                            "part": s.view.part,
                            "parts": s.view.parts,
                            "hunks": len(s.view.hunks),
                            "changed_lines": s.owned_changed,
                            "tokens": s.tokens,
                        }
                        for s in chunk.segments
                    ],
                }
                for chunk in self.chunks
            ],
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
    """Plan the chunks for ``files`` within ``budget``; ``contents`` maps new paths to head text."""
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
    for file in files:
        reason = skip_reason(file, options.exclusions)
        if reason:
            skipped.append(SkippedFile(file.path, reason, file.changed_count))
            continue
        hunks = expand_context(file, contents.get(file.new_path), options.context_lines)
        segments += _fit_file(file, hunks, cap, counter, options.overlap_lines)
    ordered = sorted(segments, key=_relation_key([s.path for s in segments]))
    bins = _pack(ordered, cap)
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
        views.append(
            FileView(file, (_slice_hunk(hunk, lead, end),), reviewed_before=start - lead or None)
        )
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
