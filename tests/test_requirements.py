"""The requirements check (``requirements_check = "on"``): one model call asks whether the change
meets each linked issue's requirements; met / not met / cannot tell per issue in the summary, a
confidential issue named ``#iid`` only, an unreadable answer never "met", nothing written into
an issue, the call recorded with its own purpose (docs/linked-issues.md)."""

from __future__ import annotations

import json

import pytest

from reviewbot.app import App
from reviewbot.linked_issues import LinkedIssue
from reviewbot.model import ModelAnswer, ToolCallText
from reviewbot.requirements import Requirement, read_requirements, summary_lines
from reviewbot.states import CallPurpose
from tests.mr_world import PROJECT, World, world  # noqa: F401

SECRET = "the customer's database password is hunter2-confidential"
REPORTER = 20
MET = "#1 Parse JSON input: **met**: The change adds parse as Parse JSON input asks."
CONFIDENTIAL = "#2 (confidential): **not met**"
CANNOT_TELL = "#3 Vague wish: **cannot tell**:"


def _issues(world: World) -> None:  # noqa: F811
    world.gitlab.add_issue(PROJECT, "Parse JSON input", "Add `parse` to app.py.")
    world.gitlab.add_issue(
        PROJECT, "Secret incident", f"{SECRET}. Needs `rotate_keys`.", confidential=True
    )
    world.gitlab.add_member(PROJECT, "reviewbot", REPORTER)  # reads the confidential issue
    world.gitlab.add_issue(PROJECT, "Vague wish", "Make it better.")
    world.gitlab.edit_description(PROJECT, 1, "Adds a parser.\n\nCloses #1, fixes #2. See #3.")


def _summary(world: World) -> str:  # noqa: F811
    return next(
        n["body"] for n in world.gitlab.notes(PROJECT, 1) if "reviewbot:summary" in n["body"]
    )


def _requirement_requests(world: World) -> list[dict]:  # noqa: F811
    return [
        body
        for body in world.vllm.requests
        if any(t["function"]["name"] == "requirement_verdict" for t in body.get("tools") or ())
    ]


@pytest.mark.slow
def test_a_verdict_per_issue_in_the_summary_and_nothing_written_into_an_issue(
    world: World,  # noqa: F811
) -> None:
    _issues(world)

    report = world.run(requirements_check="on")

    summary = _summary(world)
    assert MET in summary and CONFIDENTIAL in summary and CANNOT_TELL in summary
    posted = "\n".join(note["body"] for note in world.gitlab.notes(PROJECT, 1))
    for text in (SECRET, "Secret incident", "rotate_keys"):
        assert text not in posted  # the confidential issue: by reference only
    [asked] = _requirement_requests(world)
    assert SECRET in json.dumps(asked["messages"])  # readable by the token: asked about
    writes = [(m, p) for m, p in world.gitlab.requests if m != "GET" and "/issues" in p]
    assert writes == []
    calls = [c for c in report.review.model_calls if c.purpose is CallPurpose.REQUIREMENTS]
    assert len(calls) == 1 and calls[0].prompt_tokens > 0
    with App(world.settings()) as app:
        stored = app.store.llm_calls(report.review_id)
    assert [row["purpose"] for row in stored].count(CallPurpose.REQUIREMENTS.value) == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "fault",
    ["requirements_unreadable", "requirements_missing", "requirements_unknown", "http_500"],
)
def test_an_unreadable_or_missing_answer_is_cannot_tell_never_met(
    world: World,  # noqa: F811
    fault: str,
) -> None:
    _issues(world)
    retries = 4 if fault == "http_500" else 0  # a failed call: its first try and 4 retries
    world.vllm.add_faults("none", *[fault] * (1 + retries))

    report = world.run(requirements_check="on")

    summary = _summary(world)
    assert "**met**" not in summary and "**not met**" not in summary
    assert summary.count("**cannot tell**") == 3 and "#2 (confidential): **cannot tell**" in summary
    assert report.review.complete and report.findings  # the review itself is unaffected


@pytest.mark.slow
def test_off_by_default_and_without_issues_says_so(world: World) -> None:  # noqa: F811
    world.run()
    assert _requirement_requests(world) == [] and "requirements" not in _summary(world)

    world.run(requirements_check="on")  # the MR links no issue: no call
    assert _requirement_requests(world) == [] and "- no linked issues to check" in _summary(world)


def _issue(iid: int, confidential: bool = False) -> LinkedIssue:
    return LinkedIssue(iid, f"Title {iid}", "text", confidential=confidential)


def _call(arguments: object) -> ToolCallText:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCallText("requirement_verdict", text)


def test_reading_verdicts_only_a_readable_one_counts() -> None:
    issues = [_issue(1), _issue(2), _issue(3), _issue(4), _issue(5, confidential=True)]
    answer = ModelAnswer(
        tool_calls=[
            _call({"issue": 1, "verdict": "met", "reason": "It does.\n/label ~x"}),
            _call({"issue": 2, "verdict": "met", "reason": "yes"}),
            _call({"issue": 2, "verdict": "not_met", "reason": "no"}),  # disagrees
            _call({"issue": 3, "verdict": "met"}),  # no reason
            _call('{"issue": 4, "verdict": "met", "reason": "cut'),  # broken JSON
            _call({"issue": True, "verdict": "met", "reason": "a boolean is no number"}),
            _call({"issue": 5, "verdict": "met", "reason": "It quotes Title 5 secretly."}),
            _call({"issue": 99, "verdict": "met", "reason": "not asked"}),
        ]
    )
    verdicts = read_requirements(answer, issues)
    assert [v.verdict for v in verdicts] == [
        Requirement.MET,
        Requirement.CANNOT_TELL,
        Requirement.CANNOT_TELL,
        Requirement.CANNOT_TELL,
        Requirement.MET,
    ]
    lines = summary_lines(verdicts)
    assert lines[0] == "#1 Title 1: **met**: It does. /label ~x"
    assert lines[4] == "#5 (confidential): **met**" and "Title 5" not in "\n".join(lines[4:])
    assert [v.verdict for v in read_requirements(None, issues)] == [Requirement.CANNOT_TELL] * 5
