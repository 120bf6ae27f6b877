"""reviewbot.interdiff: which hunks of a new MR version were reviewed before (pure).

Edge cases of issue 13: a file added, removed or renamed between versions, a hunk that moved,
a rebase (the base changed, the patch did not), a force-push that rewrote history.
"""

from __future__ import annotations

from reviewbot.diff import Side, parse_git_diff
from reviewbot.interdiff import DiffDigest, compare, digest

SETTINGS = "s1"


def two_hunks(first_at: int = 1, second_at: int = 20, second: str = "+    return b\n") -> str:
    return (
        "diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n"
        f"@@ -{first_at},2 +{first_at},3 @@\n def a():\n+    check()\n     return a\n"
        f"@@ -{second_at},2 +{second_at + 1},3 @@\n def b():\n{second}     pass\n"
    )


UTIL = "diff --git a/util.py b/util.py\nnew file mode 100644\n--- /dev/null\n+++ b/util.py\n@@ -0,0 +1,2 @@\n+X = 1\n+Y = 2\n"  # noqa: E501


def test_the_same_patch_needs_no_review_and_maps_every_line() -> None:
    before = digest(parse_git_diff(two_hunks() + UTIL), SETTINGS)
    result = compare(before, parse_git_diff(two_hunks() + UTIL))
    assert result.nothing_to_review
    assert sorted(result.reviewed_before) == ["app.py", "util.py"]
    assert result.carried_lines == 4
    assert result.carry("app.py", Side.NEW, 2, None) == (2, None)
    assert result.carry("util.py", Side.NEW, 1, 2) == (1, 2)
    assert result.carry("util.py", Side.NEW, None, None) == (None, None)  # file-level


def test_a_rebase_moves_hunks_and_carries_findings_to_the_new_lines() -> None:
    before = digest(parse_git_diff(two_hunks(first_at=1, second_at=20)), SETTINGS)
    rebased = parse_git_diff(two_hunks(first_at=11, second_at=40))  # target grew above
    result = compare(before, rebased)
    assert result.nothing_to_review
    assert result.carry("app.py", Side.NEW, 2, None) == (12, None)  # "+    check()"
    assert result.carry("app.py", Side.NEW, 22, None) == (42, None)  # "+    return b"
    assert result.carry("app.py", Side.OLD, 20, None) == (40, None)  # "def b():" context


def test_a_changed_hunk_is_reviewed_and_its_findings_do_not_carry() -> None:
    before = digest(parse_git_diff(two_hunks()), SETTINGS)
    pushed = parse_git_diff(two_hunks(second="+    return b or None\n"))
    result = compare(before, pushed)
    [partial] = result.to_review
    assert [h.new_start for h in partial.hunks] == [21]  # only the changed hunk
    assert result.carry("app.py", Side.NEW, 22, None) is None
    assert result.carry("app.py", Side.NEW, 2, None) == (2, None)  # the unchanged one still
    assert result.carry("app.py", Side.NEW, None, None) is None  # the file changed
    assert result.reviewed_before == []


def test_a_file_added_between_versions_is_reviewed_whole() -> None:
    before = digest(parse_git_diff(two_hunks()), SETTINGS)
    result = compare(before, parse_git_diff(two_hunks() + UTIL))
    assert [f.new_path for f in result.to_review] == ["util.py"]
    assert result.to_review[0].hunks == parse_git_diff(UTIL)[0].hunks


def test_a_file_removed_between_versions_leaves_nothing_to_carry() -> None:
    before = digest(parse_git_diff(two_hunks() + UTIL), SETTINGS)
    result = compare(before, parse_git_diff(two_hunks()))
    assert result.nothing_to_review
    assert result.carry("util.py", Side.NEW, 1, None) is None


def test_a_file_renamed_between_versions_is_new_work() -> None:
    before = digest(parse_git_diff(UTIL), SETTINGS)
    renamed = UTIL.replace("util.py", "helpers.py")
    result = compare(before, parse_git_diff(renamed))
    assert [f.new_path for f in result.to_review] == ["helpers.py"]


def test_a_force_push_with_another_patch_is_reviewed() -> None:
    before = digest(parse_git_diff(UTIL), SETTINGS)
    rewritten = UTIL.replace("+Y = 2", "+Y = 3")
    result = compare(before, parse_git_diff(rewritten))
    assert [f.new_path for f in result.to_review] == ["util.py"]


def twin_hunks(second: str) -> str:
    return (
        "diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n"
        "@@ -1,2 +1,3 @@\n def a():\n+    check()\n     pass\n"
        f"@@ -20,2 +21,3 @@\n def a():\n{second}     pass\n"
    )


def test_identical_hunks_match_one_each() -> None:
    before = digest(parse_git_diff(twin_hunks("+    check()\n")), SETTINGS)
    assert before.files[0].hunks[0].hash == before.files[0].hunks[1].hash
    result = compare(before, parse_git_diff(twin_hunks("+    other()\n")))
    [partial] = result.to_review
    assert len(partial.hunks) == 1 and partial.hunks[0].new_start == 21
    assert result.carry("app.py", Side.NEW, 2, None) == (2, None)


def test_digest_round_trips_through_json_and_refuses_other_versions() -> None:
    before = digest(parse_git_diff(two_hunks() + UTIL), SETTINGS)
    assert DiffDigest.from_json(before.to_json()) == before
    assert DiffDigest.from_json({**before.to_json(), "version": 0}) is None
    assert DiffDigest.from_json({"version": 1}) is None
