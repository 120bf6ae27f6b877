"""Which review rules (and which team learnings, given to the model as rules) each chunk of a
review is shown, within the tokens kept for them, and which did not fit.

Owns: :class:`RuleKind` (review rules or learnings: how each is rendered, budgeted and named),
:class:`RulesApplied`. Pure: plain data in, plain data out. Must not: read rules from anywhere
(reviewbot.rules.sources does) or send anything to the model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reviewbot.chunking import Budget, Chunk
from reviewbot.diff import FileDiff
from reviewbot.prompts import render_learnings, render_rules
from reviewbot.rules.ruleset import Rule, RuleSet, fit_rules, rules_for_paths
from reviewbot.tokens import TokenCounter

# Review rules never take more than this share of a chunk's room for the diff: the rest is the
# diff's, so rules cannot squeeze a chunk down to nothing (docs/rules.md).
MAX_RULES_SHARE = 0.5


@dataclass(frozen=True)
class RuleKind:
    """Review rules, or the team's learnings given to the model as rules: how each is
    rendered, budgeted (the ReviewOptions field) and named in the summary."""

    noun: str
    tokens: str
    setting: str
    render: Callable[[Sequence[Rule]], str]


REVIEW_RULES = RuleKind("review rule", "rules", "rules_tokens", render_rules)
LEARNINGS = RuleKind("learning", "learnings", "learnings_tokens", render_learnings)


@dataclass
class RulesApplied:
    """Which review rules each chunk got: those whose paths match one of the chunk's files,
    as many as fit ``reserve`` tokens (the budget kept for them in every chunk); the ones that
    did not fit are named, never dropped silently."""

    rule_set: RuleSet = field(default_factory=RuleSet)
    reserve: int = 0
    counter: TokenCounter | None = None
    applied: dict[int, tuple[str, ...]] = field(default_factory=dict)  # chunk -> rule names
    dropped: dict[str, list[int]] = field(default_factory=dict)  # rule -> chunks it missed
    _fitted: dict[tuple[str, ...], tuple[Rule, ...]] = field(default_factory=dict, repr=False)
    kind: RuleKind = REVIEW_RULES  # or LEARNINGS

    @classmethod
    def for_review(
        cls,
        rule_set: RuleSet,
        files: Sequence[FileDiff],
        counter: TokenCounter,
        options: Any,
        budget: Budget,
        kind: RuleKind = REVIEW_RULES,
    ) -> RulesApplied:
        """The rules of a review and the tokens kept for them: the rules of every file of the
        diff rendered, capped by ``options.rules_tokens`` (``learnings_tokens`` for learnings)
        and MAX_RULES_SHARE of the room."""
        every = rules_for_paths(rule_set, _paths_of(files))
        tokens = getattr(options, kind.setting)
        if not every or tokens <= 0:
            return cls(rule_set, 0, counter, kind=kind)
        room = math.floor(max(0, budget.available) * MAX_RULES_SHARE)
        needed = counter.count(kind.render(every))
        return cls(rule_set, min(tokens, needed, room), counter, kind=kind)

    def of(self, chunk: Chunk) -> tuple[Rule, ...]:
        """The rules ``chunk`` is shown (recorded as applied to it)."""
        matching = rules_for_paths(self.rule_set, _paths_of(chunk.files.values()))
        key = tuple(rule.name for rule in matching)
        if key not in self._fitted:
            counter, render = self.counter, self.kind.render
            kept, _ = fit_rules(
                matching,
                lambda rules: counter.count(render(rules)) if counter else 0,
                self.reserve,
            )
            self._fitted[key] = kept
        kept = self._fitted[key]
        self.applied[chunk.index] = tuple(rule.name for rule in kept)
        for rule in matching:
            if rule not in kept:
                self.dropped.setdefault(rule.name, []).append(chunk.index)
        return kept

    def notes(self) -> list[str]:
        """What the summary says about the rules left out for lack of room (the problems of
        reading them are the rule set's, said by whoever read them)."""
        notes = []
        for name, chunks in self.dropped.items():
            where = ", ".join(str(index + 1) for index in sorted(set(chunks)))
            notes.append(
                f"{self.kind.noun} `{name}` not given to chunk(s) {where}: no room within "
                f"{self.reserve} {self.kind.tokens} tokens (setting {self.kind.setting})"
            )
        return notes

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.rule_set.to_dict(),
            "reserve_tokens": self.reserve,
            "by_chunk": {str(index + 1): list(names) for index, names in self.applied.items()},
            "dropped": {name: [i + 1 for i in chunks] for name, chunks in self.dropped.items()},
        }


def _paths_of(files: Iterable[FileDiff]) -> list[str]:
    """Both paths of every file (a rule for the old path of a renamed file still applies)."""
    return list(dict.fromkeys(path for f in files for path in (f.new_path, f.old_path) if path))
