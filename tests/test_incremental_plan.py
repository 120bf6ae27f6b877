"""reviewbot.incremental on plain data: from the earlier review as stored (its digest and
findings) and the MR's current diff, what to review now and which findings carry over to which
lines. End to end (the fake GitLab and vLLM, the store): tests/test_incremental.py.
"""

from __future__ import annotations

from dataclasses import replace

from reviewbot.diff import FileDiff, Side, parse_git_diff
from reviewbot.findings import (
    AnchorKind,
    Category,
    FindingState,
    Severity,
)
from reviewbot.incremental import CARRIED_CHUNK, CarriedOver, EarlierReview, plan_increment
from reviewbot.interdiff import digest
from reviewbot.stored_findings import StoredFinding, restored_finding

SETTINGS = "settings-1"
EARLIER_HEAD = "e" * 40
MODEL = "served-model"


def app_diff(first_at: int = 1, second_at: int = 20, second: str = "+    return b\n") -> str:
    return (
        "diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n"
        f"@@ -{first_at},2 +{first_at},3 @@\n def a():\n+    check()\n     return a\n"
        f"@@ -{second_at},2 +{second_at + 1},3 @@\n def b():\n{second}     pass\n"
    )


GENERATED = (
    "diff --git a/gen/api.py b/gen/api.py\nnew file mode 100644\n--- /dev/null\n"
    "+++ b/gen/api.py\n@@ -0,0 +1,1 @@\n+X = 1\n"
)
GONE = (
    "diff --git a/old.py b/old.py\ndeleted file mode 100644\n--- a/old.py\n+++ /dev/null\n"
    "@@ -1,1 +0,0 @@\n-Y = 2\n"
)
SKIPPED = {"gen/api.py": "generated"}


def stored(line: int | None, **overrides: object) -> StoredFinding:
    values: dict[str, object] = {
        "fingerprint": f"fp-{line}",
        "path": "app.py",
        "side": Side.NEW,
        "line": line,
        "end_line": None,
        "severity": Severity.MAJOR,
        "category": Category.BUG,
        "title": "Check the input",
        "body": "It is never checked.",
        "suggestion": "    check(a)",
        "anchor": AnchorKind.EXACT if line is not None else AnchorKind.FILE,
        "state": FindingState.POSTED,
        "discussion_id": "d" * 40,
        "note_id": 5,
    }
    return StoredFinding(**{**values, **overrides})  # type: ignore[arg-type]


def earlier_of(
    files: list[FileDiff], findings: list[StoredFinding], settings: str = SETTINGS
) -> EarlierReview:
    return EarlierReview(3, EARLIER_HEAD, MODEL, digest(files, settings).to_json(), findings)


def test_without_an_earlier_review_everything_is_reviewed() -> None:
    files = parse_git_diff(app_diff() + GENERATED)
    increment = plan_increment(files, SKIPPED, SETTINGS, None)
    assert increment.files == files and increment.carried == []
    assert increment.carried_over is None and increment.needs_model


def test_an_earlier_review_that_cannot_be_built_upon_means_a_full_review() -> None:
    files = parse_git_diff(app_diff())
    other_settings = earlier_of(files, [stored(2)], settings="settings-2")
    damaged = replace(other_settings, digest={"version": 1, "files": "?"})
    another_version = replace(other_settings, digest={"version": 999})
    for earlier in (other_settings, damaged, another_version, replace(damaged, digest=None)):
        increment = plan_increment(files, {}, SETTINGS, earlier)
        assert increment.carried_over is None and increment.files == files, earlier.digest


def test_the_same_patch_again_carries_everything_and_needs_no_model() -> None:
    files = parse_git_diff(app_diff() + GENERATED)
    findings = [stored(2), stored(22), stored(None)]
    increment = plan_increment(files, SKIPPED, SETTINGS, earlier_of(files, findings))
    assert [f.path for f in increment.files] == ["gen/api.py"]  # skipped files stay listed
    assert not increment.needs_model
    assert [(f.line, f.fingerprint) for f in increment.carried] == [
        (2, "fp-2"),
        (22, "fp-22"),
        (None, "fp-None"),
    ]
    # app.py alone: the skipped gen/api.py is in the plan again, never carried over too
    assert increment.carried_over == CarriedOver(
        since_head=EARLIER_HEAD, review_id=3, files=1, lines=2, findings=3
    )
    assert increment.earlier_model == MODEL


def test_a_rebase_moves_carried_findings_to_their_current_lines() -> None:
    before = parse_git_diff(app_diff(first_at=1, second_at=20))
    now = parse_git_diff(app_diff(first_at=11, second_at=40))  # the target grew above
    increment = plan_increment(now, {}, SETTINGS, earlier_of(before, [stored(2), stored(22)]))
    assert not increment.needs_model
    [first, second] = increment.carried
    assert (first.line, second.line) == (12, 42)
    assert first.line_text == "    check()" and second.line_text == "    return b"
    assert first.suggestion == "    check(a)"  # what was stored comes back
    assert {f.chunk_index for f in increment.carried} == {CARRIED_CHUNK}


def test_a_changed_hunk_is_reviewed_and_its_findings_are_not_carried() -> None:
    before = parse_git_diff(app_diff())
    now = parse_git_diff(app_diff(second="+    return b + 1\n"))
    findings = [stored(2), stored(22), stored(None)]
    increment = plan_increment(now, {}, SETTINGS, earlier_of(before, findings))
    assert increment.needs_model
    [changed] = increment.files
    assert [h.new_start for h in changed.hunks] == [21]  # only the changed hunk
    assert [f.fingerprint for f in increment.carried] == ["fp-2"]  # not 22, not file-level
    assert increment.carried_over is not None
    assert (increment.carried_over.files, increment.carried_over.lines) == (0, 1)


def test_paths_to_read_leave_out_skipped_and_deleted_files() -> None:
    files = parse_git_diff(app_diff() + GENERATED + GONE)
    increment = plan_increment(files, SKIPPED, SETTINGS, None)
    assert increment.paths_to_read() == ["app.py"]


def test_a_restored_finding_is_the_stored_one_on_the_current_diff() -> None:
    [file] = parse_git_diff(app_diff())
    finding = restored_finding(stored(2, end_line=3), file, 2, 3, chunk_index=CARRIED_CHUNK)
    assert (finding.path, finding.old_path, finding.side) == ("app.py", "app.py", Side.NEW)
    assert (finding.line, finding.end_line, finding.line_text) == (2, 3, "    check()")
    assert (finding.title, finding.body, finding.suggestion) == (
        "Check the input",
        "It is never checked.",
        "    check(a)",
    )
    assert (finding.reported_line, finding.reported_side) == (2, Side.NEW)
    file_level = restored_finding(stored(None), file, None, None, chunk_index=CARRIED_CHUNK)
    assert file_level.is_file_level and file_level.line_text == "" and file_level.reported_line == 1
