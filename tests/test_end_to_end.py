"""Webhook -> queue -> worker -> fake GitLab + fake vLLM -> comments + database, in one test.

Runs on SQLite and, when REVIEWBOT_TEST_POSTGRES_URL is set, on PostgreSQL.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

from starlette.testclient import TestClient

from reviewbot.queue import JobQueue
from reviewbot.store import Store, upgrade
from reviewbot.webhook import WEBHOOK_PATH, create_app
from reviewbot.worker import Worker
from tests.mr_world import PROJECT, World, git

SECRET = "e2e-webhook-secret"
MAX_WORKER_ROUNDS = 50
FIXTURES = Path(__file__).parent / "fixtures" / "webhooks"


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


def deliver(client: TestClient, payload: dict, uuid: str) -> int:
    headers = {
        "X-Gitlab-Token": SECRET,
        "X-Gitlab-Event": "Merge Request Hook",
        "X-Gitlab-Event-UUID": uuid,
        "Content-Type": "application/json",
    }
    return client.post(WEBHOOK_PATH, content=json.dumps(payload), headers=headers).status_code


def diff_notes(world: World) -> list[dict]:
    return [
        d["notes"][0]
        for d in world.gitlab.discussions(PROJECT, 1)
        if d["notes"][0]["type"] == "DiffNote"
    ]


def test_webhook_to_comments_and_database(world: World) -> None:
    settings = world.settings()
    upgrade(world.database_url)
    store = Store.from_url(world.database_url)
    queue = JobQueue(store, backoff_base_s=0.05, backoff_max_s=0.1)
    app = create_app(settings, store, queue, secret=SECRET, bot_username="reviewbot")
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
            Worker(settings, queue, poll_s=0.05).run(burst=True, handle_signals=False)
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
        Worker(settings, queue, poll_s=0.05).run(burst=True, handle_signals=False)
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
