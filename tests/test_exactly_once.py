"""Every write to GitLab happens once, even when its answer is lost, late or a 5xx after GitLab
stored it (issue 10 item 1), and Retry-After is honoured within a cap, in both of its forms.

The fake GitLab stores the write and then answers 502, or answers after the client gave up
("stored:" faults, tests/fakes/gitlab_server.py). Retry-After: RFC 9110 section 10.2.3.
"""

from __future__ import annotations

from collections import Counter

import pytest

from reviewbot.app import App
from reviewbot.comments import parse_marker
from reviewbot.gitlab import (
    RETRY_AFTER_CAP_S,
    GitLabClient,
    GitLabSettings,
    GitLabUnavailableError,
)
from reviewbot.mr import RunOptions, run_merge_request
from reviewbot.publish import STALE_REPLY
from tests.fakes.gitlab_server import FakeGitLab
from tests.mr_world import (  # noqa: F401
    BOT_TOKEN,
    FEATURE_APP,
    PROJECT,
    World,
    commit_on_feature,
    world,
)
from tests.store_fixtures import store_url  # noqa: F401

pytestmark = pytest.mark.slow  # measured: see docs/development.md

DISCUSSIONS = r"/merge_requests/1/discussions$"
NOTES = r"/merge_requests/1/notes$"
DRAFTS = r"/merge_requests/1/draft_notes$"
LATE_S = 2.0
CLIENT_TIMEOUT_S = 0.5
HOUR_S = 3600


def fingerprints_on_mr(world: World) -> Counter[str]:  # noqa: F811
    markers = [parse_marker(d["notes"][0]["body"]) for d in world.gitlab.discussions(PROJECT, 1)]
    return Counter(m.fingerprint for m in markers if m is not None and m.fingerprint)


def summaries(world: World) -> list[dict]:  # noqa: F811
    return [n for n in world.gitlab.notes(PROJECT, 1) if "reviewbot:summary" in n["body"]]


def test_a_discussion_stored_then_answered_502_is_not_posted_twice(world: World) -> None:  # noqa: F811
    world.gitlab.add_fault_for("POST", DISCUSSIONS, "stored:502", times=3)
    report = world.run()
    on_mr = fingerprints_on_mr(world)
    assert len(report.posted) == 3 and set(on_mr.values()) == {1}
    assert set(on_mr) == {f.fingerprint for f in report.posted}


def test_a_discussion_stored_then_answered_cut_short_is_not_posted_twice(world: World) -> None:  # noqa: F811
    """A 200 whose JSON a proxy cut short is retried (GitLabGarbledAnswerError), but only after
    the MR is searched for the write: it was stored, so it is found, not sent again."""
    world.gitlab.add_fault_for("POST", DISCUSSIONS, "stored:cut", times=3)
    report = world.run()
    on_mr = fingerprints_on_mr(world)
    assert len(report.posted) == 3 and set(on_mr.values()) == {1}
    assert set(on_mr) == {f.fingerprint for f in report.posted}


def test_a_discussion_answered_after_the_timeout_is_not_posted_twice(world: World) -> None:  # noqa: F811
    world.gitlab.add_fault_for("POST", DISCUSSIONS, f"stored:slow:{LATE_S}")
    report = world.run(gitlab_timeout_s=CLIENT_TIMEOUT_S)
    on_mr = fingerprints_on_mr(world)
    assert len(report.posted) == 3 and set(on_mr.values()) == {1}


def test_a_summary_stored_then_answered_502_is_one_note(world: World) -> None:  # noqa: F811
    world.gitlab.add_fault_for("POST", NOTES, "stored:502", times=2)
    report = world.run()
    [summary] = summaries(world)
    assert report.summary_note_id == summary["id"]
    assert "3 finding(s), 3 posted inline" in summary["body"]


def test_drafts_stored_then_answered_502_are_published_once(world: World) -> None:  # noqa: F811
    world.gitlab.add_fault_for("POST", DRAFTS, "stored:502", times=3)
    report = world.run(publish_mode="drafts")
    on_mr = fingerprints_on_mr(world)
    assert len(report.posted) == 3 and set(on_mr.values()) == {1}


def test_drafts_left_by_a_run_that_stopped_are_not_published_twice(world: World) -> None:  # noqa: F811
    world.gitlab.add_fault_for("POST", r"/draft_notes/bulk_publish$", "503", times=10)
    with (
        App(world.settings(publish_mode="drafts")) as app,
        pytest.raises(GitLabUnavailableError, match="answered 503"),
    ):
        run_merge_request(app, PROJECT, 1, RunOptions())  # fails: GitLab never publishes
    world.run(publish_mode="drafts")  # the drafts of the first run are still there
    on_mr = fingerprints_on_mr(world)
    assert len(on_mr) == 3 and set(on_mr.values()) == {1}


def test_a_help_note_stored_then_answered_502_is_one_note(world: World) -> None:  # noqa: F811
    world.gitlab.add_fault_for("POST", NOTES, "stored:502")
    client = GitLabClient(GitLabSettings(url=world.gitlab.url, token=BOT_TOKEN))
    note_id = client.post_note(PROJECT, 1, "**reviewbot** commands: ...")
    notes = [n for n in world.gitlab.notes(PROJECT, 1) if "reviewbot** commands" in n["body"]]
    assert [n["id"] for n in notes] == [note_id]


def test_retry_after_in_both_forms_is_read_and_capped(world: World) -> None:  # noqa: F811
    waits: list[float] = []
    client = GitLabClient(GitLabSettings(url=world.gitlab.url, token=BOT_TOKEN), sleep=waits.append)
    world.gitlab.add_faults("429-date", f"429:{HOUR_S}")
    assert client.bot_username() == "reviewbot"  # no crash on the HTTP-date form
    assert len(waits) == 2 and all(0 < wait <= RETRY_AFTER_CAP_S for wait in waits)
    assert waits[1] == RETRY_AFTER_CAP_S  # an hour asked: the cap


def test_a_stale_thread_reply_stored_then_answered_502_is_one_reply(world: World) -> None:  # noqa: F811
    world.run()
    fixed = FEATURE_APP.replace("return eval(text)", "return json.loads(text)")
    world.gitlab.push(PROJECT, 1, commit_on_feature(world.repo, {"app.py": fixed}, "fix eval"))
    world.gitlab.add_fault_for("POST", r"/discussions/[0-9a-f]+/notes$", "stored:502")
    report = world.run()
    assert report.resolved_threads == 1
    [resolved] = [d for d in world.gitlab.discussions(PROJECT, 1) if d["notes"][0].get("resolved")]
    assert [n["body"] for n in resolved["notes"]].count(STALE_REPLY) == 1


def test_bulk_publish_stored_then_answered_502_publishes_once(world: World) -> None:  # noqa: F811
    world.gitlab.add_fault_for("POST", r"/draft_notes/bulk_publish$", "stored:502")
    report = world.run(publish_mode="drafts")
    on_mr = fingerprints_on_mr(world)
    assert len(report.posted) == 3 and set(on_mr.values()) == {1}


def test_a_report_issue_stored_then_answered_502_is_one_issue() -> None:
    with FakeGitLab() as gitlab:
        gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        gitlab.add_project("team/reports", project_id=30)
        gitlab.add_fault_for("POST", r"/projects/30/issues$", "stored:502")
        client = GitLabClient(GitLabSettings(url=gitlab.url, token=BOT_TOKEN))
        marker = "<!-- reviewbot:report week=2026-W11 -->"
        issue = client.create_issue("team/reports", "reviewbot report 2026-W11", marker, marker)
        issues = gitlab.issues("team/reports")
    assert [i["iid"] for i in issues] == [issue["iid"]]


def _summary_writes(world: World) -> list[tuple[str, str]]:  # noqa: F811
    """Every write to the MR's notes (the summary is the only plain note a review writes),
    as (method, the path after .../merge_requests/1)."""
    marker = "/merge_requests/1/notes"
    return [
        (method, path[path.index(marker) + len("/merge_requests/1") :])
        for method, path in world.gitlab.requests
        if method != "GET" and marker in path
    ]


def test_a_first_review_writes_its_summary_once(world: World) -> None:  # noqa: F811
    """The summary was created and then written again with the same body (issue 17 item 4)."""
    world.run()
    [summary] = summaries(world)
    assert _summary_writes(world) == [("POST", "/notes")]
    assert "3 finding(s), 3 posted inline" in summary["body"]


def test_a_summary_whose_answer_was_lost_is_found_then_rewritten_once(world: World) -> None:  # noqa: F811
    world.gitlab.add_fault_for("POST", NOTES, "stored:502")
    world.run()
    [summary] = summaries(world)
    # stored, answer lost; looked for on the MR (found: not sent again); made current once
    assert _summary_writes(world) == [("POST", "/notes"), ("PUT", f"/notes/{summary['id']}")]
    assert "3 finding(s), 3 posted inline" in summary["body"]


def test_a_second_review_edits_the_summary_in_place(world: World) -> None:  # noqa: F811
    world.run()
    world.gitlab.requests.clear()
    world.run()
    [summary] = summaries(world)
    assert _summary_writes(world) == [("PUT", f"/notes/{summary['id']}")]
