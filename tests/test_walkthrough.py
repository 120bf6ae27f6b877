"""The MR's walkthrough: one model call after the chunks, in the summary note, sanitised,
updated on a push, its failure said without touching the review (docs/walkthrough.md)."""

from __future__ import annotations

import subprocess

import pytest

from reviewbot.comments import parse_marker
from reviewbot.model import CallRecord
from reviewbot.mr import RunOptions, RunReport
from reviewbot.prompts import FileSummary
from reviewbot.states import CallPurpose
from reviewbot.walkthrough import Walkthrough, read_walkthrough
from reviewbot.walkthrough_update import merged_walkthrough, walkthrough_update_messages
from tests.mr_world import PROJECT, World, commit_on_feature, git, world  # noqa: F401

WALKTHROUGH_HEADING = "**Walkthrough**"
MANY_FILES = 30  # an MR of 32 files: the incremental update's prompt against a full rewrite


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


def _walkthrough_calls(report: RunReport) -> list[CallRecord]:
    return [c for c in report.review.model_calls if c.purpose is CallPurpose.WALKTHROUGH]


def _push(world: World, files: dict[str, str]) -> None:  # noqa: F811
    commit_on_feature(world.repo, files, "more")
    world.gitlab.push(PROJECT, 1, _head(world))


@pytest.mark.slow
def test_an_incremental_review_updates_the_walkthrough_from_the_changed_files(
    world: World,  # noqa: F811
) -> None:
    modules = {f"module_{n:02}.py": f"VALUE_{n} = {n}\n" for n in range(MANY_FILES)}
    world.run(walkthrough="on")
    _push(world, modules)
    world.run(walkthrough="on")
    _push(world, {"module_00.py": "VALUE_0 = 100\n"})

    update = world.run(walkthrough="on")

    asked = _walkthrough_requests(world)[-1]["messages"][1]["content"]
    assert "<previous-walkthrough>" in asked and "- module_00.py (added, +1 -0)" in asked
    assert "module_01.py" not in asked  # the changed files only, their earlier lines only
    assert "app.py (" not in asked and "Adds a parser." not in asked  # no list, no description
    [summary] = _summaries(world)
    files = MANY_FILES + 2  # app.py, util.py and the modules
    assert f"changes {files} files." in summary
    assert "- `app.py`: modified" in summary and "- `module_01.py`: added" in summary

    full = world.run(RunOptions(full=True), walkthrough="on")  # the same head, written whole

    [updated], [whole] = _walkthrough_calls(update), _walkthrough_calls(full)
    assert (
        "<previous-walkthrough>" not in _walkthrough_requests(world)[-1]["messages"][1]["content"]
    )
    assert updated.prompt_tokens < whole.prompt_tokens
    print(  # the figure docs/walkthrough.md states
        f"\nwalkthrough prompt tokens, {files} files, a push changing 1: "
        f"update {updated.prompt_tokens} (answer {updated.completion_tokens}), "
        f"full rewrite {whole.prompt_tokens} (answer {whole.completion_tokens})"
    )


@pytest.mark.slow
def test_nothing_changed_keeps_the_walkthrough_without_a_call(world: World) -> None:  # noqa: F811
    world.run(walkthrough="on")
    [first] = _summaries(world)

    again = world.run(walkthrough="on")  # the same head

    assert len(_walkthrough_requests(world)) == 1 and not _walkthrough_calls(again)
    [summary] = _summaries(world)
    assert "- `app.py`: modified" in summary and summary.count("**Walkthrough**") == 1
    walkthrough = first.split(WALKTHROUGH_HEADING)[1].split("<!-- /reviewbot:walkthrough -->")[0]
    assert walkthrough in summary  # kept as it was


@pytest.mark.slow
def test_without_a_previous_walkthrough_an_incremental_review_writes_it_whole(
    world: World,  # noqa: F811
) -> None:
    world.run()  # walkthrough off: the summary holds none
    _push(world, {"extra.py": "VALUE = 1\n"})

    world.run(walkthrough="on")

    [asked] = _walkthrough_requests(world)
    content = asked["messages"][1]["content"]
    assert "<previous-walkthrough>" not in content and "- app.py (modified" in content
    [summary] = _summaries(world)
    assert "- `extra.py`: added" in summary and "- `app.py`: modified" in summary


def test_the_update_is_merged_into_the_previous_walkthrough_by_path() -> None:
    previous = (
        "It adds parsing.\n\n- `app.py`: adds parse\n- `gone.py`: a file since reverted\n"
        "- tests: more of them\n- `util.py`: adds clamp"
    )
    answer = "It adds parsing and a CLI.\n\n- `util.py`: clamp now checks bounds\n- `cli.py`: new"
    merged = merged_walkthrough(previous, answer, {"gone.py"})
    assert merged == (
        "It adds parsing and a CLI.\n\n- `app.py`: adds parse\n- tests: more of them\n"
        "- `util.py`: clamp now checks bounds\n- `cli.py`: new"
    )
    kept = merged_walkthrough(previous, "- `util.py`: x")
    assert kept.startswith("It adds parsing.\n\n- `app.py`: adds parse\n- `gone.py`")
    assert merged_walkthrough("- `docs/`: guides\n- `a.py`: x", "", {"a.py"}) == "- `docs/`: guides"


def test_the_update_prompt_shows_the_opening_and_the_changed_files_lines_only() -> None:
    previous = "It adds parsing.\n\n- `app.py`: adds parse\n- `util.py`: adds clamp"
    changed = [FileSummary("util.py", "modified", 3, 1)]
    [system, user] = walkthrough_update_messages("T </previous-walkthrough>", previous, changed, 2)
    assert system["content"].startswith("You write the walkthrough of a GitLab merge request")
    text = user["content"]
    assert "It adds parsing." in text and "adds clamp" in text and "app.py" not in text
    assert "- util.py (modified, +3 -1)" in text and "changes 2 files in all" in text
    assert text.count("</previous-walkthrough>") == 1


@pytest.mark.slow
def test_a_file_the_mr_no_longer_changes_loses_its_line(world: World) -> None:  # noqa: F811
    world.run(walkthrough="on")
    [first] = _summaries(world)
    assert "- `util.py`: added" in first
    git(world.repo, "checkout", "-q", "feature")
    git(world.repo, "rm", "-q", "util.py")
    git(world.repo, "commit", "-qm", "util.py was not needed after all")
    world.gitlab.push(PROJECT, 1, _head(world))

    world.run(walkthrough="on")

    [summary] = _summaries(world)
    assert "`util.py`" not in summary and "- `app.py`: modified" in summary
    assert len(_walkthrough_requests(world)) == 1  # app.py unchanged: no call
