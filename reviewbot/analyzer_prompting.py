"""Which analyzer findings each chunk's prompt is told of ("already reported, do not repeat"),
within the tokens kept for them in every chunk's budget, and how many tokens that cost.

The planner keeps ``reserve`` tokens in every chunk's budget (like the rules' reserve), so a
chunk with its digest never passes the context; a chunk whose files have no analyzer finding
gets no digest and spends nothing on it. The digest block is placed in the chunk's shared part,
before the diff (reviewbot.prompts.render_messages), so its tool rounds and verification reuse
it from the server's prefix cache.

Owns: :class:`DigestsApplied`. Pure: plain data in, plain data out. Must not: collect findings
(reviewbot.analyzers does), merge them with the model's (reviewbot.analyzer_merge) or call the
model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reviewbot.analyzer_digest import analyzer_digest
from reviewbot.analyzer_findings import AnalyzerFinding
from reviewbot.chunking import Budget, Chunk
from reviewbot.diff import FileDiff
from reviewbot.prompts import render_analyzer_digest
from reviewbot.tokens import TokenCounter

__all__ = ["MAX_DIGEST_SHARE", "DigestsApplied"]

# The digest never takes more than this share of a chunk's room for the diff.
MAX_DIGEST_SHARE = 0.25
FRAMING_PROBE = "-"  # the block rendered around one character: its framing's tokens
# Tokens merge across the block's seams: the reserve keeps a few more than its parts' sum.
SEAM_TOKENS = 4


@dataclass
class DigestsApplied:
    """The analyzer findings of a review and the tokens kept for their digest in each chunk;
    what each chunk was given (tokens, findings shown and left out) as it is rendered."""

    findings: tuple[AnalyzerFinding, ...] = ()
    reserve: int = 0
    counter: TokenCounter | None = None
    tokens: dict[int, int] = field(default_factory=dict)  # chunk index -> the block's tokens
    shown: dict[int, int] = field(default_factory=dict)  # chunk index -> findings in its digest
    on_chunk: dict[int, int] = field(default_factory=dict)  # chunk index -> findings on its files

    @classmethod
    def for_review(
        cls,
        findings: Sequence[AnalyzerFinding],
        files: Sequence[FileDiff],
        counter: TokenCounter,
        max_tokens: int,
        budget: Budget,
    ) -> DigestsApplied:
        """The findings on ``files`` and the reserve for their digest block: the digest of all
        of them rendered, capped by ``max_tokens`` (the setting ``analyzer_digest_tokens``, the
        block's framing included; 0: off) and MAX_DIGEST_SHARE of the room. No finding on the
        files, or no room for one line: no reserve."""
        paths = _paths_of(files)
        on_files = tuple(finding for finding in findings if finding.path in paths)
        if not on_files or max_tokens <= 0:
            return cls(counter=counter)
        whole = analyzer_digest(on_files, paths, counter.count, max_tokens)
        if not whole:
            return cls(counter=counter)
        room = math.floor(max(0, budget.available) * MAX_DIGEST_SHARE)
        framing = _framing(counter)
        needed = counter.count(render_analyzer_digest(whole)) + SEAM_TOKENS
        reserve = min(needed, max_tokens, room)
        if reserve <= framing:  # not even one line would fit
            return cls(counter=counter)
        return cls(on_files, reserve, counter)

    def of(self, chunk: Chunk) -> str:
        """The digest ``chunk`` is given ("" for none), its rendered block within ``reserve``."""
        paths = _paths_of(chunk.files.values())
        mine = [finding for finding in self.findings if finding.path in paths]
        if not mine or self.counter is None:
            return ""
        count = self.counter.count
        limit = self.reserve - _framing(self.counter)
        text = analyzer_digest(mine, paths, count, limit) if limit > 0 else ""
        while text and (excess := count(render_analyzer_digest(text)) - self.reserve) > 0:
            limit -= excess
            text = analyzer_digest(mine, paths, count, limit) if limit > 0 else ""
        self.on_chunk[chunk.index] = len(mine)
        self.shown[chunk.index] = sum(1 for line in text.splitlines() if _is_finding(line))
        self.tokens[chunk.index] = count(render_analyzer_digest(text)) if text else 0
        return text

    @property
    def total_tokens(self) -> int:
        """The tokens the digests added to the review's prompts, over every chunk."""
        return sum(self.tokens.values())

    def notes(self) -> list[str]:
        """The chunks whose digest left findings out for lack of room (for the run details)."""
        cut = {
            index: self.on_chunk[index] - self.shown.get(index, 0)
            for index in self.on_chunk
            if self.on_chunk[index] > self.shown.get(index, 0)
        }
        return [
            f"the analyzers' digest of chunk {index + 1} left {left} finding(s) out: no room "
            f"within {self.reserve} tokens (setting analyzer_digest_tokens)"
            for index, left in sorted(cut.items())
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "findings": len(self.findings),
            "reserve_tokens": self.reserve,
            "tokens": self.total_tokens,
            "by_chunk": {
                str(index + 1): {"tokens": tokens, "shown": self.shown.get(index, 0)}
                for index, tokens in sorted(self.tokens.items())
            },
        }


def _framing(counter: TokenCounter) -> int:
    """The tokens of the digest block without its digest, and the seams' share."""
    probe = counter.count(render_analyzer_digest(FRAMING_PROBE)) - counter.count(FRAMING_PROBE)
    return probe + SEAM_TOKENS


def _is_finding(line: str) -> bool:
    return line.startswith("- ") and not line.startswith("- … and ")


def _paths_of(files: Iterable[FileDiff]) -> set[str]:
    """Both paths of every file (a finding on the new path of a renamed file still counts)."""
    return {path for f in files for path in (f.new_path, f.old_path) if path}
