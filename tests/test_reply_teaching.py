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
from reviewbot.queue import WORKER_LOST_ON_LAST_ATTEMPT
from reviewbot.store.models import Job as JobRow
from reviewbot.teaching import add_learning
from tests.mr_world import PROJECT, World, world  # noqa: F401
from tests.test_reply import EXPIRED_LEASE_S, Thread

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
                app, "None checks in app.py are fine", project=PROJECT, globs=["app.py"]
            ),
            "elsewhere": add_learning(
                app, "Tests may use sleep", project=PROJECT, globs=["tests/**"]
            ),
            "other_category": add_learning(
                app, "Long names are fine", project=PROJECT, category="style"
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
        add_learning(app, "None checks are fine", project=PROJECT, globs=["app.py"])
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


@pytest.fixture
def thread(world: World) -> Iterator[Thread]:  # noqa: F811
    world.run()
    opened = Thread(world, "== None")
    yield opened
    opened.close()


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
