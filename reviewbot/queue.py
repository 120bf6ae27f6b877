"""The durable job queue: review jobs live in the database, workers lease them.

One row of the `jobs` table per review to run. The webhook listener enqueues; workers
(`reviewbot.worker`) claim a job with a lease, heartbeat while they run it, and complete,
fail (retry with backoff, up to `max_attempts`) or release it. A worker that dies
(kill -9, power loss) stops heartbeating: once its lease expires the job is claimable again.

Rules kept here, whatever the backend:
- a delivery seen twice (same `dedupe_key`) gives the same job;
- a newer head SHA of an MR supersedes its queued older job; the same head already queued is
  not queued twice;
- at most one job per MR and kind runs at a time (a live lease blocks the MR's other jobs of
  its kind);
- a reply job (``JobKind.REPLY``: answer a human in one of the bot's threads) is one per
  triggering note (its dedupe key): it never supersedes a review job nor is superseded by one.

Concurrency: on PostgreSQL, `claim` picks rows with `SELECT ... FOR UPDATE SKIP LOCKED` so any
number of workers share the queue without waiting on each other, and the per-MR rules are
checked under a transaction-scoped advisory lock on the MR; on SQLite every queue write takes
the database's write lock at once (BEGIN IMMEDIATE). docs/locking.md explains both.

Owns: the policy: what enqueueing, claiming and settling a job mean, when a job supersedes
another, when a failure is retried and after how long. Must not: write a query of its own (the
SQL that says it lives in ``reviewbot.store.job_queries``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from reviewbot.retry import backoff_s
from reviewbot.states import JobKind, JobStatus, Trigger
from reviewbot.store import RecordNotFound, Store, job_queries, scrub_secrets
from reviewbot.store.store import utc_now

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "EnqueueResult",
    "Job",
    "JobQueue",
    "JobStateError",
    "JobStatus",
    "LeaseLostError",
]

Clock = Callable[[], datetime]

DEFAULT_MAX_ATTEMPTS = 5
# A job's payload key asking for a full review (every hunk, not only what changed).
FULL_REVIEW_KEY = "full"
DEFAULT_LIST_LIMIT = 50
# Retry n (1-based) waits BACKOFF_BASE_S * 2**(n-1) seconds, never more than BACKOFF_MAX_S.
BACKOFF_BASE_S = 15.0
BACKOFF_MAX_S = 15 * 60.0
# PostgreSQL claim: how many candidate rows one claim inspects before giving up for now.
CLAIM_CANDIDATES = 20
WORKER_LOST_ON_LAST_ATTEMPT = "worker lost (lease expired) on the last attempt"
FINAL_STATUSES = frozenset(
    {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.SUPERSEDED, JobStatus.CANCELLED}
)


class LeaseLostError(RuntimeError):
    """The worker no longer holds the job's lease (expired and taken over, or cancelled)."""


class JobStateError(ValueError):
    """The operation does not apply to a job in its current status."""


@dataclass(frozen=True)
class Job:
    """One review job, as stored."""

    id: int
    project: str
    mr_iid: int
    head_sha: str | None
    trigger: str
    status: str  # queued | running | succeeded | failed | superseded | cancelled
    attempts: int
    max_attempts: int
    run_after: datetime
    lease_owner: str | None
    lease_expires_at: datetime | None
    error: str | None
    dedupe_key: str | None
    payload: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    project_id: int | None = None  # GitLab's id: what a worker asks GitLab by (paths change)
    kind: str = JobKind.REVIEW.value  # review | reply


@dataclass(frozen=True)
class EnqueueResult:
    """What `enqueue` did: the job to wait for, whether it is new, which jobs it replaced."""

    job_id: int
    created: bool
    superseded: list[int] = field(default_factory=list)


def _job_from_row(row: Any) -> Job:
    return Job(
        id=row.id,
        project=row.project,
        mr_iid=row.mr_iid,
        head_sha=row.head_sha,
        trigger=row.trigger,
        status=row.status,
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        run_after=row.run_after,
        lease_owner=row.lease_owner,
        lease_expires_at=row.lease_expires_at,
        error=row.error,
        dedupe_key=row.dedupe_key,
        payload=dict(row.payload or {}),
        created_at=row.created_at,
        updated_at=row.updated_at,
        project_id=row.project_id,
        kind=row.kind,
    )


class JobQueue:
    """Enqueue, claim, heartbeat and settle review jobs stored in `store`'s database."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock = utc_now,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_max_s: float = BACKOFF_MAX_S,
    ) -> None:
        self._engine = store.engine
        self._clock = clock
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._dialect = self._engine.dialect.name
        if self._dialect not in ("sqlite", "postgresql"):
            raise NotImplementedError(f"unsupported database for the job queue: {self._dialect}")

    # -- producers ---------------------------------------------------------------------

    def enqueue(
        self,
        *,
        project: str,
        mr_iid: int,
        head_sha: str | None,
        trigger: str,
        dedupe_key: str | None = None,
        payload: dict[str, Any] | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        project_id: int | None = None,
        kind: str = JobKind.REVIEW.value,
    ) -> EnqueueResult:
        """Queue a review of one MR head, unless an equivalent job is already waiting.

        ``kind="reply"``: an answer in a thread, one per ``dedupe_key`` (the triggering note):
        the rules on heads below do not apply to it, and it never touches review jobs.

        - `dedupe_key` already known (a redelivered webhook): that job, created=False;
        - a pending job of the same MR and head (or any pending job when `head_sha` is None,
          since a run reviews the MR's head at that time): that job, created=False;
        - otherwise the MR's pending jobs (queued, or running on an expired lease: their worker
          is gone) are for another head: they become `superseded` and a new job is queued.
        """
        if trigger not in {choice.value for choice in Trigger}:
            raise ValueError(f"trigger={trigger!r} is not one of: {', '.join(Trigger)}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        if kind not in {choice.value for choice in JobKind}:
            raise ValueError(f"kind={kind!r} is not one of: {', '.join(JobKind)}")
        if kind == JobKind.REPLY.value and not dedupe_key:
            raise ValueError("a reply job needs the dedupe_key of its triggering note")
        try:
            return self._enqueue_once(
                project,
                mr_iid,
                head_sha,
                trigger,
                dedupe_key,
                payload or {},
                max_attempts,
                project_id,
                kind,
            )
        except IntegrityError:
            # The dedupe_key is taken: a redelivery of an event whose job already ran (or a
            # concurrent one); the whole transaction, supersedes included, was rolled back.
            existing = self._find_by_dedupe_key(dedupe_key) if dedupe_key else None
            if existing is None:
                raise
            return EnqueueResult(job_id=existing, created=False, superseded=[])

    def _enqueue_once(
        self,
        project: str,
        mr_iid: int,
        head_sha: str | None,
        trigger: str,
        dedupe_key: str | None,
        payload: dict[str, Any],
        max_attempts: int,
        project_id: int | None,
        kind: str,
    ) -> EnqueueResult:
        now = self._clock()
        with job_queries.job_transaction(self._engine, project, mr_iid) as connection:
            # A redelivery of an event whose job still waits is answered here; one whose job
            # already ran hits the unique dedupe_key on insert (handled by the caller).
            # A reply job has no pending rivals: the unique dedupe_key is its only rule.
            pending = (
                job_queries.pending_jobs(connection, project, mr_iid, now)
                if kind == JobKind.REVIEW.value
                else []
            )
            for job_id, pending_head in pending:
                if head_sha is None or pending_head == head_sha:
                    if payload.get(FULL_REVIEW_KEY):
                        # `--full` asked: the job already waiting reviews everything
                        job_queries.mark_full_review(connection, job_id, FULL_REVIEW_KEY, now)
                    return EnqueueResult(job_id=job_id, created=False, superseded=[])
            replaced = self._supersede(connection, [job_id for job_id, _ in pending], head_sha, now)
            job_id = job_queries.insert_job(
                connection,
                project=project,
                mr_iid=mr_iid,
                head_sha=head_sha,
                trigger=trigger,
                status=JobStatus.QUEUED.value,
                attempts=0,
                max_attempts=max_attempts,
                run_after=now,
                lease_owner=None,
                lease_expires_at=None,
                error=None,
                dedupe_key=dedupe_key,
                payload=payload,
                created_at=now,
                updated_at=now,
                project_id=project_id,
                kind=kind,
            )
            return EnqueueResult(job_id=job_id, created=True, superseded=replaced)

    def _supersede(
        self, connection: Connection, ids: list[int], head_sha: str | None, now: datetime
    ) -> list[int]:
        """Mark the MR's pending jobs ``ids`` superseded by a job for ``head_sha``."""
        job_queries.supersede(connection, ids, f"superseded by head {head_sha}", now)
        return sorted(ids)

    def cancel_for_mr(self, project: str, mr_iid: int, reason: str) -> int:
        """Cancel the MR's queued jobs (MR closed or merged); return how many."""
        now = self._clock()
        with job_queries.job_transaction(self._engine, project, mr_iid) as connection:
            return job_queries.cancel_queued(connection, project, mr_iid, reason, now)

    # -- workers -----------------------------------------------------------------------

    def claim(self, worker_id: str, lease_s: float) -> Job | None:
        """Lease the next runnable job to `worker_id` for `lease_s` seconds, or None.

        Runnable: queued with `run_after` due, or running with an expired lease (its worker
        died), and no other job of the same MR holds a live lease. Each claim counts an
        attempt; a dead worker's job that has used up its attempts is marked failed instead.
        """
        now = self._clock()
        # A job whose workers kept dying (lease expired on its last attempt) stops here.
        job_queries.fail_exhausted_leases(self._engine, WORKER_LOST_ON_LAST_ATTEMPT, now)
        if self._dialect == "postgresql":
            row_id = self._claim_postgresql(worker_id, lease_s, now)
        else:
            row_id = self._claim_sqlite(worker_id, lease_s, now)
        return None if row_id is None else self.get(row_id)

    def _claim_sqlite(self, worker_id: str, lease_s: float, now: datetime) -> int | None:
        with job_queries.job_transaction(self._engine) as connection:
            job_id = job_queries.first_runnable(connection, now)
            if job_id is not None:
                self._take(connection, job_id, worker_id, lease_s, now)
            return job_id

    def _claim_postgresql(self, worker_id: str, lease_s: float, now: datetime) -> int | None:
        inspected: list[int] = []
        with self._engine.begin() as connection:
            for _ in range(CLAIM_CANDIDATES):
                candidate = job_queries.next_claim_candidate(connection, now, inspected)
                if candidate is None:
                    return None
                job_id, project, mr_iid = candidate
                # Never wait for the MR's lock while holding this row: its holder (another
                # claim superseding this job, an enqueue) may need the row, and the two would
                # deadlock. An MR being written to is skipped; the next claim takes it.
                if not job_queries.try_lock_mr(connection, project, mr_iid):
                    inspected.append(job_id)
                    continue
                # The candidate's NOT EXISTS read a snapshot taken before other claims
                # committed; under the MR's lock a fresh statement sees them (READ COMMITTED).
                if not job_queries.mr_has_live_lease(connection, project, mr_iid, job_id, now):
                    self._take(connection, job_id, worker_id, lease_s, now)
                    return job_id
                inspected.append(job_id)
        return None

    def _take(
        self, connection: Connection, job_id: int, worker_id: str, lease_s: float, now: datetime
    ) -> None:
        """Lease ``job_id``; an older job of its MR whose worker died (expired lease) is
        superseded by it, so an MR never has two jobs `running`. Runs under the MR's lock."""
        job_queries.lease_job(
            connection,
            job_id,
            worker_id,
            lease_expires_at=now + timedelta(seconds=lease_s),
            now=now,
            lost_reason=f"its worker was lost; superseded by job {job_id}",
        )

    def heartbeat(self, job_id: int, worker_id: str, lease_s: float) -> bool:
        """Extend the lease by `lease_s` from now; False when the lease is lost."""
        now = self._clock()
        until = now + timedelta(seconds=lease_s)
        return job_queries.extend_lease(self._engine, job_id, worker_id, until, now)

    def complete(self, job_id: int, worker_id: str) -> None:
        """Mark the job succeeded; LeaseLostError if `worker_id` no longer holds it."""
        self._settle(job_id, worker_id, status=JobStatus.SUCCEEDED.value, error=None)

    def fail(self, job_id: int, worker_id: str, error: str, *, retryable: bool) -> Job:
        """Record a failed attempt: queued again after a backoff, or failed for good.

        Retried when `retryable` and attempts remain (`attempts < max_attempts`).
        LeaseLostError if `worker_id` no longer holds the job.
        """
        job = self.get(job_id)
        now = self._clock()
        if retryable and job.attempts < job.max_attempts:
            # `attempts` counts this failed try: retry n waits base * 2**(n-1), capped.
            delay = backoff_s(
                job.attempts - 1, base_s=self._backoff_base_s, cap_s=self._backoff_max_s
            )
            self._settle(
                job_id,
                worker_id,
                status=JobStatus.QUEUED.value,
                error=error,
                run_after=now + timedelta(seconds=delay),
            )
        else:
            self._settle(job_id, worker_id, status=JobStatus.FAILED.value, error=error)
        return self.get(job_id)

    def postpone(self, job_id: int, worker_id: str, reason: str, delay_s: float) -> Job:
        """Queue the job again in ``delay_s`` without counting the attempt: a reason to wait
        (another run holds the MR), not a failure. LeaseLostError if no longer held."""
        self._settle(
            job_id,
            worker_id,
            status=JobStatus.QUEUED.value,
            error=reason,
            run_after=self._clock() + timedelta(seconds=delay_s),
            give_back_attempt=True,
        )
        return self.get(job_id)

    def release(self, job_id: int, worker_id: str) -> None:
        """Give an unfinished job back (graceful shutdown): queued, attempt not counted."""
        self._settle(
            job_id,
            worker_id,
            status=JobStatus.QUEUED.value,
            error=None,
            run_after=self._clock(),
            give_back_attempt=True,
        )

    def _settle(self, job_id: int, worker_id: str, **values: Any) -> None:
        now = self._clock()
        if "error" in values:
            values["error"] = scrub_secrets(values["error"])
        if not job_queries.settle_held(self._engine, job_id, worker_id, now, **values):
            self.get(job_id)  # RecordNotFound for an unknown id
            raise LeaseLostError(f"job {job_id} is no longer leased to {worker_id}")

    # -- operators ---------------------------------------------------------------------

    def get(self, job_id: int) -> Job:
        """The job; RecordNotFound if there is none with this id."""
        row = job_queries.job_row(self._engine, job_id)
        if row is None:
            raise RecordNotFound(f"job {job_id} not found")
        return _job_from_row(row)

    def list(self, *, status: str | None = None, limit: int = DEFAULT_LIST_LIMIT) -> list[Job]:
        """Newest jobs first, optionally only those in `status`."""
        if status is not None:
            _check_status(status)
        return [_job_from_row(row) for row in job_queries.job_rows(self._engine, status, limit)]

    def retry(self, job_id: int) -> Job:
        """Queue a finished job (failed, cancelled, superseded, succeeded) again, now."""
        job = self.get(job_id)
        if job.status not in FINAL_STATUSES:
            raise JobStateError(f"job {job_id} is {job.status}: only a finished job can be retried")
        now = self._clock()
        self._update_if_status(
            job_id,
            job.status,
            status=JobStatus.QUEUED.value,
            attempts=0,
            run_after=now,
            error=None,
            updated_at=now,
        )
        return self.get(job_id)

    def cancel(self, job_id: int) -> Job:
        """Cancel a queued or running job (a running worker loses its lease)."""
        job = self.get(job_id)
        if job.status == JobStatus.CANCELLED.value:
            return job
        if job.status in FINAL_STATUSES:
            raise JobStateError(f"job {job_id} is already {job.status}")
        now = self._clock()
        self._update_if_status(
            job_id,
            job.status,
            status=JobStatus.CANCELLED.value,
            lease_owner=None,
            lease_expires_at=None,
            error="cancelled by an operator",
            updated_at=now,
        )
        return self.get(job_id)

    def backlog(self) -> tuple[int, float | None]:
        """(jobs waiting now, seconds the oldest has waited; None: none waits), second looks
        not counted (reviewbot.worker.load_effort)."""
        now = self._clock()
        count, oldest = job_queries.backlog(self._engine, now)
        return count, None if oldest is None else max(0.0, (now - oldest).total_seconds())

    def counts(self) -> dict[str, int]:
        """Number of jobs in each status (every status present, zero included)."""
        totals = {status.value: 0 for status in JobStatus}
        return totals | job_queries.count_by_status(self._engine)

    # -- helpers -----------------------------------------------------------------------

    def _update_if_status(self, job_id: int, current_status: str, **values: Any) -> None:
        if not job_queries.update_if_status(self._engine, job_id, current_status, **values):
            raise JobStateError(f"job {job_id} changed status meanwhile; try again")

    def _find_by_dedupe_key(self, dedupe_key: str) -> int | None:
        return job_queries.find_by_dedupe_key(self._engine, dedupe_key)


def _check_status(status: str) -> None:
    if status not in {choice.value for choice in JobStatus}:
        raise ValueError(f"status={status!r} is not one of: {', '.join(JobStatus)}")
