"""The worker chooses each job's effort from the load (issue 37, docs/effort.md): the queue in
the database and the fake vLLM's own ``vllm:num_requests_running`` / ``_waiting`` gauges, read
over HTTP; a real worker loop runs the jobs against the fake GitLab and the fake vLLM. Runs on
SQLite and, when configured, PostgreSQL (tests/store_fixtures.py)."""

from __future__ import annotations

import logging

import pytest

from reviewbot.app import App
from reviewbot.effort import Effort
from reviewbot.ops.router_probes import pool_gauges
from reviewbot.queue import JobQueue
from reviewbot.states import Trigger
from reviewbot.worker import Worker
from reviewbot.worker.load_effort import LoadEffort
from tests.mr_world import PROJECT, World
from tests.router_pool import NO_ROUTER_REASON, ROUTER_BINARY, router_pool

FAST_POLL_S = 0.05
JOBS_LOG = "reviewbot.worker.jobs"
BUSY_RUNNING = 3
DEAD_URL = "http://127.0.0.1:9/v1"  # the discard port: nothing answers there


def _run_one_job(world: World, caplog: pytest.LogCaptureFixture, **settings: object) -> str:
    """Queue a review of MR !1, run it with a real worker; the job's effort line in the log."""
    caplog.clear()
    with App(world.settings(**settings)) as app, caplog.at_level(logging.INFO, JOBS_LOG):
        queue = JobQueue(app.store)
        queue.enqueue(project=PROJECT, mr_iid=1, head_sha=None, trigger=Trigger.WEBHOOK.value)
        Worker(app, queue, poll_s=FAST_POLL_S).run(burst=True, handle_signals=False)
        [job] = [job for job in queue.list() if job.status != "superseded"][:1]
        assert job.status == "succeeded", job.error
    lines = [r.getMessage() for r in caplog.records if "effort" in r.getMessage()]
    return "\n".join(lines)


def test_an_idle_pool_gets_deep_and_a_busy_one_standard(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    idle = _run_one_job(world, caplog, effort_follows_load=True)
    assert "effort deep (queue 0, 1 box idle (running 0, waiting 0): deep)" in idle
    world.vllm.set_gauges(running=BUSY_RUNNING)
    busy_line = _run_one_job(world, caplog, effort_follows_load=True)
    assert f"1 box busy (running {BUSY_RUNNING}, waiting 0): standard" in busy_line
    world.vllm.set_gauges(waiting=1)
    assert "waiting 1): standard" in _run_one_job(world, caplog, effort_follows_load=True)


def test_off_the_worker_leaves_the_effort_to_the_settings(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    assert _run_one_job(world, caplog) == ""


def test_a_backed_up_queue_is_quick(world: World) -> None:
    with App(world.settings(effort_follows_load=True, effort_quick_queue_depth=2)) as app:
        queue = JobQueue(app.store)
        load = LoadEffort(app.settings, queue)
        assert load.now().effort is Effort.DEEP
        queue.enqueue(project=PROJECT, mr_iid=2, head_sha="b" * 40, trigger="webhook")
        assert load.now().effort is Effort.STANDARD
        queue.enqueue(project=PROJECT, mr_iid=3, head_sha="c" * 40, trigger="webhook")
        choice = load.now()
        assert choice.effort is Effort.QUICK
        assert choice.reason.startswith("queue 2 (oldest waiting")
        # a second look waiting is not a job anyone waits for: not counted
        queue.enqueue(project=PROJECT, mr_iid=4, head_sha="d" * 40, trigger="idle")
        assert queue.backlog()[0] == 2


def test_a_box_whose_metrics_cannot_be_read_counts_as_busy(world: World) -> None:
    with App(world.settings(effort_follows_load=True, llm_base_url=DEAD_URL)) as app:
        choice = LoadEffort(app.settings, JobQueue(app.store)).now()
    assert choice.effort is Effort.STANDARD
    assert "metrics unread from http://127.0.0.1:9 (counted busy)" in choice.reason


@pytest.mark.skipif(ROUTER_BINARY is None, reason=NO_ROUTER_REASON)
def test_every_box_behind_the_router_is_read(world: World) -> None:
    with router_pool(2) as pool:
        settings = world.settings(effort_follows_load=True, llm_base_url=pool.base_url)
        gauges = pool_gauges(settings, settings.effort_metrics_timeout_s)
        assert sorted(g.url for g in gauges) == sorted(url.rstrip("/") for url in pool.urls)
        with App(settings) as app:
            load = LoadEffort(app.settings, JobQueue(app.store))
            assert load.now().reason == "queue 0, 2 boxes idle (running 0, waiting 0): deep"
            pool.boxes[1].set_gauges(running=BUSY_RUNNING)
            busy = load.now()
    assert busy.effort is Effort.STANDARD
    assert f"2 boxes busy (running {BUSY_RUNNING}, waiting 0)" in busy.reason
