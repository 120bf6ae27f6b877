"""Findings: validation, anchoring to diff lines, fingerprints, dedupe, selection.

A finding is addressed by side + line: an added line on the new side, a removed line on the
old side, an unchanged line on the new side whichever side the model named (GitLab's position
fields are reviewbot.positions' business: tests/test_positions.py). Suggestions replace new lines
only (https://docs.gitlab.com/user/project/merge_requests/reviews/suggestions/).
"""

from __future__ import annotations

from typing import Any

import pytest

from reviewbot.diff import FileDiff, Side, parse_git_diff
from reviewbot.findings import (
    AnchorKind,
    Category,
    Finding,
    FindingsOptions,
    RawFinding,
    Rejected,
    Severity,
    anchor,
    dedupe,
    fingerprint,
    process,
    report_finding_parameters,
    select,
    validate_call,
)
from reviewbot.prompts import tool_schemas

APP_DIFF = """\
diff --git a/src/app.py b/src/app.py
--- a/src/app.py
+++ b/src/app.py
@@ -1,5 +1,6 @@
 import os
-def load(path):
-    return open(path).read()
+def load(path):
+    with open(path) as handle:
+        return handle.read()
 # helpers
 def save(path, data):
@@ -20,4 +21,4 @@ def other():
 a = 1
-b = 2
+b = 3
 c = 4
 d = 5
diff --git a/old_name.py b/new_name.py
similarity index 90%
rename from old_name.py
rename to new_name.py
--- a/old_name.py
+++ b/new_name.py
@@ -1,2 +1,2 @@
-x = 1
+x = 2
 y = 3
"""

# The same change to load(), three lines further down the file.
SHIFTED_DIFF = """\
diff --git a/src/app.py b/src/app.py
--- a/src/app.py
+++ b/src/app.py
@@ -4,5 +4,6 @@
 import os
-def load(path):
-    return open(path).read()
+def load(path):
+    with open(path) as handle:
+        return handle.read()
 # helpers
 def save(path, data):
"""


def files_of(diff: str) -> dict[str, FileDiff]:
    return {file.new_path: file for file in parse_git_diff(diff)}


FILES = files_of(APP_DIFF)


def call(**overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "path": "src/app.py",
        "line": 3,
        "side": "new",
        "severity": "major",
        "category": "resource-leak",
        "title": "File handle is never closed",
        "body": "Use a `with` block.",
    }
    arguments.update(overrides)
    return {key: value for key, value in arguments.items() if value is not None}


def raw(**overrides: Any) -> RawFinding:
    result = validate_call(call(**overrides), chunk_index=0)
    assert isinstance(result, RawFinding), result
    return result


def anchored(files: dict[str, FileDiff] = FILES, **overrides: Any) -> Finding:
    result = anchor(raw(**overrides), files, context_lines=3)
    assert isinstance(result, Finding), result
    return result


# ---------------------------------------------------------------------------------------------
# validate_call


def test_valid_call_becomes_raw_finding_and_unknown_keys_are_ignored() -> None:
    result = validate_call(call(confidence=0.9, extra="x"), chunk_index=4)
    assert isinstance(result, RawFinding)
    assert result.severity is Severity.MAJOR
    assert result.category is Category.RESOURCE_LEAK
    assert result.chunk_index == 4


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"line": "12"}, "line"),
        ({"line": True}, "line"),
        ({"line": 0}, "line"),
        ({"line": 2.0}, "line"),
        ({"end_line": "4"}, "end_line"),
        ({"severity": "Major"}, "severity"),
        ({"severity": "high"}, "severity"),
        ({"category": "bugs"}, "category"),
        ({"side": "left"}, "side"),
        ({"title": "   "}, "title"),
        ({"body": ""}, "body"),
        ({"path": 3}, "path"),
        ({"suggestion": ["x"]}, "suggestion"),
    ],
)
def test_invalid_calls_are_rejected_with_the_field_named(
    overrides: dict[str, Any], field: str
) -> None:
    result = validate_call(call(**overrides), chunk_index=0)
    assert isinstance(result, Rejected)
    assert f"`{field}`:" in result.reason
    assert result.arguments["path"] == call(**overrides)["path"]


def test_missing_line_is_rejected() -> None:
    arguments = call()
    del arguments["line"]
    assert isinstance(validate_call(arguments, chunk_index=0), Rejected)


def test_a_rejected_call_names_every_broken_field_and_its_rule() -> None:
    arguments = {**call(severity="huge", title=" "), "line": None}
    result = validate_call(arguments, chunk_index=0)
    assert isinstance(result, Rejected)
    assert result.reason == (
        "`line`: required integer, got null; "
        '`severity`: must be one of blocker, critical, major, minor, info; got "huge"; '
        '`title`: must not be blank; got " "'
    )


def test_the_model_is_shown_the_schema_findings_are_checked_against() -> None:
    [tool] = tool_schemas()
    assert tool["function"]["parameters"] == report_finding_parameters()
    assert tool["function"]["parameters"]["properties"]["line"]["minimum"] == 1


# ---------------------------------------------------------------------------------------------
# anchor


def test_exact_on_added_line_is_on_the_new_side() -> None:
    finding = anchored(line=3)
    assert finding.anchor is AnchorKind.EXACT
    assert (finding.side, finding.line) == (Side.NEW, 3)
    assert finding.line_text == "    with open(path) as handle:"
    assert finding.anchor_note == ""


def test_exact_on_removed_line_is_on_the_old_side() -> None:
    finding = anchored(side="old", line=3)
    assert finding.anchor is AnchorKind.EXACT
    assert (finding.side, finding.line) == (Side.OLD, 3)
    assert finding.line_text == "    return open(path).read()"


def test_exact_on_context_line_is_on_the_new_side() -> None:
    finding = anchored(line=1)
    assert finding.anchor is AnchorKind.EXACT
    assert (finding.side, finding.line) == (Side.NEW, 1)


def test_context_line_named_on_the_old_side_is_addressed_on_the_new_side() -> None:
    # "a = 1" is old line 20 and new line 21: one line, one address
    from_old = anchored(side="old", line=20)
    from_new = anchored(side="new", line=21)
    assert from_old.anchor is AnchorKind.EXACT
    assert (from_old.side, from_old.line) == (from_new.side, from_new.line) == (Side.NEW, 21)
    assert from_old.reported_side is Side.OLD and from_old.reported_line == 20
    assert from_old.fingerprint == from_new.fingerprint
    kept, duplicates = dedupe([from_old, from_new])
    assert len(kept) == 1 and len(duplicates) == 1


def test_line_next_to_a_hunk_is_reanchored_with_a_note() -> None:
    finding = anchored(line=8)  # hunk 1 ends at new line 6
    assert finding.anchor is AnchorKind.REANCHORED
    assert finding.line is not None and finding.line != 8
    assert FILES["src/app.py"].line_at(finding.side, finding.line).is_change
    assert "line 8" in finding.anchor_note and "not part of the diff" in finding.anchor_note
    assert finding.reported_line == 8


def test_far_line_becomes_a_file_level_finding() -> None:
    finding = anchored(line=400)
    assert finding.anchor is AnchorKind.FILE
    assert finding.is_file_level
    assert finding.line is None and finding.end_line is None
    assert "line 400" in finding.anchor_note


def test_wrong_side_is_not_guessed() -> None:
    # new line 6 exists ("def save"), old line 6 does not: no silent switch to the new side
    finding = anchored(side="old", line=6)
    assert finding.anchor is not AnchorKind.EXACT
    assert "old line 6" in finding.anchor_note


def test_hallucinated_path_is_rejected() -> None:
    result = anchor(raw(path="src/nope.py"), FILES, context_lines=3)
    assert isinstance(result, Rejected)
    assert result.reason == "path not in chunk"


def test_renamed_file_is_found_by_old_or_new_path() -> None:
    by_old = anchored(path="old_name.py", side="old", line=1)
    by_new = anchored(path="new_name.py", line=1)
    assert by_old.path == by_new.path == "new_name.py"
    assert by_old.old_path == "old_name.py"


def test_end_line_kept_over_a_range_of_the_same_hunk() -> None:
    finding = anchored(line=2, end_line=4)
    assert finding.end_line == 4


@pytest.mark.parametrize("end_line", [1, 10, 21])
def test_end_line_dropped_with_a_note_when_not_a_range_in_one_hunk(end_line: int) -> None:
    finding = anchored(line=2, end_line=end_line)
    assert finding.anchor is AnchorKind.EXACT
    assert finding.end_line is None
    assert f"end_line {end_line} dropped" in finding.anchor_note


def test_suggestion_kept_on_added_lines() -> None:
    finding = anchored(line=2, end_line=4, suggestion="def load(path: str) -> str:\n")
    assert finding.suggestion == "def load(path: str) -> str:\n"


@pytest.mark.parametrize(
    "overrides",
    [
        {"side": "old", "line": 2},  # removed line
        {"line": 1},  # context line
        {"line": 2, "end_line": 5},  # range reaching a context line
        {"line": 8},  # re-anchored: written for another line
        {"line": 400},  # file level
        {"line": 2, "suggestion": "/merge\n"},  # would be a quick action
    ],
)
def test_suggestion_dropped_with_a_note(overrides: dict[str, Any]) -> None:
    overrides.setdefault("suggestion", "x = 1\n")
    finding = anchored(**overrides)
    assert finding.suggestion is None
    assert "suggestion dropped" in finding.anchor_note


def test_model_text_is_sanitised_in_the_finding() -> None:
    finding = anchored(title="/close @all <b>now</b>", body="@here\n/approve")
    assert "<b>" not in finding.title and "`@all`" in finding.title
    assert not finding.title.startswith("/")
    assert all(not line.lstrip().startswith("/") for line in finding.body.split("\n"))


def test_unprintable_model_text_is_replaced_not_kept() -> None:
    """NUL cannot be stored in PostgreSQL text nor shown; ESC would reach a terminal."""
    finding = anchored(
        title="Unsafe\x00 call", body="runs \x1b[31meval\x00\n", suggestion="x = 1\x00\n"
    )
    for text in (finding.title, finding.body, finding.suggestion or ""):
        assert "\x00" not in text and "\x1b" not in text
    assert "\ufffd" in finding.title and "\ufffd" in finding.body


# ---------------------------------------------------------------------------------------------
# fingerprint and dedupe


def test_fingerprint_survives_shifted_line_numbers() -> None:
    before = anchored(line=3)
    after = anchored(files_of(SHIFTED_DIFF), line=6)
    assert before.line != after.line
    assert before.line_text == after.line_text
    assert before.fingerprint == after.fingerprint


def test_fingerprint_ignores_whitespace_and_title_punctuation_but_not_content() -> None:
    base = fingerprint("a.py", "x = open(p)", Category.BUG, "File handle leaks!")
    assert base == fingerprint("a.py", "  x  =  open(p) ", Category.BUG, "file handle  leaks")
    assert base != fingerprint("a.py", "y = open(p)", Category.BUG, "File handle leaks!")
    assert base != fingerprint("a.py", "x = open(p)", Category.RESOURCE_LEAK, "File handle leaks!")
    assert base != fingerprint("b.py", "x = open(p)", Category.BUG, "File handle leaks!")
    assert fingerprint("a.py", "x", Category.BUG, "limit 10") != fingerprint(
        "a.py", "x", Category.BUG, "limit 20"
    )
    assert len(base) == 20 and int(base, 16) >= 0


def test_dedupe_keeps_the_most_severe_then_the_longest_body() -> None:
    minor = anchored(severity="minor", body="long " * 20)
    critical = anchored(severity="critical", body="short")
    critical_longer = anchored(severity="critical", body="a longer body")
    kept, duplicates = dedupe([minor, critical, critical_longer])
    assert kept == [critical_longer]
    assert sorted(d.body for d in duplicates) == sorted([minor.body, critical.body])


def test_dedupe_near_identical_titles_on_the_same_line() -> None:
    first = anchored(title="File handle is never closed")
    second = anchored(title="File handle is never closed.", body="other words")
    third = anchored(title="File handle never closed", body="x")
    other_category = anchored(title="File handle is never closed", category="bug")
    other_line = anchored(line=2, title="File handle is never closed")
    kept, duplicates = dedupe([first, second, third, other_category, other_line])
    assert len(kept) == 3
    assert len(duplicates) == 2


def test_dedupe_orders_by_path_then_line() -> None:
    findings = [
        anchored(line=21, title="c"),
        anchored(path="new_name.py", line=1, title="b"),
        anchored(line=2, title="a"),
    ]
    kept, _ = dedupe(findings)
    assert [(f.path, f.line) for f in kept] == [
        ("new_name.py", 1),
        ("src/app.py", 2),
        ("src/app.py", 21),
    ]


# ---------------------------------------------------------------------------------------------
# select and process


def test_select_filters_and_caps_inline() -> None:
    findings = [
        anchored(line=2, severity="minor", title="one"),
        anchored(line=3, severity="blocker", title="two"),
        anchored(line=4, severity="major", title="three"),
        anchored(line=21, severity="info", title="four"),
        anchored(line=5, severity="major", category="style", title="five"),
        anchored(line=400, severity="critical", title="six"),
    ]
    selection = select(
        findings,
        min_severity=Severity.MINOR,
        categories={Category.RESOURCE_LEAK},
        max_inline=2,
    )
    assert {f.title for f in selection.filtered} == {"four", "five"}
    assert {f.title for f in selection.inline} == {"two", "three"}
    assert {f.title for f in selection.summary_only} == {"one", "six"}


def test_process_ties_everything_together() -> None:
    calls = [
        (0, call(line=3)),
        (0, call(line=3, severity="blocker")),  # duplicate, more severe
        (0, call(line="3")),  # string line
        (0, call(path="ghost.py")),  # hallucinated path
        (7, call()),  # unknown chunk
        (0, call(line=400, title="Module is too long", category="maintainability")),
    ]
    result = process(calls, {0: FILES}, FindingsOptions(max_inline=5))
    assert {f.anchor for f in result.findings} == {AnchorKind.EXACT, AnchorKind.FILE}
    assert len(result.findings) == 2
    assert len(result.duplicates) == 1
    assert len(result.rejected) == 3
    assert all(r.reason for r in result.rejected)
    assert result.counts[Severity.BLOCKER] == 1
    assert result.counts[Severity.MAJOR] == 1
    assert sum(result.counts.values()) == len(result.findings)
    assert [f.anchor for f in result.selection.summary_only] == [AnchorKind.FILE]
    assert [f.severity for f in result.selection.inline] == [Severity.BLOCKER]


# ---------------------------------------------------------------------------------------------
# identical lines (hostile test, issue 10 item 2)

TWIN_DIFF = """\
diff --git a/wrap.py b/wrap.py
--- a/wrap.py
+++ b/wrap.py
@@ -1,2 +1,10 @@
 def first():
+    try:
+        return Wrapped
+    except:
+        pass
     pass
+def second():
+    try:
+        return Wrapped
+    except:
"""


def twin_calls(title: str = "Bare except") -> list[tuple[int, dict[str, Any]]]:
    return [
        (0, call(path="wrap.py", line=line, title=title, category="error-handling"))
        for line in (4, 10)
    ]


def test_identical_lines_in_one_file_stay_two_findings() -> None:
    files = {0: files_of(TWIN_DIFF)}
    result = process(twin_calls(), files, FindingsOptions())
    assert [f.line for f in result.findings] == [4, 10]
    assert result.duplicates == []
    first, second = result.findings
    assert first.line_text == second.line_text and first.fingerprint != second.fingerprint
    # the first occurrence keeps the plain fingerprint (markers posted earlier still match)
    assert first.fingerprint == fingerprint(
        "wrap.py", "    except:", "error-handling", "Bare except"
    )


def test_identical_lines_keep_their_fingerprints_when_lines_shift() -> None:
    shifted = TWIN_DIFF.replace(
        "@@ -1,2 +1,10 @@\n def first():\n", "@@ -1,2 +1,12 @@\n def first():\n+    # a\n+    # b\n"
    )
    before = process(twin_calls(), {0: files_of(TWIN_DIFF)}, FindingsOptions()).findings
    calls = [
        (0, call(path="wrap.py", line=line, title="Bare except", category="error-handling"))
        for line in (6, 12)
    ]
    after = process(calls, {0: files_of(shifted)}, FindingsOptions()).findings
    assert [f.fingerprint for f in after] == [f.fingerprint for f in before]
