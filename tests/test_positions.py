"""GitLab positions, line codes and links, on generated diffs (reviewbot.positions).

Rules: https://docs.gitlab.com/api/discussions/#create-a-new-thread-in-the-merge-request-diff
(added line: ``new_line`` only; removed: ``old_line`` only; unchanged: both) and
https://docs.gitlab.com/api/discussions/#parameters-for-multiline-comments (``line_range``).
The line code is ``sha1(path)_old_new`` with GitLab's diff parser counters (lib/gitlab/git.rb
``diff_line_code``, lib/gitlab/diff/parser.rb; gitlab-org/gitlab#323760); the fake GitLab
(tests/fakes/gitlab_server.py) counts them its own way, and both must agree.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewbot.diff import DiffLine, FileDiff, Hunk, LineKind, Side, parse_gitlab_diffs
from reviewbot.findings import AnchorKind, Category, Finding, Severity
from reviewbot.mergerequest import DiffRefs
from reviewbot.positions import diff_link, line_code, line_code_for, note_position, position_for
from tests.fakes.gitlab_server import parse_diff_lines
from tests.hypothesis_profiles import examples

REFS = DiffRefs("b" * 40, "s" * 40, "h" * 40)
WEB_URL = "https://gitlab.example.com/group/app/-/merge_requests/1"
LINE_CODE = re.compile(r"[0-9a-f]{40}_\d+_\d+")
FAKE_SIDE = {LineKind.ADDED: "new", LineKind.REMOVED: "old", LineKind.CONTEXT: None}
PATHS = st.text(
    alphabet=st.characters(categories=("L", "N"), include_characters="/_.- "),
    min_size=1,
    max_size=30,
).filter(lambda path: path.strip() == path and "//" not in path)
TEXT_LINE = st.text(
    alphabet=st.characters(exclude_categories=("Cs", "Cc"), exclude_characters="\n\r"),
    max_size=12,
)


@dataclass(frozen=True)
class Case:
    """A parsed file and the GitLab diff text it came from."""

    file: FileDiff
    diff: str


@st.composite
def gitlab_files(draw: st.DrawFn) -> Case:
    """One GitLab diff entry: a modified, renamed or new file with one to four hunks."""
    new_path = draw(PATHS)
    kind = draw(st.sampled_from(["modified", "renamed", "new"]))
    old_path = draw(PATHS) if kind == "renamed" else new_path
    markers = ["+"] if kind == "new" else ["+", "-", " "]
    old_no = 0 if kind == "new" else draw(st.integers(1, 40))
    new_no = 1 if kind == "new" else old_no + draw(st.integers(-min(old_no - 1, 5), 5))
    hunk_count = 1 if kind == "new" else draw(st.integers(1, 4))
    text: list[str] = []
    for _ in range(hunk_count):
        body = draw(
            st.lists(st.tuples(st.sampled_from(markers), TEXT_LINE), min_size=1, max_size=12)
        )
        old_count = sum(1 for marker, _ in body if marker != "+")
        new_count = sum(1 for marker, _ in body if marker != "-")
        text.append(f"@@ -{old_no},{old_count} +{new_no},{new_count} @@")
        text += [marker + line for marker, line in body]
        gap = draw(st.integers(1, 20))
        old_no, new_no = old_no + old_count + gap, new_no + new_count + gap
    diff = "\n".join(text) + "\n"
    entry = {
        "old_path": old_path,
        "new_path": new_path,
        "diff": diff,
        "new_file": kind == "new",
        "renamed_file": kind == "renamed",
        "deleted_file": False,
    }
    [file] = parse_gitlab_diffs([entry])
    return Case(file, diff)


def finding_on(
    file: FileDiff, side: Side, line: int | None, end_line: int | None = None
) -> Finding:
    return Finding(
        path=file.path,
        old_path=file.old_path,
        side=side,
        line=line,
        end_line=end_line,
        severity=Severity.MINOR,
        category=Category.BUG,
        title="t",
        body="b",
        suggestion=None,
        anchor=AnchorKind.EXACT if line is not None else AnchorKind.FILE,
        anchor_note="",
        line_text="",
        fingerprint="f" * 16,
        chunk_index=0,
        reported_line=line or 1,
        reported_side=side,
    )


def counters(hunk: Hunk) -> list[tuple[int, int]]:
    """GitLab's (old, new) counters of each line, walking the hunk: both start at the header's
    starts; a line moves the old counter unless it is added, the new one unless removed."""
    pairs = []
    old_pos, new_pos = hunk.old_start, hunk.new_start
    for line in hunk.lines:
        pairs.append((old_pos, new_pos))
        old_pos += line.kind is not LineKind.ADDED
        new_pos += line.kind is not LineKind.REMOVED
    return pairs


@pytest.mark.slow
@given(gitlab_files())
@settings(max_examples=examples(200), deadline=None)
def test_every_line_is_addressed_by_the_numbers_of_its_kind(case: Case) -> None:
    for line in case.file.lines():
        position = position_for(case.file, line.side, line.number)
        assert position is not None and position.kind is line.kind
        assert (position.old_path, position.new_path) == (case.file.old_path, case.file.new_path)
        if line.kind is LineKind.ADDED:
            assert (position.old_line, position.new_line) == (None, line.new_no)
        elif line.kind is LineKind.REMOVED:
            assert (position.old_line, position.new_line) == (line.old_no, None)
        else:
            assert (position.old_line, position.new_line) == (line.old_no, line.new_no)
            assert line.old_no is not None
            assert position_for(case.file, Side.OLD, line.old_no) == position


def line_addressed(file: FileDiff, old_line: int | None, new_line: int | None) -> DiffLine | None:
    """The diff line a GitLab position's ``old_line``/``new_line`` names, as GitLab reads it."""
    if old_line is not None and new_line is not None:
        old, new = file.line_at(Side.OLD, old_line), file.line_at(Side.NEW, new_line)
        return old if old is new else None
    if new_line is not None:
        return file.line_at(Side.NEW, new_line)
    return None if old_line is None else file.line_at(Side.OLD, old_line)


@pytest.mark.slow
@given(gitlab_files())
@settings(max_examples=examples(200), deadline=None)
def test_a_position_leads_back_to_its_line(case: Case) -> None:
    for line in case.file.lines():
        position = note_position(REFS, case.file, finding_on(case.file, line.side, line.number))
        assert position["position_type"] == "text" and "line_range" not in position
        assert (position["base_sha"], position["start_sha"], position["head_sha"]) == (
            REFS.base_sha,
            REFS.start_sha,
            REFS.head_sha,
        )
        found = line_addressed(case.file, position.get("old_line"), position.get("new_line"))
        assert found is line


@pytest.mark.slow
@given(gitlab_files())
@settings(max_examples=examples(200), deadline=None)
def test_line_codes_are_sha1_of_the_new_path_and_gitlabs_counters(case: Case) -> None:
    digest = hashlib.sha1(case.file.new_path.encode("utf-8")).hexdigest()
    fake_lines = parse_diff_lines(case.diff)
    ours = list(case.file.lines())
    assert len(fake_lines) == len(ours)
    for hunk in case.file.hunks:
        for line, (old_pos, new_pos) in zip(hunk.lines, counters(hunk), strict=True):
            code = line_code_for(case.file, line.side, line.number)
            assert code == f"{digest}_{old_pos}_{new_pos}" and LINE_CODE.fullmatch(code)
            if line.kind is not LineKind.ADDED:
                assert old_pos == line.old_no
            if line.kind is not LineKind.REMOVED:
                assert new_pos == line.new_no
    for line, fake in zip(ours, fake_lines, strict=True):
        assert fake.kind == FAKE_SIDE[line.kind]
        expected = line_code(case.file.new_path, fake.old_pos, fake.new_pos)
        assert line_code_for(case.file, line.side, line.number) == expected


@pytest.mark.slow
@given(gitlab_files(), st.data())
@settings(max_examples=examples(200), deadline=None)
def test_a_range_names_both_ends_by_line_code(case: Case, data: st.DataObject) -> None:
    side = data.draw(st.sampled_from(list(Side)))
    shown = sorted({line.number_on(side) for line in case.file.lines()} - {None})
    if not shown:
        return
    start = data.draw(st.sampled_from(shown))
    end = data.draw(st.sampled_from([n for n in shown if n >= start]))
    finding = finding_on(case.file, side, start, end)
    for draft in (False, True):
        position = note_position(REFS, case.file, finding, draft=draft)
        ends = position["line_range"]
        for key, number in (("start", start), ("end", end)):
            assert ends[key]["line_code"] == line_code_for(case.file, side, number)
            assert ends[key]["type"] == side.value
            point = position_for(case.file, side, number)
            assert point is not None
            if draft:  # the draft notes API refuses line numbers here (gitlab-org/gitlab#571619)
                assert set(ends[key]) == {"line_code", "type"}
            else:
                assert (ends[key]["old_line"], ends[key]["new_line"]) == (
                    point.old_line,
                    point.new_line,
                )


@pytest.mark.slow
@given(gitlab_files(), st.sampled_from(list(Side)), st.integers(1, 500))
@settings(max_examples=examples(200), deadline=None)
def test_a_line_the_diff_does_not_show_keeps_the_number_it_was_given(
    case: Case, side: Side, number: int
) -> None:
    if case.file.line_at(side, number) is not None:
        return
    finding = finding_on(case.file, side, number, number + 1)
    position = note_position(REFS, case.file, finding)
    key, other = ("old_line", "new_line") if side is Side.OLD else ("new_line", "old_line")
    assert position[key] == number and other not in position and "line_range" not in position
    assert line_code_for(case.file, side, number) is None
    assert diff_link(WEB_URL, case.file, finding) is None


@given(gitlab_files())
@settings(max_examples=examples(100), deadline=None)
def test_a_link_points_at_the_line_code(case: Case) -> None:
    for line in case.file.lines():
        finding = finding_on(case.file, line.side, line.number)
        code = line_code_for(case.file, line.side, line.number)
        assert diff_link(WEB_URL, case.file, finding) == f"{WEB_URL}/diffs#{code}"
        assert diff_link("", case.file, finding) is None
    assert diff_link(WEB_URL, case.file, finding_on(case.file, Side.NEW, None)) is None
    assert diff_link(WEB_URL, None, finding_on(case.file, Side.NEW, 1)) is None


def test_a_file_level_finding_has_paths_and_no_line() -> None:
    [file] = parse_gitlab_diffs(
        [{"old_path": "a.py", "new_path": "b.py", "diff": "@@ -1 +1 @@\n-x\n+y\n"}]
    )
    position = note_position(REFS, file, finding_on(file, Side.NEW, None))
    assert position == {
        "position_type": "text",
        "base_sha": REFS.base_sha,
        "start_sha": REFS.start_sha,
        "head_sha": REFS.head_sha,
        "old_path": "a.py",
        "new_path": "b.py",
    }


def test_added_line_after_a_removed_one_carries_the_next_old_counter() -> None:
    [file] = parse_gitlab_diffs(
        [{"old_path": "f.py", "new_path": "f.py", "diff": "@@ -5 +5 @@\n-old\n+new\n"}]
    )
    digest = hashlib.sha1(b"f.py").hexdigest()
    assert line_code_for(file, Side.OLD, 5) == f"{digest}_5_5"
    assert line_code_for(file, Side.NEW, 5) == f"{digest}_6_5"
