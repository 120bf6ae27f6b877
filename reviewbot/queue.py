"""The durable job queue: review jobs live in the database, workers lease them.

One row of the `jobs` table per review to run. The webhook listener enqueues; workers
(`reviewbot.worker`) claim a job with a lease, heartbeat while they run it, and complete,
fail (retry with backoff, up to `max_attempts`) or release it. A worker that dies
(kill -9, power loss) stops heartbeating: once its lease expires the job is claimable again.

Rules kept here, whatever the backend:
- a delivery seen twice (same `dedupe_key`) gives the same job;
- a newer head SHA of an MR supersedes its queued older job; the same head already queued is
  not queued twice;
- at most one job per MR runs at a time (a live lease blocks the MR's other jobs).

Concurrency: on PostgreSQL, `claim` picks rows with `SELECT ... FOR UPDATE SKIP LOCKED` so any
number of workers share the queue without waiting on each other
(https://www.postgresql.org/docs/current/sql-select.html#SQL-FOR-UPDATE-SHARE), and the
per-MR rules are checked under a transaction-scoped advisory lock on the MR
(https://www.postgresql.org/docs/current/functions-admin.html#FUNCTIONS-ADVISORY-LOCKS).
On SQLite every queue write starts with BEGIN IMMEDIATE, which takes the database's write lock
at once, so check-then-write sequences never interleave
(https://www.sqlite.org/lang_transaction.html).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, and_, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import aliased

from reviewbot.retry import backoff_s
from reviewbot.store import RecordNotFound, Store, scrub_secrets
from reviewbot.store.models import Job as JobRow
from reviewbot.store.models import JobStatus, Trigger
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
# Advisory lock keys are signed 64-bit integers.
ADVISORY_KEY_BYTES = 8
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


@dataclass(frozen=True)
class EnqueueResult:
    """What `enqueue` did: the job to wait for, whether it is new, which jobs it replaced."""

    job_id: int
    created: bool
    superseded: list[int] = field(default_factory=list)


def _job_from_row(row: JobRow) -> Job:
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
    )


def _mr_lock_key(project: str, mr_iid: int) -> int:
    """A stable signed 64-bit advisory-lock key for one MR (same in every process)."""
    digest = hashlib.blake2b(
        f"reviewbot-job:{project}!{mr_iid}".encode(), digest_size=ADVISORY_KEY_BYTES
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


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
    ) -> EnqueueResult:
        """Queue a review of one MR head, unless an equivalent job is already waiting.

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
    ) -> EnqueueResult:
        now = self._clock()
        with self._write(project, mr_iid) as connection:
            # A redelivery of an event whose job still waits is answered here; one whose job
            # already ran hits the unique dedupe_key on insert (handled by the caller).
            pending = self._pending(connection, project, mr_iid, now)
            for job_id, pending_head in pending:
                if head_sha is None or pending_head == head_sha:
                    if payload.get(FULL_REVIEW_KEY):
                        self._ask_full_review(connection, job_id, now)
                    return EnqueueResult(job_id=job_id, created=False, superseded=[])
            replaced = self._supersede(connection, [job_id for job_id, _ in pending], head_sha, now)
            job_id = connection.scalar(
                JobRow.__table__.insert()
                .values(
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
                )
                .returning(JobRow.id)
            )
            return EnqueueResult(job_id=job_id, created=True, superseded=replaced)

    def _ask_full_review(self, connection: Connection, job_id: int, now: datetime) -> None:
        """A job already waiting for this head is to review everything (`--full` asked)."""
        payload = dict(connection.scalar(select(JobRow.payload).where(JobRow.id == job_id)) or {})
        if not payload.get(FULL_REVIEW_KEY):
            payload[FULL_REVIEW_KEY] = True
            connection.execute(
                update(JobRow).where(JobRow.id == job_id).values(payload=payload, updated_at=now)
            )

    def _supersede(
        self, connection: Connection, ids: list[int], head_sha: str | None, now: datetime
    ) -> list[int]:
        """Mark the MR's pending jobs ``ids`` superseded by a job for ``head_sha``."""
        if ids:
            connection.execute(
                update(JobRow)
                .where(JobRow.id.in_(ids))
                .values(
                    status=JobStatus.SUPERSEDED.value,
                    lease_owner=None,
                    lease_expires_at=None,
                    error=f"superseded by head {head_sha}",
                    updated_at=now,
                )
            )
        return sorted(ids)

    def _pending(
        self, connection: Connection, project: str, mr_iid: int, now: datetime
    ) -> list[tuple[int, str | None]]:
        """(id, head) of the MR's jobs still to run: queued, or running on an expired lease."""
        pending = or_(
            JobRow.status == JobStatus.QUEUED.value,
            and_(JobRow.status == JobStatus.RUNNING.value, JobRow.lease_expires_at <= now),
        )
        query = (
            select(JobRow.id, JobRow.head_sha)
            .where(self._same_mr(project, mr_iid), pending)
            .order_by(JobRow.id.desc())
        )
        return [(job_id, head) for job_id, head in connection.execute(query)]

    def cancel_for_mr(self, project: str, mr_iid: int, reason: str) -> int:
        """Cancel the MR's queued jobs (MR closed or merged); return how many."""
        now = self._clock()
        with self._write(project, mr_iid) as connection:
            result = connection.execute(
                update(JobRow)
                .where(self._same_mr(project, mr_iid), JobRow.status == JobStatus.QUEUED.value)
                .values(status=JobStatus.CANCELLED.value, error=reason, updated_at=now)
            )
            return result.rowcount

    # -- workers -----------------------------------------------------------------------

    def claim(self, worker_id: str, lease_s: float) -> Job | None:
        """Lease the next runnable job to `worker_id` for `lease_s` seconds, or None.

        Runnable: queued with `run_after` due, or running with an expired lease (its worker
        died), and no other job of the same MR holds a live lease. Each claim counts an
        attempt; a dead worker's job that has used up its attempts is marked failed instead.
        """
        now = self._clock()
        self._fail_exhausted_leases(now)
        if self._dialect == "postgresql":
            row_id = self._claim_postgresql(worker_id, lease_s, now)
        else:
            row_id = self._claim_sqlite(worker_id, lease_s, now)
        return None if row_id is None else self.get(row_id)

    def _claim_sqlite(self, worker_id: str, lease_s: float, now: datetime) -> int | None:
        with self._write() as connection:
            job_id = connection.scalar(self._runnable(now).limit(1))
            if job_id is not None:
                self._take(connection, job_id, worker_id, lease_s, now)
            return job_id

    def _claim_postgresql(self, worker_id: str, lease_s: float, now: datetime) -> int | None:
        inspected: list[int] = []
        with self._engine.begin() as connection:
            for _ in range(CLAIM_CANDIDATES):
                query = self._runnable(now).limit(1).with_for_update(skip_locked=True)
                if inspected:
                    query = query.where(JobRow.id.not_in(inspected))
                candidate = connection.execute(
                    query.add_columns(JobRow.project, JobRow.mr_iid)
                ).first()
                if candidate is None:
                    return None
                job_id, project, mr_iid = candidate
                # Never wait for the MR's lock while holding this row: its holder (another
                # claim superseding this job, an enqueue) may need the row, and the two would
                # deadlock. An MR being written to is skipped; the next claim takes it.
                if not self._try_lock_mr(connection, project, mr_iid):
                    inspected.append(job_id)
                    continue
                # The NOT EXISTS above read a snapshot taken before other claims committed;
                # under the MR's lock a fresh statement sees them (READ COMMITTED).
                if not self._mr_has_live_lease(connection, project, mr_iid, job_id, now):
                    self._take(connection, job_id, worker_id, lease_s, now)
                    return job_id
                inspected.append(job_id)
        return None

    def _runnable(self, now: datetime) -> Any:
        """SELECT id of runnable jobs, oldest due first."""
        live = aliased(JobRow)
        mr_busy = (
            select(live.id)
            .where(
                live.project == JobRow.project,
                live.mr_iid == JobRow.mr_iid,
                live.id != JobRow.id,
                live.status == JobStatus.RUNNING.value,
                live.lease_expires_at > now,
            )
            .exists()
        )
        due = or_(
            and_(JobRow.status == JobStatus.QUEUED.value, JobRow.run_after <= now),
            and_(JobRow.status == JobStatus.RUNNING.value, JobRow.lease_expires_at <= now),
        )
        return select(JobRow.id).where(due, ~mr_busy).order_by(JobRow.run_after, JobRow.id)

    def _mr_has_live_lease(
        self, connection: Connection, project: str, mr_iid: int, job_id: int, now: datetime
    ) -> bool:
        live = connection.scalar(
            select(JobRow.id)
            .where(
                self._same_mr(project, mr_iid),
                JobRow.id != job_id,
                JobRow.status == JobStatus.RUNNING.value,
                JobRow.lease_expires_at > now,
            )
            .limit(1)
        )
        return live is not None

    def _take(
        self, connection: Connection, job_id: int, worker_id: str, lease_s: float, now: datetime
    ) -> None:
        """Lease ``job_id``; an older job of its MR whose worker died (expired lease) is
        superseded by it, so an MR never has two jobs `running`. Runs under the MR's lock."""
        project, mr_iid = connection.execute(
            select(JobRow.project, JobRow.mr_iid).where(JobRow.id == job_id)
        ).one()
        connection.execute(
            update(JobRow)
            .where(
                self._same_mr(project, mr_iid),
                JobRow.id < job_id,
                JobRow.status == JobStatus.RUNNING.value,
                JobRow.lease_expires_at <= now,
            )
            .values(
                status=JobStatus.SUPERSEDED.value,
                lease_owner=None,
                lease_expires_at=None,
                error=f"its worker was lost; superseded by job {job_id}",
                updated_at=now,
            )
        )
        connection.execute(
            update(JobRow)
            .where(JobRow.id == job_id)
            .values(
                status=JobStatus.RUNNING.value,
                lease_owner=worker_id,
                lease_expires_at=now + timedelta(seconds=lease_s),
                attempts=JobRow.attempts + 1,
                updated_at=now,
            )
        )

    def _fail_exhausted_leases(self, now: datetime) -> None:
        """A job whose workers kept dying (lease expired on its last attempt) stops here."""
        exhausted = and_(
            JobRow.status == JobStatus.RUNNING.value,
            JobRow.lease_expires_at <= now,
            JobRow.attempts >= JobRow.max_attempts,
        )
        with self._engine.begin() as connection:
            connection.execute(
                update(JobRow)
                .where(exhausted)
                .values(
                    status=JobStatus.FAILED.value,
                    lease_owner=None,
                    lease_expires_at=None,
                    error="worker lost (lease expired) on the last attempt",
                    updated_at=now,
                )
            )

    def heartbeat(self, job_id: int, worker_id: str, lease_s: float) -> bool:
        """Extend the lease by `lease_s` from now; False when the lease is lost."""
        now = self._clock()
        with self._engine.begin() as connection:
            result = connection.execute(
                update(JobRow)
                .where(self._held_by(job_id, worker_id))
                .values(lease_expires_at=now + timedelta(seconds=lease_s), updated_at=now)
            )
            return result.rowcount == 1

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
            attempts=JobRow.attempts - 1,
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
            attempts=JobRow.attempts - 1,
        )

    def _settle(self, job_id: int, worker_id: str, **values: Any) -> None:
        now = self._clock()
        if "error" in values:
            values["error"] = scrub_secrets(values["error"])
        with self._engine.begin() as connection:
            result = connection.execute(
                update(JobRow)
                .where(self._held_by(job_id, worker_id))
                .values(lease_owner=None, lease_expires_at=None, updated_at=now, **values)
            )
        if result.rowcount != 1:
            self.get(job_id)  # RecordNotFound for an unknown id
            raise LeaseLostError(f"job {job_id} is no longer leased to {worker_id}")

    # -- operators ---------------------------------------------------------------------

    def get(self, job_id: int) -> Job:
        """The job; RecordNotFound if there is none with this id."""
        with self._engine.connect() as connection:
            row = connection.execute(select(JobRow).where(JobRow.id == job_id)).first()
        if row is None:
            raise RecordNotFound(f"job {job_id} not found")
        return _job_from_row(row)  # type: ignore[arg-type]

    def list(self, *, status: str | None = None, limit: int = DEFAULT_LIST_LIMIT) -> list[Job]:
        """Newest jobs first, optionally only those in `status`."""
        query = select(JobRow).order_by(JobRow.id.desc()).limit(limit)
        if status is not None:
            _check_status(status)
            query = query.where(JobRow.status == status)
        with self._engine.connect() as connection:
            return [_job_from_row(row) for row in connection.execute(query)]  # type: ignore[arg-type]

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

    def counts(self) -> dict[str, int]:
        """Number of jobs in each status (every status present, zero included)."""
        totals = {status.value: 0 for status in JobStatus}
        query = select(JobRow.status, func.count()).group_by(JobRow.status)
        with self._engine.connect() as connection:
            for status, count in connection.execute(query):
                totals[status] = count
        return totals

    # -- helpers -----------------------------------------------------------------------

    @contextmanager
    def _write(self, project: str | None = None, mr_iid: int | None = None) -> Iterator[Connection]:
        """A write transaction: SQLite takes its write lock at once; PostgreSQL locks the MR."""
        with self._engine.begin() as connection:
            if self._dialect == "sqlite":
                connection.exec_driver_sql("BEGIN IMMEDIATE")
            elif project is not None and mr_iid is not None:
                self._lock_mr(connection, project, mr_iid)
            yield connection

    def _lock_mr(self, connection: Connection, project: str, mr_iid: int) -> None:
        if self._dialect == "postgresql":
            connection.execute(select(func.pg_advisory_xact_lock(_mr_lock_key(project, mr_iid))))

    @staticmethod
    def _try_lock_mr(connection: Connection, project: str, mr_iid: int) -> bool:
        """PostgreSQL: take the MR's transaction lock if it is free; never wait."""
        key = _mr_lock_key(project, mr_iid)
        return bool(connection.scalar(select(func.pg_try_advisory_xact_lock(key))))

    def _update_if_status(self, job_id: int, current_status: str, **values: Any) -> None:
        with self._engine.begin() as connection:
            result = connection.execute(
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.status == current_status)
                .values(**values)
            )
        if result.rowcount != 1:
            raise JobStateError(f"job {job_id} changed status meanwhile; try again")

    def _find_by_dedupe_key(self, dedupe_key: str) -> int | None:
        with self._engine.connect() as connection:
            return connection.scalar(select(JobRow.id).where(JobRow.dedupe_key == dedupe_key))

    @staticmethod
    def _same_mr(project: str, mr_iid: int) -> Any:
        return and_(JobRow.project == project, JobRow.mr_iid == mr_iid)

    @staticmethod
    def _held_by(job_id: int, worker_id: str) -> Any:
        return and_(
            JobRow.id == job_id,
            JobRow.status == JobStatus.RUNNING.value,
            JobRow.lease_owner == worker_id,
        )


def _check_status(status: str) -> None:
    if status not in {choice.value for choice in JobStatus}:
        raise ValueError(f"status={status!r} is not one of: {', '.join(JobStatus)}")
