"""What an answer in one of the bot's threads is told of the team's wishes: the review rules
and the team's learnings that apply to the thread's finding, within the review's budgets.

A review gives each chunk the rules and learnings whose globs match one of the chunk's files
(``reviewbot.rules.applied``); an answer is about one finding, so it gets those whose globs
match the finding's path and whose category (when they name one) is the finding's, in their
order, as many as fit ``rules_tokens`` and ``learnings_tokens`` (the same settings, the same
rendering: ``prompts/rules.j2``, ``prompts/learnings.j2``). What did not fit is named, never
dropped silently.

Owns: :class:`Guidance`, :func:`guidance_for`. Pure: plain data in, plain data out. Must not:
read rules or learnings from anywhere (``reviewbot.rules.sources``,
``reviewbot.learnings.teaching``) or talk to the model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from reviewbot.learnings.learning import Learning, learning_applies, learning_rules
from reviewbot.prompts import render_learnings, render_rules
from reviewbot.rules.ruleset import Rule, RuleSet, fit_rules, rules_for_paths
from reviewbot.tokens import TokenCounter

__all__ = ["Guidance", "guidance_for"]


@dataclass(frozen=True)
class Guidance:
    """The rules and learnings (as prompt rules) an answer is given, and those left out."""

    rules: tuple[Rule, ...] = ()
    learnings: tuple[Rule, ...] = ()
    left_out: tuple[str, ...] = ()  # names of the rules and learnings with no room

    def blocks(self) -> str:
        """The prompt blocks ("" without rules or learnings), rules first."""
        shown = [render_rules(self.rules), render_learnings(self.learnings)]
        return "\n\n".join(block.strip() for block in shown if block)


def guidance_for(
    path: str,
    category: str,
    rule_set: RuleSet,
    learnings: Iterable[Learning],
    counter: TokenCounter,
    *,
    rules_tokens: int,
    learnings_tokens: int,
) -> Guidance:
    """The rules of ``rule_set`` and the active ``learnings`` for a finding of ``category``
    at ``path``, each kind within its token budget (rendered as the prompt shows them)."""
    rules = tuple(
        rule
        for rule in rules_for_paths(rule_set, [path])
        if rule.category is None or rule.category.value == category
    )
    taught = learning_rules(
        learning for learning in learnings if learning_applies(learning, path, category)
    ).rules
    kept_rules, dropped_rules = fit_rules(
        rules, lambda chosen: counter.count(render_rules(chosen)), rules_tokens
    )
    kept_learnings, dropped_learnings = fit_rules(
        taught, lambda chosen: counter.count(render_learnings(chosen)), learnings_tokens
    )
    left_out = tuple(rule.name for rule in (*dropped_rules, *dropped_learnings))
    return Guidance(kept_rules, kept_learnings, left_out)
