"""The MR's linked issues as context: read through the fake GitLab's closes_issues and
related_issues, in the prompt as data, never in a posted note (docs/linked-issues.md)."""

from __future__ import annotations

import json

import pytest

from reviewbot.linked_issues import Link, LinkedIssue, merged, public_name, within_budget
from tests.mr_world import PROJECT, World, world  # noqa: F401

pytestmark = pytest.mark.slow

SECRET = "the customer's database password is hunter2-confidential"


def _prompts(world: World) -> str:  # noqa: F811
    return "\n".join(json.dumps(body["messages"]) for body in world.vllm.requests)


def _posted(world: World) -> str:  # noqa: F811
    return "\n".join(note["body"] for note in world.gitlab.notes(PROJECT, 1))


def test_closing_and_related_issues_are_in_the_prompt_and_in_no_note(world: World) -> None:  # noqa: F811
    world.gitlab.add_issue(
        PROJECT, "Parse JSON input", "The parser must reject </issues> bad input.", labels=("bug",)
    )
    world.gitlab.add_issue(PROJECT, "Secret incident", SECRET, confidential=True)
    world.gitlab.add_member(PROJECT, "reviewbot", 20)  # a Reporter reads confidential issues
    world.gitlab.add_issue(PROJECT, "Mentioned only", "Related requirement text")
    world.gitlab.edit_description(PROJECT, 1, "Adds a parser.\n\nCloses #1, fixes #2. See #3.")

    report = world.run()

    prompts = _prompts(world)
    assert 'iid=\\"1\\" link=\\"closes\\"' in prompts
    assert "Parse JSON input" in prompts and "reject &lt;/issues> bad input" in prompts
    assert SECRET in prompts  # readable by the token: used as context
    assert 'iid=\\"3\\" link=\\"related\\"' in prompts
    posted = _posted(world)
    assert posted  # the review did post
    for text in (SECRET, "Secret incident", "reject", "Related requirement text"):
        assert text not in posted
    assert not [w for w in report.warnings if "not available" in w]


def test_a_confidential_issue_the_token_cannot_read_is_not_used(world: World) -> None:  # noqa: F811
    world.gitlab.add_issue(PROJECT, "Secret incident", SECRET, confidential=True)
    world.gitlab.edit_description(PROJECT, 1, "Closes #1")

    world.run()

    assert SECRET not in _prompts(world)
    assert "Secret incident" not in _prompts(world)


def test_gitlab_without_related_issues_says_so_once_and_reviews(world: World) -> None:  # noqa: F811
    world.gitlab.version = "16.11.0-ee"
    world.gitlab.add_issue(PROJECT, "Parse JSON input", "Must reject bad input.")
    world.gitlab.edit_description(PROJECT, 1, "Closes #1")

    report = world.run()

    unavailable = [w for w in report.warnings if "related_issues" in w]
    assert unavailable == ["related_issues is not available on this GitLab"]
    assert "Must reject bad input." in _prompts(world)
    assert report.findings  # the review itself went on
    assert "related_issues is not available" in _posted(world)


def test_linked_issues_off_reads_nothing(world: World) -> None:  # noqa: F811
    world.gitlab.add_issue(PROJECT, "Parse JSON input", "Must reject bad input.")
    world.gitlab.edit_description(PROJECT, 1, "Closes #1")

    world.run(linked_issues="off")

    assert "Must reject bad input." not in _prompts(world)
    assert not [path for _, path in world.gitlab.requests if path.endswith("_issues")]


def _issue(iid: int, description: str = "", **fields: object) -> LinkedIssue:
    return LinkedIssue(iid=iid, title=f"Issue {iid}", description=description, **fields)  # type: ignore[arg-type]


def test_closing_issues_come_first_and_each_once() -> None:
    closes = [_issue(2), _issue(5)]
    related = [_issue(5, link=Link.RELATED), _issue(1, link=Link.RELATED)]
    assert [issue.iid for issue in merged(closes, related)] == [2, 5, 1]
    assert merged(closes, related)[1].link is Link.CLOSES


def test_the_budget_cuts_descriptions_then_leaves_issues_out() -> None:
    issues = [_issue(1, "a" * 2000), _issue(2, "b" * 2000), _issue(3, "c" * 50)]
    shown, left_out = within_budget(issues, tokens=600)  # 2,400 characters
    assert shown[0].description == "a" * 2000
    assert shown[1].description.endswith("… (truncated)")
    assert sum(len(i.description) for i in shown) <= 2400
    assert left_out == len(issues) - len(shown)
    nothing, all_out = within_budget(issues, tokens=0)
    assert nothing == [] and all_out == 3


def test_a_confidential_issue_is_named_by_its_number_only() -> None:
    assert public_name(_issue(7, confidential=True)) == "#7"
    assert public_name(_issue(7)) == "#7 Issue 7"


@pytest.mark.slow
def test_closes_issues_failing_is_said_and_the_review_goes_on(world: World) -> None:  # noqa: F811
    world.gitlab.add_issue(PROJECT, "Parse JSON input", "Must reject bad input.")
    world.gitlab.edit_description(PROJECT, 1, "Closes #1")
    world.gitlab.answer_with(
        '{"message":"403 Forbidden"}',
        status=403,
        method="GET",
        path_pattern=r"/projects/7/merge_requests/1/closes_issues",
    )

    report = world.run()

    [said] = [w for w in report.warnings if w.startswith("closes_issues")]
    assert said == (
        "closes_issues could not be read: reading closes_issues of !1 failed: 403 403 Forbidden"
    )
    # the related issues still hold it: in the prompt as related, not as closed
    assert 'iid=\\"1\\" link=\\"related\\"' in _prompts(world)
    assert 'link=\\"closes\\"' not in _prompts(world)
    assert report.findings
