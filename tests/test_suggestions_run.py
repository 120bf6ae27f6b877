"""End to end through the fake GitLab and the fake vLLM: a suggestion that does not parse is
left out of the posted note while its finding is posted, and the run details count it; a valid
multi-line suggestion is posted with its ``-0+1`` range."""

from __future__ import annotations

from tests.builders import diff_notes, summary_notes
from tests.mr_world import FEATURE_APP, World


def _finding(line: int, end_line: int | None, suggestion: str, title: str) -> dict[str, object]:
    call: dict[str, object] = {
        "path": "app.py",
        "line": line,
        "severity": "major",
        "category": "bug",
        "title": title,
        "body": "See the suggestion.",
        "suggestion": suggestion,
    }
    if end_line is not None:
        call["end_line"] = end_line
    return call


def test_a_broken_suggestion_is_dropped_and_counted_the_valid_one_posted(world: World) -> None:
    compare = world.line_of(FEATURE_APP, "if items == None")
    bare = world.line_of(FEATURE_APP, "except:")
    world.vllm.script_tool_calls(
        (
            "report_finding",
            _finding(
                compare,
                compare + 1,
                "    if items is None:\n        return 0\n",
                "Compare None with is",
            ),
        ),
        (
            "report_finding",
            _finding(
                bare, bare + 1, "    except OSError\n        raise", "Bare except swallows errors"
            ),
        ),
        offered_or_not=True,
    )
    world.run()
    notes = {n["position"]["new_line"]: n["body"] for n in diff_notes(world)}
    assert "```suggestion:-0+1\n    if items is None:\n        return 0\n```" in notes[compare]
    assert "Bare except swallows errors" in notes[bare]
    assert "```suggestion" not in notes[bare]
    [summary] = summary_notes(world)
    assert (
        "| Suggestions | 2 checked, 1 kept, 1 dropped (does not parse: 1; their findings are "
        "kept) |" in summary["body"]
    )
