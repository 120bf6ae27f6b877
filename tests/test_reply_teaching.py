"""Answers in the bot's threads and the team's wishes, end to end (webhook → reply job →
worker → fake GitLab and fake vLLM, which records every request): the answer is given the
review rules and learnings of its finding; a reply job that ends for good without an answer
(its worker lost on the last attempt, cancelled) is settled; ``@bot don't flag this …`` is
answered with a proposed learning that the author confirms with ``/reviewbot learn``. The
harness is tests/test_reply.py's; the intent's phrasings: tests/test_thread_intent.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from reviewbot.app import App
from reviewbot.learnings.teaching import add_learning, project_learnings
from reviewbot.queue import WORKER_LOST_ON_LAST_ATTEMPT
from reviewbot.store.models import Job as JobRow
from tests.mr_world import PROJECT, World, world  # noqa: F401
from tests.test_reply import (  # noqa: F401 - thread_fixture is the fixture `thread`
    DEVELOPER,
    EXPIRED_LEASE_S,
    REPORTER,
    THREAD_NOTES,
    Thread,
    thread_fixture,
)

pytestmark = pytest.mark.slow  # measured: see docs/development.md

RULES = """rules:
  - name: none-checks
    paths: ["app.py"]
    instructions: Compare with None using `is`.
    category: bug
  - name: docs-only
    paths: ["docs/**"]
    instructions: Docs need a title.
  - name: style-only
    instructions: Keep lines short.
    category: style
"""


def reply_prompt(world: World, since: int) -> str:  # noqa: F811
    """The user message of the one reply request the fake vLLM got after request ``since``."""
    [body] = [
        body
        for body in world.vllm.requests[since:]
        if str(body["messages"][0]["content"]).startswith("<reviewbot-reply")
    ]
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


@pytest.fixture
def guided(world: World, tmp_path: Path) -> Iterator[tuple[Thread, dict[str, Any]]]:  # noqa: F811
    """A bot thread on the `== None` finding (category bug, app.py), with instance rules and
    three learnings: one for the finding, one for another path, one for another category."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    world.run()
    with App(world.settings()) as app:
        made = {
            "here": add_learning(
                app.learnings(),
                app.gitlab(),
                "None checks in app.py are fine",
                project=PROJECT,
                globs=["app.py"],
            ),
            "elsewhere": add_learning(
                app.learnings(),
                app.gitlab(),
                "Tests may use sleep",
                project=PROJECT,
                globs=["tests/**"],
            ),
            "other_category": add_learning(
                app.learnings(),
                app.gitlab(),
                "Long names are fine",
                project=PROJECT,
                category="style",
            ),
        }
    opened = Thread(world, "== None", rules_file=str(rules))
    yield opened, made
    opened.close()


def test_an_answer_is_given_the_rules_and_learnings_of_its_finding(
    guided: tuple[Thread, dict[str, Any]],
) -> None:
    thread, made = guided
    before = len(thread.world.vllm.requests)
    note = thread.say("@reviewbot why is this a problem?")
    thread.hook(note)
    thread.work()
    assert len(thread.answers(note["id"])) == 1
    prompt = reply_prompt(thread.world, before)
    assert '<rule name="none-checks" category="bug">' in prompt
    assert "docs-only" not in prompt and "style-only" not in prompt
    assert f'<learning name="learning {made["here"].id}">' in prompt
    assert "None checks in app.py are fine" in prompt
    assert f'"learning {made["elsewhere"].id}"' not in prompt
    assert f'"learning {made["other_category"].id}"' not in prompt
    assert prompt.index("<learnings>") < prompt.index("<finding") < prompt.index("<thread>")


def test_an_answer_gets_no_learnings_past_their_budget(world: World) -> None:  # noqa: F811
    world.run()
    with App(world.settings()) as app:
        add_learning(
            app.learnings(), app.gitlab(), "None checks are fine", project=PROJECT, globs=["app.py"]
        )
    thread = Thread(world, "== None", learnings_tokens=0, rules_tokens=0)
    try:
        before = len(world.vllm.requests)
        note = thread.say("/reviewbot explain")
        thread.hook(note)
        thread.work()
        prompt = reply_prompt(world, before)
        assert "<learnings>" not in prompt and "<rules>" not in prompt
        assert len(thread.answers(note["id"])) == 1
    finally:
        thread.close()


# -- a reply job that ends for good settles its reply ---------------------------------------


def set_last_attempt(thread: Thread, job_id: int) -> None:
    with thread.store.engine.begin() as connection:
        connection.execute(update(JobRow).where(JobRow.id == job_id).values(max_attempts=1))


def test_a_reply_whose_worker_died_on_its_last_attempt_is_settled_failed(thread: Thread) -> None:
    note = thread.say("@reviewbot is this safe?")
    job_id = thread.hook(note)["job_id"]
    set_last_attempt(thread, job_id)
    assert thread.queue.claim("worker-a", EXPIRED_LEASE_S).id == job_id  # and dies
    time.sleep(EXPIRED_LEASE_S + 0.1)
    thread.work()  # the next claim fails the job: no attempt left
    assert thread.queue.get(job_id).status == "failed"
    assert thread.answers(note["id"]) == []
    [reply] = thread.replies()
    assert reply.status == "failed" and reply.reason == WORKER_LOST_ON_LAST_ATTEMPT
    assert reply.finished_at is not None


def test_a_cancelled_reply_job_settles_its_reply_dropped(thread: Thread) -> None:
    by_operator = thread.say("@reviewbot why?")
    by_close = thread.say("@reviewbot and this?")
    operator_job = thread.hook(by_operator)["job_id"]
    thread.hook(by_close)
    thread.queue.cancel(operator_job)
    assert thread.queue.cancel_for_mr(PROJECT, 1, "merge request closed") == 1
    thread.work()
    assert thread.answers(by_operator["id"]) == [] and thread.answers(by_close["id"]) == []
    assert [(r.status, r.reason) for r in thread.replies()] == [
        ("dropped", "cancelled by an operator"),
        ("dropped", "merge request closed"),
    ]


def test_a_retried_reply_job_answers_its_reply_after_all(thread: Thread) -> None:
    note = thread.say("@reviewbot explain please")
    job_id = thread.hook(note)["job_id"]
    set_last_attempt(thread, job_id)
    thread.world.vllm.add_faults(*["http_500"] * 20)
    thread.work()
    assert thread.replies()[0].status == "failed"
    thread.world.vllm.clear_faults()
    thread.queue.retry(job_id)  # `reviewbot jobs retry`, once the model is back
    assert thread.replies()[0].status == "queued"
    thread.work()
    assert thread.queue.get(job_id).status == "succeeded"
    assert len(thread.answers(note["id"])) == 1
    assert thread.replies()[0].status == "posted"


# -- `@bot don't flag this …`: proposed, then confirmed by `/reviewbot learn` ----------------

WISH = "@reviewbot don't flag this, we compare to None on purpose"


def learnings_of(thread: Thread) -> list[Any]:
    with App(thread.settings) as app:
        return project_learnings(app.learnings(), app.gitlab(), project=PROJECT)


def test_a_wish_not_to_flag_is_proposed_and_the_authors_confirmation_makes_it_once(
    thread: Thread,
) -> None:
    thread.world.gitlab.add_member(PROJECT, "alice", DEVELOPER)
    before = len(thread.world.vllm.requests)
    wish = thread.say(WISH)
    assert thread.hook(wish)["status"] == "queued"
    thread.work()
    [proposal_answer] = thread.answers(wish["id"])
    [proposed] = learnings_of(thread)
    assert proposed.status.value == "proposed" and proposed.source.value == "thread"
    assert proposed.text.startswith("don't flag this, we compare to None on purpose")
    assert "(said of the finding “" in proposed.text  # "this", with its context
    assert (proposed.category, proposed.path_globs) == ("bug", ("app.py",))
    assert (proposed.discussion_id, proposed.note_id, proposed.mr_iid) == (thread.id, wish["id"], 1)
    assert proposed.author == "alice" and proposed.author_id == wish["author"]["id"]
    assert proposed.proposal_note_id == proposal_answer["id"]
    body = proposal_answer["body"]
    assert f"Proposed learning {proposed.id}" in body and "`/reviewbot learn`" in body
    assert "category `bug`" in body and "`app.py`" in body
    assert len(thread.world.vllm.requests) == before  # no model call for a proposal
    confirm = thread.say("/reviewbot learn")
    assert thread.hook(confirm)["status"] == "queued"
    assert thread.hook(confirm)["status"] == "duplicate"  # GitLab delivered it twice
    thread.work()
    [confirmed_answer] = thread.answers(confirm["id"])
    assert f"Learned (learning {proposed.id}" in confirmed_answer["body"]
    [learning] = learnings_of(thread)
    assert learning.status.value == "active" and learning.accepted_by == "alice"
    again = thread.say("/reviewbot learn")
    thread.hook(again)
    thread.work()
    [again_answer] = thread.answers(again["id"])
    assert f"Already in force: learning {proposed.id}" in again_answer["body"]
    assert len(learnings_of(thread)) == 1


def test_a_proposal_whose_gitlab_answer_is_lost_is_made_and_answered_once(thread: Thread) -> None:
    thread.world.gitlab.add_member(PROJECT, "alice", DEVELOPER)
    wish = thread.say(WISH)
    thread.hook(wish)
    thread.world.gitlab.add_fault_for("POST", THREAD_NOTES, "stored:502", times=2)
    thread.work()
    assert len(thread.answers(wish["id"])) == 1
    assert [item.status.value for item in learnings_of(thread)] == ["proposed"]


def test_a_wish_from_someone_who_may_not_teach_gets_an_ordinary_answer(thread: Thread) -> None:
    thread.world.gitlab.add_member(PROJECT, "alice", REPORTER)
    wish = thread.say(WISH)
    thread.hook(wish)
    thread.work()
    [answer] = thread.answers(wish["id"])
    assert "flagged as" in answer["body"]  # the fake model's answer
    assert learnings_of(thread) == []
    confirm = thread.say("/reviewbot learn")
    thread.hook(confirm)
    thread.work()
    [refused] = thread.answers(confirm["id"])
    assert refused["body"].startswith("Not done:")
    assert thread.replies()[-1].status == "refused"


def test_a_proposal_confirmed_by_someone_who_may_not_teach_stays_proposed(
    thread: Thread,
) -> None:
    """Confirming is a change like making one: the same role, checked the same way."""
    thread.world.gitlab.add_member(PROJECT, "alice", DEVELOPER)
    thread.world.gitlab.add_user("carol", token="glpat-carol")
    thread.world.gitlab.add_member(PROJECT, "carol", REPORTER)
    wish = thread.say(WISH)
    thread.hook(wish)
    thread.work()
    confirm = thread.say("/reviewbot learn", token="glpat-carol")
    thread.hook(confirm)
    thread.work()
    [refused] = thread.answers(confirm["id"])
    assert refused["body"].startswith("Not done:") and "(role Reporter)" in refused["body"]
    [proposed] = learnings_of(thread)
    assert proposed.status.value == "proposed" and proposed.accepted_by is None
    assert thread.replies()[-1].status == "refused"


def test_a_forged_learn_delivery_makes_nothing_of_a_note_that_holds_no_command(
    thread: Thread,
) -> None:
    """A Note Hook with the right secret and a real note id, but a command the note does not
    hold: the worker reads the note from GitLab, finds no command, and does nothing."""
    thread.world.gitlab.add_member(PROJECT, "alice", DEVELOPER)
    note = thread.say("Note to self: don't flag eval here until the parser lands")
    assert thread.hook(note | {"body": "/reviewbot learn"})["status"] == "queued"
    thread.work()
    assert thread.answers(note["id"]) == []
    assert learnings_of(thread) == []
    [reply] = thread.replies()
    assert reply.status == "dropped" and "holds no command" in reply.reason


def test_the_command_done_is_the_one_the_note_holds(thread: Thread) -> None:
    thread.world.gitlab.add_member(PROJECT, "alice", DEVELOPER)
    note = thread.say("/reviewbot explain")
    assert thread.hook(note | {"body": "/reviewbot ignore"})["status"] == "queued"
    thread.work()
    [answer] = thread.answers(note["id"])
    assert "Resolved" not in answer["body"]
    discussion = next(
        d for d in thread.world.gitlab.discussions(PROJECT, 1) if d["id"] == thread.id
    )
    assert not discussion["notes"][0]["resolved"]
    [reply] = thread.replies()
    assert (reply.status, reply.command, reply.model_calls) == ("posted", "explain", 1)


def test_a_bare_learn_with_nothing_proposed_makes_nothing(thread: Thread) -> None:
    thread.world.gitlab.add_member(PROJECT, "alice", DEVELOPER)
    confirm = thread.say("/reviewbot learn")
    thread.hook(confirm)
    thread.work()
    [answer] = thread.answers(confirm["id"])
    assert answer["body"].startswith("Nothing learned: this thread has no proposed learning")
    assert learnings_of(thread) == []


def test_learn_in_a_thread_keeps_its_thread_and_the_globs_it_names(thread: Thread) -> None:
    thread.world.gitlab.add_member(PROJECT, "alice", DEVELOPER)
    note = thread.say("/reviewbot learn don't flag == None comparisons in tests/**")
    thread.hook(note)
    thread.work()
    [answer] = thread.answers(note["id"])
    [learning] = learnings_of(thread)
    assert learning.status.value == "active" and learning.path_globs == ("tests/**",)
    assert (learning.discussion_id, learning.note_id, learning.mr_iid) == (thread.id, note["id"], 1)
    assert learning.author_id == note["author"]["id"]
    assert "`tests/**`" in answer["body"]


def test_a_thumbs_up_on_a_thread_proposal_accepts_it_at_the_next_feedback_sync(
    thread: Thread,
) -> None:
    from click.testing import CliRunner

    from reviewbot.commands import main

    thread.world.gitlab.add_member(PROJECT, "alice", DEVELOPER)
    thread.world.gitlab.add_member(PROJECT, "bob", DEVELOPER)
    wish = thread.say(WISH)
    thread.hook(wish)
    thread.work()
    [proposal_answer] = thread.answers(wish["id"])
    thread.world.gitlab.add_award_emoji(PROJECT, 1, proposal_answer["id"], "thumbsup", "bob")
    env = thread.world.command_env("secret")
    synced = CliRunner().invoke(main, ["feedback", "sync", "--since", "1d"], env=env)
    assert synced.exit_code == 0, synced.output
    [learning] = learnings_of(thread)
    assert (learning.status.value, learning.accepted_by) == ("active", "bob")
    assert f"learning {learning.id} accepted by @bob (👍 on its note)" in synced.output
