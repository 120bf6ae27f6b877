"""Acceptance: three MRs reviewed, people react, a push, a merge -> `feedback sync` -> `report`.

Everything over real HTTP against the fake GitLab and the fake vLLM, on SQLite and (when
REVIEWBOT_TEST_POSTGRES_URL is set) PostgreSQL. The fake model reports fixed patterns
(tests/fakes/vllm_server.py), so every count below is exact:

- !1 (app.py): ``eval(`` (security), ``== None`` (bug, with a suggestion), bare ``except:``
  (error-handling). alice 👍 the eval comment and replies in its thread; bob 👎 the None
  comment; alice resolves the except thread; a push then rewrites the ``== None`` line.
- !2 (jobs.py): ``eval(`` (security) and ``time.sleep(`` (performance); bob 👍 the eval
  comment; the MR is merged with both threads open and the lines unchanged.
- !3 (config.py): a hard-coded secret (security) and ``!= None`` (bug, with a suggestion);
  carol 👍 then takes it back on the secret comment; alice applies the suggestion.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from reviewbot.app import App
from reviewbot.commands import main
from reviewbot.mr import RunOptions, run_merge_request
from tests.mr_world import BOT_TOKEN, FEATURE_APP, PROJECT, World, commit_on_feature, git

pytestmark = pytest.mark.slow  # measured: see docs/development.md

PROJECT_ID = 7
USERS = {"alice": "glpat-alice", "bob": "glpat-bob", "carol": "glpat-carol"}
JOBS = """import time


def parse(text):
    return eval(text)


def wait():
    time.sleep(5)
"""
CONFIG = """def settings(value):
    password = "hunter22"
    if value != None:
        return value
    return password
"""


def _branch(world: World, name: str, files: dict[str, str]) -> None:
    git(world.repo, "checkout", "-q", "main")
    git(world.repo, "checkout", "-qb", name)
    for path, text in files.items():
        (world.repo / path).write_text(text)
    git(world.repo, "add", "-A")
    git(world.repo, "commit", "-qm", name)


def _api(world: World, user: str, method: str, path: str, **data: Any) -> Any:
    answer = requests.request(
        method,
        f"{world.gitlab.url}/api/v4/projects/{PROJECT_ID}{path}",
        headers={"PRIVATE-TOKEN": USERS[user]},
        json=data or None,
        timeout=10,
    )
    answer.raise_for_status()
    return answer.json()


def _threads(world: World, iid: int) -> dict[str, dict[str, Any]]:
    """The bot's threads of an MR by the category in their first note's heading."""
    found = {}
    for discussion in world.gitlab.discussions(PROJECT, iid):
        first = discussion["notes"][0]
        if first["type"] == "DiffNote":
            key = next(
                word
                for word in ("eval", "None", "except", "sleep", "secret")
                if word in first["body"]
            )
            found[key] = {"id": discussion["id"], "note_id": first["id"]}
    return found


@pytest.fixture
def three_mrs(world: World) -> World:
    for user, token in USERS.items():
        world.gitlab.add_user(user, token=token)
    _branch(world, "jobs", {"jobs.py": JOBS})
    _branch(world, "config", {"config.py": CONFIG})
    world.gitlab.add_mr_from_git(PROJECT, world.repo, "main", "jobs", iid=2, title="Jobs")
    world.gitlab.add_mr_from_git(PROJECT, world.repo, "main", "config", iid=3, title="Config")
    with App(world.settings()) as app:
        for iid in (1, 2, 3):
            run_merge_request(app, PROJECT, iid, RunOptions())
    return world


def _react(world: World) -> None:
    gitlab = world.gitlab
    first, second, third = _threads(world, 1), _threads(world, 2), _threads(world, 3)
    assert set(first) == {"eval", "None", "except"}
    assert set(second) == {"eval", "sleep"} and set(third) == {"secret", "None"}
    # !1: votes, a reply, a resolution, then a push that rewrites the `== None` line
    gitlab.add_award_emoji(PROJECT, 1, first["eval"]["note_id"], "thumbsup", "alice")
    gitlab.add_award_emoji(PROJECT, 1, first["eval"]["note_id"], "rocket", "bob")  # not a vote
    gitlab.add_award_emoji(PROJECT, 1, first["None"]["note_id"], "thumbsdown", "bob")
    gitlab.add_award_emoji(PROJECT, 1, first["None"]["note_id"], "thumbsup", "reviewbot")
    _api(
        world,
        "alice",
        "POST",
        f"/merge_requests/1/discussions/{first['eval']['id']}/notes",
        body="Good catch, fixing.",
    )
    _api(
        world,
        "alice",
        "PUT",
        f"/merge_requests/1/discussions/{first['except']['id']}",
        resolved=True,
    )
    fixed = FEATURE_APP.replace("if items == None:", "if items is None:")
    commit_on_feature(world.repo, {"app.py": fixed}, "use is None")
    gitlab.push(PROJECT, 1, "feature")
    # !2: a vote, then merged with every thread open and every line as it was
    gitlab.add_award_emoji(PROJECT, 2, second["eval"]["note_id"], "thumbsup", "bob")
    gitlab.merge(PROJECT, 2, "bob")
    # !3: a vote taken back later (see the test), a suggestion applied
    gitlab.add_award_emoji(PROJECT, 3, third["secret"]["note_id"], "thumbsup", "carol")
    gitlab.apply_suggestion(PROJECT, 3, third["None"]["note_id"], "alice")


def _cli(world: World, *args: str) -> Any:
    env = {
        "REVIEWBOT_GITLAB_URL": world.gitlab.url,
        "REVIEWBOT_GITLAB_TOKEN": BOT_TOKEN,
        "REVIEWBOT_DATABASE_URL": world.database_url,
    }
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def _report(world: World, output: Path) -> dict[str, Any]:
    now = datetime.now(UTC)
    since, until = (now - timedelta(hours=1)).isoformat(), (now + timedelta(hours=1)).isoformat()
    _cli(world, "report", "--since", since, "--until", until, "--output", str(output))
    return json.loads((output / "report.json").read_text())


def _remove_vote(world: World, iid: int, note_id: int, username: str) -> None:
    """carol takes her 👍 back (the fake keeps awards on the note, as GitLab does)."""
    with world.gitlab._lock:
        note = world.gitlab._note(world.gitlab._mr(PROJECT, iid), note_id)
        note.awards = [a for a in note.awards if a["user"]["username"] != username]


def test_feedback_sync_then_report_counts_exactly(three_mrs: World, tmp_path: Path) -> None:
    world = three_mrs
    _react(world)
    synced = _cli(world, "feedback", "sync", "--since", "1d").output
    # one line per MR with its request count: MR + discussions + awards per comment
    # (+ one compare for !1, whose findings were reviewed at an older head)
    assert f"{PROJECT}!1: 6 requests, 3 findings, " in synced
    assert f"{PROJECT}!2: 4 requests, 2 findings, " in synced
    assert f"{PROJECT}!3: 4 requests, 2 findings, " in synced
    assert "3 merge requests reviewed since" in synced

    report = _report(world, tmp_path / "first")
    assert report["totals"] == {
        "reviews": 3,
        "reviews_by_status": {"succeeded": 3},
        "mrs": 3,
        "findings": 7,
        "findings_posted": 7,
        "model_calls": 3,
        "prompt_tokens": report["totals"]["prompt_tokens"],
        "completion_tokens": report["totals"]["completion_tokens"],
        "cached_tokens": report["totals"]["cached_tokens"],
    }
    assert report["feedback"] == {
        "thumbs_up": 3,
        "thumbs_down": 1,
        "addressed": 1,
        "resolved_by_human": 2,
        "replied": 1,
        "replies": 1,
        "suggestion_applied": 1,
        "deleted": 0,
        "ignored": 2,
    }
    # acceptance 3 / (3 + 1); addressed 1 of the 5 findings whose MR moved on (!1 pushed,
    # !2 merged; !3 still at the reviewed head)
    assert report["rates"] == {"acceptance": 0.75, "addressed": 0.2}
    by_category = {row["category"]: row for row in report["by_category"]}
    assert {
        c: (r["findings"], r["thumbs_up"], r["thumbs_down"], r["addressed"])
        for c, r in by_category.items()
    } == {
        "security": (3, 3, 0, 0),
        "bug": (2, 0, 1, 1),
        "error-handling": (1, 0, 0, 0),
        "performance": (1, 0, 0, 0),
    }
    # one model and one prompt version: their rows have by_category's shape and all the counts
    fields = set(by_category["security"]) - {"category"}
    counted = ("findings", "findings_posted", "thumbs_up", "thumbs_down", "addressed")
    for dimension, value in (("model", world.vllm.model), ("prompt_version", "v1+")):
        [row] = report[f"by_{dimension}"]
        assert set(row) == fields | {dimension} and row[dimension].startswith(value)
        assert [row[name] for name in counted] == [7, 7, 3, 1, 1]
        assert (row["acceptance"], row["addressed_rate"]) == (0.75, 0.2)
    assert report["latency"]["ttft_ms"]["count"] == 3
    assert report["slo"]["ttft_p95_target_ms"] == 800.0  # no --slo-ttft-ms: the default
    assert report["slo"]["pass"] is True
    assert report["previous"]["totals"]["reviews"] == 0
    assert report["previous"]["rates"] == {"acceptance": None, "addressed": None}

    # a second sync adds nothing; carol's 👍 taken back is recorded once, as a revocation
    again = _cli(world, "feedback", "sync").output
    assert "0 new outcomes recorded" in again
    secret = _threads(world, 3)["secret"]["note_id"]
    _remove_vote(world, 3, secret, "carol")
    assert "1 new outcomes recorded" in _cli(world, "feedback", "sync").output
    assert "0 new outcomes recorded" in _cli(world, "feedback", "sync").output
    after = _report(world, tmp_path / "second")
    assert (after["feedback"]["thumbs_up"], after["rates"]["acceptance"]) == (2, 2 / 3)
    markdown = (tmp_path / "second" / "report.md").read_text()
    assert f"{world.gitlab.url}/{PROJECT}/-/merge_requests/1" in markdown
    assert "| 👍 | 2 | 0 | ▲ 2 |" in markdown


def test_sync_interrupted_after_one_mr_keeps_it_and_resumes(three_mrs: World) -> None:
    from reviewbot.feedback import sync_feedback

    world = three_mrs
    _react(world)
    since = datetime.now(UTC) - timedelta(days=1)

    def stop(_done: object) -> None:
        raise KeyboardInterrupt

    with App(world.settings()) as app:
        with pytest.raises(KeyboardInterrupt):
            sync_feedback(app.store, app.gitlab(), since=since, now=datetime.now(UTC), on_done=stop)
        kept = len(app.store.feedback(project=PROJECT))
        assert kept > 0
        resumed = sync_feedback(app.store, app.gitlab(), since=since, now=datetime.now(UTC))
        assert [mr.iid for mr in resumed.merge_requests] == [3, 2, 1]
        assert resumed.merge_requests[0].recorded == 0  # the interrupted run had saved it
        assert kept + resumed.recorded == len(app.store.feedback(project=PROJECT))


def test_sync_of_one_project_leaves_the_others_alone(world: World) -> None:
    """`feedback sync --project` by path or by id reads and records that project's MRs only."""
    other, other_id = "group/lib", PROJECT_ID + 1
    world.gitlab.add_project(other, project_id=other_id)
    world.gitlab.add_mr_from_git(other, world.repo, "main", "feature", iid=1, title="Lib")
    with App(world.settings()) as app:
        for project in (PROJECT, other):
            run_merge_request(app, project, 1, RunOptions())
            [first, *_] = [
                d["notes"][0]
                for d in world.gitlab.discussions(project, 1)
                if d["notes"][0]["type"] == "DiffNote"
            ]
            world.gitlab.add_award_emoji(project, 1, first["id"], "thumbsup", "alice")
        store = app.store
        mine = _cli(world, "feedback", "sync", "--project", PROJECT).output
        assert f"{PROJECT}!1: " in mine and f"{other}!1" not in mine
        assert "1 merge requests reviewed since" in mine and "1 new outcomes recorded" in mine
        assert [f["value"] for f in store.feedback(project=PROJECT)] == ["thumbsup"]
        assert store.feedback(project=other) == []
        theirs = _cli(world, "feedback", "sync", "--project", str(other_id)).output
        assert f"{other}!1: " in theirs and f"{PROJECT}!1" not in theirs
        assert [f["value"] for f in store.feedback(project=other)] == ["thumbsup"]
        assert len(store.feedback(project=PROJECT)) == 1


def test_a_dry_run_is_marked_and_never_counted_in_the_report(world: World, tmp_path: Path) -> None:
    """`run --dry-run` posts nothing: its review is recorded as a dry run, and the report
    counts only what reviews that post found (issue 32 item 8: 2 findings shown for 1, 2.0 per
    MR)."""
    with App(world.settings()) as app:
        dry = run_merge_request(app, PROJECT, 1, RunOptions(dry_run=True))
        assert dry.dry_run and len(dry.posted) == 3
        assert world.gitlab.discussions(PROJECT, 1) == []  # nothing posted
        run_merge_request(app, PROJECT, 1, RunOptions())
        rows = sorted(app.store.reviews(project=PROJECT), key=lambda row: row["id"])
        assert [(row["status"], row["dry_run"]) for row in rows] == [
            ("succeeded", True),
            ("succeeded", False),
        ]
    threads = world.gitlab.discussions(PROJECT, 1)
    assert len([d for d in threads if d["notes"][0]["type"] == "DiffNote"]) == 3
    report = _report(world, tmp_path / "report")
    totals = report["totals"]
    assert (totals["reviews"], totals["mrs"]) == (1, 1)
    assert (totals["findings"], totals["findings_posted"]) == (3, 3)
    assert [week["findings_per_mr"] for week in report["trend"]["weeks"]] == [3.0]
    listed = _cli(world, "reviews", "list", "--project", PROJECT).output
    assert "dry run" in listed
