"""Tests for reviewbot.queue: dedupe, supersede, one running job per MR, leases, retries.

Every test runs on SQLite and, when REVIEWBOT_TEST_POSTGRES_URL is set, on PostgreSQL too
(tests/store_fixtures.py). Time is a FakeClock moved by hand: lease expiry and backoff need
no sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from sqlalchemy import create_engine, func, select, update

from reviewbot.queue import (
    EnqueueResult,
    Job,
    JobQueue,
    JobStateError,
    LeaseLostError,
)
from reviewbot.store import RecordNotFound, Store
from reviewbot.store.job_queries import mr_lock_key
from reviewbot.store.models import Job as JobRow
from tests.builders import FakeClock
from tests.store_fixtures import migrated_store, store_url  # noqa: F401

PROJECT = "group/app"
HEAD_A = "a" * 40
HEAD_B = "b" * 40
LEASE_S = 30.0
BACKOFF_BASE_S = 10.0
BACKOFF_MAX_S = 1000.0
THREADS = 4
MR_COUNT = 20


@pytest.fixture
def queue(migrated_store: Store, clock: FakeClock) -> JobQueue:  # noqa: F811
    return JobQueue(
        migrated_store, clock=clock, backoff_base_s=BACKOFF_BASE_S, backoff_max_s=BACKOFF_MAX_S
    )


@pytest.fixture
def queue_factory(store_url: str, clock: FakeClock) -> Iterator[Callable[[], JobQueue]]:  # noqa: F811
    """Independent queues (own engine each), as separate workers would have."""
    stores: list[Store] = []

    def make() -> JobQueue:
        store = Store.from_url(store_url)
        stores.append(store)
        return JobQueue(store, clock=clock)

    yield make
    for store in stores:
        store.close()


def _enqueue(
    queue: JobQueue, mr_iid: int = 1, head_sha: str | None = HEAD_A, **extra: object
) -> EnqueueResult:
    return queue.enqueue(
        project=PROJECT, mr_iid=mr_iid, head_sha=head_sha, trigger="webhook", **extra
    )  # type: ignore[arg-type]


def _claim(queue: JobQueue, worker_id: str = "w1") -> Job:
    job = queue.claim(worker_id, LEASE_S)
    assert job is not None
    return job


# -- enqueue ----------------------------------------------------------------------------


@pytest.mark.slow
def test_enqueue_stores_the_job(queue: JobQueue, clock: FakeClock) -> None:
    result = _enqueue(queue, dedupe_key="delivery-1", payload={"event": "open"}, max_attempts=3)
    job = queue.get(result.job_id)
    assert result.created
    assert result.superseded == []
    assert (job.project, job.mr_iid, job.head_sha, job.trigger) == (PROJECT, 1, HEAD_A, "webhook")
    assert (job.status, job.attempts, job.max_attempts) == ("queued", 0, 3)
    assert job.payload == {"event": "open"}
    assert job.run_after == clock.now
    assert job.lease_owner is None


def test_redelivery_returns_the_same_job(queue: JobQueue) -> None:
    results = [_enqueue(queue, dedupe_key="uuid-1") for _ in range(5)]
    assert len({result.job_id for result in results}) == 1
    assert [result.created for result in results] == [True] + [False] * 4
    assert len(queue.list()) == 1


def test_redelivery_after_completion_does_not_queue_again(queue: JobQueue) -> None:
    first = _enqueue(queue, dedupe_key="uuid-1")
    queue.complete(_claim(queue).id, "w1")
    again = _enqueue(queue, dedupe_key="uuid-1")
    assert (again.job_id, again.created) == (first.job_id, False)
    assert queue.get(first.job_id).status == "succeeded"


def test_concurrent_redeliveries_create_one_job(
    queue: JobQueue, queue_factory: Callable[[], JobQueue]
) -> None:
    queues = [queue_factory() for _ in range(THREADS)]
    barrier = threading.Barrier(THREADS)
    results: list[EnqueueResult] = []

    def deliver(producer: JobQueue) -> None:
        barrier.wait()
        results.append(_enqueue(producer, dedupe_key="same-delivery"))

    _run_threads(deliver, queues)
    assert len({result.job_id for result in results}) == 1
    assert sum(result.created for result in results) == 1
    assert len(queue.list()) == 1


def test_newer_head_supersedes_the_queued_job(queue: JobQueue) -> None:
    older = _enqueue(queue, head_sha=HEAD_A)
    other_mr = _enqueue(queue, mr_iid=2, head_sha=HEAD_A)
    newer = _enqueue(queue, head_sha=HEAD_B)
    assert newer.created
    assert newer.superseded == [older.job_id]
    assert queue.get(older.job_id).status == "superseded"
    assert queue.get(other_mr.job_id).status == "queued"
    assert _claim(queue).id in {newer.job_id, other_mr.job_id}


def test_same_head_already_queued_is_not_queued_twice(queue: JobQueue) -> None:
    first = _enqueue(queue, dedupe_key="push-event")
    same_head = _enqueue(queue, dedupe_key="note-event")
    any_head = _enqueue(queue, head_sha=None)
    assert (same_head.job_id, same_head.created) == (first.job_id, False)
    assert (any_head.job_id, any_head.created) == (first.job_id, False)
    assert queue.counts()["queued"] == 1


def test_running_job_is_not_superseded_but_a_new_head_is_queued(queue: JobQueue) -> None:
    _enqueue(queue, head_sha=HEAD_A)
    running = _claim(queue)
    newer = _enqueue(queue, head_sha=HEAD_B)
    assert newer.created
    assert newer.superseded == []
    assert queue.get(running.id).status == "running"


def test_new_head_supersedes_a_dead_workers_job(queue: JobQueue, clock: FakeClock) -> None:
    _enqueue(queue, head_sha=HEAD_A)
    dead = _claim(queue, "crashed")
    clock.advance(LEASE_S + 1)
    newer = _enqueue(queue, head_sha=HEAD_B)
    assert newer.superseded == [dead.id]
    assert _claim(queue, "w2").id == newer.job_id


def test_a_reply_job_never_supersedes_nor_is_superseded_by_a_review(
    queue: JobQueue, clock: FakeClock
) -> None:
    review = _enqueue(queue, head_sha=HEAD_A)
    reply = _enqueue(queue, head_sha=HEAD_B, kind="reply", dedupe_key="reply:note-1")
    assert reply.created and reply.superseded == []
    assert queue.get(review.job_id).status == "queued"
    newer = _enqueue(queue, head_sha=HEAD_B)
    assert newer.superseded == [review.job_id]
    assert queue.get(reply.job_id).status == "queued"
    second = _enqueue(queue, head_sha=HEAD_B, kind="reply", dedupe_key="reply:note-2")
    assert second.created and queue.get(reply.job_id).status == "queued"
    again = _enqueue(queue, head_sha=HEAD_B, kind="reply", dedupe_key="reply:note-1")
    assert (again.job_id, again.created) == (reply.job_id, False)


def test_a_reply_job_runs_while_a_review_of_its_mr_runs(queue: JobQueue, clock: FakeClock) -> None:
    _enqueue(queue, head_sha=HEAD_A)
    review = _claim(queue, "w1")
    reply = _enqueue(queue, head_sha=HEAD_A, kind="reply", dedupe_key="reply:note-1")
    claimed = _claim(queue, "w2")
    assert (claimed.id, claimed.kind) == (reply.job_id, "reply")
    assert review.kind == "review"
    # a reply job taken over after its worker died does not supersede the review's dead job
    clock.advance(LEASE_S + 1)
    _enqueue(queue, head_sha=HEAD_A, kind="reply", dedupe_key="reply:note-2")
    assert {_claim(queue, "w3").id, _claim(queue, "w4").id} >= {review.id}
    assert queue.get(review.id).status == "running"


def test_a_reply_job_needs_a_known_kind_and_its_note(queue: JobQueue) -> None:
    with pytest.raises(ValueError, match="kind"):
        _enqueue(queue, kind="chat", dedupe_key="x")
    with pytest.raises(ValueError, match="dedupe_key"):
        _enqueue(queue, kind="reply")


def test_invalid_enqueue_arguments_are_refused(queue: JobQueue) -> None:
    with pytest.raises(ValueError, match="trigger"):
        queue.enqueue(project=PROJECT, mr_iid=1, head_sha=HEAD_A, trigger="cron")
    with pytest.raises(ValueError, match="max_attempts"):
        _enqueue(queue, max_attempts=0)


# -- claim and leases -------------------------------------------------------------------


def test_claim_takes_oldest_job_with_a_lease(queue: JobQueue, clock: FakeClock) -> None:
    first = _enqueue(queue, mr_iid=1)
    _enqueue(queue, mr_iid=2)
    job = _claim(queue, "w1")
    assert job.id == first.job_id
    assert (job.status, job.lease_owner, job.attempts) == ("running", "w1", 1)
    assert job.lease_expires_at == clock.now + timedelta(seconds=LEASE_S)


def test_empty_queue_claims_nothing(queue: JobQueue) -> None:
    assert queue.claim("w1", LEASE_S) is None


def test_at_most_one_running_job_per_mr(queue: JobQueue) -> None:
    _enqueue(queue, mr_iid=1, head_sha=HEAD_A)
    running = _claim(queue, "w1")
    waiting = _enqueue(queue, mr_iid=1, head_sha=HEAD_B)
    assert queue.claim("w2", LEASE_S) is None
    other_mr = _enqueue(queue, mr_iid=2)
    assert _claim(queue, "w2").id == other_mr.job_id

    queue.complete(running.id, "w1")
    assert _claim(queue, "w3").id == waiting.job_id


def test_expired_lease_is_reclaimed(queue: JobQueue, clock: FakeClock) -> None:
    _enqueue(queue)
    lost = _claim(queue, "crashed")
    clock.advance(LEASE_S - 1)
    assert queue.claim("w2", LEASE_S) is None

    clock.advance(2)
    taken = _claim(queue, "w2")
    assert taken.id == lost.id
    assert (taken.lease_owner, taken.attempts) == ("w2", 2)
    assert not queue.heartbeat(lost.id, "crashed", LEASE_S)
    with pytest.raises(LeaseLostError):
        queue.complete(lost.id, "crashed")
    queue.complete(taken.id, "w2")
    assert queue.get(taken.id).status == "succeeded"


def test_heartbeat_keeps_the_lease(queue: JobQueue, clock: FakeClock) -> None:
    _enqueue(queue)
    job = _claim(queue, "w1")
    for _ in range(3):
        clock.advance(LEASE_S * 2 / 3)
        assert queue.heartbeat(job.id, "w1", LEASE_S)
        assert queue.claim("w2", LEASE_S) is None
    assert queue.get(job.id).lease_expires_at == clock.now + timedelta(seconds=LEASE_S)


def test_job_whose_workers_keep_dying_ends_failed(queue: JobQueue, clock: FakeClock) -> None:
    job_id = _enqueue(queue, max_attempts=2).job_id
    for worker in ("first", "second"):
        assert _claim(queue, worker).id == job_id
        clock.advance(LEASE_S + 1)
    assert queue.claim("third", LEASE_S) is None
    job = queue.get(job_id)
    assert job.status == "failed"
    assert "lease expired" in (job.error or "")


@pytest.mark.slow
def test_concurrent_claims_take_each_job_once(
    queue: JobQueue, queue_factory: Callable[[], JobQueue]
) -> None:
    expected = {_enqueue(queue, mr_iid=iid).job_id for iid in range(1, MR_COUNT + 1)}
    claimed: list[int] = []
    barrier = threading.Barrier(THREADS)

    def drain(worker: JobQueue) -> None:
        worker_id = f"w-{threading.get_ident()}"
        barrier.wait()
        while (job := worker.claim(worker_id, LEASE_S)) is not None:
            claimed.append(job.id)
            worker.complete(job.id, worker_id)

    _run_threads(drain, [queue_factory() for _ in range(THREADS)])
    assert sorted(claimed) == sorted(expected)
    assert queue.counts()["succeeded"] == MR_COUNT


def test_concurrent_claims_never_run_one_mr_twice(
    queue: JobQueue, queue_factory: Callable[[], JobQueue], clock: FakeClock
) -> None:
    """A dead worker's job and a newer queued job of the same MR: only one may start."""
    _enqueue(queue, head_sha=HEAD_A)
    _claim(queue, "crashed")
    _enqueue(queue, head_sha=HEAD_B)  # the running job is live: queued beside it
    clock.advance(LEASE_S + 1)  # now both are runnable
    claimed: list[Job] = []
    barrier = threading.Barrier(THREADS)

    def contend(worker: JobQueue) -> None:
        barrier.wait()
        job = worker.claim(f"w-{threading.get_ident()}", LEASE_S)
        if job is not None:
            claimed.append(job)

    _run_threads(contend, [queue_factory() for _ in range(THREADS)])
    assert len(claimed) == 1
    assert queue.counts()["running"] == 1


# Far longer than a claim that does not wait takes; only a claim that waits reaches it.
CLAIM_WAIT_S = 10.0


def test_a_claim_never_waits_for_an_mr_another_transaction_is_writing(
    queue: JobQueue,
    store_url: str,  # noqa: F811
) -> None:
    """An enqueue holds the MR's lock and then writes the MR's queued job; a claim that held
    that job's row while waiting for the MR's lock would deadlock with it."""
    if not store_url.startswith("postgresql"):
        pytest.skip("PostgreSQL advisory locks")
    job_id = _enqueue(queue).job_id
    engine = create_engine(store_url)
    outcome: list[Job | None] = []
    try:
        with engine.begin() as writer:
            writer.execute(select(func.pg_advisory_xact_lock(mr_lock_key(PROJECT, 1))))
            claimer = threading.Thread(target=lambda: outcome.append(queue.claim("w1", LEASE_S)))
            claimer.start()
            claimer.join(CLAIM_WAIT_S)
            claimed_without_waiting = not claimer.is_alive()
            writer.execute(update(JobRow).where(JobRow.id == job_id).values(attempts=0))
        claimer.join()
    finally:
        engine.dispose()
    assert claimed_without_waiting and outcome == [None]  # the MR was busy: skipped
    assert _claim(queue).id == job_id  # and taken by the next claim


# -- settling ----------------------------------------------------------------------------


def test_retryable_failures_back_off_then_fail(queue: JobQueue, clock: FakeClock) -> None:
    job_id = _enqueue(queue, max_attempts=3).job_id
    delays = []
    for _ in range(2):
        job = _claim(queue)
        retried = queue.fail(job.id, "w1", "GitLab answered 503", retryable=True)
        assert (retried.status, retried.lease_owner) == ("queued", None)
        delay = (retried.run_after - clock.now).total_seconds()
        assert delay > 0
        delays.append(delay)
        clock.advance(delay - 1)
        assert queue.claim("w1", LEASE_S) is None
        clock.advance(1)
    assert delays[1] == 2 * delays[0]

    final = queue.fail(_claim(queue).id, "w1", "GitLab answered 503", retryable=True)
    assert (final.status, final.attempts, final.error) == ("failed", 3, "GitLab answered 503")
    assert queue.get(job_id).status == "failed"
    assert queue.claim("w1", LEASE_S) is None


@pytest.mark.slow
def test_backoff_is_capped(queue: JobQueue, clock: FakeClock) -> None:
    _enqueue(queue, max_attempts=20)
    for _ in range(12):
        job = queue.fail(_claim(queue).id, "w1", "down", retryable=True)
        assert (job.run_after - clock.now).total_seconds() <= BACKOFF_MAX_S
        clock.advance(BACKOFF_MAX_S)


def test_permanent_failure_is_final_at_once(queue: JobQueue) -> None:
    _enqueue(queue)
    job = _claim(queue)
    failed = queue.fail(job.id, "w1", "404 Project Not Found", retryable=False)
    assert (failed.status, failed.attempts) == ("failed", 1)


def test_errors_are_scrubbed_of_secrets(queue: JobQueue) -> None:
    _enqueue(queue)
    token = "glpat-abcdefghijklmnopqrst"
    failed = queue.fail(_claim(queue).id, "w1", f"401 with PRIVATE-TOKEN: {token}", retryable=False)
    assert token not in (failed.error or "")
    assert "401" in (failed.error or "")


def test_release_requeues_without_counting_an_attempt(queue: JobQueue) -> None:
    job_id = _enqueue(queue).job_id
    queue.release(_claim(queue, "stopping").id, "stopping")
    released = queue.get(job_id)
    assert (released.status, released.attempts, released.lease_owner) == ("queued", 0, None)
    assert _claim(queue, "w2").id == job_id
    with pytest.raises(LeaseLostError):
        queue.release(job_id, "stopping")


def test_settling_unknown_job_raises_record_not_found(queue: JobQueue) -> None:
    with pytest.raises(RecordNotFound):
        queue.complete(999, "w1")
    with pytest.raises(RecordNotFound):
        queue.get(999)


# -- operators ---------------------------------------------------------------------------


@pytest.mark.slow
def test_cancel_for_mr_cancels_queued_jobs_only(queue: JobQueue) -> None:
    _enqueue(queue, mr_iid=1, head_sha=HEAD_A)
    running = _claim(queue)
    queued = _enqueue(queue, mr_iid=1, head_sha=HEAD_B)
    other = _enqueue(queue, mr_iid=2)
    assert queue.cancel_for_mr(PROJECT, 1, "merge request merged") == 1
    assert queue.get(queued.job_id).status == "cancelled"
    assert queue.get(queued.job_id).error == "merge request merged"
    assert queue.get(running.id).status == "running"
    assert queue.get(other.job_id).status == "queued"


@pytest.mark.slow
def test_cancel_a_running_job_takes_its_lease(queue: JobQueue) -> None:
    _enqueue(queue)
    job = _claim(queue)
    assert queue.cancel(job.id).status == "cancelled"
    assert queue.cancel(job.id).status == "cancelled"
    assert not queue.heartbeat(job.id, "w1", LEASE_S)
    with pytest.raises(LeaseLostError):
        queue.complete(job.id, "w1")


def test_retry_requeues_a_finished_job(queue: JobQueue) -> None:
    _enqueue(queue, max_attempts=1)
    job = _claim(queue)
    with pytest.raises(JobStateError):
        queue.retry(job.id)
    queue.fail(job.id, "w1", "boom", retryable=True)
    retried = queue.retry(job.id)
    assert (retried.status, retried.attempts, retried.error) == ("queued", 0, None)
    assert _claim(queue).id == job.id
    queue.complete(job.id, "w1")
    with pytest.raises(JobStateError):
        queue.cancel(job.id)


def test_list_and_counts(queue: JobQueue) -> None:
    ids = [_enqueue(queue, mr_iid=iid).job_id for iid in range(1, 4)]
    queue.complete(_claim(queue).id, "w1")
    assert [job.id for job in queue.list()] == sorted(ids, reverse=True)
    assert [job.id for job in queue.list(limit=1)] == [max(ids)]
    assert [job.id for job in queue.list(status="succeeded")] == [min(ids)]
    counts = queue.counts()
    assert (counts["queued"], counts["succeeded"], counts["failed"]) == (2, 1, 0)
    assert sum(counts.values()) == len(ids)
    with pytest.raises(ValueError, match="status"):
        queue.list(status="done")


def _run_threads(target: Callable[[JobQueue], None], queues: list[JobQueue]) -> None:
    """Run ``target`` on each queue in its own thread; an exception in one fails the test."""
    errors: list[BaseException] = []

    def run(queue: JobQueue) -> None:
        try:
            target(queue)
        except BaseException as error:  # noqa: BLE001 - re-raised below, in the test thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(q,)) for q in queues]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
