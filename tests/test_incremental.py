"""Incremental reviews end to end (issue 13 section 1, issue 10 item 12): a push reviews only
what changed, a rebase or the same head again costs no model call, findings on unchanged code
keep their threads; --full, a new model or new review settings review everything again.

Runs against the fake GitLab and the fake vLLM over HTTP, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import update

from reviewbot.commands import main
from reviewbot.comments import SHORT_SHA_CHARS
from reviewbot.mr import ReviewIncompleteError, RunOptions, require_complete
from reviewbot.prompts import prompt_version
from reviewbot.store import Store
from reviewbot.store.models import Review
from tests.builders import diff_notes
from tests.fakes.vllm_server import FakeVLLM, MalformedCalls
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

pytestmark = pytest.mark.slow  # measured: see docs/development.md

UTIL_WITH_EVAL = UTIL + "\n\ndef parse_any(text):\n    return eval(text)\n"


def chat_requests(world: World) -> list[dict]:  # noqa: F811
    return list(world.vllm.requests)


def prompt_text(request: dict) -> str:
    return json.dumps(request["messages"])


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
            "REVIEWBOT_ANALYZERS": ",",  # none: the model's findings alone
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


# Two risky lines pushed in v2 (issue 17): the fake reports eval( and == None.
UTIL_RISKY = (
    UTIL + "\n\ndef parse_any(text):\n    return eval(text)\n"
    "\n\ndef empty(value):\n    return value == None\n"
)


def cli_run_exit_code(world: World) -> int:  # noqa: F811
    """`reviewbot run 1` configured through the environment: its exit code."""
    return cli_run_text(world).exit_code


def cli_run_text(world: World) -> Result:  # noqa: F811
    """`reviewbot run 1` (its text output) configured through the environment."""
    return CliRunner().invoke(
        main,
        ["run", "1", "--project", PROJECT],
        env={
            "REVIEWBOT_GITLAB_URL": world.gitlab.url,
            "REVIEWBOT_GITLAB_TOKEN": BOT_TOKEN,
            "REVIEWBOT_LLM_BASE_URL": world.vllm.base_url,
            "REVIEWBOT_DATABASE_URL": world.database_url,
            "REVIEWBOT_MIN_SEVERITY": "info",
            "REVIEWBOT_GITLAB_NOTES_PER_MINUTE": str(FAST_NOTES_PER_MINUTE),
            "REVIEWBOT_ANALYZERS": ",",  # none: the model's findings alone
        },
    )


def test_hunks_whose_answer_could_not_be_read_are_reviewed_on_the_next_push(
    world: World,  # noqa: F811
) -> None:
    """v1 reviewed; v2 adds two risky lines and the model answers only unreadable calls (also
    after a repair turn): exit 1, nothing marked reviewed; v3, a rebase with the model readable
    again, sends those hunks to the model and posts both findings (issue 17 item 1)."""
    world.run()
    world.gitlab.push(PROJECT, 1, commit_on_feature(world.repo, {"util.py": UTIL_RISKY}, "v2"))
    world.vllm.malformed = MalformedCalls(kinds=("missing_line", "wrong_type"), repair="same")
    assert cli_run_exit_code(world) == 1
    assert "could not be read" in summary(world) and "util.py" in summary(world)
    assert not [n for n in diff_notes(world) if n["position"]["new_path"] == "util.py"]
    world.vllm.malformed = None
    calls = len(chat_requests(world))
    rebase_feature(world, {"README.md": "# app\n\nNow with docs.\n"}, "v3: docs on main")
    report = require_complete(world.run())
    new_calls = chat_requests(world)[calls:]
    assert new_calls and all("util.py" in prompt_text(r) for r in new_calls)
    risky_lines = [world.line_of(UTIL_RISKY, "eval("), world.line_of(UTIL_RISKY, "== None")]
    assert sorted((f.path, f.line) for f in report.posted) == [("util.py", n) for n in risky_lines]
    assert "could not be read" not in summary(world)


def test_readable_calls_of_a_partly_unreadable_answer_are_posted_and_asked_again(
    world: World,  # noqa: F811
) -> None:
    """v2's answer has one unreadable call (the first, every time): the readable finding is
    posted, the review is incomplete; the next run asks for util.py again and posts the other."""
    world.run()
    world.gitlab.push(PROJECT, 1, commit_on_feature(world.repo, {"util.py": UTIL_RISKY}, "v2"))
    world.vllm.add_faults(*["missing_line"] * 40)
    partial = world.run()
    with pytest.raises(ReviewIncompleteError, match="could not be read: 1 of 2 calls invalid"):
        require_complete(partial)
    [posted] = [f for f in partial.posted if f.path == "util.py"]
    assert posted.line == world.line_of(UTIL_RISKY, "== None")
    note = summary(world)
    assert (
        "- chunk 1 (util.py lines 1-10: 10 changed lines): the model's answer could not be "
        "read: 1 of 2 calls invalid (`line`: required integer, missing)"
    ) in note
    assert ": 0 reviewed, 1 not reviewed (see below); 1 unchanged: 3 finding(s) kept." in note
    assert "No change to the patch" not in note
    world.vllm.clear_faults()
    calls = len(chat_requests(world))
    report = require_complete(world.run())
    assert any("util.py" in prompt_text(r) for r in chat_requests(world)[calls:])
    assert [(f.path, f.line) for f in report.posted] == [
        ("util.py", world.line_of(UTIL_RISKY, "eval("))
    ]
    assert [f.path for f in report.already_posted].count("util.py") == 1


@pytest.mark.parametrize("repair", ["same", "fix"])
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_at_a_30_percent_unreadable_rate_no_finding_is_lost_for_good(
    world: World,  # noqa: F811
    seed: int,
    repair: str,
) -> None:
    """The issue's measurement (1-2 of 4 findings lost for good in 4 of 4 seeds), as a rule:
    a model that writes 30% of its calls unreadably (every seed here breaks one to three of
    the five) and repeats its mistakes when told, or fixes them. A run is either complete with
    every finding, or incomplete; the run after the model is fixed posts every finding, and
    none twice."""
    world.gitlab.push(PROJECT, 1, commit_on_feature(world.repo, {"util.py": UTIL_RISKY}, "v1"))
    world.vllm.malformed = MalformedCalls(rate=0.3, seed=seed, repair=repair)
    first = world.run()
    assert first.review.complete == (repair == "fix")
    everything = {
        ("app.py", world.line_of(FEATURE_APP, needle)) for needle in ("eval(", "== None", "except:")
    } | {("util.py", world.line_of(UTIL_RISKY, needle)) for needle in ("eval(", "== None")}
    posted = {(f.path, f.line) for f in first.posted}
    if first.review.complete:
        assert posted == everything
    else:
        assert posted < everything and "could not be read" in summary(world)
    world.vllm.malformed = None
    again = require_complete(world.run())
    assert posted | {(f.path, f.line) for f in again.posted} == everything
    assert not posted & {(f.path, f.line) for f in again.posted}  # nothing posted twice
    assert len(diff_notes(world)) == len(everything)


ANSWERS_FOR_EVERY_TRY = 40  # faults enough for every try and repair turn of the v2 review


def _deep_arguments(vllm: FakeVLLM) -> None:
    vllm.add_faults(*["deep_arguments"] * ANSWERS_FOR_EVERY_TRY)


# Seed 0 at rate 0.5 writes v2's eval( finding without `line` and its == None one right, in
# every answer to the diff (the answers to repair turns follow the repair policy).
ONE_OF_TWO_BROKEN = {"rate": 0.5, "seed": 0, "kinds": ("missing_line",)}


def _repairs_that_repeat_what_was_read(vllm: FakeVLLM) -> None:
    vllm.malformed = MalformedCalls(**ONE_OF_TWO_BROKEN, repair="repeat")


def _repairs_on_another_path(vllm: FakeVLLM) -> None:
    vllm.malformed = MalformedCalls(**ONE_OF_TWO_BROKEN, repair="unrelated")


def _json_that_is_no_findings_in_content_mode(vllm: FakeVLLM) -> None:
    vllm.tool_parser, vllm.honour_response_format = False, False
    vllm.add_faults(*["bare_json_value"] * ANSWERS_FOR_EVERY_TRY)


def _readable_again(vllm: FakeVLLM) -> None:
    vllm.clear_faults()
    vllm.malformed = None
    vllm.tool_parser, vllm.honour_response_format = True, True


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        (_deep_arguments, "arguments are JSON nested deeper than 32 levels"),
        (_repairs_that_repeat_what_was_read, "`line`: required integer, missing"),
        (_repairs_on_another_path, "`line`: required integer, missing"),
        (
            _json_that_is_no_findings_in_content_mode,
            'JSON content must be an object with a "findings" list, got a number',
        ),
    ],
    ids=["deep-arguments", "repair-repeats", "repair-elsewhere", "content-json-value"],
)
def test_an_answer_read_wrong_before_is_not_a_review_and_is_sent_again(
    world: World,  # noqa: F811
    model: Any,
    reason: str,
) -> None:
    """The audit of issue 17 item 1: arguments nested 3,000 deep (a RecursionError), a repair
    answered with the call already read or with one on another path (counted as repairs), and
    content-mode JSON that is no findings object ("no findings"). v2 adds two risky lines in
    util.py: `reviewbot run` exits 1 with one clear line, the summary says which lines were
    not reviewed and why; the next run sends util.py again and posts what v2 did not."""
    world.run()
    world.gitlab.push(PROJECT, 1, commit_on_feature(world.repo, {"util.py": UTIL_RISKY}, "v2"))
    model(world.vllm)
    failed = cli_run_text(world)
    assert failed.exit_code == 1 and "Traceback" not in failed.output, failed.output
    note = summary(world)
    assert (
        "- chunk 1 (util.py lines 1-10: 10 changed lines): the model's answer could not be "
        "read" in note
    )
    assert reason in note and "No change to the patch" not in note
    posted_before = {
        n["position"]["new_line"]
        for n in diff_notes(world)
        if n["position"]["new_path"] == "util.py"
    }
    _readable_again(world.vllm)
    calls = len(chat_requests(world))
    report = require_complete(world.run())
    assert any("util.py" in prompt_text(r) for r in chat_requests(world)[calls:])
    risky = {world.line_of(UTIL_RISKY, "eval("), world.line_of(UTIL_RISKY, "== None")}
    on_util = [
        n["position"]["new_line"]
        for n in diff_notes(world)
        if n["position"]["new_path"] == "util.py"
    ]
    assert sorted(on_util) == sorted(risky)  # each once
    assert {f.line for f in report.posted if f.path == "util.py"} == risky - posted_before
    assert "could not be read" not in summary(world)


def test_the_same_head_again_counts_a_skipped_file_once(world: World) -> None:  # noqa: F811
    """A skipped file (a lock file here) is neither reviewed earlier nor now: the summary of the
    same head again says what the first one said (2/3 files), never 3/4 (issue 32 item 8)."""
    lock = "left-pad@1.0.0:\n  version 1.0.0\n"
    head = commit_on_feature(world.repo, {"yarn.lock": lock}, "a lock file")
    world.gitlab.push(PROJECT, 1, head)
    first = world.run()
    assert "**Coverage:** 2/3 files, 16/18 changed lines." in summary(world)
    again = world.run()
    assert "**Coverage:** 2/3 files, 16/18 changed lines." in summary(world)
    assert again.review.coverage == first.review.coverage
    # app.py and util.py were reviewed before; the lock file is skipped again, not carried
    assert again.review.carried is not None and again.review.carried.files == 2
