"""Chunk planning: coverage, budgets, splitting, packing, exclusions."""

from __future__ import annotations

import dataclasses
import difflib
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewbot.chunking import (
    Budget,
    BudgetTooSmallError,
    ContextKind,
    Plan,
    PlanOptions,
    Segment,
    plan,
)
from reviewbot.config import DEFAULT_SCOPE_CONTEXT_TOKENS
from reviewbot.diff import FileDiff, FileStatus, Side, parse_git_diff
from reviewbot.diffview import expand_context
from reviewbot.exclusions import ExclusionRules
from reviewbot.tokens import ByteEstimateCounter, local_counter
from tests.hypothesis_profiles import examples

COUNTER = local_counter()
NO_SCOPE = PlanOptions(scope_tokens=0)


def make_file(path: str, hunks: list[tuple[int, int]], *, prefix: str = "line") -> str:
    """A git diff text for ``path`` with hunks of (start, added_lines), each replacing one line."""
    out = [f"diff --git a/{path} b/{path}", f"--- a/{path}", f"+++ b/{path}"]
    shift = 0
    for start, added in hunks:
        out.append(f"@@ -{start},3 +{start + shift},{2 + added} @@")
        out.append(f" {prefix} context before {start}")
        out.append(f"-{prefix} old {start}")
        out += [f"+{prefix} new {start}.{i} = compute({i})" for i in range(added)]
        out.append(f" {prefix} context after {start}")
        shift += added - 1
    return "\n".join(out) + "\n"


def owned_lines(result: Plan) -> Counter:
    owned: Counter = Counter()
    for chunk in result.chunks:
        for segment in chunk.segments:
            file = segment.view.file
            for index, hunk in enumerate(segment.view.hunks):
                lines = hunk.lines
                if index == 0 and segment.view.reviewed_before:
                    lines = lines[segment.view.reviewed_before :]
                for line in lines:
                    if line.is_change:
                        owned[(file.path, line.side, line.number)] += 1
    return owned


def all_changed(files: list[FileDiff]) -> set:
    return {(f.path, line.side, line.number) for f in files for line in f.lines() if line.is_change}


def test_small_diff_is_one_chunk_with_files_whole() -> None:
    files = parse_git_diff(make_file("a.py", [(10, 3)]) + make_file("b.py", [(5, 2), (40, 1)]))
    result = plan(files, Budget(), COUNTER)
    assert len(result.chunks) == 1
    assert [s.view.parts for s in result.chunks[0].segments] == [1, 1]
    assert result.coverage.changed_lines_covered == result.coverage.changed_lines_total == 9


def test_large_file_splits_at_hunks_and_every_line_is_owned_once() -> None:
    text = make_file("big.py", [(i * 100 + 1, 40) for i in range(30)])
    files = parse_git_diff(text)
    budget = Budget(max_model_len=4096 + 256 + 2000, output_reserve=4096)
    result = plan(files, budget, COUNTER)
    assert len(result.chunks) > 1
    assert all(chunk.tokens <= budget.available for chunk in result.chunks)
    parts = [s.view for c in result.chunks for s in c.segments]
    assert all(view.parts == len(parts) for view in parts)
    assert all(len(view.hunks) >= 1 and view.reviewed_before is None for view in parts)
    owned = owned_lines(result)
    assert set(owned) == all_changed(files) and set(owned.values()) == {1}


def test_huge_hunk_splits_into_windows_with_context_overlap() -> None:
    files = parse_git_diff(make_file("huge.py", [(1, 3000)]))
    budget = Budget(max_model_len=4096 + 256 + 3000, output_reserve=4096)
    result = plan(files, budget, COUNTER)
    views = [s.view for c in result.chunks for s in c.segments]
    assert len(views) > 5
    assert all(v.reviewed_before for v in views[1:])  # each later window repeats some lines
    assert "reviewed in the previous part" in result.chunks[1].text
    assert all(chunk.tokens <= budget.available for chunk in result.chunks)
    owned = owned_lines(result)
    assert set(owned) == all_changed(files) and set(owned.values()) == {1}


def test_budget_too_small_is_an_error() -> None:
    files = parse_git_diff(make_file("a.py", [(1, 2)]))
    with pytest.raises(BudgetTooSmallError):
        plan(files, Budget(max_model_len=4096, output_reserve=4096), COUNTER)
    with pytest.raises(BudgetTooSmallError, match="even one line"):
        plan(files, Budget(max_model_len=4096 + 256 + 20, output_reserve=4096), COUNTER)


def test_skipped_files_are_listed_with_reasons() -> None:
    text = (
        make_file("package-lock.json", [(1, 5)])
        + make_file("vendor/lib.go", [(1, 2)])
        + make_file("src/app.py", [(1, 2)])
        + make_file("docs/notes.md", [(1, 1)])
        + "diff --git a/logo.png b/logo.png\nindex 1..2 100644\n"
        "Binary files a/logo.png and b/logo.png differ\n"
    )
    files = parse_git_diff(text)
    rules = ExclusionRules(extra_globs=("docs/*",))
    result = plan(files, Budget(), COUNTER, options=PlanOptions(exclusions=rules))
    reasons = {s.path: s.reason for s in result.coverage.skipped}
    assert reasons == {
        "package-lock.json": "lock file",
        "vendor/lib.go": "vendored",
        "docs/notes.md": "excluded by configuration",
        "logo.png": "binary file",
    }
    coverage = result.coverage
    skipped_lines = sum(s.changed_lines for s in coverage.skipped)
    assert coverage.changed_lines_covered + skipped_lines == coverage.changed_lines_total
    assert [s.path for c in result.chunks for s in c.segments] == ["src/app.py"]


def test_head_contents_add_context_and_signature() -> None:
    head = "\n".join(
        ["import os", "", "def handler(request):"] + [f"    step{i}()" for i in range(1, 20)]
    )
    diff = (
        "--- a/h.py\n+++ b/h.py\n@@ -10,1 +10,1 @@\n-    old()\n+    step7()\n"  # line 10 of head
    )
    [file] = parse_git_diff(diff)
    no_scope = PlanOptions(scope_tokens=0)  # only the context lines (scopes: test_scope.py)
    result = plan([file], Budget(), COUNTER, contents={"h.py": head}, options=no_scope)
    text = result.chunks[0].text
    assert "@@ -7,7 +7,7 @@ def handler(request):" in text
    assert "   7 |     step4()" in text and "  13 |     step10()" in text
    assert "  14 |" not in text and "   6 |" not in text
    assert "+ 10 |     step7()" in text and "- 10 |     old()" in text


def test_head_lines_are_numbered_like_git() -> None:
    # a form feed and a Unicode line separator are not line ends for git
    head = "a\x0cb\r\nc\u2028d\nlast\nafter"
    [file] = parse_git_diff("--- a/f\n+++ b/f\n@@ -3,1 +3,1 @@\n-old\n+last\n")
    [hunk] = expand_context(file, head, 3)
    assert [(line.new_no, line.text) for line in hunk.lines if line.new_no] == [
        (1, "a\x0cb"),
        (2, "c\u2028d"),
        (3, "last"),
        (4, "after"),
    ]


def test_context_below_a_hunk_has_its_own_old_numbers() -> None:
    head = "\n".join(f"line {n}" for n in range(1, 11)) + "\n"
    # new line 4 replaced old lines 4-5: below it, old numbers run one ahead of new ones
    [file] = parse_git_diff("--- a/f\n+++ b/f\n@@ -4,2 +4,1 @@\n-x\n-y\n+line 4\n")
    [hunk] = expand_context(file, head, 3)
    below = [(line.old_no, line.new_no) for line in hunk.lines[-3:]]
    assert below == [(6, 5), (7, 6), (8, 7)]
    assert hunk.header() == "@@ -1,8 +1,7 @@"


def test_related_files_travel_together() -> None:
    text = "".join(
        make_file(path, [(1, 30)])
        for path in ["src/zeta.py", "tests/test_alpha.py", "src/alpha.py", "tests/test_zeta.py"]
    )
    files = parse_git_diff(text)
    one = plan(files, Budget(), COUNTER)
    order = [s.path for s in one.chunks[0].segments]
    assert order.index("tests/test_alpha.py") == order.index("src/alpha.py") + 1
    assert order.index("tests/test_zeta.py") == order.index("src/zeta.py") + 1
    # With room for two files per chunk, each source shares its chunk with its test.
    size = one.chunks[0].segments[0].tokens
    budget = Budget(max_model_len=4096 + 256 + 2 * size + 10, output_reserve=4096)
    two = plan(files, budget, COUNTER)
    groups = [{s.path for s in c.segments} for c in two.chunks]
    assert {"src/alpha.py", "tests/test_alpha.py"} in groups
    assert {"src/zeta.py", "tests/test_zeta.py"} in groups


def test_chunks_are_balanced() -> None:
    text = "".join(make_file(f"m{i}.py", [(1, 10 + i)]) for i in range(12))
    files = parse_git_diff(text)
    total = plan(files, Budget(), COUNTER).chunks[0].tokens
    budget = Budget(max_model_len=4096 + 256 + int(total * 0.55), output_reserve=4096)
    result = plan(files, budget, COUNTER)
    sizes = [chunk.tokens for chunk in result.chunks]
    assert len(sizes) == 2
    assert max(sizes) - min(sizes) < total * 0.2


def test_fallback_counter_over_counts_real_code() -> None:
    import reviewbot.chunking

    source = Path(reviewbot.chunking.__file__).read_text()
    diff = "--- /dev/null\n+++ b/c.py\n@@ -0,0 +1,{} @@\n".format(source.count("\n"))
    text = diff + "".join("+" + line + "\n" for line in source.splitlines())
    [file] = parse_git_diff(text)
    rendered = plan([file], Budget(), COUNTER).chunks[0].text
    assert ByteEstimateCounter().count(rendered) > COUNTER.count(rendered)


@st.composite
def random_diff(draw: st.DrawFn) -> str:
    paths = draw(
        st.lists(
            st.from_regex(r"[a-c]/[a-e]{1,3}\.py", fullmatch=True),
            min_size=1,
            max_size=6,
            unique=True,
        )
    )
    out = []
    for path in paths:
        starts = sorted(draw(st.sets(st.integers(1, 50), min_size=1, max_size=5)))
        out.append(make_file(path, [(s * 200, draw(st.integers(1, 120))) for s in starts]))
    return "".join(out)


@pytest.mark.slow
@given(random_diff(), st.integers(150, 3000), st.integers(0, 4))
@settings(max_examples=examples(40), deadline=None)
def test_property_every_changed_line_once_and_no_chunk_over_budget(
    text: str, room: int, context: int
) -> None:
    check_plan_invariants(text, room, context)


def check_plan_invariants(text: str, room: int, context: int) -> None:
    """Every changed line owned exactly once; no chunk over budget (exact recount)."""
    files = parse_git_diff(text)
    budget = Budget(max_model_len=4096 + 256 + room, output_reserve=4096)
    result = plan(files, budget, COUNTER, options=PlanOptions(overlap_lines=context))
    assert all(chunk.tokens <= budget.available for chunk in result.chunks)
    assert all(COUNTER.count(chunk.text) <= budget.available for chunk in result.chunks)
    owned = owned_lines(result)
    assert set(owned) == all_changed(files)
    assert set(owned.values()) == {1}
    assert result.coverage.changed_lines_covered == result.coverage.changed_lines_total


def test_deleted_files_skipped_unless_asked() -> None:
    diff = "diff --git a/x.py b/x.py\ndeleted file mode 100644\n--- a/x.py\n+++ /dev/null\n"
    diff += "@@ -1,2 +0,0 @@\n-a\n-b\n"
    [file] = parse_git_diff(diff)
    assert file.status is FileStatus.DELETED
    assert plan([file], Budget(), COUNTER).coverage.skipped[0].reason == "deleted file"
    rules = ExclusionRules(review_deleted_files=True)
    result = plan([file], Budget(), COUNTER, options=PlanOptions(exclusions=rules))
    assert result.coverage.changed_lines_covered == 2
    assert "- 1 | a" in result.chunks[0].text and Side.OLD.value == "old"


# --- context in the room that is left ----------------------------------------------------------


def function_file(functions: int, body: int) -> list[str]:
    lines = []
    for f in range(functions):
        lines += [f"def f{f}(x):", *[f"    y{i} = x + {i}" for i in range(body)], ""]
    return lines


def unified(path: str, old: list[str], new: list[str]) -> str:
    lines = difflib.unified_diff(old, new, f"a/{path}", f"b/{path}", lineterm="")
    return "".join(line + "\n" for line in lines)


def edited(path: str, old: list[str], at: int, text: str) -> tuple[FileDiff, str]:
    new = [*old[:at], text, *old[at + 1 :]]
    [file] = parse_git_diff(unified(path, old, new))
    return file, "\n".join(new) + "\n"


def test_a_small_changed_file_is_shown_whole_once() -> None:
    file, head = edited("m.py", function_file(3, 5), 9, "    y1 = x - 1")
    result = plan([file], Budget(), COUNTER, contents={"m.py": head})
    [segment] = result.chunks[0].segments
    assert segment.context is ContextKind.WHOLE
    [hunk] = segment.view.hunks
    assert hunk.header() == "@@ -1,21 +1,21 @@"  # every line, once
    assert segment.text.count("y1 = x") == 4  # f0 and f2 as context, f1 old and new
    assert "- 10 |     y1 = x + 1" in segment.text and "+ 10 |     y1 = x - 1" in segment.text
    assert result.chunks[0].context_tokens == segment.context_tokens > 0
    plain = plan([file], Budget(), COUNTER, contents={"m.py": head}, options=NO_SCOPE)
    assert segment.tokens - plain.chunks[0].tokens == segment.context_tokens


def test_a_whole_file_cheaper_than_its_hunks_costs_no_context_never_less() -> None:
    """Two hunks ten lines apart: the whole file drops a hunk header and costs fewer tokens
    than the hunks (`plan --json` once showed context_tokens -14)."""
    old = [f"v{i} = {i}" for i in range(20)]
    new = [*old[:2], "v2 = 'x'", *old[3:13], "vv = 'y'", *old[14:]]
    [file] = parse_git_diff(unified("m.py", old, new))
    assert len(file.hunks) == 2
    result = plan([file], Budget(), COUNTER, contents={"m.py": "\n".join(new) + "\n"})
    [segment] = result.chunks[0].segments
    assert segment.context is ContextKind.WHOLE
    assert segment.context_tokens == 0
    assert result.totals()["context_tokens"] == 0


def test_a_large_file_gets_its_hunks_scopes_instead() -> None:
    file, head = edited("m.py", function_file(20, 30), 32 * 5 + 20, "    y19 = x - 1")
    result = plan([file], Budget(), COUNTER, contents={"m.py": head})
    [segment] = result.chunks[0].segments
    assert segment.context is ContextKind.SCOPE
    assert segment.parser == "tree-sitter:python" and segment.scoped_hunks == 1
    assert "  161 | def f5(x):" in segment.text  # the signature, 20 lines above the change
    assert "def f4" not in segment.text
    assert 0 < segment.context_tokens <= DEFAULT_SCOPE_CONTEXT_TOKENS


def test_context_is_added_only_in_room_the_chunk_has_left() -> None:
    file, head = edited("m.py", function_file(20, 30), 32 * 5 + 20, "    y19 = x - 1")
    plain = plan([file], Budget(), COUNTER, contents={"m.py": head}, options=NO_SCOPE)
    tight = Budget(max_model_len=4096 + 256 + plain.chunks[0].tokens + 20, output_reserve=4096)
    result = plan([file], tight, COUNTER, contents={"m.py": head})
    assert result.chunks[0].text == plain.chunks[0].text
    assert result.totals()["context_tokens"] == 0


def test_scope_tokens_zero_turns_context_off() -> None:
    file, head = edited("m.py", function_file(3, 5), 9, "    y1 = x - 1")
    result = plan([file], Budget(), COUNTER, contents={"m.py": head}, options=NO_SCOPE)
    assert result.totals()["context_tokens"] == 0
    assert {s.context for s in result.segments} == {ContextKind.NONE}


def test_a_head_that_does_not_match_the_diff_adds_no_context() -> None:
    file, head = edited("m.py", function_file(20, 30), 32 * 5 + 20, "    y19 = x - 1")
    stale = head.replace("    y19 = x - 1", "    y19 = x * 2")
    result = plan([file], Budget(), COUNTER, contents={"m.py": stale})
    assert result.totals()["context_tokens"] == 0


@st.composite
def edited_files(draw: st.DrawFn) -> tuple[list[FileDiff], dict[str, str]]:
    """Files of functions (parsed by tree-sitter or, for .txt and .go, the heuristic) edited at
    random places, their diff made by difflib with git's three lines of context."""
    names = ["a/m.py", "a/test_m.py", "b/k.rb", "b/notes.txt", "c/x.go"]
    paths = draw(st.lists(st.sampled_from(names), min_size=1, max_size=4, unique=True))
    text = ""
    contents = {}
    for path in paths:
        old = function_file(draw(st.integers(1, 6)), draw(st.integers(1, 30)))
        new = list(old)
        for _ in range(draw(st.integers(1, 6))):
            at = draw(st.integers(0, len(new)))
            size = draw(st.integers(1, 4))
            action = draw(st.sampled_from(["replace", "insert", "delete"]))
            block = [f"    z{at}_{i} = call({i})" for i in range(size)]
            if action == "insert":
                new[at:at] = block
            elif action == "delete" and len(new) > size:
                del new[at : at + size]
            else:
                new[at : at + size] = block
        if new == old:
            new.append("    tail = 1")
        text += f"diff --git a/{path} b/{path}\n" + unified(path, old, new)
        contents[path] = "\n".join(new) + "\n"
    return parse_git_diff(text), contents


def view_is_consistent(segment: Segment, head: str | None) -> bool:
    """Headers count their lines, hunks do not overlap, context lines are the head's."""
    lines = head.split("\n") if head is not None else None
    last_new = 0
    for hunk in segment.view.hunks:
        new = [line.new_no for line in hunk.lines if line.new_no is not None]
        old = [line.old_no for line in hunk.lines if line.old_no is not None]
        if (hunk.new_count, hunk.old_count) != (len(new), len(old)):
            return False
        if new and (new != list(range(new[0], new[0] + len(new))) or new[0] <= last_new):
            return False
        last_new = new[-1] if new else last_new
        for line in hunk.lines:
            if lines and line.new_no is not None and lines[line.new_no - 1] != line.text:
                return False
    return True


@pytest.mark.slow
@given(edited_files(), st.integers(150, 4000), st.integers(0, 1500), st.integers(0, 4))
@settings(max_examples=examples(40), deadline=None)
def test_property_context_keeps_coverage_chunks_and_budget(
    edited: tuple[list[FileDiff], dict[str, str]], room: int, scope: int, context: int
) -> None:
    files, contents = edited
    budget = Budget(max_model_len=4096 + 256 + room, output_reserve=4096)
    try:
        plain = plan(
            files,
            budget,
            COUNTER,
            contents=contents,
            options=PlanOptions(context_lines=context, scope_tokens=0),
        )
    except BudgetTooSmallError:
        return
    result = plan(
        files,
        budget,
        COUNTER,
        contents=contents,
        options=PlanOptions(context_lines=context, scope_tokens=scope),
    )
    assert all(COUNTER.count(chunk.text) <= budget.available for chunk in result.chunks)
    owned = owned_lines(result)
    assert set(owned) == all_changed(files) and set(owned.values()) == {1}
    assert result.coverage.changed_lines_covered == result.coverage.changed_lines_total
    assert len(result.chunks) == len(plain.chunks)  # context never adds a chunk
    added = sum(c.tokens for c in result.chunks) - sum(c.tokens for c in plain.chunks)
    # what context costs: each segment's extra tokens, none below 0 (a whole file can cost
    # less than its hunks' headers)
    assert result.totals()["context_tokens"] >= max(0, added)
    assert all(segment.context_tokens >= 0 for segment in result.segments)
    assert all(view_is_consistent(s, contents.get(s.path)) for s in result.segments)
    if scope == 0:
        assert added == 0


def test_replanning_a_chunk_with_context_never_sends_context_alone() -> None:
    """What ``chunking.resplit`` does when the server finds a chunk too long: the views' hunks,
    context blocks included, planned again in a smaller budget without head contents."""
    old = function_file(20, 80)
    new = list(old)
    for at in (82 * 3 + 75, 82 * 9 + 78, 82 * 15 + 70):  # far below their functions' signatures
        new[at] = "    changed = True"
    [file] = parse_git_diff(unified("m.py", old, new))
    result = plan([file], Budget(), COUNTER, contents={"m.py": "\n".join(new) + "\n"})
    [segment] = result.chunks[0].segments
    assert any(hunk.changed_count == 0 for hunk in segment.view.hunks)  # signature blocks
    shown = dataclasses.replace(file, hunks=segment.view.hunks, _index=None)
    for room in range(segment.tokens // 8, segment.tokens // 2, segment.tokens // 40):
        small = Budget(max_model_len=4096 + 256 + room, output_reserve=4096)
        replanned = plan([shown], small, COUNTER, options=PlanOptions(0))
        assert all(chunk.changed_lines > 0 for chunk in replanned.chunks), room
        assert replanned.coverage.changed_lines_covered == file.changed_count
