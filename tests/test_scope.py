"""Enclosing scopes: what encloses a line (tree-sitter, heuristic) and how it is shown.

Golden files: each source file in ``tests/golden/scope/`` has hunk ranges in ``cases.json``
(new-side lines that the test marks as added) and a ``<file>.expected.json`` with, per range,
what encloses it and the rendered view the model would see (enclosing-scope context with the
default budget, no context lines). Set ``REVIEWBOT_UPDATE_GOLDEN=1`` to rewrite the JSON after a
deliberate change, then read its diff before committing it.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reviewbot.chunking import Budget, plan
from reviewbot.config import DEFAULT_SCOPE_CONTEXT_TOKENS
from reviewbot.diff import FileDiff, Hunk, LineKind, Side, parse_git_diff
from reviewbot.diffview import (
    FileView,
    agrees_with_head,
    head_lines,
    render_file,
    whole_file,
    with_scope,
)
from reviewbot.findings import (
    DEFAULT_CONTEXT_LINES,
    AnchorKind,
    Category,
    Finding,
    RawFinding,
    Severity,
    anchor,
)
from reviewbot.scope import (
    GRAMMARS,
    HEURISTIC,
    MAX_PARSE_BYTES,
    Grammar,
    SourceOutline,
    language_of,
    load_language,
)
from reviewbot.tokens import local_counter

COUNTER = local_counter()
GOLDEN = Path(__file__).parent / "golden" / "scope"
CASES: dict[str, list[list[int]]] = json.loads((GOLDEN / "cases.json").read_text())


def added_range(path: str, head: list[str], first: int, last: int) -> FileDiff:
    """A diff in which head lines ``first..last`` of ``path`` were added."""
    count = last - first + 1
    diff = f"--- a/{path}\n+++ b/{path}\n@@ -{first - 1},0 +{first},{count} @@\n"
    diff += "".join(f"+{head[n - 1]}\n" for n in range(first, last + 1))
    [file] = parse_git_diff(diff)
    return file


def outline_of(name: str) -> tuple[list[str], SourceOutline]:
    head = head_lines((GOLDEN / name).read_text())
    return head, SourceOutline(name, head)


def scoped_view(name: str, first: int, last: int, budget: int) -> tuple[FileDiff, tuple[Hunk, ...]]:
    head, outline = outline_of(name)
    file = added_range(name, head, first, last)
    return file, with_scope(file.hunks, head, outline.enclosing, budget, COUNTER).hunks


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_scopes(name: str) -> None:
    _, outline = outline_of(name)
    actual: list[dict[str, Any]] = []
    for first, last in CASES[name]:
        found = outline.enclosing(first)
        file, hunks = scoped_view(name, first, last, DEFAULT_SCOPE_CONTEXT_TOKENS)
        actual.append(
            {
                "lines": [first, last],
                "method": found.method,
                "scopes": [[s.first, s.signature_last, s.kind] for s in found.scopes],
                "openers": list(found.openers),
                "view": render_file(FileView(file, hunks)).splitlines(),
            }
        )
    expected_path = GOLDEN / f"{name}.expected.json"
    if os.environ.get("REVIEWBOT_UPDATE_GOLDEN") == "1":
        expected_path.write_text(json.dumps(actual, indent=1, ensure_ascii=False) + "\n")
    assert actual == json.loads(expected_path.read_text())


def test_every_golden_language_has_a_case() -> None:
    languages = {language_of(name) for name in CASES}
    assert set(GRAMMARS) <= languages
    assert None in languages  # and the heuristic


def test_languages_by_extension() -> None:
    assert language_of("src/app.py") == "python"
    assert language_of("web/App.TSX") == "tsx"
    assert language_of("web/app.mjs") == "javascript"
    assert language_of("include/x.h") == "cpp"
    assert language_of("Rakefile") == "ruby"
    assert language_of("main.kt") is None
    assert language_of("Makefile") is None


def test_every_grammar_loads_from_its_wheel() -> None:
    for name, grammar in GRAMMARS.items():
        assert load_language(grammar) is not None, name


def test_a_grammar_that_cannot_load_means_the_heuristic() -> None:
    missing = Grammar("tree_sitter_not_installed_here", "language", frozenset({"x"}))
    assert load_language(missing) is None
    wrong_function = Grammar("tree_sitter_python", "no_such_function", frozenset({"x"}))
    assert load_language(wrong_function) is None


def test_a_broken_parse_falls_back_to_indentation_there_only() -> None:
    _, outline = outline_of("broken.py")  # line 6 opens a parenthesis it never closes
    before = outline.enclosing(2)
    assert before.method == "tree-sitter:python"
    assert [s.first for s in before.scopes] == [1]
    inside = outline.enclosing(10)
    assert inside.method == HEURISTIC
    assert [s.first for s in inside.scopes] == [5]  # def broken(items):
    assert inside.openers == (7, 8)
    # the parser lost `class Later:` in the error; the heuristic still sees it
    after = outline.enclosing(18)
    assert after.method == HEURISTIC
    assert [s.first for s in after.scopes] == [14, 15]


def test_a_file_too_large_to_parse_uses_the_heuristic() -> None:
    body = ["    x = '" + "y" * (MAX_PARSE_BYTES // 100) + "'"] * 100
    lines = ["def big():", *body, "    return x"]
    outline = SourceOutline("big.py", lines)
    assert outline.parser_name == HEURISTIC
    found = outline.enclosing(len(lines))
    assert [s.first for s in found.scopes] == [1]


def test_lines_out_of_range_have_no_scope() -> None:
    _, outline = outline_of("orders.py")
    assert outline.enclosing(0).scopes == ()
    assert outline.enclosing(10_000).scopes == ()


def test_grammars_are_imported_only_for_languages_present(tmp_path: Path) -> None:
    script = """
import sys
from reviewbot.chunking import Budget, plan
from reviewbot.diff import parse_git_diff
from reviewbot.tokens import ByteEstimateCounter
assert "tree_sitter" not in sys.modules
head = "def f(x):\\n" + "".join(f"    y{i} = x\\n" for i in range(300)) + "    return x\\n"
diff = "--- a/m.py\\n+++ b/m.py\\n@@ -101,1 +101,1 @@\\n-    y99 = x\\n+    y99 = x + 1\\n"
head = head.replace("    y99 = x\\n", "    y99 = x + 1\\n")
result = plan(parse_git_diff(diff), Budget(), ByteEstimateCounter(), contents={"m.py": head})
assert result.totals()["parsers"] == {"tree-sitter:python": 1}, result.totals()
print(sorted({m.split(".")[0] for m in sys.modules if m.startswith("tree_sitter_")}))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.split() == ["['tree_sitter_python']"]


# --- how scopes are shown --------------------------------------------------------------------


def shown_numbers(hunks: tuple[Hunk, ...]) -> list[int]:
    return [line.new_no for hunk in hunks for line in hunk.lines if line.new_no is not None]


def assert_consistent(hunks: tuple[Hunk, ...], head: list[str]) -> None:
    """Headers count their lines; context lines are the head's; hunks do not overlap."""
    last_new = 0
    for hunk in hunks:
        assert hunk.new_count == sum(1 for line in hunk.lines if line.new_no is not None)
        assert hunk.old_count == sum(1 for line in hunk.lines if line.old_no is not None)
        numbers = [line.new_no for line in hunk.lines if line.new_no is not None]
        assert numbers == list(range(hunk.new_start, hunk.new_start + len(numbers)))
        assert not numbers or numbers[0] > last_new
        last_new = numbers[-1] if numbers else last_new
        for line in hunk.lines:
            if line.kind is LineKind.CONTEXT:
                assert line.new_no is not None and head[line.new_no - 1] == line.text


def test_budget_orders_signatures_then_openers_then_nearest_body() -> None:
    head, _ = outline_of("orders.py")
    # refund's signature, the class's, the `if` then the `for`, then the body upwards
    priority = [23, 24, 25, 12, 13, 33, 30, 32, 31, 29, 28, 27, 26]
    taken = []
    for budget in (0, 30, 60, 120, 180, 250, 10_000):
        hunks = scoped_view("orders.py", 34, 35, budget)[1]
        assert_consistent(hunks, head)
        added = [n for n in shown_numbers(hunks) if n not in (34, 35)]
        count = len(added)
        assert set(added) == set(priority[:count]), (budget, added)
        taken.append(count)
    assert taken == sorted(taken)  # more budget never shows less
    assert taken[0] == 0 and 0 < taken[1] < len(priority) and taken[-1] == len(priority)


def test_budget_is_counted_with_the_extra_headers() -> None:
    file, hunks = scoped_view("orders.py", 34, 35, 120)
    plain = COUNTER.count(render_file(FileView(file, file.hunks)))
    scoped = COUNTER.count(render_file(FileView(file, hunks)))
    assert 0 < scoped - plain <= 120


def test_second_hunk_of_a_function_does_not_repeat_lines() -> None:
    head, outline = outline_of("orders.py")
    diff = "--- a/orders.py\n+++ b/orders.py\n"
    for number in (27, 34):
        diff += f"@@ -{number},1 +{number},1 @@\n-old\n+{head[number - 1]}\n"
    [file] = parse_git_diff(diff)
    hunks = with_scope(file.hunks, head, outline.enclosing, 10_000, COUNTER).hunks
    numbers = shown_numbers(hunks)
    assert numbers == sorted(set(numbers))  # nothing twice
    assert numbers == [12, 13, *range(23, 35)]  # the gap between the hunks filled once
    assert len(hunks) == 2  # class lines, then one hunk: the joined method and both changes
    assert_consistent(hunks, head)


def test_removed_lines_keep_their_old_numbers_between_scope_lines() -> None:
    head, outline = outline_of("server.go")
    # lines 22-23 of head replaced two old lines 22-24 (one more line on the old side)
    diff = "--- a/s.go\n+++ b/s.go\n@@ -22,3 +22,2 @@\n-a\n-b\n-c\n"
    diff += f"+{head[21]}\n+{head[22]}\n"
    [file] = parse_git_diff(diff)
    hunks = with_scope(file.hunks, head, outline.enclosing, 10_000, COUNTER).hunks
    context = [line for hunk in hunks for line in hunk.lines if line.kind is LineKind.CONTEXT]
    assert context and all(line.old_no == line.new_no for line in context)  # all above the edit
    assert hunks[-1].lines[-1].new_no == 23
    assert_consistent(hunks, head)


def test_whole_file_marks_changes_in_place() -> None:
    head = head_lines((GOLDEN / "buffer.c").read_text())
    diff = "--- a/buffer.c\n+++ b/buffer.c\n@@ -20,2 +20,1 @@\n-        return -2;\n"
    diff += f"-        /* gone */\n+{head[19]}\n"
    [file] = parse_git_diff(diff)
    assert agrees_with_head(file, head)
    hunk = whole_file(file, head)
    assert hunk is not None
    assert (hunk.old_start, hunk.old_count, hunk.new_start, hunk.new_count) == (
        1,
        len(head) + 1,
        1,
        len(head),
    )
    kinds = [(line.kind, line.old_no, line.new_no) for line in hunk.lines[18:22]]
    assert kinds == [
        (LineKind.CONTEXT, 19, 19),
        (LineKind.REMOVED, 20, None),
        (LineKind.REMOVED, 21, None),
        (LineKind.ADDED, None, 20),
    ]
    assert hunk.lines[-1].old_no == len(head) + 1
    assert_consistent((hunk,), head)


def test_a_head_that_disagrees_with_the_diff_is_not_used() -> None:
    head = head_lines((GOLDEN / "buffer.c").read_text())
    [file] = parse_git_diff("--- a/b.c\n+++ b/b.c\n@@ -20,1 +20,1 @@\n-x\n+not in head\n")
    assert not agrees_with_head(file, head)
    [beyond] = parse_git_diff("--- a/b.c\n+++ b/b.c\n@@ -99,0 +100,1 @@\n+tail\n")
    assert not agrees_with_head(beyond, head)


# --- findings on context lines -----------------------------------------------------------------


def test_findings_on_scope_lines_are_anchored_like_any_line_outside_the_diff() -> None:
    old = [line for f in range(20) for line in (f"def f{f}(x):", *["    y = x"] * 30, "")]
    new = list(old)
    new[32 * 5 + 20] = "    y = eval(x)"  # line 181, in f5 (line 161)
    diff = "".join(
        line + "\n" for line in difflib.unified_diff(old, new, "a/m.py", "b/m.py", lineterm="")
    )
    [file] = parse_git_diff(diff)
    result = plan([file], Budget(), COUNTER, contents={"m.py": "\n".join(new) + "\n"})
    [chunk] = result.chunks
    assert "  161 | def f5(x):" in chunk.text and "  176 |     y = x" in chunk.text

    def anchored(line: int) -> Finding:
        raw = RawFinding(
            "m.py", line, Side.NEW, None, Severity.MAJOR, Category.BUG, "t", "b", None, 0
        )
        finding = anchor(raw, chunk.files, context_lines=DEFAULT_CONTEXT_LINES)
        assert isinstance(finding, Finding)
        return finding

    assert anchored(181).anchor is AnchorKind.EXACT
    near = anchored(176)  # shown as scope context, 2 lines above git's context
    assert (near.anchor, near.line) == (AnchorKind.REANCHORED, 181)
    far = anchored(161)  # the signature, 17 lines above
    assert far.anchor is AnchorKind.FILE and far.line is None
    assert "not part of the diff" in far.anchor_note
