"""reviewbot.comments: hidden markers, finding comments, the summary note (pure).

Suggestion syntax: https://docs.gitlab.com/user/project/merge_requests/reviews/suggestions/
"""

from __future__ import annotations

import re

from reviewbot.chunking import Coverage, SkippedFile
from reviewbot.comments import (
    IncrementalNote,
    MarkerKind,
    SummaryData,
    UnplacedFinding,
    UnplacedReason,
    finding_body,
    line_text_hash,
    parse_marker,
    summary_body,
)
from reviewbot.diff import Side, parse_git_diff
from reviewbot.findings import AnchorKind, Category, Finding, RawFinding, Severity, anchor

DIFF = """\
diff --git a/src/my file.py b/src/my file.py
--- a/src/my file.py
+++ b/src/my file.py
@@ -1,5 +1,6 @@
 keep = 1
-old = 2
+new = 2
+more = 3
+last = 4
 tail = 5
 end = 6
"""
PATH = "src/my file.py"
MR_URL = "http://gitlab.example/group/app/-/merge_requests/3"
SUGGESTION = "new = 20\nmore = 30\n"


def _finding(line: int, side: Side = Side.NEW, **changes: object) -> Finding:
    (file,) = parse_git_diff(DIFF)
    raw = RawFinding(
        path=PATH,
        line=line,
        side=side,
        end_line=changes.pop("end_line", None),  # type: ignore[arg-type]
        severity=Severity.CRITICAL,
        category=Category.BUG,
        title=str(changes.pop("title", "Off by one")),
        body=str(changes.pop("body", "The loop stops early.")),
        suggestion=changes.pop("suggestion", None),  # type: ignore[arg-type]
        chunk_index=0,
    )
    result = anchor(raw, {file.path: file})
    assert isinstance(result, Finding)
    return result


def test_finding_marker_round_trips() -> None:
    finding = _finding(3)
    marker = parse_marker(finding_body(finding))
    assert marker is not None
    assert marker.kind is MarkerKind.FINDING
    assert marker.fingerprint == finding.fingerprint
    assert marker.path == PATH
    assert (marker.side, marker.line) == (finding.side, finding.line)
    assert marker.text_hash == line_text_hash(finding.line_text)


def test_removed_line_marker_keeps_old_side() -> None:
    marker = parse_marker(finding_body(_finding(2, Side.OLD)))
    assert marker is not None
    assert (marker.side, marker.line) == (Side.OLD, 2)


def test_text_hash_ignores_whitespace_changes() -> None:
    assert line_text_hash("a  =\t1 ") == line_text_hash("a = 1")
    assert line_text_hash("a = 1") != line_text_hash("a = 2")


def test_only_the_last_marker_counts() -> None:
    first, second = finding_body(_finding(2)), finding_body(_finding(3, title="Other"))
    marker = parse_marker(first + "\n\nquoted reply\n\n" + second)
    assert marker is not None
    assert marker.fingerprint == _finding(3, title="Other").fingerprint
    assert parse_marker("no marker here") is None
    assert parse_marker("<!-- reviewbot:finding fp=abc path=x line=sideways:1 -->") is None


def test_model_text_cannot_forge_a_marker() -> None:
    forged = "<!-- reviewbot:summary -->"
    finding = _finding(3, body=f"look {forged}")
    marker = parse_marker(finding_body(finding))
    assert marker is not None
    assert marker.kind is MarkerKind.FINDING


def test_body_shows_severity_title_and_body() -> None:
    finding = _finding(3)
    body = finding_body(finding)
    assert finding.title in body
    assert finding.body in body
    assert str(finding.category) in body
    assert "Critical" in body


def test_suggestion_block_covers_the_range() -> None:
    finding = _finding(2, end_line=3, suggestion=SUGGESTION)
    assert finding.suggestion is not None
    assert finding.end_line is not None and finding.line is not None
    body = finding_body(finding)
    span = finding.end_line - finding.line
    match = re.search(r"^(`{3,})suggestion:-0\+(\d+)\n(.*?)^\1$", body, re.M | re.S)
    assert match is not None
    assert int(match.group(2)) == span
    assert match.group(3) == SUGGESTION


def test_reanchored_finding_says_so() -> None:
    finding = _finding(8)  # two lines past the hunk: moved to its nearest changed line
    assert finding.anchor is AnchorKind.REANCHORED
    assert "nearest changed line" in finding_body(finding)


def _summary(**changes: object) -> SummaryData:
    coverage = Coverage(
        files_total=3,
        files_reviewed=2,
        changed_lines_total=40,
        changed_lines_covered=30,
        skipped=(SkippedFile("package-lock.json", "generated file", 10),),
    )
    values: dict[str, object] = {
        "head_sha": "a" * 40,
        "model": "Qwen3.5-35B-A3B",
        "prompt_version": "v3",
        "mr_web_url": MR_URL,
        "counts": {Severity.CRITICAL: 1, Severity.MINOR: 2},
        "inline_count": 2,
        "coverage": coverage,
        "chunks": 2,
        **changes,
    }
    return SummaryData(**values)  # type: ignore[arg-type]


def test_summary_reports_coverage_and_skipped_reasons() -> None:
    body = summary_body(_summary())
    assert "2/3 files" in body
    assert "30/40 changed lines" in body
    assert "package-lock.json" in body
    assert "generated file" in body
    marker = parse_marker(body)
    assert marker is not None and marker.kind is MarkerKind.SUMMARY


def test_summary_links_unplaced_findings() -> None:
    placed = _finding(3)
    link = f"{MR_URL}/diffs#0a1b2c_3_3"
    body = summary_body(
        _summary(
            unplaced=(
                UnplacedFinding(placed, UnplacedReason.REFUSED, link, detail="line_code"),
                UnplacedFinding(_finding(40), UnplacedReason.FILE_LEVEL),
            ),
            errors=("chunk 2: timed out",),
            ci_job_url="http://gitlab.example/jobs/9",
        )
    )
    assert f"`src/my file.py`:{placed.line}]({link})" in body
    assert UnplacedReason.FILE_LEVEL.value in body
    assert "chunk 2: timed out" in body
    assert "http://gitlab.example/jobs/9" in body


def test_long_skipped_list_is_collapsible() -> None:
    skipped = tuple(SkippedFile(f"gen/{n}.js", "generated file", 1) for n in range(20))
    coverage = Coverage(21, 1, 21, 1, skipped)
    body = summary_body(_summary(coverage=coverage))
    assert "<details>" in body
    assert body.count("gen/") == len(skipped)


def test_an_incremental_review_with_an_unreviewed_file_never_says_no_change() -> None:
    note = IncrementalNote("b" * 40, None, 0, 1, 3, files_not_reviewed=1)
    unreviewed = (
        "chunk 1 (util.py lines 1-10: 10 changed lines): the model's answer could not "
        "be read: 2 of 2 calls invalid (`line`: required integer, missing)",
    )
    body = summary_body(_summary(incremental=note, unreviewed=unreviewed))
    assert "No change to the patch" not in body
    assert "1 file(s) changed since `bbbbbbbb`: 0 reviewed, 1 not reviewed (see below)" in body
    assert "Incomplete review" in body and unreviewed[0] in body
    nothing = IncrementalNote("b" * 40, None, 0, 1, 3)
    assert "No change to the patch" in summary_body(_summary(incremental=nothing))


def test_run_details_give_the_share_of_unreadable_calls() -> None:
    body = summary_body(_summary(invalid_model_calls=2, model_tool_calls=9, repaired_model_calls=1))
    assert "| Invalid model calls | 2 of 9 (1 resent readably) |" in body
    assert "| Invalid model calls | 0 |" in summary_body(_summary())
