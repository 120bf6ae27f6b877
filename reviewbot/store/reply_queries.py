"""The SQL of answers in the bot's threads (``replies`` table, and the findings they answer).

Owns: :class:`ReplyStore`: which finding a thread belongs to, the one ``replies`` row per
triggering note (its ``reply_key``), its settling, the rate-limit counts, the reply a reaction
is on, and the report's figures on replies. Must not: decide what a reply says or when it is
dropped (``reviewbot.replies.answer`` does), or talk to GitLab.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, and_, case, func, select, update
from sqlalchemy.dialects import postgresql, sqlite

from reviewbot.states import FeedbackKind, ReplyStatus
from reviewbot.store.models import Feedback as FeedbackRow
from reviewbot.store.models import Finding as FindingRow
from reviewbot.store.models import Reply as ReplyRow

__all__ = ["ReplyRecord", "ReplyStore", "ThreadFinding", "reply_key"]

Clock = Callable[[], datetime]
# Replies that count against the rate limits: answered (a refusal too), or about to be.
COUNTED_STATUSES = (
    ReplyStatus.QUEUED.value,
    ReplyStatus.POSTED.value,
    ReplyStatus.REFUSED.value,
)
THUMBS_UP = "thumbsup"
THUMBS_DOWN = "thumbsdown"


def reply_key(gitlab_url: str | None, project_id: int | None, project: str, note_id: int) -> str:
    """One answer per triggering note: ``<gitlab url>|<project id or path>|<note id>``."""
    where = str(project_id) if project_id is not None else project
    return f"{(gitlab_url or '').rstrip('/')}|{where}|{note_id}"


@dataclass(frozen=True)
class ThreadFinding:
    """The finding a bot thread was opened for, as stored."""

    finding_id: int
    project: str
    mr_iid: int | None
    path: str
    side: str
    line: int | None
    end_line: int | None
    severity: str
    category: str
    title: str
    body: str
    suggestion: str | None
    fingerprint: str
    note_id: int | None


@dataclass(frozen=True)
class ReplyRecord:
    """One row of ``replies``."""

    id: int
    reply_key: str
    status: str
    command: str
    discussion_id: str
    trigger_note_id: int
    finding_id: int | None
    reply_note_id: int | None
    created_at: datetime
    reason: str | None
    author: str | None


class ReplyStore:
    """Queries on ``replies`` (and the findings and feedback they refer to)."""

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock

    # -- intake -------------------------------------------------------------------------

    def thread_finding(
        self, discussion_id: str, project_id: int | None = None
    ) -> ThreadFinding | None:
        """The finding whose thread is ``discussion_id`` (newest row), or None: not a thread
        the bot started for a finding."""
        query = select(FindingRow).where(FindingRow.discussion_id == discussion_id)
        if project_id is not None:
            query = query.where(
                (FindingRow.project_id == project_id) | FindingRow.project_id.is_(None)
            )
        with self._engine.connect() as connection:
            row = connection.execute(query.order_by(FindingRow.id.desc()).limit(1)).first()
        if row is None:
            return None
        finding = row
        return ThreadFinding(
            finding_id=finding.id,
            project=finding.project,
            mr_iid=finding.mr_iid,
            path=finding.path,
            side=finding.side,
            line=finding.line,
            end_line=finding.end_line,
            severity=finding.severity,
            category=finding.category,
            title=finding.title,
            body=finding.body,
            suggestion=finding.suggestion,
            fingerprint=finding.fingerprint,
            note_id=finding.note_id,
        )

    def recent_replies(
        self, *, project: str, mr_iid: int | None, author: str | None, since: datetime
    ) -> int:
        """Replies queued or posted since ``since`` on the MR (``mr_iid``) or for ``author``."""
        conditions = [
            ReplyRow.project == project,
            ReplyRow.created_at >= since,
            ReplyRow.status.in_(COUNTED_STATUSES),
        ]
        if mr_iid is not None:
            conditions.append(ReplyRow.mr_iid == mr_iid)
        if author is not None:
            conditions.append(ReplyRow.author == author)
        query = select(func.count()).select_from(ReplyRow).where(and_(*conditions))
        with self._engine.connect() as connection:
            return int(connection.scalar(query) or 0)

    def start(self, **values: Any) -> tuple[int, bool]:
        """The row of ``values["reply_key"]``, inserted (status ``values["status"]``) unless
        it exists: (id, created)."""
        row = {"created_at": self._clock(), **values}
        insert = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}[
            self._engine.dialect.name
        ]
        statement = (
            insert(ReplyRow)
            .values(**row)
            .on_conflict_do_nothing(index_elements=["reply_key"])
            .returning(ReplyRow.id)
        )
        with self._engine.begin() as connection:
            created = connection.execute(statement).scalar()
            if created is not None:
                return int(created), True
            existing = connection.scalar(
                select(ReplyRow.id).where(ReplyRow.reply_key == values["reply_key"])
            )
        return int(existing), False

    def set_job(self, reply_id: int, job_id: int) -> None:
        with self._engine.begin() as connection:
            connection.execute(
                update(ReplyRow).where(ReplyRow.id == reply_id).values(job_id=job_id)
            )

    # -- the worker ---------------------------------------------------------------------

    def by_id(self, reply_id: int) -> ReplyRecord | None:
        with self._engine.connect() as connection:
            row = connection.execute(select(ReplyRow).where(ReplyRow.id == reply_id)).first()
        if row is None:
            return None
        reply = row
        return ReplyRecord(
            id=reply.id,
            reply_key=reply.reply_key,
            status=reply.status,
            command=reply.command,
            discussion_id=reply.discussion_id,
            trigger_note_id=reply.trigger_note_id,
            finding_id=reply.finding_id,
            reply_note_id=reply.reply_note_id,
            created_at=reply.created_at,
            reason=reply.reason,
            author=reply.author,
        )

    def restate(self, reply_id: int, *, command: str, author: str | None) -> None:
        """The command and author of a reply as the note holds them (not as delivered)."""
        with self._engine.begin() as connection:
            connection.execute(
                update(ReplyRow)
                .where(ReplyRow.id == reply_id)
                .values(command=command, author=author)
            )

    def finish(self, reply_id: int, status: str, **values: Any) -> None:
        """Settle a reply: ``status`` with its reason, note, model, calls, tokens, latency."""
        with self._engine.begin() as connection:
            connection.execute(
                update(ReplyRow)
                .where(ReplyRow.id == reply_id)
                .values(status=status, finished_at=self._clock(), **values)
            )

    # -- reactions ----------------------------------------------------------------------

    def reply_for_note(self, note_id: int) -> tuple[int, int | None, int] | None:
        """(reply id, finding id, MR iid) of the bot's answer posted as note ``note_id``."""
        query = select(ReplyRow.id, ReplyRow.finding_id, ReplyRow.mr_iid).where(
            ReplyRow.reply_note_id == note_id
        )
        with self._engine.connect() as connection:
            row = connection.execute(query.order_by(ReplyRow.id.desc()).limit(1)).first()
        return None if row is None else (int(row.id), row.finding_id, int(row.mr_iid))

    # -- the report ---------------------------------------------------------------------

    def reply_figures(
        self, since: datetime, until: datetime, project: str | None = None
    ) -> list[dict[str, Any]]:
        """Per command and status, replies to notes that arrived in [since, until) (of
        ``project`` when given): how many, their model calls, and the 👍/👎 given on them."""
        up = func.sum(case((FeedbackRow.value == THUMBS_UP, 1), else_=0))
        down = func.sum(case((FeedbackRow.value == THUMBS_DOWN, 1), else_=0))
        reactions = (
            select(FeedbackRow.reply_id, up.label("up"), down.label("down"))
            .where(FeedbackRow.reply_id.is_not(None), FeedbackRow.kind == FeedbackKind.AWARD.value)
            .group_by(FeedbackRow.reply_id)
            .subquery()
        )
        query = (
            select(
                ReplyRow.command,
                ReplyRow.status,
                func.count(ReplyRow.id),
                func.coalesce(func.sum(reactions.c.up), 0),
                func.coalesce(func.sum(reactions.c.down), 0),
                func.coalesce(func.sum(ReplyRow.model_calls), 0),
            )
            .outerjoin(reactions, reactions.c.reply_id == ReplyRow.id)
            .group_by(ReplyRow.command, ReplyRow.status)
            .order_by(ReplyRow.command, ReplyRow.status)
        )
        query = query.where(ReplyRow.created_at >= since, ReplyRow.created_at < until)
        if project is not None:
            query = query.where(ReplyRow.project == project)
        with self._engine.connect() as connection:
            return [
                {
                    "command": command,
                    "status": status,
                    "replies": int(count),
                    "thumbs_up": int(thumbs_up),
                    "thumbs_down": int(thumbs_down),
                    "model_calls": int(calls),
                }
                for command, status, count, thumbs_up, thumbs_down, calls in connection.execute(
                    query
                )
            ]
