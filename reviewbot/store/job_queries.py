"""The SQL of the job queue (``jobs`` table): statements and the locks they run under.

Owns: every query :class:`reviewbot.queue.JobQueue` makes, each a function of an open
connection (plain values and rows out), and the two things that make a queue write safe
across processes:

- :func:`job_transaction`: on SQLite every queue write starts with BEGIN IMMEDIATE, which
  takes the database's write lock at once, so check-then-write sequences never interleave
  (https://www.sqlite.org/lang_transaction.html); on PostgreSQL a write about one MR first
  takes that MR's transaction-scoped advisory lock
  (https://www.postgresql.org/docs/current/functions-admin.html#FUNCTIONS-ADVISORY-LOCKS);
- :func:`next_claim_candidate`: ``SELECT ... FOR UPDATE SKIP LOCKED`` so any number of workers
  pick rows without waiting on each other
  (https://www.postgresql.org/docs/current/sql-select.html#SQL-FOR-UPDATE-SHARE).

A reply job (an answer in one of the bot's threads) that ends for good without an answer
(failed, its worker lost on the last attempt, cancelled) settles its ``replies`` row in the
same transaction (:func:`end_replies`): never left ``queued`` as if an answer were coming.

What the rows mean (what a claim is, when a job supersedes another, when a failure is retried
and after how long) is the queue's policy, kept in ``reviewbot.queue``. Must not: decide it,
only say it in SQL. docs/locking.md describes both together.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, Row, and_, case, func, or_, select, update
from sqlalchemy.orm import aliased

from reviewbot.states import JobKind, JobStatus, ReplyStatus, Trigger
from reviewbot.store.models import Job as JobRow
from reviewbot.store.models import Reply as ReplyRow

__all__ = [
    "cancel_queued",
    "count_by_status",
    "end_replies",
    "extend_lease",
    "fail_exhausted_leases",
    "find_by_dedupe_key",
    "first_runnable",
    "insert_job",
    "job_row",
    "job_rows",
    "job_transaction",
    "lease_job",
    "mark_full_review",
    "mr_has_live_lease",
    "mr_lock_key",
    "next_claim_candidate",
    "pending_jobs",
    "reopen_replies",
    "settle_held",
    "supersede",
    "try_lock_mr",
    "update_if_status",
]

# Advisory lock keys are signed 64-bit integers; the prefix keeps them apart from the per-MR
# run lock's ("reviewbot-mr:", reviewbot.store.mr_lock).
ADVISORY_KEY_BYTES = 8
ADVISORY_KEY_PREFIX = "reviewbot-job:"
QUEUED = JobStatus.QUEUED.value
RUNNING = JobStatus.RUNNING.value
# A second look while idle (Trigger.IDLE) waits behind every other runnable job.
BACKGROUND_TRIGGER = Trigger.IDLE.value
# What becomes of the reply still queued of a reply job that ends for good in this status.
REPLY_WHEN_JOB_ENDS = {
    JobStatus.FAILED.value: ReplyStatus.FAILED.value,
    JobStatus.CANCELLED.value: ReplyStatus.DROPPED.value,
    JobStatus.SUPERSEDED.value: ReplyStatus.DROPPED.value,
}
REPLY_ID_KEY = "reply_id"  # a reply job's payload names its replies row


def mr_lock_key(project: str, mr_iid: int) -> int:
    """A stable signed 64-bit advisory-lock key for one MR (same in every process)."""
    digest = hashlib.blake2b(
        f"{ADVISORY_KEY_PREFIX}{project}!{mr_iid}".encode(), digest_size=ADVISORY_KEY_BYTES
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


@contextmanager
def job_transaction(
    engine: Engine, project: str | None = None, mr_iid: int | None = None
) -> Iterator[Connection]:
    """A write transaction: SQLite takes its write lock at once; PostgreSQL locks the MR."""
    with engine.begin() as connection:
        if engine.dialect.name == "sqlite":
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        elif project is not None and mr_iid is not None:
            connection.execute(select(func.pg_advisory_xact_lock(mr_lock_key(project, mr_iid))))
        yield connection


def try_lock_mr(connection: Connection, project: str, mr_iid: int) -> bool:
    """PostgreSQL: take the MR's transaction lock if it is free; never wait."""
    key = mr_lock_key(project, mr_iid)
    return bool(connection.scalar(select(func.pg_try_advisory_xact_lock(key))))


def _same_mr(project: str, mr_iid: int) -> Any:
    return and_(JobRow.project == project, JobRow.mr_iid == mr_iid)


def _held_by(job_id: int, worker_id: str) -> Any:
    return and_(
        JobRow.id == job_id,
        JobRow.status == RUNNING,
        JobRow.lease_owner == worker_id,
    )


# ---------------------------------------------------------------------------------------------
# Producers


def pending_jobs(
    connection: Connection,
    project: str,
    mr_iid: int,
    now: datetime,
    kind: str = JobKind.REVIEW.value,
) -> list[tuple[int, str | None]]:
    """(id, head) of the MR's jobs of ``kind`` still to run, newest first: queued, or running
    on an expired lease (a reply job never supersedes a review, nor the other way round)."""
    pending = or_(
        JobRow.status == QUEUED,
        and_(JobRow.status == RUNNING, JobRow.lease_expires_at <= now),
    )
    query = (
        select(JobRow.id, JobRow.head_sha)
        .where(_same_mr(project, mr_iid), JobRow.kind == kind, pending)
        .order_by(JobRow.id.desc())
    )
    return [(job_id, head) for job_id, head in connection.execute(query)]


def insert_job(connection: Connection, **values: Any) -> int:
    """A new row of ``jobs`` with ``values``; its id."""
    return connection.scalar(JobRow.__table__.insert().values(**values).returning(JobRow.id))


def mark_full_review(connection: Connection, job_id: int, key: str, now: datetime) -> None:
    """Set ``payload[key]`` true on the job, unless it already is."""
    payload = dict(connection.scalar(select(JobRow.payload).where(JobRow.id == job_id)) or {})
    if not payload.get(key):
        payload[key] = True
        connection.execute(
            update(JobRow).where(JobRow.id == job_id).values(payload=payload, updated_at=now)
        )


def supersede(connection: Connection, ids: Sequence[int], reason: str, now: datetime) -> None:
    """Mark the jobs ``ids`` superseded, leases dropped, with ``reason`` as their error."""
    if ids:
        connection.execute(
            update(JobRow)
            .where(JobRow.id.in_(ids))
            .values(
                status=JobStatus.SUPERSEDED.value,
                lease_owner=None,
                lease_expires_at=None,
                error=reason,
                updated_at=now,
            )
        )
        end_replies(connection, ids, JobStatus.SUPERSEDED.value, reason, now)


def cancel_queued(
    connection: Connection, project: str, mr_iid: int, reason: str, now: datetime
) -> int:
    """Cancel the MR's queued jobs; how many."""
    cancelled = connection.scalars(
        update(JobRow)
        .where(_same_mr(project, mr_iid), JobRow.status == QUEUED)
        .values(status=JobStatus.CANCELLED.value, error=reason, updated_at=now)
        .returning(JobRow.id)
    ).all()
    end_replies(connection, cancelled, JobStatus.CANCELLED.value, reason, now)
    return len(cancelled)


def find_by_dedupe_key(engine: Engine, dedupe_key: str) -> int | None:
    with engine.connect() as connection:
        return connection.scalar(select(JobRow.id).where(JobRow.dedupe_key == dedupe_key))


# ---------------------------------------------------------------------------------------------
# Workers


def _runnable(now: datetime) -> Any:
    """SELECT id of runnable jobs, oldest due first, second looks (``Trigger.IDLE``) after
    every other: queued and due, or running on an expired lease, with no other job of the same
    MR and kind on a live lease (an answer in a thread does not wait for a review of the MR to
    end)."""
    live = aliased(JobRow)
    mr_busy = (
        select(live.id)
        .where(
            live.project == JobRow.project,
            live.mr_iid == JobRow.mr_iid,
            live.id != JobRow.id,
            live.kind == JobRow.kind,
            live.status == RUNNING,
            live.lease_expires_at > now,
        )
        .exists()
    )
    due = or_(
        and_(JobRow.status == QUEUED, JobRow.run_after <= now),
        and_(JobRow.status == RUNNING, JobRow.lease_expires_at <= now),
    )
    background_last = case((JobRow.trigger == BACKGROUND_TRIGGER, 1), else_=0)
    return (
        select(JobRow.id)
        .where(due, ~mr_busy)
        .order_by(background_last, JobRow.run_after, JobRow.id)
    )


def first_runnable(connection: Connection, now: datetime) -> int | None:
    """The id of the oldest runnable job (SQLite, under the write lock), or None."""
    return connection.scalar(_runnable(now).limit(1))


def next_claim_candidate(
    connection: Connection, now: datetime, inspected: Sequence[int]
) -> tuple[int, str, int] | None:
    """PostgreSQL: (id, project, mr_iid) of the oldest runnable job not in ``inspected``, its row
    locked (``FOR UPDATE SKIP LOCKED``: rows other claims hold are skipped, not waited for)."""
    query = _runnable(now).limit(1).with_for_update(skip_locked=True)
    if inspected:
        query = query.where(JobRow.id.not_in(inspected))
    candidate = connection.execute(query.add_columns(JobRow.project, JobRow.mr_iid)).first()
    if candidate is None:
        return None
    job_id, project, mr_iid = candidate
    return int(job_id), str(project), int(mr_iid)


def mr_has_live_lease(
    connection: Connection, project: str, mr_iid: int, job_id: int, now: datetime
) -> bool:
    """Whether another job of the MR and of ``job_id``'s kind runs on a live lease (a fresh
    statement)."""
    kind = select(JobRow.kind).where(JobRow.id == job_id).scalar_subquery()
    live = connection.scalar(
        select(JobRow.id)
        .where(
            _same_mr(project, mr_iid),
            JobRow.kind == kind,
            JobRow.id != job_id,
            JobRow.status == RUNNING,
            JobRow.lease_expires_at > now,
        )
        .limit(1)
    )
    return live is not None


def lease_job(
    connection: Connection,
    job_id: int,
    worker_id: str,
    lease_expires_at: datetime,
    now: datetime,
    lost_reason: str,
) -> None:
    """Lease ``job_id`` to ``worker_id`` (running, one more attempt); the MR's older jobs still
    running on an expired lease are superseded with ``lost_reason``, in the same transaction.
    Only review jobs do that: each reply job answers its own note, and is never superseded."""
    project, mr_iid, kind = connection.execute(
        select(JobRow.project, JobRow.mr_iid, JobRow.kind).where(JobRow.id == job_id)
    ).one()
    lost = update(JobRow).where(
        _same_mr(project, mr_iid),
        JobRow.kind == JobKind.REVIEW.value,
        JobRow.id < job_id,
        JobRow.status == RUNNING,
        JobRow.lease_expires_at <= now,
    )
    if kind == JobKind.REVIEW.value:
        connection.execute(
            lost.values(
                status=JobStatus.SUPERSEDED.value,
                lease_owner=None,
                lease_expires_at=None,
                error=lost_reason,
                updated_at=now,
            )
        )
    connection.execute(
        update(JobRow)
        .where(JobRow.id == job_id)
        .values(
            status=RUNNING,
            lease_owner=worker_id,
            lease_expires_at=lease_expires_at,
            attempts=JobRow.attempts + 1,
            updated_at=now,
        )
    )


def fail_exhausted_leases(engine: Engine, reason: str, now: datetime) -> None:
    """Jobs running on an expired lease with no attempt left become failed with ``reason``."""
    exhausted = and_(
        JobRow.status == RUNNING,
        JobRow.lease_expires_at <= now,
        JobRow.attempts >= JobRow.max_attempts,
    )
    with engine.begin() as connection:
        failed = connection.scalars(
            update(JobRow)
            .where(exhausted)
            .values(
                status=JobStatus.FAILED.value,
                lease_owner=None,
                lease_expires_at=None,
                error=reason,
                updated_at=now,
            )
            .returning(JobRow.id)
        ).all()
        end_replies(connection, failed, JobStatus.FAILED.value, reason, now)


def extend_lease(
    engine: Engine, job_id: int, worker_id: str, lease_expires_at: datetime, now: datetime
) -> bool:
    """Move the lease's end, if ``worker_id`` still holds it; whether it did."""
    with engine.begin() as connection:
        result = connection.execute(
            update(JobRow)
            .where(_held_by(job_id, worker_id))
            .values(lease_expires_at=lease_expires_at, updated_at=now)
        )
        return result.rowcount == 1


def settle_held(
    engine: Engine,
    job_id: int,
    worker_id: str,
    now: datetime,
    *,
    give_back_attempt: bool = False,
    **values: Any,
) -> bool:
    """Drop the lease of a job ``worker_id`` holds and set ``values``; whether it held it.
    ``give_back_attempt``: the attempt its claim counted is not counted after all."""
    if give_back_attempt:
        values["attempts"] = JobRow.attempts - 1
    with engine.begin() as connection:
        result = connection.execute(
            update(JobRow)
            .where(_held_by(job_id, worker_id))
            .values(lease_owner=None, lease_expires_at=None, updated_at=now, **values)
        )
        if result.rowcount == 1:
            end_replies(connection, [job_id], values.get("status"), values.get("error"), now)
    return result.rowcount == 1


# ---------------------------------------------------------------------------------------------
# Operators


def job_row(engine: Engine, job_id: int) -> Row[Any] | None:
    with engine.connect() as connection:
        return connection.execute(select(JobRow).where(JobRow.id == job_id)).first()


def job_rows(engine: Engine, status: str | None, limit: int) -> list[Row[Any]]:
    """Newest first, only those in ``status`` when given."""
    query = select(JobRow).order_by(JobRow.id.desc()).limit(limit)
    if status is not None:
        query = query.where(JobRow.status == status)
    with engine.connect() as connection:
        return list(connection.execute(query))


def update_if_status(engine: Engine, job_id: int, current_status: str, **values: Any) -> bool:
    """Set ``values`` on the job if it is still in ``current_status``; whether it was."""
    with engine.begin() as connection:
        result = connection.execute(
            update(JobRow)
            .where(JobRow.id == job_id, JobRow.status == current_status)
            .values(**values)
        )
        if result.rowcount == 1 and values.get("status") == QUEUED:
            reopen_replies(connection, job_id)
        elif result.rowcount == 1:
            end_replies(
                connection,
                [job_id],
                values.get("status"),
                values.get("error"),
                values["updated_at"],
            )
    return result.rowcount == 1


def backlog(engine: Engine, now: datetime) -> tuple[int, datetime | None]:
    """(how many jobs wait, queued and due, and the oldest one's creation time), second looks
    (``Trigger.IDLE``) not counted: what the effort that follows the load reads."""
    query = select(func.count(JobRow.id), func.min(JobRow.created_at)).where(
        JobRow.status == QUEUED, JobRow.run_after <= now, JobRow.trigger != BACKGROUND_TRIGGER
    )
    with engine.connect() as connection:
        count, oldest = connection.execute(query).one()
    return int(count), oldest


def pending_with_trigger(engine: Engine, trigger: str) -> int:
    """How many jobs started by ``trigger`` are queued or running."""
    query = select(func.count(JobRow.id)).where(
        JobRow.trigger == trigger, JobRow.status.in_((QUEUED, RUNNING))
    )
    with engine.connect() as connection:
        return int(connection.scalar(query) or 0)


def count_by_status(engine: Engine) -> dict[str, int]:
    """How many jobs are in each status that has any."""
    query = select(JobRow.status, func.count()).group_by(JobRow.status)
    with engine.connect() as connection:
        return {status: int(count) for status, count in connection.execute(query)}


def end_replies(
    connection: Connection,
    job_ids: Sequence[int],
    job_status: str | None,
    reason: str | None,
    now: datetime,
) -> None:
    """The reply jobs among ``job_ids`` ended for good in ``job_status`` (failed, cancelled,
    superseded; any other status: nothing to do): their replies still ``queued`` (the row the
    payload names, or whose ``job_id`` is the job) are settled ``failed`` or ``dropped`` with
    ``reason``."""
    reply_status = REPLY_WHEN_JOB_ENDS.get(job_status or "")
    if reply_status is None or not job_ids:
        return
    connection.execute(
        update(ReplyRow)
        .where(ReplyRow.status == ReplyStatus.QUEUED.value, _replies_of(connection, job_ids))
        .values(
            status=reply_status, reason=reason or f"the reply job was {job_status}", finished_at=now
        )
    )


def reopen_replies(connection: Connection, job_id: int) -> None:
    """A reply job queued again (``reviewbot jobs retry``): its reply, failed or dropped, is
    queued again, so the job answers it (or drops it, too late, with the reason) rather than
    succeeding with nothing done. A posted reply stays posted."""
    connection.execute(
        update(ReplyRow)
        .where(
            ReplyRow.status.in_([ReplyStatus.FAILED.value, ReplyStatus.DROPPED.value]),
            _replies_of(connection, [job_id]),
        )
        .values(status=ReplyStatus.QUEUED.value, reason=None, finished_at=None)
    )


def _replies_of(connection: Connection, job_ids: Sequence[int]) -> Any:
    """The condition on ``replies`` rows of the reply jobs ``job_ids``: the row each job's
    payload names, or whose ``job_id`` is one of them."""
    payloads = connection.execute(
        select(JobRow.payload).where(JobRow.id.in_(job_ids), JobRow.kind == JobKind.REPLY.value)
    ).scalars()
    reply_ids = [
        int(named)
        for payload in payloads
        if isinstance(named := (payload or {}).get(REPLY_ID_KEY), int)
    ]
    return or_(ReplyRow.id.in_(reply_ids), ReplyRow.job_id.in_(job_ids))
