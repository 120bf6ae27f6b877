"""Which rules and learnings an answer in a bot thread is given (reviewbot.replies.guidance,
pure): those of the finding's path and category, in order, within their token budgets, and
the names of those with no room. End to end at the fake vLLM: tests/test_reply_teaching.py.
"""

from __future__ import annotations

from reviewbot.findings import Category
from reviewbot.learnings.learning import Learning, LearningStatus
from reviewbot.prompts import render_rules
from reviewbot.replies.guidance import guidance_for
from reviewbot.rules.ruleset import Rule, RuleSet, RuleSource
from reviewbot.tokens import ByteEstimateCounter

COUNTER = ByteEstimateCounter()
LARGE = 10_000


def rule(name: str, paths: tuple[str, ...] = (), category: Category | None = None) -> Rule:
    return Rule(name, RuleSource.INSTANCE, "rules.yaml", f"Rule {name}.", paths, None, category)


def learning(id: int, globs: tuple[str, ...] = (), category: str | None = None) -> Learning:
    return Learning(f"Learning {id}.", project_id=7, path_globs=globs, category=category, id=id)


RULES = RuleSet(
    (
        rule("any"),
        rule("app", ("app.py",)),
        rule("tests", ("tests/**",)),
        rule("bugs", category=Category.BUG),
        rule("style", category=Category.STYLE),
    )
)
LEARNINGS = (
    learning(1),
    learning(2, ("app.py",), "bug"),
    learning(3, ("tests/**",)),
    learning(4, category="style"),
    Learning("Removed.", project_id=7, status=LearningStatus.REMOVED, id=5),
)


def names(rules: tuple[Rule, ...]) -> list[str]:
    return [item.name for item in rules]


def test_the_rules_and_learnings_of_the_findings_path_and_category_in_order() -> None:
    given = guidance_for(
        "app.py", "bug", RULES, LEARNINGS, COUNTER, rules_tokens=LARGE, learnings_tokens=LARGE
    )
    assert names(given.rules) == ["any", "app", "bugs"]
    assert names(given.learnings) == ["learning 1", "learning 2"]
    assert given.left_out == ()
    blocks = given.blocks()
    assert blocks.index("<rules>") < blocks.index("<learnings>")
    assert 'category="bug"' in blocks and "Learning 2." in blocks


def test_what_has_no_room_is_named_and_a_zero_budget_gives_none() -> None:
    room = COUNTER.count(render_rules(RULES.rules[:1]))
    given = guidance_for(
        "app.py", "bug", RULES, LEARNINGS, COUNTER, rules_tokens=room, learnings_tokens=0
    )
    assert names(given.rules) == ["any"]
    assert given.learnings == ()
    assert set(given.left_out) == {"app", "bugs", "learning 1", "learning 2"}


def test_nothing_applies_gives_no_blocks() -> None:
    given = guidance_for(
        "docs/x.md", "security", RuleSet(), (), COUNTER, rules_tokens=LARGE, learnings_tokens=LARGE
    )
    assert given.rules == () and given.learnings == () and given.blocks() == ""
