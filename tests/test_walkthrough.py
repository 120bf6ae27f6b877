"""The MR's walkthrough: one model call after the chunks, in the summary note, sanitised,
updated on a push, its failure said without touching the review (docs/walkthrough.md)."""

from __future__ import annotations

import subprocess

import pytest

from reviewbot.comments import parse_marker
from reviewbot.states import CallPurpose
from reviewbot.walkthrough import Walkthrough, read_walkthrough
from tests.mr_world import PROJECT, World, commit_on_feature, world  # noqa: F401

WALKTHROUGH_HEADING = "**Walkthrough**"


def _summaries(world: World) -> list[str]:  # noqa: F811
    bodies = [note["body"] for note in world.gitlab.notes(PROJECT, 1)]
    return [body for body in bodies if WALKTHROUGH_HEADING in body or "walkthrough:" in body]


def _walkthrough_requests(world: World) -> list[dict]:  # noqa: F811
    return [
        body
        for body in world.vllm.requests
        if "walkthrough of a GitLab merge request" in body["messages"][0]["content"]
    ]


@pytest.mark.slow
def test_written_once_into_the_summary_then_updated_on_a_push(world: World) -> None:  # noqa: F811
    report = world.run(walkthrough="on")

    [summary] = _summaries(world)
    files = len(world.gitlab.notes(PROJECT, 1)) and report.review.coverage.files_total
    assert f"This merge request, Add parsing, changes {files} files." in summary
    assert "- `app.py`: modified" in summary
    assert len(_walkthrough_requests(world)) == 1
    request = _walkthrough_requests(world)[0]
    assert request["max_tokens"] == 600 and "tools" not in request
    purposes = [call.purpose for call in report.review.model_calls]
    assert purposes.count(CallPurpose.WALKTHROUGH) == 1
    assert purposes.count(CallPurpose.REVIEW) >= 1

    commit_on_feature(world.repo, {"extra.py": "VALUE = 1\n"}, "more")
    world.gitlab.push(PROJECT, 1, _head(world))
    world.run(walkthrough="on")

    [summary] = _summaries(world)  # the same note, edited in place
    assert f"changes {files + 1} files." in summary and "- `extra.py`: added" in summary
    assert len(_walkthrough_requests(world)) == 2
    markers = [parse_marker(note["body"]) for note in world.gitlab.notes(PROJECT, 1)]
    assert sum(1 for m in markers if m is not None and m.kind.value == "summary") == 1


def _head(world: World) -> str:  # noqa: F811
    return subprocess.run(
        ["git", "-C", str(world.repo), "rev-parse", "feature"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


@pytest.mark.slow
def test_off_and_under_the_threshold_make_no_call(world: World) -> None:  # noqa: F811
    world.run()
    world.run(walkthrough="on", walkthrough_min_changed_lines=10_000)
    assert _walkthrough_requests(world) == []
    assert _summaries(world) == []


@pytest.mark.slow
def test_a_failed_call_is_said_and_the_review_goes_on(world: World) -> None:  # noqa: F811
    # the chunk's request answered, then the walkthrough's and its every retry refused
    world.vllm.add_faults("none", *["http_500"] * 5)  # a first try and 4 retries
    report = world.run(walkthrough="on")

    [summary] = _summaries(world)
    assert "_walkthrough: not written (" in summary and WALKTHROUGH_HEADING not in summary
    assert report.findings and report.review.complete  # the review itself is unaffected
    [call] = [c for c in report.review.model_calls if c.purpose is CallPurpose.WALKTHROUGH]
    assert call.outcome == "error"


def test_the_answer_is_sanitised() -> None:
    answer = (
        "## Summary\nThis adds a parser for @all.\n\n```mermaid\ngraph TD; A-->B\n```\n"
        "/label ~feature\n- `app.py`: adds <script>x</script>\n"
    )
    text = read_walkthrough(answer).text
    assert "##" not in text and "mermaid" not in text and "graph TD" not in text
    assert "/label" not in text and "<script>" not in text
    assert "`@all`" in text and "- `app.py`: adds" in text
    assert read_walkthrough("```mermaid\ngraph\n```\n") == Walkthrough(
        not_written="the model's answer was empty"
    )
