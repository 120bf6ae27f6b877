"""The installed ``reviewbot`` reviews: ``plan``, ``review``, ``run``, ``ci``, ``learnings`` and
``reviews``, each typed as a user types it (``tests/installed/commands.py``).

The commands run from the venv the wheel was installed into without extras, from a directory
outside the checkout, against the fake GitLab and the fake vLLM over real HTTP on 127.0.0.1 and
a SQLite file (the default database of a user; ``test_commands_service`` takes the webhook
service to PostgreSQL). The world is MR !1 of ``tests/mr_world.py``: the fake model reports
``eval(``, ``== None`` and a bare ``except:`` in ``app.py``, so every count below is exact. The
test process reads what the commands did from the fakes and from the database.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reviewbot.findings import FindingState
from reviewbot.store import Store
from tests.builders import diff_notes, summary_notes
from tests.fakes.silent_server import closed_port
from tests.fakes.vllm_server import FakeVLLM
from tests.installed.artifacts import Installed
from tests.installed.commands import reviewbot, succeeded, user_env, world_env
from tests.installed.tier import INSTALLED
from tests.mr_world import FEATURE_APP, PROJECT, World, git, make_repo
from tests.test_ci import (
    CHANGED_LINES,
    JOB_URL,
    CiWorld,
    check_codequality_shape,
    check_posted_on_mr_version,
    ci_world,  # noqa: F401  (fixture)
    expected_lines,
    isolated_env,  # noqa: F401  (fixture of ci_world)
)
from tests.test_learnings_end_to_end import NONE_LEARNING

pytestmark = INSTALLED

FINDINGS = len(expected_lines())  # eval(, == None, bare except: in app.py


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """The world's database: a SQLite file, what a user gets without setting one."""
    return f"sqlite:///{tmp_path / 'reviewbot.db'}"


def test_plan_cuts_a_git_range_into_prompts_offline(installed: Installed, outside: Path) -> None:
    """In a git repository, with the model server's port refusing connections: the plan needs
    no server, and every changed line lands in the one chunk."""
    repo = make_repo(outside / "repo")
    with closed_port() as port:
        env = user_env(outside, REVIEWBOT_LLM_BASE_URL=f"http://127.0.0.1:{port}/v1")
        plan = json.loads(
            succeeded(reviewbot(installed, repo, env, "plan", "--git", "main..feature", "--json"))
        )
        table = succeeded(reviewbot(installed, repo, env, "plan", "--git", "main..feature"))
    coverage = plan["coverage"]
    assert coverage["changed_lines_total"] == coverage["changed_lines_covered"] == CHANGED_LINES
    assert (coverage["files_total"], coverage["files_reviewed"]) == (2, 2)
    [chunk] = plan["chunks"]
    assert [f["path"] for f in chunk["files"]] == ["app.py", "util.py"] and chunk["tokens"] > 0
    assert plan["budget"]["max_model_len"] == 65536  # offline: the default context
    assert plan["token_counter"].startswith("qwen-bpe")  # the tokenizer the wheel depends on
    assert f"Coverage: {CHANGED_LINES}/{CHANGED_LINES} changed lines in 2/2 files" in table


def test_review_of_a_git_range_and_of_a_diff_file_prints_the_findings(
    installed: Installed, outside: Path
) -> None:
    repo = make_repo(outside / "repo")
    diff = outside / "change.diff"
    diff.write_text(git(repo, "diff", "main", "feature") + "\n")
    eval_line = next(n for n, line in enumerate(FEATURE_APP.splitlines(), 1) if "eval(" in line)
    with FakeVLLM() as vllm:
        env = user_env(outside, REVIEWBOT_LLM_BASE_URL=vllm.base_url)
        text = succeeded(
            reviewbot(
                installed, repo, env, "review", "--git", "main..feature", "--min-severity", "info"
            )
        )
        from_file = json.loads(
            succeeded(reviewbot(installed, outside, env, "review", "--diff", diff, "--json"))
        )
        bodies = list(vllm.requests)
    assert "app.py" in text and f"new line {eval_line}: [critical] security" in text
    assert f"{FINDINGS} findings" in text and "1 chunks" in text
    found = {(f["path"], f["line"]) for f in from_file["findings"]}
    assert found == expected_lines()
    assert all(f["anchor"] == "exact" and f["side"] == "new" for f in from_file["findings"])
    [call] = from_file["calls"]
    assert call["outcome"] == "ok" and call["prompt_tokens"] > 0
    # two reviews, one chunk each, with the bot's own tool
    assert len(bodies) == 2
    assert all(b["tools"][0]["function"]["name"] == "report_finding" for b in bodies)


def test_run_posts_once_and_reviews_shows_what_was_recorded(
    installed: Installed, outside: Path, world: World
) -> None:
    env = world_env(world, outside)
    command = ("run", "1", "--project", PROJECT, "--json")
    first = json.loads(succeeded(reviewbot(installed, outside, env, *command)))
    assert len(first["posted"]) == FINDINGS and first["already_posted"] == []
    notes = diff_notes(world)
    assert {(n["position"]["new_path"], n["position"]["new_line"]) for n in notes} == (
        expected_lines()
    )
    assert all("reviewbot:finding" in n["body"] for n in notes)
    [summary] = summary_notes(world)
    assert summary["id"] == first["summary_note_id"]
    assert f"{FINDINGS} finding(s), {FINDINGS} posted inline" in summary["body"]

    again = json.loads(succeeded(reviewbot(installed, outside, env, *command)))
    assert again["posted"] == [] and sorted(again["already_posted"]) == sorted(first["posted"])
    assert len(diff_notes(world)) == FINDINGS  # nothing posted twice
    assert [n["id"] for n in summary_notes(world)] == [summary["id"]]  # edited in place

    store = Store.from_url(world.database_url)
    try:
        review = store.review(first["review_id"])
        stored = store.findings(first["review_id"])
    finally:
        store.close()
    assert review["status"] == "succeeded" and review["head_sha"] == first["head_sha"]
    assert {f["state"] for f in stored} == {FindingState.POSTED.value} and len(stored) == FINDINGS

    listed = json.loads(succeeded(reviewbot(installed, outside, env, "reviews", "list", "--json")))
    assert [r["id"] for r in listed] == [again["review_id"], first["review_id"]]  # newest first
    shown = json.loads(
        succeeded(
            reviewbot(installed, outside, env, "reviews", "show", str(first["review_id"]), "--json")
        )
    )
    assert shown["review"]["status"] == "succeeded"
    assert {f["fingerprint"] for f in shown["findings"]} == set(first["posted"])
    assert shown["llm_calls"] and all(c["prompt_tokens"] > 0 for c in shown["llm_calls"])


def test_ci_in_a_merge_request_pipeline_posts_and_writes_the_code_quality_report(
    installed: Installed,
    outside: Path,
    ci_world: CiWorld,  # noqa: F811
) -> None:
    """The GitLab CI job: a detached checkout of the head, GitLab's CI_* variables, the files
    read from the checkout, a throw-away database (the user data folder)."""
    checkout = ci_world.clone("checkout")
    git(checkout, "checkout", "-q", ci_world.head_sha)
    report, summary = checkout / "gl-code-quality-report.json", checkout / "summary.md"
    env = user_env(outside, **ci_world.env(checkout))
    succeeded(
        reviewbot(installed, checkout, env, "ci", "--codequality", report, "--summary", summary)
    )
    check_posted_on_mr_version(ci_world)
    assert ci_world.raw_file_requests() == []  # the contents came from the checkout
    [note] = ci_world.summary_notes()
    assert JOB_URL in note["body"] and summary.read_text() == note["body"]
    issues = json.loads(report.read_text())
    check_codequality_shape(issues)
    assert {(i["location"]["path"], i["location"]["lines"]["begin"]) for i in issues} == (
        expected_lines()
    )
    # a retried job, with a new throw-away database: the hidden markers prevent repeats
    retry_env = user_env(outside / "retry", **ci_world.env(checkout))
    succeeded(reviewbot(installed, checkout, retry_env, "ci"))
    assert len(ci_world.diff_notes()) == FINDINGS and len(ci_world.summary_notes()) == 1


def test_a_learning_added_and_listed_suppresses_its_finding_in_the_next_run(
    installed: Installed, outside: Path, world: World
) -> None:
    env = world_env(world, outside)
    learnings = ("learnings", "add", "--project", PROJECT, "--path", "app.py")
    made = json.loads(
        succeeded(
            reviewbot(
                installed, outside, env, *learnings, "--category", "bug", "--json", NONE_LEARNING
            )
        )
    )
    assert made["status"] == "active" and made["excludes"] and made["project_id"] == 7
    listed = json.loads(
        succeeded(
            reviewbot(installed, outside, env, "learnings", "list", "--project", PROJECT, "--json")
        )
    )
    assert [item["id"] for item in listed] == [made["id"]]
    assert listed[0]["text"] == NONE_LEARNING
    run = json.loads(
        succeeded(reviewbot(installed, outside, env, "run", "1", "--project", PROJECT, "--json"))
    )
    bodies = [n["body"] for n in diff_notes(world)]
    assert len(bodies) == FINDINGS - 1 and not any("None" in body for body in bodies)
    store = Store.from_url(world.database_url)
    try:
        [quiet] = [
            f
            for f in store.findings(run["review_id"])
            if f["state"] == FindingState.SUPPRESSED.value
        ]
    finally:
        store.close()
    assert quiet["category"] == "bug" and quiet["learning_id"] == made["id"]
