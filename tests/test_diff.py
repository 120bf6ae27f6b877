"""Diff parsing and GitLab positions.

Golden files: each ``tests/golden/*.diff`` (made with real ``git diff``) is paired with a
``.json`` holding its expected parse. Set ``REVIEWBOT_UPDATE_GOLDEN=1`` to rewrite the JSON after a
deliberate change, then read the diff of the JSON before committing it.

GitLab position rules: https://docs.gitlab.com/api/discussions/#create-a-new-thread-in-the-merge-request-diff
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import unidiff
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewbot.diff import (
    FileDiff,
    FileStatus,
    LineKind,
    Side,
    nearest_changed_line,
    parse_git_diff,
    parse_gitlab_diffs,
    unquote_git_path,
)
from reviewbot.positions import position_for
from tests.hypothesis_profiles import examples

GOLDEN = Path(__file__).parent / "golden"
MARKERS = {LineKind.ADDED: "+", LineKind.REMOVED: "-", LineKind.CONTEXT: " "}


def as_jsonable(files: list[FileDiff]) -> list[dict]:
    return [
        {
            "old_path": f.old_path,
            "new_path": f.new_path,
            "status": f.status.value,
            "binary": f.is_binary,
            "submodule": f.is_submodule,
            "modes": [f.old_mode, f.new_mode],
            "similarity": f.similarity,
            "too_large": f.too_large,
            "generated": f.generated,
            "warnings": list(f.warnings),
            "hunks": [
                {
                    "header": h.header(),
                    "lines": [
                        f"{MARKERS[line.kind]} {line.old_no} {line.new_no} {line.text[:60]}"
                        + (" [no newline]" if line.no_newline else "")
                        for line in h.lines
                    ],
                }
                for h in f.hunks
            ],
        }
        for f in files
    ]


def golden_cases() -> list[Path]:
    return [*sorted(GOLDEN.glob("*.diff")), GOLDEN / "gitlab_entries.json"]


@pytest.mark.parametrize("source", golden_cases(), ids=lambda p: p.stem)
def test_golden(source: Path) -> None:
    if source.suffix == ".diff":
        parsed = parse_git_diff(source.read_bytes())
    else:
        parsed = parse_gitlab_diffs(json.loads(source.read_text()))
    expected_path = source.with_name(source.stem + ".expected.json")
    actual = as_jsonable(parsed)
    if os.environ.get("REVIEWBOT_UPDATE_GOLDEN") == "1":
        expected_path.write_text(json.dumps(actual, indent=1, ensure_ascii=False) + "\n")
    assert actual == json.loads(expected_path.read_text())


def parse_golden(name: str) -> list[FileDiff]:
    return parse_git_diff((GOLDEN / name).read_bytes())


def test_header_lookalike_lines_are_content() -> None:
    [file] = parse_golden("header_lookalikes.diff")
    added = [line.text for line in file.lines() if line.kind is LineKind.ADDED]
    assert added == ["LINE2", "--- x", "+++ y", "@@ fake", "-- not removed"]
    assert file.warnings == ()


def test_rename_pure_and_with_changes() -> None:
    [pure] = parse_golden("rename_pure.diff")
    assert (pure.status, pure.old_path, pure.new_path, pure.hunks) == (
        FileStatus.RENAMED,
        "ren.txt",
        "renamed.txt",
        (),
    )
    [changed] = parse_golden("rename_with_changes.diff")
    assert changed.status is FileStatus.RENAMED and changed.changed_count == 2
    position = position_for(changed, Side.NEW, 2)
    assert position is not None and (position.old_path, position.new_path) == (
        "ren2.txt",
        "renamed2.txt",
    )


def test_new_deleted_binary_mode_submodule() -> None:
    [new] = parse_golden("new_file.diff")
    assert new.status is FileStatus.ADDED and new.added_count == 2 and new.path == "new.txt"
    [deleted] = parse_golden("deleted_file.diff")
    assert deleted.status is FileStatus.DELETED and deleted.path == "del.txt"
    assert deleted.removed_count == 1
    [binary] = parse_golden("binary.diff")
    assert binary.is_binary and binary.hunks == ()
    [mode] = parse_golden("mode_only.diff")
    assert mode.mode_changed and mode.changed_count == 0
    [sub] = parse_golden("submodule.diff")
    assert sub.is_submodule


def test_no_newline_crlf_non_ascii() -> None:
    [nn] = parse_golden("no_newline_at_eof.diff")
    assert all(line.no_newline for line in nn.lines())
    [crlf] = parse_golden("crlf.diff")
    assert all(not line.text.endswith("\r") for line in crlf.lines())
    [utf] = parse_golden("non_ascii_invalid_utf8.diff")
    assert utf.path == "na ïve.txt"
    first = next(utf.lines()).text
    assert first.startswith("näive ") and "\ufffd" in first and first.endswith("café")


def test_empty_and_not_a_diff() -> None:
    assert parse_git_diff("") == []
    assert parse_git_diff("\n\n") == []
    with pytest.raises(ValueError, match="not a unified diff"):
        parse_git_diff("hello world\nthis is prose\n")


def test_truncated_hunk_is_kept_with_a_warning() -> None:
    [file] = parse_git_diff("--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n")
    assert file.changed_count == 2
    assert file.warnings and "cut off" in file.warnings[0]


def test_quoted_paths() -> None:
    assert unquote_git_path('"a/na \\303\\257ve.txt"') == "a/na ïve.txt"
    assert unquote_git_path('"tab\\there"') == "tab\there"
    assert unquote_git_path("plain") == "plain"


def test_gitlab_entries_positions_follow_gitlab_rules() -> None:
    files = parse_gitlab_diffs(json.loads((GOLDEN / "gitlab_entries.json").read_text()))
    user = files[0]
    removed = position_for(user, Side.OLD, 11)
    added = position_for(user, Side.NEW, 11)
    context = position_for(user, Side.NEW, 10)
    assert removed is not None and (removed.old_line, removed.new_line) == (11, None)
    assert added is not None and (added.old_line, added.new_line) == (None, 11)
    assert context is not None and (context.old_line, context.new_line) == (10, 10)
    assert position_for(user, Side.NEW, 99) is None
    assert position_for(user, Side.OLD, 13) is None  # old line 13 is not shown
    assert files[5].too_large and files[6].generated and files[4].is_binary


def test_nearest_changed_line() -> None:
    [file] = parse_golden("plain_unified.diff")
    # context line 3 ("a = 1") is next to removed old 4 / added new 4
    near = nearest_changed_line(file, Side.NEW, 3)
    assert near is not None and near.is_change and near.new_no == 4
    assert nearest_changed_line(file, Side.NEW, 40) is None
    outside = nearest_changed_line(file, Side.NEW, 1, max_distance=3)
    assert outside is not None and outside.is_change


# --------------------------------------------------------------------------------------------
# Properties: random valid diffs


@st.composite
def random_hunks(draw: st.DrawFn) -> tuple[str, list[list[tuple[str, str]]]]:
    """A diff text with several hunks and the (marker, text) lines of each hunk."""
    text_line = st.text(
        alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\n\r"),
        max_size=20,
    )
    hunk_count = draw(st.integers(1, 4))
    old_no = new_no = draw(st.integers(1, 50))
    chunks = ["--- a/f.txt", "+++ b/f.txt"]
    all_hunks = []
    for _ in range(hunk_count):
        body = draw(
            st.lists(
                st.tuples(st.sampled_from(["+", "-", " "]), text_line), min_size=1, max_size=15
            )
        )
        old_count = sum(1 for m, _ in body if m != "+")
        new_count = sum(1 for m, _ in body if m != "-")
        chunks.append(f"@@ -{old_no},{old_count} +{new_no},{new_count} @@")
        chunks += [m + t for m, t in body]
        all_hunks.append(body)
        gap = draw(st.integers(1, 30))
        old_no += old_count + gap
        new_no += new_count + gap
    return "\n".join(chunks) + "\n", all_hunks


@pytest.mark.slow
@given(random_hunks())
@settings(max_examples=examples(200), deadline=None)
def test_property_numbering_and_positions_round_trip(case: tuple[str, list]) -> None:
    text, hunks = case
    [file] = parse_git_diff(text)
    assert len(file.hunks) == len(hunks)
    for hunk, body in zip(file.hunks, hunks, strict=True):
        assert [MARKERS[line.kind] + line.text for line in hunk.lines] == [m + t for m, t in body]
        olds = [line.old_no for line in hunk.lines if line.old_no is not None]
        news = [line.new_no for line in hunk.lines if line.new_no is not None]
        assert olds == list(range(hunk.old_start, hunk.old_start + hunk.old_count))
        assert news == list(range(hunk.new_start, hunk.new_start + hunk.new_count))
        for line in hunk.lines:
            position = position_for(file, line.side, line.number)
            assert position is not None and position.kind is line.kind
            if line.kind is LineKind.ADDED:
                assert (position.old_line, position.new_line) == (None, line.new_no)
            elif line.kind is LineKind.REMOVED:
                assert (position.old_line, position.new_line) == (line.old_no, None)
            else:
                assert (position.old_line, position.new_line) == (line.old_no, line.new_no)
            # every line in a hunk with a change re-anchors to a changed line of that hunk
            if hunk.changed_count:
                near = nearest_changed_line(file, line.side, line.number)
                assert near is not None and near.is_change and near in hunk.lines


@pytest.mark.slow
@given(random_hunks())
@settings(max_examples=examples(100), deadline=None)
def test_property_agrees_with_unidiff(case: tuple[str, list]) -> None:
    text, _ = case
    [ours] = parse_git_diff(text)
    [theirs] = unidiff.PatchSet(text)
    their_lines = [
        (line.line_type, line.source_line_no, line.target_line_no) for h in theirs for line in h
    ]
    our_lines = [(MARKERS[line.kind], line.old_no, line.new_no) for line in ours.lines()]
    assert our_lines == their_lines
