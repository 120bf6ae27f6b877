"""What a review could not review: the chunks the model never answered readably (pure).

Owns: :class:`UnreviewedPart` (a chunk's files, changed lines and line ranges, and why), made
from a chunk of the plan, and the changed lines each file owns in a plan (what a lost chunk
takes from the coverage). Must not: decide that a chunk failed (``reviewbot.review`` does), or
word the summary (``reviewbot.comments``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reviewbot.chunking import Chunk, Plan
from reviewbot.diff import Hunk, Side

__all__ = ["UnreviewedPart", "changed_lines_by_path", "line_ranges", "unreviewed_part"]


@dataclass(frozen=True)
class UnreviewedPart:
    """A chunk the model never answered readably (after retries): what it held, and why."""

    chunk_index: int
    lines_by_path: tuple[tuple[str, int], ...]  # (path, changed lines this chunk owned)
    reason: str
    # (path, "lines 12-18, 40-44"): the hunks the chunk showed (removed-only: "old lines 3-5")
    ranges_by_path: tuple[tuple[str, str], ...] = ()

    @property
    def changed_lines(self) -> int:
        return sum(lines for _, lines in self.lines_by_path)

    def describe(self) -> str:
        """``chunk 3 (app.py lines 4-9; util.py lines 1-3, 20: 17 changed lines): <reason>``
        (1-based chunk)."""
        ranges: dict[str, list[str]] = {path: [] for path, _ in self.lines_by_path}
        for path, where in self.ranges_by_path:
            ranges.setdefault(path, []).append(where)
        places = "; ".join(
            " ".join((path, ", ".join(wheres))) if wheres else path
            for path, wheres in ranges.items()
        )
        return (
            f"chunk {self.chunk_index + 1} ({places}: {self.changed_lines} changed lines): "
            f"{self.reason}"
        )


def changed_lines_by_path(review_plan: Plan) -> dict[str, int]:
    owned: dict[str, int] = {}
    for chunk in review_plan.chunks:
        for segment in chunk.segments:
            owned[segment.path] = owned.get(segment.path, 0) + segment.owned_changed
    return owned


def unreviewed_part(chunk: Chunk, reason: str) -> UnreviewedPart:
    return UnreviewedPart(
        chunk.index,
        tuple((segment.path, segment.owned_changed) for segment in chunk.segments),
        reason,
        tuple((segment.path, line_ranges(segment.view.hunks)) for segment in chunk.segments),
    )


def line_ranges(hunks: Sequence[Hunk]) -> str:
    """``lines 12-18, 40`` on the new side; hunks that only remove lines: ``old lines 3-5``."""
    new, old = [], []
    for hunk in hunks:
        side = Side.NEW if hunk.new_count else Side.OLD
        first, last = hunk.range_on(side)
        (new if side is Side.NEW else old).append(
            str(first) if first == last else f"{first}-{last}"
        )
    parts = [f"lines {', '.join(new)}"] if new else []
    parts += [f"old lines {', '.join(old)}"] if old else []
    return ", ".join(parts)
