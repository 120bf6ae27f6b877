"""How hard a review looks: the review effort (issue 37, docs/effort.md).

- ``quick``: one pass per chunk, no repository tools;
- ``standard``: one pass per chunk with the configured aids (tools, verification): the default;
- ``deep``: several independent passes per chunk, merged by vote.

An :class:`EffortChoice` is the effort a run uses and the reason it was chosen (a setting, the
trigger, or the model pool's load); it is shown in the run details and stored with the review.

Owns: the effort levels and the record of a choice. Must not: read the load, the queue or the
settings (the worker and the entry points choose), nor do I/O.
"""

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Effort", "EffortChoice", "default_effort"]


class Effort(StrEnum):
    """A review's effort, from the cheapest to the most thorough."""

    QUICK = "quick"
    STANDARD = "standard"
    DEEP = "deep"


@dataclass(frozen=True)
class EffortChoice:
    """The effort a run uses and why (one line, e.g. "setting review_effort = deep")."""

    effort: Effort
    reason: str


def default_effort() -> EffortChoice:
    """The effort of a run that no setting, trigger or load chose: today's standard review."""
    return EffortChoice(Effort.STANDARD, "default")
