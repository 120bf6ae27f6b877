"""The team learnings in the database: :class:`LearningBook` adds, lists, accepts, rejects and
removes them, looks up those in force for a project (its own and its groups') and counts the
findings each one suppressed.

A project (or a group) holds at most ``MAX_LEARNINGS_PER_PROJECT`` learnings that are active
or proposed; ``add`` refuses one more with :class:`~reviewbot.learnings.LearningLimitError`. A
proposal carries a unique ``proposal_key``: proposing the same thing twice stores it once.

Owns: the SQL of the ``learnings`` table and of the findings it suppressed. Must not: decide
what a learning says or whether it applies (``reviewbot.learnings.learning``), or who may make one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, false, func, insert, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from reviewbot.findings import FindingState
from reviewbot.learnings.learning import (
    MAX_LEARNINGS_PER_PROJECT,
    Learning,
    LearningError,
    LearningLimitError,
    LearningSource,
    LearningStatus,
    ancestor_groups,
)
from reviewbot.states import FeedbackKind
from reviewbot.store.models import PUBLISHED_STATES
from reviewbot.store.models import Feedback as FeedbackRow
from reviewbot.store.models import Finding as FindingRow
from reviewbot.store.models import Learning as LearningRow
from reviewbot.store.models import Review as ReviewRow
from reviewbot.store.store import RecordNotFound, utc_now

__all__ = ["LearningBook"]

Clock = Callable[[], datetime]
COUNTED_STATUSES = (LearningStatus.ACTIVE.value, LearningStatus.PROPOSED.value)
# status now -> the statuses it may be reached from
MOVES = {
    LearningStatus.ACTIVE: (LearningStatus.PROPOSED, LearningStatus.REJECTED),
    LearningStatus.REJECTED: (LearningStatus.PROPOSED,),
    LearningStatus.REMOVED: (
        LearningStatus.ACTIVE,
        LearningStatus.PROPOSED,
        LearningStatus.REJECTED,
    ),
}
COLUMNS = tuple(column.key for column in LearningRow.__table__.columns)


def _learning(row: Any) -> Learning:
    values = {key: getattr(row, key) for key in COLUMNS}
    values["path_globs"] = tuple(values["path_globs"] or ())
    values["status"] = LearningStatus(values["status"])
    values["source"] = LearningSource(values["source"])
    return Learning(**values)


def _values(learning: Learning, created_at: datetime) -> dict[str, Any]:
    values = {key: getattr(learning, key) for key in COLUMNS if key != "id"}
    values["path_globs"] = list(learning.path_globs)
    values["status"] = learning.status.value
    values["source"] = learning.source.value
    values["gitlab_url"] = learning.gitlab_url.rstrip("/") if learning.gitlab_url else None
    values["created_at"] = learning.created_at or created_at
    return values


class LearningBook:
    """Reads and writes the ``learnings`` table (plain :class:`Learning` values in and out)."""

    def __init__(self, engine: Engine, *, clock: Clock = utc_now) -> None:
        self._engine = engine
        self._clock = clock

    # -- writes ------------------------------------------------------------------------

    def add(self, learning: Learning) -> int:
        """Store a new learning; its id. LearningError when it names neither a project nor a
        group, LearningLimitError when its project or group is full."""
        self._check_scope(learning)
        with self._engine.begin() as connection:
            held = connection.execute(
                select(func.count()).select_from(LearningRow).where(*self._same_scope(learning))
            ).scalar_one()
            if held >= MAX_LEARNINGS_PER_PROJECT:
                raise LearningLimitError(
                    f"{learning.scope} already has {held} learnings (active or proposed), the "
                    f"most allowed is {MAX_LEARNINGS_PER_PROJECT}: remove one first "
                    "(reviewbot learnings remove ID)"
                )
            statement = insert(LearningRow).values(**_values(learning, self._clock()))
            return int(connection.execute(statement.returning(LearningRow.id)).scalar_one())

    def propose(self, learning: Learning) -> int | None:
        """Store a proposal once per ``proposal_key``: its id, or None when that key was
        proposed before (whatever became of it) or the project is full."""
        if not learning.proposal_key:
            raise LearningError("a proposal needs a proposal_key")
        proposal = replace(learning, status=LearningStatus.PROPOSED, source=LearningSource.PROPOSAL)
        self._check_scope(proposal)
        with self._engine.begin() as connection:
            held = connection.execute(
                select(func.count()).select_from(LearningRow).where(*self._same_scope(proposal))
            ).scalar_one()
            if held >= MAX_LEARNINGS_PER_PROJECT:
                return None
            statement = (
                self._dialect_insert()
                .values(**_values(proposal, self._clock()))
                .on_conflict_do_nothing(index_elements=["proposal_key"])
                .returning(LearningRow.id)
            )
            row = connection.execute(statement).first()
        return int(row.id) if row is not None else None

    def accept(self, learning_id: int, by: str | None) -> Learning:
        """Put a proposed (or rejected) learning in force; the learning as it is now."""
        now = self._clock()
        return self._move(learning_id, LearningStatus.ACTIVE, accepted_by=by, accepted_at=now)

    def reject(self, learning_id: int, by: str | None) -> Learning:
        """Turn a proposal down: it is kept (never proposed again) but never applied."""
        now = self._clock()
        return self._move(learning_id, LearningStatus.REJECTED, accepted_by=by, accepted_at=now)

    def remove(self, learning_id: int) -> Learning:
        """Take a learning out of force for good (kept in the database for the record)."""
        return self._move(learning_id, LearningStatus.REMOVED, removed_at=self._clock())

    def set_proposal_note(
        self,
        learning_id: int,
        note_id: int,
        *,
        mr_iid: int | None = None,
        discussion_id: str | None = None,
    ) -> None:
        """Remember the GitLab note that proposes ``learning_id``, and its thread when given
        (a learning proposed in a thread has its thread already)."""
        thread: dict[str, Any] = {}
        if mr_iid is not None and discussion_id is not None:
            thread = {"mr_iid": mr_iid, "discussion_id": discussion_id}
        with self._engine.begin() as connection:
            statement = (
                update(LearningRow)
                .where(LearningRow.id == learning_id)
                .values(proposal_note_id=note_id, **thread)
            )
            if connection.execute(statement).rowcount != 1:
                raise RecordNotFound(f"learning {learning_id} not found")

    def _move(self, learning_id: int, status: LearningStatus, **fields: Any) -> Learning:
        with self._engine.begin() as connection:
            row = connection.execute(
                select(LearningRow).where(LearningRow.id == learning_id)
            ).first()
            if row is None:
                raise RecordNotFound(f"learning {learning_id} not found")
            now = LearningStatus(row.status)
            if now not in MOVES[status]:
                raise LearningError(
                    f"learning {learning_id} is {now.value}: it cannot be {status.value}"
                )
            connection.execute(
                update(LearningRow)
                .where(LearningRow.id == learning_id, LearningRow.status == now.value)
                .values(status=status.value, **fields)
            )
        return self.get(learning_id)

    # -- reads -------------------------------------------------------------------------

    def get(self, learning_id: int) -> Learning:
        """One learning; RecordNotFound when there is none of that id."""
        with self._engine.connect() as connection:
            row = connection.execute(
                select(LearningRow).where(LearningRow.id == learning_id)
            ).first()
        if row is None:
            raise RecordNotFound(f"learning {learning_id} not found")
        return _learning(row)

    def list(
        self,
        gitlab_url: str | None,
        *,
        project_id: int | None = None,
        group_path: str | None = None,
        statuses: Iterable[LearningStatus] = (),
    ) -> list[Learning]:
        """The learnings of one GitLab (None: of every one; of one project and/or group when
        given), oldest first, of the given statuses (none given: every status)."""
        conditions = []
        if gitlab_url is not None:
            conditions.append(LearningRow.gitlab_url == gitlab_url.rstrip("/"))
        scopes = []
        if project_id is not None:
            scopes.append(LearningRow.project_id == project_id)
        if group_path is not None:
            scopes.append(
                (LearningRow.project_id.is_(None)) & (LearningRow.group_path == group_path)
            )
        if scopes:
            conditions.append(or_(*scopes))
        wanted = [status.value for status in statuses]
        if wanted:
            conditions.append(LearningRow.status.in_(wanted))
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(LearningRow).where(*conditions).order_by(LearningRow.id)
            )
            return [_learning(row) for row in rows]

    def active_for_project(
        self, gitlab_url: str, project_id: int, project_path: str
    ) -> list[Learning]:
        """The learnings in force for a project: its own, then its groups' (nearest group
        first), each oldest first."""
        groups = ancestor_groups(project_path)
        scope = LearningRow.project_id == project_id
        if groups:
            scope = or_(
                scope,
                LearningRow.project_id.is_(None) & LearningRow.group_path.in_(groups),
            )
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(LearningRow)
                .where(
                    LearningRow.gitlab_url == gitlab_url.rstrip("/"),
                    LearningRow.status == LearningStatus.ACTIVE.value,
                    scope,
                )
                .order_by(LearningRow.id)
            )
            found = [_learning(row) for row in rows]
        nearness = {group: index for index, group in enumerate(groups)}

        def order(learning: Learning) -> tuple[int, int]:
            if learning.project_id is not None:
                return (-1, learning.id or 0)
            return (nearness.get(learning.group_path or "", len(groups)), learning.id or 0)

        return sorted(found, key=order)

    def suppressed_counts(
        self,
        learning_ids: Iterable[int],
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> dict[int, int]:
        """How many findings each learning suppressed (from ``since``, before ``until``), in
        reviews that post: a dry run's are not counted (the review that posts counts them)."""
        ids = list(learning_ids)
        if not ids:
            return {}
        conditions = [
            FindingRow.learning_id.in_(ids),
            FindingRow.state == FindingState.SUPPRESSED.value,
            ReviewRow.dry_run.is_(false()),
        ]
        if since is not None:
            conditions.append(FindingRow.created_at >= since)
        if until is not None:
            conditions.append(FindingRow.created_at < until)
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(FindingRow.learning_id, func.count())
                .join(ReviewRow, FindingRow.review_id == ReviewRow.id)
                .where(*conditions)
                .group_by(FindingRow.learning_id)
            )
            return {int(learning_id): int(count) for learning_id, count in rows}

    def turned_down_candidates(self, gitlab_url: str, since: datetime) -> list[dict[str, Any]]:
        """Posted findings of ``gitlab_url`` made since ``since`` with a 👎 or a resolution on
        record (whether it still counts is the caller's to decide, from the votes in force and
        the other outcomes), oldest first."""
        voted_or_resolved = (
            select(FeedbackRow.finding_id)
            .where(
                FeedbackRow.finding_id.is_not(None),
                or_(
                    (FeedbackRow.kind == FeedbackKind.AWARD.value)
                    & FeedbackRow.value.like("thumbsdown%"),
                    FeedbackRow.kind == FeedbackKind.RESOLUTION.value,
                ),
            )
            .distinct()
        )
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(
                    FindingRow.id,
                    FindingRow.project_id,
                    FindingRow.project,
                    FindingRow.mr_iid,
                    FindingRow.discussion_id,
                    FindingRow.path,
                    FindingRow.line,
                    FindingRow.category,
                    FindingRow.title,
                )
                .where(
                    FindingRow.gitlab_url == gitlab_url.rstrip("/"),
                    FindingRow.project_id.is_not(None),
                    FindingRow.created_at >= since,
                    FindingRow.state.in_([state.value for state in PUBLISHED_STATES]),
                    FindingRow.id.in_(voted_or_resolved),
                )
                .order_by(FindingRow.id)
            )
            return [dict(row._mapping) for row in rows]

    # -- helpers -----------------------------------------------------------------------

    @staticmethod
    def _check_scope(learning: Learning) -> None:
        if not learning.gitlab_url:
            raise LearningError("a learning needs the GitLab URL it is for")
        if learning.project_id is None and not learning.group_path:
            raise LearningError("a learning needs a project or a group")

    @staticmethod
    def _same_scope(learning: Learning) -> list[Any]:
        conditions = [
            LearningRow.gitlab_url == (learning.gitlab_url or "").rstrip("/"),
            LearningRow.status.in_(COUNTED_STATUSES),
        ]
        if learning.project_id is not None:
            conditions.append(LearningRow.project_id == learning.project_id)
        else:
            conditions.append(LearningRow.project_id.is_(None))
            conditions.append(LearningRow.group_path == learning.group_path)
        return conditions

    def _dialect_insert(self) -> Any:
        dialect_insert = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}.get(
            self._engine.dialect.name
        )
        if dialect_insert is None:
            raise NotImplementedError(f"unsupported database: {self._engine.dialect.name}")
        return dialect_insert(LearningRow)
