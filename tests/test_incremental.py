"""Incremental reviews end to end (issue 13 section 1, issue 10 item 12): a push reviews only
what changed, a rebase or the same head again costs no model call, findings on unchanged code
keep their threads; --full, a new model or new review settings review everything again.

Runs against the fake GitLab and the fake vLLM over HTTP, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import update

from reviewbot.commands import main
from reviewbot.comments import SHORT_SHA_CHARS
from reviewbot.mr import RunOptions
from reviewbot.prompts import prompt_version
from reviewbot.store import Store
from reviewbot.store.models import Review
from tests.fakes.vllm_server import FakeVLLM
from tests.mr_world import (
    BOT_TOKEN,
    FAST_NOTES_PER_MINUTE,
    FEATURE_APP,
    PROJECT,
    UTIL,
    World,
    commit_on_feature,
    git,
    world,  # noqa: F401
)
from tests.store_fixtures import store_url  # noqa: F401

UTIL_WITH_EVAL = UTIL + "\n\ndef parse_any(text):\n    return eval(text)\n"


def chat_requests(world: World) -> list[dict]:  # noqa: F811
    return list(world.vllm.requests)


def prompt_text(request: dict) -> str:
    return json.dumps(request["messages"])


def diff_notes(world: World) -> list[dict]:  # noqa: F811
    return [
        d["notes"][0]
        for d in world.gitlab.discussions(PROJECT, 1)
        if d["notes"][0]["type"] == "DiffNote"
    ]


def summary(world: World) -> str:  # noqa: F811
    [note] = [n for n in world.gitlab.notes(PROJECT, 1) if "reviewbot:summary" in n["body"]]
    return str(note["body"])


def test_the_same_head_again_makes_no_model_call_and_keeps_everything(world: World) -> None:  # noqa: F811
    first = world.run()
    calls = len(chat_requests(world))
    again = world.run()
    assert len(chat_requests(world)) == calls  # 0 model calls
    assert again.review.carried is not None and again.review.carried.findings == 3
    assert again.posted == [] and len(again.already_posted) == 3
    assert again.resolved_threads == 0 and len(diff_notes(world)) == 3
    assert again.review.coverage == first.review.coverage  # 16/16: reviewed earlier
    assert "No change to the patch since" in summary(world)
    assert "3 finding(s), 3 posted inline" in summary(world)


def test_full_reviews_everything_again(world: World) -> None:  # noqa: F811
    world.run()
    calls = len(chat_requests(world))
    again = world.run(RunOptions(full=True))
    assert len(chat_requests(world)) > calls
    assert again.review.carried is None and len(again.already_posted) == 3


def test_a_push_to_one_file_reviews_only_that_file(world: World) -> None:  # noqa: F811
    earlier = world.run().head_sha
    calls = len(chat_requests(world))
    head = commit_on_feature(world.repo, {"util.py": UTIL_WITH_EVAL}, "util grows")
    world.gitlab.push(PROJECT, 1, head)
    report = world.run()
    new_calls = chat_requests(world)[calls:]
    assert new_calls and all("util.py" in prompt_text(r) for r in new_calls)
    assert not any("def parse(text)" in prompt_text(r) for r in new_calls)  # app.py not sent
    assert [f.path for f in report.posted] == ["util.py"]  # the new finding
    assert len(report.already_posted) == 3 and report.resolved_threads == 0
    carried = report.review.carried
    assert carried is not None and (carried.files, carried.findings) == (1, 3)
    coverage = report.review.coverage
    assert coverage.changed_lines_covered == coverage.changed_lines_total
    assert incremental_line(world, earlier, head) in summary(world)


def incremental_line(world: World, earlier: str, head: str) -> str:  # noqa: F811
    """The summary's sentence for a review of one changed file, the other unchanged, linking
    GitLab's compare view of the changes since the earlier review's head."""
    compare = f"{world.gitlab.url}/{PROJECT}/-/compare/{earlier}...{head}"
    return (
        f"Incremental review: 1 file(s) changed since `{earlier[:SHORT_SHA_CHARS]}` "
        f"([changes since]({compare})): reviewed; 1 unchanged: 3 finding(s) kept. "
        "Comment `/reviewbot review --full` for a full review."
    )


def rebase_feature(world: World, files: dict[str, str], message: str) -> str:  # noqa: F811
    """Commit ``files`` on main, rebase the feature branch onto it, push: the new head."""
    git(world.repo, "checkout", "-q", "main")
    for name, text in files.items():
        (world.repo / name).write_text(text)
    git(world.repo, "add", "-A")
    git(world.repo, "commit", "-qm", message)
    git(world.repo, "checkout", "-q", "feature")
    git(world.repo, "rebase", "-q", "main")
    head = git(world.repo, "rev-parse", "HEAD")
    world.gitlab.push(PROJECT, 1, head)
    return head


def test_a_rebase_that_keeps_the_patch_makes_no_model_call(world: World) -> None:  # noqa: F811
    world.run()
    calls = len(chat_requests(world))
    rebase_feature(world, {"README.md": "# app\n\nNow with docs.\n"}, "docs on main")
    report = world.run()
    assert len(chat_requests(world)) == calls  # 0 model calls
    assert report.posted == [] and report.resolved_threads == 0
    assert len(report.already_posted) == 3


BIG = "".join(f"value_{n} = {n}\n" for n in range(1, 31))


def test_a_rebase_that_moves_lines_carries_findings_to_their_new_lines(
    world: World,  # noqa: F811
) -> None:
    rebase_feature(world, {"big.py": BIG}, "big on main")
    risky = BIG.replace("value_25 = 25", "value_25 = eval(text)")
    world.gitlab.push(PROJECT, 1, commit_on_feature(world.repo, {"big.py": risky}, "risky"))
    first = world.run()
    [on_big] = [f for f in first.posted if f.path == "big.py"]
    assert on_big.line == 25
    calls = len(chat_requests(world))
    header = "".join(f"# header {n}\n" for n in range(5))
    rebase_feature(world, {"big.py": header + BIG}, "five lines on top")  # far from the hunk
    report = world.run()
    assert len(chat_requests(world)) == calls  # the patch is the same: 0 model calls
    [moved] = [f for f in report.already_posted if f.path == "big.py"]
    assert (moved.line, moved.line_text) == (30, "value_25 = eval(text)")
    assert report.resolved_threads == 0 and report.posted == []


def test_a_fix_resolves_its_thread_and_reviews_only_the_fixed_hunk(world: World) -> None:  # noqa: F811
    world.run()
    fixed = FEATURE_APP.replace("return eval(text)", "return json.loads(text)")
    head = commit_on_feature(world.repo, {"app.py": fixed}, "fix eval")
    world.gitlab.push(PROJECT, 1, head)
    report = world.run()
    assert report.resolved_threads == 1 and report.posted == []
    assert {f.title for f in report.already_posted} == {
        f.title for f in report.findings if "eval" not in f.title.lower()
    }


def test_another_model_reviews_everything(world: World) -> None:  # noqa: F811
    world.run()
    with FakeVLLM(model="Qwen/Qwen3.5-27B") as other:
        report = world.run(llm_base_url=other.base_url)
        assert other.requests  # a full review by the new model
    assert report.review.carried is None


def test_new_review_settings_review_everything(world: World) -> None:  # noqa: F811
    world.run()
    calls = len(chat_requests(world))
    report = world.run(min_severity="minor")
    assert len(chat_requests(world)) > calls and report.review.carried is None


# A prompt version no review on record was made with (a template or the tool schema changed).
OLDER_PROMPT_VERSION = "v0+00000000"


def test_a_new_prompt_version_reviews_everything(world: World) -> None:  # noqa: F811
    first = world.run()
    # reviewbot was upgraded since: the review on record was made with another prompt
    assert prompt_version() != OLDER_PROMPT_VERSION
    store = Store.from_url(world.database_url)
    try:
        with store.engine.begin() as connection:
            connection.execute(
                update(Review)
                .where(Review.id == first.review_id)
                .values(prompt_version=OLDER_PROMPT_VERSION)
            )
    finally:
        store.close()
    calls = len(chat_requests(world))
    report = world.run()
    assert len(chat_requests(world)) > calls and report.review.carried is None
    assert report.posted == [] and len(report.already_posted) == 3
    # recorded with the current prompt version: the next run of the same head builds on it
    calls = len(chat_requests(world))
    again = world.run()
    assert len(chat_requests(world)) == calls and again.review.carried is not None


def cli_run(world: World, config: Path, *flags: str) -> dict:  # noqa: F811
    """`reviewbot run 1 --json` with ``flags``, configured through the environment only."""
    result = CliRunner().invoke(
        main,
        ["run", "1", "--project", PROJECT, "--json", *flags],
        env={
            "REVIEWBOT_CONFIG": str(config),
            "REVIEWBOT_GITLAB_URL": world.gitlab.url,
            "REVIEWBOT_GITLAB_TOKEN": BOT_TOKEN,
            "REVIEWBOT_LLM_BASE_URL": world.vllm.base_url,
            "REVIEWBOT_DATABASE_URL": world.database_url,
            "REVIEWBOT_MIN_SEVERITY": "info",
            "REVIEWBOT_GITLAB_NOTES_PER_MINUTE": str(FAST_NOTES_PER_MINUTE),
        },
    )
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_run_full_and_force_review_everything_again(world: World, tmp_path: Path) -> None:  # noqa: F811
    config = tmp_path / "empty.toml"
    config.write_text("")
    first = cli_run(world, config)
    assert first["incremental"] is None and len(first["posted"]) == 3
    calls = len(chat_requests(world))
    again = cli_run(world, config)  # the same head: nothing to review
    assert len(chat_requests(world)) == calls
    assert again["incremental"] is not None and again["incremental"]["findings_kept"] == 3
    for flag in ("--force", "--full"):
        calls = len(chat_requests(world))
        forced = cli_run(world, config, flag)
        assert len(chat_requests(world)) > calls, flag  # the model saw the whole diff again
        assert forced["incremental"] is None, flag
        assert forced["posted"] == [] and len(forced["already_posted"]) == 3, flag


def squash_feature(world: World, files: dict[str, str], message: str) -> str:  # noqa: F811
    """Rewrite the feature branch as one new commit on main with ``files`` changed (nothing:
    the same tree), force-push it: the new head."""
    git(world.repo, "checkout", "-q", "feature")
    git(world.repo, "reset", "-q", "--soft", "main")
    for name, text in files.items():
        (world.repo / name).write_text(text)
    git(world.repo, "add", "-A")
    git(world.repo, "commit", "-qm", message)
    head = git(world.repo, "rev-parse", "HEAD")
    world.gitlab.push(PROJECT, 1, head)
    return head


def unresolved_threads(world: World) -> int:  # noqa: F811
    return sum(not note.get("resolved") for note in diff_notes(world))


def test_a_force_push_that_keeps_the_patch_makes_no_model_call(world: World) -> None:  # noqa: F811
    docs = commit_on_feature(world.repo, {"README.md": "# app\n\nParses text.\n"}, "docs")
    world.gitlab.push(PROJECT, 1, docs)
    world.run()
    calls = len(chat_requests(world))
    tree = git(world.repo, "rev-parse", "feature^{tree}")
    head = squash_feature(world, {}, "Add parsing (squashed)")
    assert head != docs and git(world.repo, "rev-parse", f"{head}^{{tree}}") == tree
    assert git(world.repo, "rev-parse", f"{head}~1") == git(world.repo, "rev-parse", "main")
    report = world.run()
    assert len(chat_requests(world)) == calls  # 0 model calls
    assert report.posted == [] and len(report.already_posted) == 3
    assert report.resolved_threads == 0 and unresolved_threads(world) == 3
    compare = f"{world.gitlab.url}/{PROJECT}/-/compare/{docs}...{head}"
    assert (
        f"No change to the patch since `{docs[:SHORT_SHA_CHARS]}` ([changes since]({compare})) "
        "was reviewed: no model call, 3 finding(s) kept."
    ) in summary(world)


def test_a_force_push_that_changes_one_file_reviews_only_that_file(world: World) -> None:  # noqa: F811
    world.run()
    calls = len(chat_requests(world))
    squash_feature(world, {"util.py": UTIL_WITH_EVAL}, "Add parsing, util grows (squashed)")
    report = world.run()
    new_calls = chat_requests(world)[calls:]
    assert new_calls and all("util.py" in prompt_text(r) for r in new_calls)
    assert not any("def parse(text)" in prompt_text(r) for r in new_calls)  # app.py not sent
    assert [f.path for f in report.posted] == ["util.py"]
    assert len(report.already_posted) == 3 and report.resolved_threads == 0
    assert unresolved_threads(world) == 4
    carried = report.review.carried
    assert carried is not None and (carried.files, carried.findings) == (1, 3)


def test_an_incomplete_review_is_not_built_upon(world: World) -> None:  # noqa: F811
    world.vllm.add_faults(*["stream_cut_mid_call"] * 20)
    failed = world.run()
    assert failed.review.unreviewed
    world.vllm.clear_faults()
    calls = len(chat_requests(world))
    report = world.run()
    assert len(chat_requests(world)) > calls and report.review.carried is None
    assert len(report.posted) == 3


# Identical lines in two hunks of one file (issue 10 item 2) stay two findings when only one
# of the hunks is reviewed again: they are counted in the whole file, not in the changed part.
BLOCK = "    try:\n        return load(path)\n    except:\n        pass\n"
FILLER = "".join(f"value_{n} = {n}\n" for n in range(20))
LOAD = "    return load(path)\n"
TWINS_BASE = f"def first(path):\n{LOAD}\n{FILLER}\ndef second(path):\n{LOAD}"
ONE_BLOCK = f"def first(path):\n{BLOCK}\n{FILLER}\ndef second(path):\n{LOAD}"
TWO_BLOCKS = f"def first(path):\n{BLOCK}\n{FILLER}\ndef second(path):\n{BLOCK}"


def twins_notes(world: World) -> list[tuple[int, bool]]:  # noqa: F811
    return sorted(
        (n["position"]["new_line"], bool(n.get("resolved")))
        for n in diff_notes(world)
        if n["position"]["new_path"] == "twins.py"
    )


def test_an_identical_block_pushed_later_gets_its_own_comment(world: World) -> None:  # noqa: F811
    rebase_feature(world, {"twins.py": TWINS_BASE}, "twins on main")
    world.gitlab.push(PROJECT, 1, commit_on_feature(world.repo, {"twins.py": ONE_BLOCK}, "one"))
    world.run()
    first_except = ONE_BLOCK.splitlines().index("    except:") + 1
    assert twins_notes(world) == [(first_except, False)]
    world.gitlab.push(PROJECT, 1, commit_on_feature(world.repo, {"twins.py": TWO_BLOCKS}, "two"))
    report = world.run()
    assert report.review.carried is not None  # an incremental review
    second_except = TWO_BLOCKS.splitlines().index("    except:", first_except) + 1
    assert [(f.path, f.line) for f in report.posted] == [("twins.py", second_except)]
    assert twins_notes(world) == [(first_except, False), (second_except, False)]
    assert "5 finding(s), 5 posted inline" in summary(world)  # 3 on app.py, 2 on twins.py


def test_identical_blocks_keep_two_threads_when_one_hunk_changes(world: World) -> None:  # noqa: F811
    rebase_feature(world, {"twins.py": TWINS_BASE}, "twins on main")
    world.gitlab.push(PROJECT, 1, commit_on_feature(world.repo, {"twins.py": TWO_BLOCKS}, "two"))
    first = world.run()
    assert len([f for f in first.posted if f.path == "twins.py"]) == 2
    touched = TWO_BLOCKS.replace("def second(path):\n", "def second(path):\n    # retry later\n")
    world.gitlab.push(PROJECT, 1, commit_on_feature(world.repo, {"twins.py": touched}, "touch"))
    report = world.run()
    assert report.review.carried is not None and report.posted == []
    on_twins = sorted(f.line for f in report.findings if f.path == "twins.py")
    assert len(on_twins) == 2 and len(set(on_twins)) == 2
    assert [resolved for _, resolved in twins_notes(world)] == [False, False]
    assert "5 finding(s), 5 posted inline" in summary(world)
