"""The worker's loop: claim jobs from the durable queue, run them, heartbeat, settle.

`Worker.run()` claims jobs (`reviewbot.queue.JobQueue`), runs `handler(job)` in up to
`concurrency` threads, renews each lease every `lease_s / 3`, and settles the job: succeeded,
retried with backoff (transient errors: GitLab or the model unreachable, MR busy, connection
errors) or failed (anything else: not found, no access, bad settings, bugs). On SIGTERM or
SIGINT it stops claiming, lets running jobs finish for `grace_s`, then releases the rest to
the queue, so another worker picks them up at once. With `burst=True` it exits once nothing
is left to claim and its own jobs are done.

With ``effort_follows_load`` each job's effort is chosen from the load as it starts
(`reviewbot.worker.load_effort`); with ``idle_review``, while it runs nothing, the worker asks
`reviewbot.worker.idle_review` every ``idle_review_interval_s`` whether to queue a second look.

Owns: claiming, running, heartbeating and settling jobs. Must not: decide what a job does
(`reviewbot.worker.jobs` does), parse options or print (it logs).
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

from sqlalchemy.exc import DBAPIError

from reviewbot.app import App
from reviewbot.errors import disposition
from reviewbot.gitlab import GitLabError
from reviewbot.queue import (
    Job,
    JobQueue,
    JobStatus,
    LeaseLostError,
)
from reviewbot.retry import backoff_s
from reviewbot.worker.idle_review import IdleReview
from reviewbot.worker.jobs import is_retryable, job_concurrency, run_job
from reviewbot.worker.load_effort import LoadEffort

__all__ = ["Worker", "WorkerStats", "default_worker_id"]

log = logging.getLogger(__name__)

JobHandler = Callable[[Job], object]

DEFAULT_LEASE_S = 300.0
DEFAULT_POLL_S = 1.0
DEFAULT_GRACE_S = 30.0
HEARTBEATS_PER_LEASE = 3
MIN_LEASE_S = 1.0
WORKER_ID_SUFFIX_CHARS = 8
ERROR_TEXT_LIMIT = 2000
# Another run holds the MR: look again this much later (not counted as an attempt).
BUSY_RETRY_S = 10.0
# Recording a job's result survives a database restart: tries, and the first pause (doubling).
SETTLE_ATTEMPTS = 5
SETTLE_RETRY_S = 0.5
SETTLE_RETRY_MAX_S = 8.0  # the pauses between the five tries: 0.5, 1, 2, 4 s


def default_worker_id() -> str:
    """host:pid:random, unique across hosts and restarts, readable in `jobs list`."""
    suffix = uuid.uuid4().hex[:WORKER_ID_SUFFIX_CHARS]
    return f"{socket.gethostname()}:{os.getpid()}:{suffix}"


@dataclass
class WorkerStats:
    """What one `Worker.run` did."""

    claimed: int = 0
    succeeded: int = 0
    retried: int = 0
    failed: int = 0
    postponed: int = 0  # another run held the MR: queued again, attempt not counted
    released: int = 0
    lost: int = 0


@dataclass
class _Running:
    """A job this worker is running, and how it is to be settled."""

    job: Job
    thread: threading.Thread | None = None
    next_heartbeat: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    settling: bool = False
    released: bool = False


class Worker:
    """Claims jobs from `queue` and runs them with `handler`, `concurrency` at a time."""

    def __init__(
        self,
        app: App,
        queue: JobQueue | None = None,
        *,
        handler: JobHandler | None = None,
        worker_id: str | None = None,
        concurrency: int = 1,
        lease_s: float = DEFAULT_LEASE_S,
        poll_s: float = DEFAULT_POLL_S,
        grace_s: float = DEFAULT_GRACE_S,
    ) -> None:
        """`queue=None`: the queue in the App's database. `handler=None` runs the real review
        (`run_job`) on the App, with the model's request budget (`settings.concurrency`)
        divided among the `concurrency` jobs run at once; build the App with
        `shared_model_slots=True` so every model request holds a slot shared with the other
        workers (`reviewbot.slots`)."""
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        if lease_s < MIN_LEASE_S:
            raise ValueError(f"lease_s must be at least {MIN_LEASE_S}, got {lease_s}")
        if poll_s <= 0:
            raise ValueError(f"poll_s must be positive, got {poll_s}")
        self.app = app
        self.queue = queue or JobQueue(app.store)
        self.load = LoadEffort(app.settings, self.queue)
        if handler is None:
            share = job_concurrency(app.settings, concurrency)
            handler = functools.partial(run_job, app, concurrency=share, load=self.load)
        self.handler = handler
        self.worker_id = worker_id or default_worker_id()
        self.concurrency = concurrency
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.grace_s = grace_s
        self.stats = WorkerStats()
        self._heartbeat_s = lease_s / HEARTBEATS_PER_LEASE
        self._stopping = threading.Event()
        self._abandon = threading.Event()
        self._wake = threading.Event()
        self._running: dict[int, _Running] = {}
        self._stats_lock = threading.Lock()
        self.idle = IdleReview(app, self.queue, self.load) if app.settings.idle_review else None
        self._next_look = 0.0  # monotonic time of the next second-look tick

    # -- control -----------------------------------------------------------------------

    def stop(self) -> None:
        """Stop claiming; running jobs get `grace_s` to finish, then are released."""
        self._stopping.set()
        self._wake.set()

    def abandon(self) -> None:
        """Stop now: release running jobs without waiting for the grace period."""
        self._abandon.set()
        self.stop()

    def run(self, *, burst: bool = False, handle_signals: bool = True) -> WorkerStats:
        """Work until stopped (SIGTERM/SIGINT or `stop()`), or until idle when `burst`."""
        log.info(
            "worker %s: started (concurrency %d, lease %.0fs)",
            self.worker_id,
            self.concurrency,
            self.lease_s,
        )
        with self._signals_handled(handle_signals):
            while not self._stopping.is_set():
                self._reap()
                self._renew_leases()
                queue_empty = self._fill()
                if queue_empty and not self._running and self._look_again():
                    continue  # a second look was queued: claim it
                if burst and queue_empty and not self._running:
                    break
                self._wake.wait(min(self.poll_s, self._heartbeat_s))
                self._wake.clear()
            self._shut_down()
        log.info("worker %s: stopped (%s)", self.worker_id, self.stats)
        return self.stats

    def _count(self, outcome: str) -> None:
        with self._stats_lock:
            setattr(self.stats, outcome, getattr(self.stats, outcome) + 1)

    # -- claiming ----------------------------------------------------------------------

    def _fill(self) -> bool:
        """Claim jobs until every slot is busy; True when the queue had nothing to give."""
        while len(self._running) < self.concurrency and not self._stopping.is_set():
            try:
                job = self.queue.claim(self.worker_id, self.lease_s)
            except DBAPIError as error:
                log.warning("worker %s: cannot claim (database): %s", self.worker_id, error)
                return False
            if job is None:
                return True
            self._start(job)
        return False

    def _look_again(self) -> bool:
        """With ``idle_review``, at most every ``idle_review_interval_s``: queue a second look
        if the pool is idle (reviewbot.worker.idle_review); True when one was queued."""
        now = time.monotonic()
        if self.idle is None or now < self._next_look:
            return False
        self._next_look = now + self.app.settings.idle_review_interval_s
        try:
            tick = self.idle.tick()
        except (DBAPIError, GitLabError) as error:
            log.warning("worker %s: no second look this time: %s", self.worker_id, error)
            return False
        log.debug("worker %s: second look: %s", self.worker_id, tick.reason)
        return tick.job_id is not None

    def _start(self, job: Job) -> None:
        self._count("claimed")
        running = _Running(job=job, next_heartbeat=time.monotonic() + self._heartbeat_s)
        running.thread = threading.Thread(
            target=self._execute, args=(running,), name=f"job-{job.id}", daemon=True
        )
        self._running[job.id] = running
        log.info(
            "job %d: started (%s !%d, attempt %d/%d)",
            job.id,
            job.project,
            job.mr_iid,
            job.attempts,
            job.max_attempts,
        )
        running.thread.start()

    # -- running -----------------------------------------------------------------------

    def _execute(self, running: _Running) -> None:
        job = running.job
        try:
            try:
                self.handler(job)
            except Exception as error:  # noqa: BLE001 - every failure is recorded on the job
                self._settle(running, error)
            else:
                self._settle(running, None)
        finally:
            self._wake.set()

    def _settle(self, running: _Running, error: Exception | None) -> None:
        job = running.job
        with running.lock:
            if running.released:
                log.info("job %d: finished after it was released; result dropped", job.id)
                return
            running.settling = True
        for attempt in range(SETTLE_ATTEMPTS):
            try:
                self._record_outcome(job, error)
                return
            except LeaseLostError:
                self._count("lost")
                log.warning("job %d: lease lost before the result was recorded", job.id)
                return
            except DBAPIError as db_error:
                # The database is restarting: try again; the job thread must not die of it.
                log.warning(
                    "job %d: cannot record the result yet (database): %s",
                    job.id,
                    db_error.orig or db_error,
                )
                if attempt + 1 < SETTLE_ATTEMPTS:
                    time.sleep(backoff_s(attempt, base_s=SETTLE_RETRY_S, cap_s=SETTLE_RETRY_MAX_S))
        log.error("job %d: result not recorded; its lease expires and it runs again", job.id)

    def _record_outcome(self, job: Job, error: Exception | None) -> None:
        if error is None:
            self.queue.complete(job.id, self.worker_id)
            self._count("succeeded")
            log.info("job %d: succeeded", job.id)
            return
        known = disposition(error)
        if known is not None and known.retry and not known.counts_as_attempt:
            waiting = self.queue.postpone(job.id, self.worker_id, _describe(error), BUSY_RETRY_S)
            self._count("postponed")
            log.info(
                "job %d: %s; again at %s (not counted as an attempt)",
                job.id,
                waiting.error,
                waiting.run_after.isoformat(),
            )
            return
        settled = self.queue.fail(
            job.id, self.worker_id, _describe(error), retryable=is_retryable(error)
        )
        if settled.status == JobStatus.QUEUED.value:
            self._count("retried")
            log.warning(
                "job %d: %s; retry after %s", job.id, settled.error, settled.run_after.isoformat()
            )
        else:
            self._count("failed")
            # A reply job's reply is settled with it (reviewbot.store.job_queries.end_replies).
            log.error("job %d: failed: %s", job.id, settled.error)

    def _renew_leases(self) -> None:
        now = time.monotonic()
        for running in list(self._running.values()):
            if running.next_heartbeat > now or running.settling:
                continue
            running.next_heartbeat = now + self._heartbeat_s
            try:
                held = self.queue.heartbeat(running.job.id, self.worker_id, self.lease_s)
            except DBAPIError as error:
                log.warning("job %d: heartbeat failed (database): %s", running.job.id, error)
                continue
            if not held and not running.settling:
                log.warning("job %d: lease lost (expired or cancelled)", running.job.id)

    def _reap(self) -> None:
        for job_id, running in list(self._running.items()):
            if running.thread is not None and not running.thread.is_alive():
                del self._running[job_id]

    # -- shutting down -----------------------------------------------------------------

    def _shut_down(self) -> None:
        """Give running jobs `grace_s` to finish, then hand the rest back to the queue."""
        deadline = time.monotonic() + self.grace_s
        while self._running and not self._abandon.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._renew_leases()
            self._wake.wait(min(remaining, self._heartbeat_s))
            self._wake.clear()
            self._reap()
        for running in list(self._running.values()):
            self._release(running)
        # Only now: a job cancelled earlier would be failed instead of handed back.
        self.app.stop_model_waits()

    def _release(self, running: _Running) -> None:
        with running.lock:
            if running.settling:
                return
            running.released = True
        try:
            self.queue.release(running.job.id, self.worker_id)
        except LeaseLostError:
            log.warning("job %d: lease already lost at shutdown", running.job.id)
            return
        self._count("released")
        log.info("job %d: released to the queue (shutdown)", running.job.id)

    @contextmanager
    def _signals_handled(self, enabled: bool) -> Iterator[None]:
        """SIGTERM/SIGINT stop the worker; a second signal skips the grace period.

        Python runs signal handlers in the main thread only
        (https://docs.python.org/3/library/signal.html#signals-and-threads).
        """
        if not enabled or threading.current_thread() is not threading.main_thread():
            yield
            return
        signals = (signal.SIGTERM, signal.SIGINT)
        previous = {signum: signal.getsignal(signum) for signum in signals}

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            if self._stopping.is_set():
                self.abandon()
            else:
                log.info(
                    "worker %s: %s received, stopping", self.worker_id, signal.Signals(signum).name
                )
                self.stop()

        for signum in signals:
            signal.signal(signum, on_signal)
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def _describe(error: BaseException) -> str:
    """`Type: message`, bounded, for the job's error column."""
    text = f"{type(error).__name__}: {error}"
    return text[:ERROR_TEXT_LIMIT]
