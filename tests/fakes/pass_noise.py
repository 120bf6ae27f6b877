"""A noisy fake model for the passes of a deep review (issue 37, docs/effort.md).

``FakeVLLM(noise=PassNoise(recall, false_positive_rate, seed))``: every review answer first
finds what the fake always finds (its reviewer table, rules, hazards), then, independently per
request ``seed`` (a deep review's passes each send their own; a request without one is seed 0):

- each true finding is reported with probability ``recall`` (else missed);
- each added line that has no finding gets a false positive with probability
  ``false_positive_rate`` (``bug``, ``minor``, title ``noise: looks suspicious``).

The draws are a SHA-256 of (``seed``, the request's seed, the finding's path, line and title):
the same request gets the same answer on every run, whatever the order of concurrent requests,
and two passes with different seeds draw independently. Repair turns and tool rounds draw as
their first answer did.

Owns: the noise model. Must not: know reviewbot's code.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

HASH_SCALE = float(2**64)
NOISE_TITLE = "noise: looks suspicious"


class _Line(Protocol):
    path: str
    kind: str
    number: int
    text: str


@dataclass(frozen=True)
class PassNoise:
    """Per-pass recall and false-positive rate of the fake model (see the module notes)."""

    recall: float = 1.0
    false_positive_rate: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("recall", "false_positive_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {value}")

    def _draw(self, request_seed: int, *key: Any) -> float:
        text = json.dumps([self.seed, request_seed, *key], sort_keys=True).encode()
        return int.from_bytes(hashlib.sha256(text).digest()[:8], "big") / HASH_SCALE

    def apply(
        self, found: list[dict[str, Any]], lines: Sequence[_Line], request_seed: int | None
    ) -> list[dict[str, Any]]:
        """``found`` as one noisy pass (``request_seed``) reports it."""
        seed = request_seed or 0
        kept = [
            finding
            for finding in found
            if self._draw(seed, finding.get("path"), finding.get("line"), finding.get("title"))
            < self.recall
        ]
        flagged = {(finding.get("path"), finding.get("line")) for finding in found}
        noise = [
            {
                "path": line.path,
                "line": line.number,
                "side": "new",
                "severity": "minor",
                "category": "bug",
                "title": NOISE_TITLE,
                "body": f"`{line.text.strip()}` may be wrong.",
            }
            for line in lines
            if line.kind == "added"
            and (line.path, line.number) not in flagged
            and self._draw(seed, "fp", line.path, line.number) < self.false_positive_rate
        ]
        return kept + noise
