"""When idle, look again (issue 37, docs/effort.md): the worker queues a second look at a
recent open MR while the fake vLLM's gauges say the pool is idle, runs it at the lowest
priority and posts only what is new, exactly once; one head is looked at once; the day's
budget of model time stops it; a fresh MR's job goes first. SQLite and, when configured,
PostgreSQL (tests/store_fixtures.py)."""

from __future__ import annotations

from reviewbot.app import App
from reviewbot.effort_settings import DEFAULT_DEEP_PASSES
from reviewbot.model import request_priority
from reviewbot.mr import RunOptions
from reviewbot.queue import JobQueue
from reviewbot.states import Trigger, Workload
from reviewbot.store import Store
from reviewbot.worker import Worker
from reviewbot.worker.idle_review import IdleReview
from reviewbot.worker.load_effort import LoadEffort
from tests.fakes.vllm_server import PLANTED_TITLE
from tests.mr_world import PROJECT, World

FAST_POLL_S = 0.05
BUSY_RUNNING = 2
WORKER_LEASE_S = 60.0


def _bodies(world: World) -> list[str]:
    """The inline comments' bodies (the summary note is edited in place, one note still)."""
    return [
        d["notes"][0]["body"]
        for d in world.gitlab.discussions(PROJECT, 1)
        if d["notes"][0]["type"] == "DiffNote"
    ]


def _notes(world: World) -> int:
    return len(world.gitlab.notes(PROJECT, 1))


def _look_again(world: World, **settings: object) -> list:
    """One worker in burst mode with idle_review on; the jobs it left in the queue."""
    with App(world.settings(idle_review=True, **settings)) as app:
        queue = JobQueue(app.store)
        Worker(app, queue, poll_s=FAST_POLL_S).run(burst=True, handle_signals=False)
        return queue.list()


def test_a_second_look_at_an_unchanged_mr_posts_nothing_twice(world: World) -> None:
    world.run()
    first, notes = _bodies(world), _notes(world)
    assert first
    asked_before = len(world.vllm.requests)
    [job] = _look_again(world)
    assert (job.trigger, job.status, job.payload) == ("idle", "succeeded", {"full": True})
    assert (_bodies(world), _notes(world)) == (first, notes)
    second_look_requests = world.vllm.requests[asked_before:]
    assert second_look_requests
    background = request_priority(Workload.BACKGROUND)
    assert {body.get("priority") for body in second_look_requests} == {background}
    # The same head again: no second look for it.
    assert [j.id for j in _look_again(world)] == [job.id]


def test_a_second_look_posts_a_new_finding_once(world: World) -> None:
    world.run()
    first, notes = _bodies(world), _notes(world)
    # the deep look finds one thing more, in every one of its passes (one chunk: one request
    # a pass), so the vote keeps it
    world.vllm.add_faults(*["planted_finding"] * DEFAULT_DEEP_PASSES)
    [job] = _look_again(world)
    assert job.status == "succeeded"
    after = _bodies(world)
    assert after[: len(first)] == first
    assert len(after) == len(first) + 1 and PLANTED_TITLE in after[-1]
    assert _notes(world) == notes + 1
    # Found again by a later review: on the MR already, never posted twice.
    world.vllm.add_faults("planted_finding")
    world.run(RunOptions(full=True))
    assert (_bodies(world), _notes(world)) == (after, notes + 1)


def test_a_new_finding_only_one_pass_reported_is_voted_out_of_the_second_look(
    world: World,
) -> None:
    world.run()
    first, notes = _bodies(world), _notes(world)
    world.vllm.add_faults("planted_finding")  # the first pass only
    [job] = _look_again(world)
    assert job.status == "succeeded"
    assert (_bodies(world), _notes(world)) == (first, notes)
    store = Store.from_url(world.database_url)
    [second_look] = [r for r in store.reviews() if r["trigger"] == Trigger.IDLE]
    assert (second_look["effort"], second_look["passes"]) == ("deep", DEFAULT_DEEP_PASSES)
    states = {f["title"]: (f["state"], f["votes"]) for f in store.findings(second_look["id"])}
    assert states[PLANTED_TITLE] == ("voted_out", 1)


def test_no_second_look_when_busy_or_over_budget(world: World) -> None:
    world.run()
    world.vllm.set_gauges(running=BUSY_RUNNING)
    with App(world.settings(idle_review=True)) as app:
        queue = JobQueue(app.store)
        tick = IdleReview(app, queue, LoadEffort(app.settings, queue)).tick()
    assert tick.job_id is None
    assert tick.reason.startswith("the pool is not idle: queue 0, 1 box busy (running 2")
    world.vllm.set_gauges()
    with App(world.settings(idle_review=True, idle_review_gpu_seconds_per_day=0)) as app:
        queue = JobQueue(app.store)
        tick = IdleReview(app, queue, LoadEffort(app.settings, queue)).tick()
    assert tick == tick.__class__(None, "today's budget is spent (0 of 0 s)")
    assert _look_again(world, idle_review_gpu_seconds_per_day=0) == []


def test_a_fresh_mrs_job_goes_before_a_second_look(migrated_store: Store) -> None:
    queue = JobQueue(migrated_store)
    idle = queue.enqueue(project=PROJECT, mr_iid=1, head_sha="a" * 40, trigger=Trigger.IDLE)
    fresh = queue.enqueue(project=PROJECT, mr_iid=2, head_sha="b" * 40, trigger="webhook")
    first = queue.claim("worker-1", WORKER_LEASE_S)
    second = queue.claim("worker-1", WORKER_LEASE_S)
    assert first is not None and second is not None
    assert (first.id, second.id) == (fresh.job_id, idle.job_id)
