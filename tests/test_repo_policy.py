"""The repository's review policy (reviewbot.repo_policy), on plain data: the target branch's
``.reviewbot.toml`` bytes applied to the settings, and what the summary is told. End to end
(read from the target branch, never the MR's head): tests/test_run.py."""

from __future__ import annotations

from reviewbot.config import MAX_CONFIG_FILE_BYTES, Settings
from reviewbot.repo_policy import REPO_CONFIG_FILE, repo_policy

BASE = Settings(exclude=("vendor/*",), min_severity="info")
CHANGED = (
    "this merge request changes .reviewbot.toml: the review used the target branch's version; "
    "the change applies once it is merged"
)


def test_without_a_file_the_settings_stay() -> None:
    assert repo_policy(BASE, None, changed_by_mr=False).settings is BASE
    assert repo_policy(BASE, None, changed_by_mr=False).warnings == ()


def test_the_target_branchs_file_is_applied_on_top_of_the_instance() -> None:
    text = '[reviewbot]\nexclude = ["gen/*"]\nmin_severity = "major"\n'
    policy = repo_policy(BASE, text.encode(), changed_by_mr=False)
    assert policy.settings.exclude == ("vendor/*", "gen/*")
    assert policy.settings.min_severity == "major"
    assert policy.warnings == ()


DEEP_NESTING = 50_000  # far past Python's recursion limit, a 100 KB file


def test_a_change_in_the_mr_is_said_and_not_applied() -> None:
    policy = repo_policy(BASE, None, changed_by_mr=True)
    assert policy.settings is BASE
    assert policy.warnings == (CHANGED,)


def test_a_broken_or_forbidden_file_is_ignored_with_its_reason() -> None:
    for text, reason in (
        ("[[[", "is not valid TOML"),
        ("gitlab_token = 'x'\n", "cannot be set from the repository"),
        # tomllib recurses: this was a RecursionError that failed the whole review
        ("exclude = " + "[" * DEEP_NESTING + "]" * DEEP_NESTING + "\n", "nested too deep"),
        ("language = '" + "x" * (MAX_CONFIG_FILE_BYTES + 1) + "'\n", "larger than"),
    ):
        policy = repo_policy(BASE, text.encode(), changed_by_mr=True)
        assert policy.settings is BASE
        [changed, ignored] = policy.warnings
        assert changed == CHANGED
        assert ignored.startswith(f"ignored {REPO_CONFIG_FILE}: ") and reason in ignored


def test_a_file_saved_with_a_byte_order_mark_is_applied() -> None:
    text = '[reviewbot]\nexclude = ["gen/*"]\n'
    for data in (text.encode("utf-16"), text.encode("utf-8-sig"), text.encode("utf-32")):
        policy = repo_policy(BASE, data, changed_by_mr=False)
        assert policy.settings.exclude == ("vendor/*", "gen/*") and policy.warnings == ()


def test_a_file_that_is_not_text_is_named_and_not_used() -> None:
    for data in (b"exclude = ['caf\xe9']\n", "[reviewbot]\n".encode("utf-16-le"), b"\x00\x01"):
        policy = repo_policy(BASE, data, changed_by_mr=False)
        assert policy.settings is BASE
        assert policy.warnings == (".reviewbot.toml is not UTF-8 text; not used",)
