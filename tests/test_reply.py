"""Answers in the bot's threads, end to end: webhook → reply job → worker → one answer.

The world's review posts findings on the fake GitLab; a human replies in one of those threads
through GitLab's API; the Note Hook GitLab would send is delivered to the real listener
(create_app); a real worker (burst) answers through the fake vLLM's chatty mode. SQLite and,
when configured, PostgreSQL (the world's store_url).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select, update
from starlette.testclient import TestClient

from reviewbot.app import App
from reviewbot.gitlab import GitLabClient, GitLabSettings
from reviewbot.learnings.teaching import project_learnings
from reviewbot.model import PRIORITY_THREAD_ANSWER
from reviewbot.queue import JobQueue
from reviewbot.replies.answer import reply_marker
from reviewbot.report.document import build_report, report_markdown
from reviewbot.report.html import report_html
from reviewbot.states import JobKind
from reviewbot.store import Store
from reviewbot.store.models import Feedback as FeedbackRow
from reviewbot.store.models import Job as JobRow
from reviewbot.store.models import Reply as ReplyRow
from reviewbot.webhook.openapi import WEBHOOK_PATH
from reviewbot.webhook.payloads import parse_reply_command
from reviewbot.webhook.server import create_app
from reviewbot.window import Window
from reviewbot.worker import Worker
from tests.hypothesis_profiles import examples
from tests.mr_world import (  # noqa: F401
    BOT_TOKEN,
    FEATURE_APP,
    PROJECT,
    World,
    commit_on_feature,
    world,
)

pytestmark = pytest.mark.slow  # measured: see docs/development.md

SECRET = "reply-secret"
BOT = "reviewbot"
PROJECT_ID = 7
ALICE_TOKEN = "glpat-alice"
THREAD_NOTES = r"/discussions/[0-9a-f]+/notes$"
EXPIRED_LEASE_S = 1.0
GUEST, REPORTER, DEVELOPER = 10, 20, 30  # GitLab access levels


class Thread:
    """One of the bot's threads on MR !1 and the listener GitLab's hooks reach."""

    def __init__(self, world: World, needle: str, **settings: Any) -> None:  # noqa: F811
        self.world = world
        self.settings = world.settings(**settings)
        self.store = Store.from_url(world.database_url)
        self.queue = JobQueue(self.store)
        self.client = TestClient(
            create_app(self.settings, self.store, self.queue, secret=SECRET, bot_username=BOT)
        )
        self.discussion = next(
            d for d in world.gitlab.discussions(PROJECT, 1) if needle in d["notes"][0]["body"]
        )
        self.id = self.discussion["id"]

    def say(self, text: str, token: str = ALICE_TOKEN) -> dict[str, Any]:
        """A human's note in the thread, through GitLab's API."""
        url = (
            f"{self.world.gitlab.url}/api/v4/projects/{PROJECT_ID}/merge_requests/1/"
            f"discussions/{self.id}/notes"
        )
        response = httpx.post(url, headers={"PRIVATE-TOKEN": token}, data={"body": text})
        response.raise_for_status()
        return response.json()

    def hook(
        self, note: dict[str, Any], *, action: str = "create", discussion_id: str | None = None
    ) -> dict[str, Any]:
        """Deliver the Note Hook GitLab sends for ``note``; the listener's JSON answer."""
        author = note["author"]
        payload = {
            "object_kind": "note",
            "event_type": "note",
            "user": {"id": author["id"], "username": author["username"], "name": author["name"]},
            "project": {"id": PROJECT_ID, "path_with_namespace": PROJECT},
            "object_attributes": {
                "id": note["id"],
                "note": note["body"],
                "noteable_type": "MergeRequest",
                "author_id": author["id"],
                "system": False,
                "action": action,
                "discussion_id": discussion_id or self.id,
            },
            "merge_request": {"iid": 1, "state": "opened"},
        }
        headers = {
            "X-Gitlab-Event": "Note Hook",
            "X-Gitlab-Token": SECRET,
            "Idempotency-Key": f"note-{note['id']}-{action}",
            "Content-Type": "application/json",
        }
        response = self.client.post(WEBHOOK_PATH, content=json.dumps(payload), headers=headers)
        assert response.status_code in (200, 202), response.text
        return response.json()

    def work(self) -> None:
        with App(self.settings) as app:
            Worker(app, lease_s=EXPIRED_LEASE_S * 30, poll_s=0.05).run(
                burst=True, handle_signals=False
            )

    def answers(self, note_id: int) -> list[dict[str, Any]]:
        marker = reply_marker(note_id)
        discussion = next(
            d for d in self.world.gitlab.discussions(PROJECT, 1) if d["id"] == self.id
        )
        return [n for n in discussion["notes"] if marker in n["body"]]

    def replies(self) -> list[Any]:
        with self.store.engine.connect() as connection:
            return list(connection.execute(select(ReplyRow).order_by(ReplyRow.id)))

    def close(self) -> None:
        self.client.close()
        self.store.close()


@pytest.fixture(name="thread")
def thread_fixture(world: World) -> Iterator[Thread]:  # noqa: F811
    """The bot's thread on the ``== None`` line of MR !1, after a review (other modules import
    it as ``thread_fixture``, so that their tests' ``thread`` shadows no import)."""
    world.run()
    opened = Thread(world, "== None")
    yield opened
    opened.close()


def test_a_mention_gets_one_answer_in_the_thread(thread: Thread) -> None:
    note = thread.say("@reviewbot why is this a problem?")
    detail = thread.hook(note)
    assert detail["status"] == "queued"
    assert thread.queue.get(detail["job_id"]).kind == JobKind.REPLY.value
    thread.work()
    [answer] = thread.answers(note["id"])
    assert answer["author"]["username"] == BOT
    assert "flagged" in answer["body"]
    [reply] = thread.replies()
    assert (reply.status, reply.command, reply.reply_note_id) == ("posted", "ask", answer["id"])
    assert reply.model_calls == 1 and reply.completion_tokens > 0 and reply.latency_ms > 0


def test_a_redelivered_hook_is_answered_once(thread: Thread) -> None:
    note = thread.say("/reviewbot explain")
    assert thread.hook(note)["status"] == "queued"
    assert thread.hook(note)["status"] == "duplicate"
    thread.work()
    assert len(thread.answers(note["id"])) == 1


def test_a_lost_gitlab_answer_gives_one_answer(thread: Thread) -> None:
    note = thread.say("@reviewbot explain please")
    thread.hook(note)
    thread.world.gitlab.add_fault_for("POST", THREAD_NOTES, "stored:502", times=2)
    thread.work()
    assert len(thread.answers(note["id"])) == 1
    assert thread.replies()[0].status == "posted"


def test_a_reply_whose_job_fails_for_good_is_recorded_failed_not_left_queued(
    thread: Thread,
) -> None:
    note = thread.say("@reviewbot explain please")
    job_id = thread.hook(note)["job_id"]
    with thread.store.engine.begin() as connection:  # the job's last attempt is this one
        connection.execute(update(JobRow).where(JobRow.id == job_id).values(max_attempts=1))
    thread.world.vllm.add_faults(*["http_500"] * 20)
    thread.work()
    assert thread.answers(note["id"]) == []
    assert thread.queue.get(job_id).status == "failed"
    [reply] = thread.replies()
    assert reply.status == "failed" and reply.reason


def test_a_worker_killed_after_posting_is_not_answered_twice(thread: Thread) -> None:
    note = thread.say("@reviewbot is this safe?")
    job_id = thread.hook(note)["job_id"]
    # Worker A claims the job, posts its answer, and dies before recording anything.
    claimed = thread.queue.claim("worker-a", EXPIRED_LEASE_S)
    assert claimed is not None and claimed.id == job_id
    marker = reply_marker(note["id"])
    bot = GitLabClient(GitLabSettings(url=thread.world.gitlab.url, token=BOT_TOKEN))
    bot.reply_in_thread(PROJECT_ID, 1, thread.id, f"answer of worker A\n\n{marker}", marker)
    time.sleep(EXPIRED_LEASE_S + 0.1)
    thread.work()  # worker B takes the job over once A's lease has expired
    [answer] = thread.answers(note["id"])
    assert "worker A" in answer["body"]
    assert thread.replies()[0].status == "posted"
    assert thread.queue.get(job_id).status == "succeeded"


def test_a_worker_killed_before_posting_is_answered_once_by_another(thread: Thread) -> None:
    note = thread.say("@reviewbot is this safe?")
    job_id = thread.hook(note)["job_id"]
    assert thread.queue.claim("worker-a", EXPIRED_LEASE_S).id == job_id
    time.sleep(EXPIRED_LEASE_S + 0.1)
    thread.work()
    assert len(thread.answers(note["id"])) == 1


def test_an_edited_note_does_not_trigger_again(thread: Thread) -> None:
    note = thread.say("@reviewbot why?")
    thread.hook(note)
    detail = thread.hook(note, action="update")
    assert detail["status"] == "ignored" and "edited" in detail["reason"]
    thread.work()
    assert len(thread.answers(note["id"])) == 1
    assert len(thread.replies()) == 1


def test_a_thread_the_bot_did_not_start_gets_nothing(thread: Thread) -> None:
    url = f"{thread.world.gitlab.url}/api/v4/projects/{PROJECT_ID}/merge_requests/1/discussions"
    started = httpx.post(url, headers={"PRIVATE-TOKEN": ALICE_TOKEN}, data={"body": "hmm"})
    human_thread = started.json()["id"]
    note = started.json()["notes"][0] | {"body": "/reviewbot fix"}
    detail = thread.hook(note, discussion_id=human_thread)
    assert detail["status"] == "ignored" and "outside a thread" in detail["reason"]
    assert thread.replies() == [] and thread.queue.list(limit=10) == []


def test_a_bot_author_gets_nothing(thread: Thread) -> None:
    thread.world.gitlab.add_user("project_7_bot_1a2b3c", token="glpat-token-bot")
    note = thread.say("@reviewbot hello", token="glpat-token-bot")
    detail = thread.hook(note)
    assert detail["status"] == "ignored" and "bot" in detail["reason"]
    thread.world.gitlab.add_user("renovate", token="glpat-renovate", bot=True)
    flagged = thread.say("@reviewbot hello", token="glpat-renovate")
    assert thread.hook(flagged)["status"] == "queued"  # the hook has no bot flag...
    thread.work()
    assert thread.answers(flagged["id"]) == []  # ...GitLab's user API has
    assert thread.replies()[0].reason == "the note was written by a bot user"


def test_the_per_mr_rate_limit_drops_the_extra_notes(world: World) -> None:  # noqa: F811
    world.run()
    limited = Thread(world, "== None", reply_max_per_mr_per_hour=1)
    try:
        first, second = limited.say("@reviewbot one?"), limited.say("@reviewbot two?")
        assert limited.hook(first)["status"] == "queued"
        detail = limited.hook(second)
        assert detail["status"] == "ignored" and "rate limited" in detail["reason"]
        limited.work()
        assert len(limited.answers(first["id"])) == 1 and limited.answers(second["id"]) == []
        assert [r.status for r in limited.replies()] == ["posted", "dropped"]
    finally:
        limited.close()


def test_a_late_answer_is_dropped_not_posted(world: World) -> None:  # noqa: F811
    world.run()
    hurried = Thread(world, "== None", reply_timeout_s=0.001)
    try:
        note = hurried.say("@reviewbot why?")
        hurried.hook(note)
        hurried.work()
        assert hurried.answers(note["id"]) == []
        [reply] = hurried.replies()
        assert reply.status == "dropped" and "reply_timeout_s" in reply.reason
    finally:
        hurried.close()


def test_fix_posts_a_suggestion_gitlab_accepts(thread: Thread) -> None:
    note = thread.say("/reviewbot fix")
    thread.hook(note)
    thread.work()
    [answer] = thread.answers(note["id"])
    [suggestion] = answer["suggestions"]
    assert suggestion["appliable"] and "is None" in suggestion["to_content"]
    assert suggestion["from_line"] == thread.discussion["notes"][0]["position"]["new_line"]


def test_fix_after_the_line_changed_posts_no_suggestion(thread: Thread) -> None:
    changed = FEATURE_APP.replace("if items == None:", "if not items:")
    head = commit_on_feature(thread.world.repo, {"app.py": changed}, "fix it")
    thread.world.gitlab.push(PROJECT, 1, head)
    note = thread.say("/reviewbot fix")
    thread.hook(note)
    thread.work()
    [answer] = thread.answers(note["id"])
    assert answer["suggestions"] == [] and "line changed" in answer["body"]


def thread_now(thread: Thread) -> dict[str, Any]:
    """The bot's thread as GitLab has it now."""
    return next(d for d in thread.world.gitlab.discussions(PROJECT, 1) if d["id"] == thread.id)


def feedback_rows(thread: Thread) -> list[Any]:
    with thread.store.engine.connect() as connection:
        return list(connection.execute(select(FeedbackRow)).all())


def test_ignore_resolves_the_thread_and_records_negative_feedback(thread: Thread) -> None:
    thread.world.gitlab.add_member(PROJECT, "alice", DEVELOPER)
    note = thread.say("/reviewbot ignore")
    thread.hook(note)
    thread.work()
    [answer] = thread.answers(note["id"])
    assert "/reviewbot learn" in answer["body"]
    discussion = next(
        d for d in thread.world.gitlab.discussions(PROJECT, 1) if d["id"] == thread.id
    )
    assert discussion["notes"][0]["resolved"]
    with thread.store.engine.connect() as connection:
        [feedback] = connection.execute(select(FeedbackRow)).all()
    assert (feedback.kind, feedback.username) == ("ignored", "alice")
    assert feedback.reply_id == thread.replies()[0].id
    assert thread.replies()[0].model_calls == 0


@pytest.mark.parametrize("role", [GUEST, REPORTER, None], ids=["guest", "reporter", "stranger"])
def test_ignore_without_the_developer_role_is_refused_once_in_the_thread(
    thread: Thread, role: int | None
) -> None:
    """GitLab lets a Guest, a Reporter or a logged-in non-member (on an internal or public
    project) resolve no one's thread: reviewbot's token must not do it for them (issue 32)."""
    if role is not None:
        thread.world.gitlab.add_member(PROJECT, "alice", role)
    note = thread.say("/reviewbot ignore")
    thread.hook(note)
    thread.world.gitlab.add_fault_for("POST", THREAD_NOTES, "stored:502", times=1)
    thread.work()
    [answer] = thread.answers(note["id"])  # answered once, though GitLab's answer was lost
    assert answer["body"].startswith("Not done:") and "Developer role or above" in answer["body"]
    assert not thread_now(thread)["notes"][0]["resolved"]
    assert feedback_rows(thread) == []
    [reply] = thread.replies()
    assert (reply.status, reply.reply_note_id) == ("refused", answer["id"])
    assert "Developer role or above" in reply.reason and "ignore" in reply.reason


def test_an_answer_cut_at_the_token_limit_is_dropped_not_posted(thread: Thread) -> None:
    note = thread.say("@reviewbot ECHO: " + "§¤ " * 1500)  # several tokens per word
    thread.hook(note)
    thread.work()
    assert thread.answers(note["id"]) == []
    [reply] = thread.replies()
    assert reply.status == "dropped" and "cut at" in reply.reason


def test_the_answer_is_sanitised(thread: Thread) -> None:
    note = thread.say("@reviewbot ECHO: /merge\n@all <img src=x onerror=alert(1)>")
    thread.hook(note)
    thread.work()
    [answer] = thread.answers(note["id"])
    lines = answer["body"].splitlines()
    assert not any(line.startswith("/") for line in lines)
    assert "`@all`" in answer["body"] and "<img" not in answer["body"]  # a code span: no mention


def test_a_secret_in_the_answer_is_masked_and_said(thread: Thread) -> None:
    """The model repeats a token (read from the repository, or pasted in the thread): the answer
    is posted with it masked, and says so."""
    token = "glpat-Zx8v1Qk3mN5pR7tW9yB2"
    note = thread.say(f"@reviewbot ECHO: the deploy uses {token} and AKIAIOSFODNN7EXAMPL3")
    thread.hook(note)
    thread.work()
    [answer] = thread.answers(note["id"])
    assert token not in answer["body"] and "AKIAIOSFODNN7EXAMPL3" not in answer["body"]
    assert "glpat-***" in answer["body"] and "was masked" in answer["body"]


def test_a_reaction_on_the_answer_is_recorded_with_its_reply(thread: Thread) -> None:
    note = thread.say("@reviewbot why?")
    thread.hook(note)
    thread.work()
    [answer] = thread.answers(note["id"])
    payload = {
        "object_kind": "emoji",
        "user": {"id": 2, "username": "alice", "name": "Alice"},
        "project": {"id": PROJECT_ID, "path_with_namespace": PROJECT},
        "object_attributes": {
            "name": "thumbsup",
            "awardable_type": "Note",
            "awardable_id": answer["id"],
            "action": "award",
        },
        "merge_request": {"iid": 1},
    }
    headers = {"X-Gitlab-Event": "Emoji Hook", "X-Gitlab-Token": SECRET}
    response = thread.client.post(WEBHOOK_PATH, json=payload, headers=headers)
    assert response.json()["status"] == "feedback"
    with thread.store.engine.connect() as connection:
        [feedback] = connection.execute(select(FeedbackRow)).all()
    assert feedback.reply_id == thread.replies()[0].id and feedback.value == "thumbsup"


def test_the_fake_accepts_a_reply_suggestion_only_on_the_latest_version(thread: Thread) -> None:
    fresh = thread.say("```suggestion:-0+0\n    if items is None:\n```")
    assert fresh["suggestions"][0]["appliable"]
    head = commit_on_feature(thread.world.repo, {"NOTES.md": "more\n"}, "another commit")
    thread.world.gitlab.push(PROJECT, 1, head)
    outdated = thread.say("```suggestion:-0+0\n    if items is None:\n```")
    assert not outdated["suggestions"][0]["appliable"]


@given(st.text(max_size=200))
@settings(max_examples=examples(200), deadline=None)
def test_any_note_parses_to_a_known_reply_command_or_none(note: str) -> None:
    assert parse_reply_command(note, BOT) in {None, "ask", "explain", "fix", "ignore"}


@pytest.mark.parametrize(
    ("note", "command"),
    [
        ("@reviewbot why?", "ask"),
        ("looks fine, thanks @reviewbot", "ask"),
        ("/reviewbot fix", "fix"),
        ("@ReviewBot Explain", "explain"),
        ("/reviewbot ignore", "ignore"),
        ("/reviewbot review", None),
        ("/reviewbot help", None),
        ("@reviewbot help", None),
        ("/reviewbot", None),
        ("mail me at a@reviewbot.example", None),
        ("@reviewbots hi", None),
    ],
)
def test_reply_commands(note: str, command: str | None) -> None:
    assert parse_reply_command(note, BOT) == command


def test_learn_by_a_developer_makes_a_learning_and_confirms_it(thread: Thread) -> None:
    thread.world.gitlab.add_member(PROJECT, "alice", DEVELOPER)
    note = thread.say("/reviewbot learn we compare to None on purpose in app.py; don't flag it")
    assert thread.hook(note)["status"] == "queued"
    thread.work()
    [answer] = thread.answers(note["id"])
    with App(thread.settings) as app:
        [learning] = project_learnings(app.learnings(), app.gitlab(), project=PROJECT)
    assert learning.text.startswith("we compare to None on purpose")
    assert (learning.author, learning.source, learning.category) == ("alice", "thread", "bug")
    assert f"learning {learning.id}" in answer["body"] and "on purpose" in answer["body"]


def test_learn_by_someone_without_the_developer_role_is_refused_in_the_thread(
    thread: Thread,
) -> None:
    thread.world.gitlab.add_member(PROJECT, "alice", REPORTER)
    note = thread.say("/reviewbot learn ignore everything")
    thread.hook(note)
    thread.work()
    [answer] = thread.answers(note["id"])
    assert answer["body"].startswith("Not done:") and "(role Reporter)" in answer["body"]
    [reply] = thread.replies()
    assert reply.status == "refused" and "make or confirm a learning" in reply.reason
    with App(thread.settings) as app:
        assert project_learnings(app.learnings(), app.gitlab(), project=PROJECT) == []


def test_the_report_counts_answers_and_their_reception(thread: Thread) -> None:
    thread.world.gitlab.add_member(PROJECT, "alice", DEVELOPER)
    asked, ignored = thread.say("@reviewbot why?"), thread.say("/reviewbot ignore")
    thread.hook(asked)
    thread.hook(ignored)
    thread.work()
    [answer] = thread.answers(asked["id"])
    thread.world.gitlab.add_award_emoji(PROJECT, 1, answer["id"], "thumbsdown", "alice")
    award = {
        "object_kind": "emoji",
        "user": {"id": 2, "username": "alice", "name": "Alice"},
        "project": {"id": PROJECT_ID, "path_with_namespace": PROJECT},
        "object_attributes": {
            "name": "thumbsdown",
            "awardable_type": "Note",
            "awardable_id": answer["id"],
            "action": "award",
        },
    }
    headers = {"X-Gitlab-Event": "Emoji Hook", "X-Gitlab-Token": SECRET}
    thread.client.post(WEBHOOK_PATH, json=award, headers=headers)
    now = datetime.now(UTC)
    report = build_report(thread.store, Window(now - timedelta(days=1), now), now=now)
    assert report["replies"] == [
        {
            "command": "ask",
            "status": "posted",
            "replies": 1,
            "thumbs_up": 0,
            "thumbs_down": 1,
            "model_calls": 1,
        },
        {
            "command": "ignore",
            "status": "posted",
            "replies": 1,
            "thumbs_up": 0,
            "thumbs_down": 0,
            "model_calls": 0,
        },
    ]
    assert "| ask | posted | 1 | 0 | 1 | 1 |" in report_markdown(report)
    page = report_html(report)
    assert "threads</h2>" in page
    assert "<td>ignore</td>" in page


def test_the_answer_carries_the_mrs_session_key(thread: Thread) -> None:
    """A router in front of several boxes answers the thread on the box its MR's reviews went
    to (docs/several-boxes.md)."""
    note = thread.say("@reviewbot why is this a problem?")
    thread.hook(note)
    thread.work()
    assert thread.answers(note["id"])
    key = f"{urlsplit(thread.world.gitlab.url).netloc}/{PROJECT_ID}/1"
    assert thread.world.vllm.request_headers[-1].get("x-session-id") == key
    assert thread.world.vllm.requests[-1].get("user") == key


def test_the_answer_goes_before_every_review(thread: Thread) -> None:
    """A human waits in the thread: its request carries the lowest vLLM priority, below the
    reviews' (issue 34 part 3)."""
    note = thread.say("@reviewbot why is this a problem?")
    thread.hook(note)
    thread.work()
    assert thread.answers(note["id"])
    reviews = [body["priority"] for body in thread.world.vllm.requests[:-1]]
    assert thread.world.vllm.requests[-1]["priority"] == PRIORITY_THREAD_ANSWER
    assert reviews and all(priority > PRIORITY_THREAD_ANSWER for priority in reviews)
