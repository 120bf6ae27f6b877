"""Team learnings end to end: ``reviewbot learnings`` against the fake GitLab and the test
database (SQLite and PostgreSQL), then ``reviewbot run`` against the fake vLLM, which records
every request: a learning reaches the prompt of the chunks whose files it matches, and a
"don't flag" learning of the finding's category and path suppresses it (never posted, stored
as ``suppressed_by_learning`` with the learning's id). Core and store: tests/test_learnings.py.
"""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from reviewbot.commands import main
from reviewbot.findings import FindingState
from reviewbot.store import Store
from tests.mr_world import PROJECT, World, world  # noqa: F401

NONE_LEARNING = "We compare with == None on purpose in app.py; don't flag it"


def cli(world: World, *args: str) -> Any:  # noqa: F811
    """`reviewbot <args>` in this world's environment: (exit code, output)."""
    result = CliRunner().invoke(main, list(args), env=world.command_env("secret"))
    return result.exit_code, result.output  # stdout and stderr, as a terminal shows them


def add(world: World, text: str, *options: str) -> dict[str, Any]:  # noqa: F811
    code, output = cli(world, "learnings", "add", "--project", PROJECT, *options, "--json", text)
    assert code == 0, output
    return json.loads(output)


def user_prompts(world: World) -> list[str]:  # noqa: F811
    return [
        next(m["content"] for m in body["messages"] if m["role"] == "user")
        for body in world.vllm.requests
    ]


def posted_titles(world: World) -> list[str]:  # noqa: F811
    return [
        note["body"]
        for discussion in world.gitlab.discussions(PROJECT, 1)
        for note in discussion["notes"]
        if "reviewbot:finding" in note["body"]
    ]


def stored(world: World, review_id: int) -> list[dict[str, Any]]:  # noqa: F811
    store = Store.from_url(world.database_url)
    try:
        return store.findings(review_id)
    finally:
        store.close()


def test_a_cli_learning_reaches_the_prompt_and_suppresses_a_matching_finding(
    world: World,  # noqa: F811
) -> None:
    made = add(world, NONE_LEARNING, "--path", "app.py", "--category", "bug")
    assert made["status"] == "active" and made["excludes"] and made["project_id"] == 7
    report = world.run()
    [prompt] = user_prompts(world)
    assert f'<learning name="learning {made["id"]}" category="bug">' in prompt
    assert "don't flag it" in prompt and prompt.index("<learnings>") < prompt.index("<file")
    posted = posted_titles(world)
    assert not any("None" in body for body in posted)  # suppressed: never posted
    assert any("eval" in body for body in posted)  # another category: posted
    findings = stored(world, report.review_id)
    [quiet] = [f for f in findings if f["state"] == FindingState.SUPPRESSED.value]
    assert quiet["category"] == "bug" and quiet["learning_id"] == made["id"]
    coverage = report.review.coverage
    assert coverage.changed_lines_covered == coverage.changed_lines_total


def test_a_learning_of_another_path_or_category_does_not_suppress(world: World) -> None:  # noqa: F811
    other_path = add(world, NONE_LEARNING, "--path", "tests/**", "--category", "bug")
    other_category = add(world, NONE_LEARNING, "--path", "app.py", "--category", "style")
    instruction = add(world, "Prefer small functions", "--path", "app.py", "--category", "bug")
    report = world.run()
    [prompt] = user_prompts(world)
    assert f'name="learning {other_path["id"]}"' not in prompt  # its glob matches no file
    assert f'name="learning {other_category["id"]}"' in prompt
    assert f'name="learning {instruction["id"]}"' in prompt
    assert any("None" in body for body in posted_titles(world))
    states = {f["state"] for f in stored(world, report.review_id)}
    assert FindingState.SUPPRESSED.value not in states


def test_a_removed_learning_no_longer_applies(world: World) -> None:  # noqa: F811
    made = add(world, NONE_LEARNING, "--path", "app.py", "--category", "bug")
    code, output = cli(world, "learnings", "remove", str(made["id"]))
    assert code == 0 and f"learning {made['id']} removed" in output
    world.run()
    [prompt] = user_prompts(world)
    assert "<learnings>" not in prompt
    assert any("None" in body for body in posted_titles(world))


def test_learnings_past_their_budget_are_named_and_every_line_is_reviewed(
    world: World,  # noqa: F811
) -> None:
    made = add(world, NONE_LEARNING, "--category", "bug")
    report = world.run(learnings_tokens=0)
    [prompt] = user_prompts(world)
    assert "<learnings>" not in prompt
    assert any(
        f"learning `learning {made['id']}` not given to chunk(s) 1" in line
        for line in report.warnings
    )
    coverage = report.review.coverage
    assert coverage.changed_lines_covered == coverage.changed_lines_total
    # not in the prompt, but still in force: the finding it excludes is not posted
    assert not any("None" in body for body in posted_titles(world))


def test_the_cli_lists_and_refuses_bad_input_with_exit_2(world: World) -> None:  # noqa: F811
    made = add(world, NONE_LEARNING, "--path", "app.py", "--category", "bug")
    code, output = cli(world, "learnings", "list", "--project", PROJECT, "--json")
    assert code == 0 and [item["id"] for item in json.loads(output)] == [made["id"]]
    code, output = cli(world, "learnings", "list", "--project", PROJECT)
    assert code == 0 and "don't flag it" in output
    for args, message in (
        (("add", "--project", PROJECT, "   "), "text is empty"),
        (("add", "--project", PROJECT, "--path", "../x", "hi"), "leads out of the repository"),
        (("add", "--project", PROJECT, "--category", "nits", "hi"), "nits"),
        (("add", "hi"), "exactly one of a project or a group"),
        (("add", "--project", PROJECT, "x" * 501), "at most 500"),
        (("accept", "999"), "learning 999 not found"),
        (("reject", str(made["id"])), "is active: it cannot be rejected"),
    ):
        code, output = cli(world, "learnings", *args)
        assert code == 2, (args, output)
        assert message in output and len(output.strip().splitlines()) == 1, output
