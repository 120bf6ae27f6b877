"""reviewbot.suggestions: a suggestion applied to the head file, and each reason to drop it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewbot.suggestions import (
    SuggestionProblem,
    block_range,
    check_suggestion,
    suggestion_lines,
)

PY = "def total(items):\n    if items is None:\n        return 0\n    return sum(items)\n"
JS = "function f(a) {\n  if (a) {\n    return g(a);\n  }\n  return 0;\n}\n"
GO = "package a\n\nfunc F(a int) int {\n\tif a > 0 {\n\t\treturn a\n\t}\n\treturn 0\n}\n"
RUST = "fn f(a: i32) -> i32 {\n    let b = a + 1;\n    b\n}\n"


def test_a_valid_python_edit_is_ok_and_patches_exactly_its_lines() -> None:
    check = check_suggestion("m.py", PY, 2, 3, "    if not items:\n        return 0\n")
    assert check.ok and (check.lines_above, check.lines_below) == (0, 1)
    assert check.patched == PY.replace("if items is None", "if not items")


def test_wrong_indentation_in_python_does_not_compile() -> None:
    check = check_suggestion("m.py", PY, 4, None, "      return sum(items)")
    assert check.problem is SuggestionProblem.DOES_NOT_PARSE
    assert "IndentationError" in check.detail or "unindent" in check.detail


@pytest.mark.parametrize(
    ("path", "head", "line", "suggestion"),
    [
        ("f.js", JS, 3, "    return g(a;"),
        ("f.ts", JS, 3, "    return g(a));"),
        ("f.go", GO, 5, "\t\treturn (a"),
        ("f.rs", RUST, 2, "    let b = [a + 1;"),
        ("f.java", "class A {\n  int f() {\n    return 1;\n  }\n}\n", 3, "    return (1;"),
        ("f.c", "int f(void) {\n  return 1;\n}\n", 2, "  return {1;"),
        ("f.rb", "def f\n  g(1)\nend\n", 2, "  g(1"),
    ],
)
def test_unbalanced_brackets_do_not_parse(path: str, head: str, line: int, suggestion: str) -> None:
    check = check_suggestion(path, head, line, None, suggestion)
    assert check.problem is SuggestionProblem.DOES_NOT_PARSE, check
    assert "new ERROR/MISSING" in check.detail


def test_a_balanced_edit_in_each_language_is_ok() -> None:
    assert check_suggestion("f.js", JS, 3, None, "    return h(a);").ok
    assert check_suggestion("f.go", GO, 5, None, "\t\treturn a * 2").ok
    assert check_suggestion("f.rs", RUST, 2, None, "    let b = a * 2;").ok


def test_a_file_already_broken_is_judged_by_new_errors_only() -> None:
    head = "def f(:\n    return 1\nx = 2\n"  # the head does not compile already
    assert check_suggestion("m.py", head, 3, None, "x = 3").ok
    assert check_suggestion("m.py", head, 3, None, "x = (3").problem is (
        SuggestionProblem.DOES_NOT_PARSE
    )


def test_replacing_the_wrong_lines_repeats_a_neighbour() -> None:
    # meant for lines 2-3, anchored on 3-4: its first line repeats line 2, kept above
    check = check_suggestion("m.py", PY, 3, 4, "    if items is None:\n        return []\n")
    assert check.problem is SuggestionProblem.OFF_BY_ONE
    assert "repeats line 2" in check.detail


def test_lines_that_differ_from_the_diff_are_refused() -> None:
    check = check_suggestion("m.py", PY, 2, None, "    if not items:", ["    if items == None:"])
    assert check.problem is SuggestionProblem.LINES_DIFFER


def test_a_no_op_is_refused_with_or_without_its_trailing_newline() -> None:
    for text in ("        return 0", "        return 0\n"):
        assert check_suggestion("m.py", PY, 3, None, text).problem is SuggestionProblem.NO_OP


@pytest.mark.parametrize(("first", "last"), [(5, None), (4, 6), (0, None)])
def test_a_range_past_the_file_is_refused(first: int, last: int | None) -> None:
    check = check_suggestion("m.py", PY, first, last, "x = 1")
    assert check.problem is SuggestionProblem.OUTSIDE_FILE


def test_a_head_file_not_read_is_never_passed() -> None:
    check = check_suggestion("m.py", None, 1, None, "x = 1")
    assert check.problem is SuggestionProblem.HEAD_NOT_READ and check.patched is None


def test_crlf_files_keep_their_line_ends() -> None:
    head = PY.replace("\n", "\r\n")
    check = check_suggestion("m.py", head, 3, None, "        return []", ["        return 0"])
    assert check.ok
    assert check.patched == head.replace("return 0", "return []")
    assert check_suggestion("m.py", head, 3, None, "        return 0").problem is (
        SuggestionProblem.NO_OP
    )


def test_a_last_line_without_newline_stays_without() -> None:
    head = PY.rstrip("\n")
    check = check_suggestion("m.py", head, 4, None, "    return sum(items, 0)\n")
    assert check.ok and check.patched == head.replace("sum(items)", "sum(items, 0)")
    assert not check.patched.endswith("\n")


def test_a_renamed_file_is_parsed_by_its_new_path() -> None:
    # the finding's path is the new path: a .py renamed to .js is judged as JavaScript
    head = "const a = 1;\n"
    assert check_suggestion("new.js", head, 1, None, "const a = 2;").ok
    assert check_suggestion("new.js", head, 1, None, "const a = (2;").problem is (
        SuggestionProblem.DOES_NOT_PARSE
    )


def test_an_empty_suggestion_deletes_the_lines() -> None:
    check = check_suggestion("m.py", PY, 2, 3, "")
    assert check.ok and check.patched == "def total(items):\n    return sum(items)\n"
    assert suggestion_lines("") == []


def test_a_file_without_grammar_gets_the_line_checks_only() -> None:
    head = "a: [1\nb: 2\n"
    assert check_suggestion("conf.yaml", head, 2, None, "b: {{{").ok
    assert check_suggestion("conf.yaml", head, 2, None, "b: 2").problem is SuggestionProblem.NO_OP


def test_block_range_is_anchored_on_the_first_line() -> None:
    assert block_range(10, None) == (0, 0)
    assert block_range(10, 10) == (0, 0)
    assert block_range(10, 13) == (0, 3)


_LINE = st.text(alphabet="abc xyz=()", max_size=12)


@given(
    st.lists(_LINE, min_size=1, max_size=12),
    st.data(),
    st.lists(_LINE, min_size=1, max_size=5),
)
def test_properties_of_applying(lines: list[str], data: st.DataObject, new: list[str]) -> None:
    """The replaced lines themselves are always a no-op; any other edit's patched file holds
    exactly the suggestion's lines in the range, and the rest unchanged."""
    head = "\n".join(lines) + "\n"
    first = data.draw(st.integers(1, len(lines)))
    last = data.draw(st.integers(first, len(lines)))
    same = "\n".join(lines[first - 1 : last]) + "\n"  # one line end: the block's own
    assert check_suggestion("notes.txt", head, first, last, same).problem is (
        SuggestionProblem.NO_OP
    )
    check = check_suggestion("notes.txt", head, first, last, "\n".join(new) + "\n")
    if check.ok:
        assert check.patched is not None
        patched = check.patched.split("\n")[:-1]
        assert patched == lines[: first - 1] + new + lines[last:]
    else:
        assert check.problem in {SuggestionProblem.NO_OP, SuggestionProblem.OFF_BY_ONE}
