"""The walkthrough against the real vLLM serving the scripted model: one plain-text call (no
tools, no thinking) through vLLM's chat template, written into the summary note."""

from __future__ import annotations

from reviewbot.states import CallPurpose
from tests.mr_world import PROJECT, World, commit_on_feature, git
from tests.realvllm.tier import REAL_VLLM

pytestmark = REAL_VLLM


def test_a_review_writes_its_walkthrough_once(real_world: World) -> None:
    report = real_world.run(walkthrough="on")

    bodies = [note["body"] for note in real_world.gitlab.notes(PROJECT, 1)]
    [summary] = [body for body in bodies if "**Walkthrough**" in body]
    assert "This merge request, Add parsing, changes" in summary
    assert "- `app.py`: modified" in summary
    calls = [c for c in report.review.model_calls if c.purpose is CallPurpose.WALKTHROUGH]
    assert len(calls) == 1 and calls[0].outcome == "ok" and calls[0].completion_tokens > 0


def test_a_push_updates_the_walkthrough_from_the_changed_files(real_world: World) -> None:
    real_world.run(walkthrough="on")
    commit_on_feature(real_world.repo, {"extra.py": "VALUE = 1\n"}, "more")
    real_world.gitlab.push(PROJECT, 1, git(real_world.repo, "rev-parse", "feature"))

    update = real_world.run(walkthrough="on")

    bodies = [note["body"] for note in real_world.gitlab.notes(PROJECT, 1)]
    [summary] = [body for body in bodies if "**Walkthrough**" in body]
    assert "- `extra.py`: added" in summary and "- `app.py`: modified" in summary
    [call] = [c for c in update.review.model_calls if c.purpose is CallPurpose.WALKTHROUGH]
    assert call.outcome == "ok" and call.completion_tokens > 0


def test_the_requirements_check_answers_through_the_tool_parser(real_world: World) -> None:
    real_world.gitlab.add_issue(PROJECT, "Parse JSON input", "Add `parse` to app.py.")
    real_world.gitlab.add_issue(PROJECT, "Rotate keys", "Needs `rotate_keys`.")
    real_world.gitlab.edit_description(PROJECT, 1, "Closes #1 and closes #2")

    report = real_world.run(requirements_check="on")

    bodies = [note["body"] for note in real_world.gitlab.notes(PROJECT, 1)]
    [summary] = [body for body in bodies if "reviewbot:summary" in body]
    assert "#1 Parse JSON input: **met**" in summary
    assert "#2 Rotate keys: **not met**" in summary
    [call] = [c for c in report.review.model_calls if c.purpose is CallPurpose.REQUIREMENTS]
    assert call.outcome == "ok" and call.prompt_tokens > 0
