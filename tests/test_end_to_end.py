"""Webhook -> queue -> worker -> fake GitLab + fake vLLM -> comments + database, in one test.

Runs on SQLite and, when REVIEWBOT_TEST_POSTGRES_URL is set, on PostgreSQL.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from reviewbot.app import App
from reviewbot.queue import FULL_REVIEW_KEY, Job, JobQueue
from reviewbot.store import Store, upgrade
from reviewbot.webhook import WEBHOOK_PATH, create_app
from reviewbot.worker import Worker
from tests.builders import diff_notes
from tests.fakes.vllm_server import LatencyModel, MalformedCalls
from tests.mr_world import PROJECT, World, git

pytestmark = pytest.mark.slow  # measured: see docs/development.md

SECRET = "e2e-webhook-secret"
MAX_WORKER_ROUNDS = 50
WAIT_S = 60.0
FIXTURES = Path(__file__).parent / "fixtures" / "webhooks"
PROJECT_ID = 7  # group/app on the fake GitLab (tests/mr_world.py)


def open_event(world: World) -> dict:
    payload = json.loads((FIXTURES / "merge_request_open.json").read_text())
    payload = copy.deepcopy(payload)
    head = git(world.repo, "rev-parse", "feature")
    payload["project"]["path_with_namespace"] = PROJECT
    payload["project"]["id"] = 7
    payload["object_attributes"]["iid"] = 1
    payload["object_attributes"]["target_project_id"] = 7
    payload["object_attributes"]["last_commit"]["id"] = head
    return payload


def note_event(world: World, note: str) -> dict:
    """A comment by a developer on MR !1 at the feature branch's head."""
    payload = json.loads((FIXTURES / "note_merge_request_review.json").read_text())
    head = git(world.repo, "rev-parse", "feature")
    payload["project"]["path_with_namespace"] = PROJECT
    payload["project"]["id"] = payload["project_id"] = PROJECT_ID
    payload["object_attributes"]["note"] = note
    payload["object_attributes"]["project_id"] = PROJECT_ID
    merge_request = payload["merge_request"]
    merge_request["iid"] = 1
    merge_request["source_project_id"] = merge_request["target_project_id"] = PROJECT_ID
    merge_request["last_commit"]["id"] = head
    return payload


def deliver(client: TestClient, payload: dict, uuid: str, event: str = "Merge Request Hook") -> int:
    headers = {
        "X-Gitlab-Token": SECRET,
        "X-Gitlab-Event": event,
        "X-Gitlab-Event-UUID": uuid,
        "Content-Type": "application/json",
    }
    return client.post(WEBHOOK_PATH, content=json.dumps(payload), headers=headers).status_code


@pytest.fixture
def service(world: World) -> Iterator[tuple[App, Store, JobQueue]]:
    """A worker's App (migrated store, shared model slots) and a queue with short backoffs."""
    with App(world.settings(), shared_model_slots=True) as app:
        store = app.store
        yield app, store, JobQueue(store, backoff_base_s=0.05, backoff_max_s=0.1)


def test_webhook_to_comments_and_database(
    world: World, service: tuple[App, Store, JobQueue]
) -> None:
    worker_app, store, queue = service
    app = create_app(worker_app.settings, store, queue, secret=SECRET, bot_username="reviewbot")
    payload = open_event(world)
    with TestClient(app) as client:
        # the same delivery five times (GitLab retries on timeouts) -> one job
        delivery = "6f3a0c1e-0000-4000-8000-000000000001"
        answers = [deliver(client, payload, delivery) for _ in range(5)]
        assert answers[0] == 202 and set(answers) <= {200, 202}
        assert queue.counts().get("queued") == 1
        # GitLab is down for the first attempts: the job waits and retries
        world.gitlab.add_faults("502", "502", "502", "502", "502", "502")
        for _ in range(MAX_WORKER_ROUNDS):  # --burst exits while a retry waits out its backoff
            Worker(worker_app, queue, poll_s=0.05).run(burst=True, handle_signals=False)
            [job] = queue.list()
            if job.status != "queued":
                break
            time.sleep(0.1)
        assert job.status == "succeeded" and job.attempts >= 2, job
        notes = diff_notes(world)
        assert len(notes) == 3
        summaries = [n for n in world.gitlab.notes(PROJECT, 1) if "reviewbot:summary" in n["body"]]
        assert len(summaries) == 1
        # a redelivery after the review queues nothing new and posts nothing twice
        assert deliver(client, payload, delivery) in (200, 202)
        Worker(worker_app, queue, poll_s=0.05).run(burst=True, handle_signals=False)
        assert len(queue.list()) == 1 and len(diff_notes(world)) == 3
        metrics = client.get("/metrics").text
        assert 'reviewbot_jobs{status="succeeded"} 1' in metrics
        assert 'reviewbot_reviews_total{status="succeeded"} 1' in metrics
    from sqlalchemy import text

    with store.engine.connect() as connection:
        reviews = connection.execute(text("select status, trigger from reviews")).all()
        posted = connection.execute(
            text("select count(*) from findings where state = 'posted'")
        ).scalar_one()
    assert ("succeeded", "webhook") in [tuple(r) for r in reviews]
    assert posted == 3


def test_model_down_for_a_while_then_back(
    world: World, service: tuple[App, Store, JobQueue]
) -> None:
    worker_app, store, queue = service
    queue.enqueue(project=PROJECT, mr_iid=1, head_sha=None, trigger="webhook")
    # every attempt of the one chunk's request fails in the first run (1 try + 4 retries)
    world.vllm.add_faults(*["http_503"] * 5)
    for _ in range(MAX_WORKER_ROUNDS):
        Worker(worker_app, queue, poll_s=0.05).run(burst=True, handle_signals=False)
        [job] = queue.list()
        if job.status != "queued":
            break
        time.sleep(0.1)
    assert job.status == "succeeded" and job.attempts == 2, job
    assert len(diff_notes(world)) == 3
    statuses = [r["status"] for r in reversed(store.reviews(project=PROJECT, mr_iid=1))]
    assert statuses == ["failed", "succeeded"]


def test_unreadable_model_answers_fail_the_attempt_and_the_retry_reviews_them(
    world: World, service: tuple[App, Store, JobQueue]
) -> None:
    """Every call the model writes lacks `line`, repair turns too: the worker's attempt is not
    a review (the job is queued again, nothing is posted); once the model answers readably, the
    retry posts the three findings (issue 17)."""
    worker_app, store, queue = service
    queue.enqueue(project=PROJECT, mr_iid=1, head_sha=None, trigger="webhook")
    world.vllm.malformed = MalformedCalls(kinds=("missing_line",), repair="same")
    Worker(worker_app, queue, poll_s=0.05).run(burst=True, handle_signals=False)
    [job] = queue.list()
    assert job.status == "queued" and job.attempts >= 1, job
    assert "could not be read" in (job.error or "")
    assert diff_notes(world) == []
    world.vllm.malformed = None
    for _ in range(MAX_WORKER_ROUNDS):
        Worker(worker_app, queue, poll_s=0.05).run(burst=True, handle_signals=False)
        [job] = queue.list()
        if job.status != "queued":
            break
        time.sleep(0.1)
    assert job.status == "succeeded", job
    assert len(diff_notes(world)) == 3
    statuses = [r["status"] for r in reversed(store.reviews(project=PROJECT, mr_iid=1))]
    assert statuses[-1] == "succeeded" and set(statuses[:-1]) == {"failed"}


def test_worker_killed_mid_review_another_completes_it(world: World, tmp_path: Path) -> None:
    world.vllm.latency = LatencyModel(ttft_base_s=2.0)
    upgrade(world.database_url)
    queue = JobQueue(Store.from_url(world.database_url))
    queue.enqueue(project=PROJECT, mr_iid=1, head_sha=None, trigger="webhook")
    env = {
        **os.environ,
        "REVIEWBOT_GITLAB_URL": world.gitlab.url,
        "REVIEWBOT_GITLAB_TOKEN": world.settings().gitlab_token or "",
        "REVIEWBOT_LLM_BASE_URL": world.vllm.base_url,
        "REVIEWBOT_DATABASE_URL": world.database_url,
        "REVIEWBOT_MIN_SEVERITY": "info",
        "REVIEWBOT_MR_LOCK_SECONDS": "2",
        "REVIEWBOT_ANALYZERS": ",",  # none: the model's three findings alone
        "REVIEWBOT_CONFIG": str(tmp_path / "none.toml"),
    }
    (tmp_path / "none.toml").write_text("")
    command = [
        sys.executable,
        "-m",
        "reviewbot.commands",
        "worker",
        "--lease-seconds",
        "2",
        "--poll-seconds",
        "0.1",
    ]
    first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + WAIT_S
        while world.vllm.stats.requests == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert world.vllm.stats.requests >= 1, "the worker never reached the model"
        first.kill()  # kill -9 in the middle of the model call
        first.wait()
    finally:
        if first.poll() is None:
            first.kill()
    world.vllm.latency = LatencyModel()
    second = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and queue.list()[0].status != "succeeded":
            time.sleep(0.1)
    finally:
        second.terminate()
        _, stderr = second.communicate(timeout=WAIT_S)
    [job] = queue.list()
    assert job.status == "succeeded", stderr.decode()
    assert job.attempts == 2
    assert len(diff_notes(world)) == 3  # nothing lost, nothing twice


def test_event_for_a_project_the_token_cannot_read_fails_once_clearly(
    world: World, service: tuple[App, Store, JobQueue]
) -> None:
    worker_app, store, queue = service
    app = create_app(worker_app.settings, store, queue, secret=SECRET, bot_username="reviewbot")
    payload = open_event(world)
    payload["project"]["path_with_namespace"] = "secret/elsewhere"
    payload["project"]["id"] = 999
    payload["object_attributes"]["target_project_id"] = 999
    with TestClient(app) as client:
        assert deliver(client, payload, "6f3a0c1e-0000-4000-8000-000000000099") == 202
    Worker(worker_app, queue, poll_s=0.05).run(burst=True, handle_signals=False)
    [job] = queue.list()
    assert job.status == "failed" and job.attempts == 1  # not retried: it cannot succeed
    assert "not found" in (job.error or "") and "secret/elsewhere" in (job.error or "")
    assert world.gitlab.discussions(PROJECT, 1) == []


def test_the_worker_asks_gitlab_by_project_id_so_a_renamed_project_is_still_found(
    world: World, service: tuple[App, Store, JobQueue]
) -> None:
    worker_app, store, queue = service
    app = create_app(worker_app.settings, store, queue, secret=SECRET, bot_username="reviewbot")
    payload = open_event(world)
    payload["project"]["path_with_namespace"] = "group/app-before-the-rename"  # id 7 stays
    with TestClient(app) as client:
        assert deliver(client, payload, "6f3a0c1e-0000-4000-8000-000000000042") == 202
    [queued] = queue.list()
    assert queued.project_id == 7
    Worker(worker_app, queue, poll_s=0.05).run(burst=True, handle_signals=False)
    [job] = queue.list()
    assert job.status == "succeeded", job.error
    assert len(diff_notes(world)) == 3


def test_review_full_comment_reviews_an_already_reviewed_head_again(
    world: World, service: tuple[App, Store, JobQueue]
) -> None:
    worker_app, store, queue = service
    app = create_app(worker_app.settings, store, queue, secret=SECRET, bot_username="reviewbot")

    def comment(note: str, uuid: str) -> Job:
        """Post ``note`` on the MR, let a worker run what it queued: the job."""
        with TestClient(app) as client:
            assert deliver(client, note_event(world, note), uuid, "Note Hook") == 202
        Worker(worker_app, queue, poll_s=0.05).run(burst=True, handle_signals=False)
        job = queue.list()[0]  # newest first
        assert job.status == "succeeded", job.error
        return job

    with TestClient(app) as client:
        assert deliver(client, open_event(world), "6f3a0c1e-0000-4000-8000-000000000101") == 202
    Worker(worker_app, queue, poll_s=0.05).run(burst=True, handle_signals=False)
    assert len(diff_notes(world)) == 3
    calls = len(world.vllm.requests)
    again = comment("/reviewbot review", "6f3a0c1e-0000-4000-8000-000000000102")
    assert FULL_REVIEW_KEY not in again.payload
    assert len(world.vllm.requests) == calls  # the same head: nothing to review
    full = comment("/reviewbot review --full", "6f3a0c1e-0000-4000-8000-000000000103")
    assert full.payload.get(FULL_REVIEW_KEY) is True and full.trigger == "note"
    assert len(world.vllm.requests) > calls  # every hunk went to the model again
    assert len(diff_notes(world)) == 3  # and nothing was posted twice
    [newest, *_] = store.reviews(project=PROJECT, mr_iid=1)
    assert newest["status"] == "succeeded" and store.llm_calls(newest["id"])
