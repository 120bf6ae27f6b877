"""The accuracy report's figures, each computed in SQL (GROUP BY, window functions), never by
looping over rows in Python: a year of data reports in seconds (tests/bench/bench_report.py).

Which rows a window holds:

- a dry run (``run --dry-run``, ``ci --dry-run``) is in no window: it posted nothing;
- a review belongs to a window when it *started* in it: ``since <= started_at < until`` (UTC,
  ``until`` exclusive: a review at 23:59:59.999999 on Sunday is in that week, one at 00:00:00
  on Monday is not); its model calls and findings go with it;
- a finding is *posted* when it has a thread on GitLab (``PUBLISHED_STATES``). Feedback is
  about a posted finding and counts in the window of the review that posted it, whenever it
  arrived: the report says what became of that window's comments so far;
- 👍/👎 are the *current* votes: per finding, user and vote the newest event wins, so a vote
  recorded by both the webhook and ``feedback sync`` counts once and a revoked vote not at all;
- the other outcomes count findings (a finding addressed twice is one addressed finding),
  except ``replies``, which counts human replies.

Percentiles are nearest-rank, the same on both backends: the value at rank ``ceil(p * n)`` in
ascending order, found with grouped counts and one ``ROW_NUMBER()`` window
(`reviewbot.store.percentile_queries`; SQLite has no ``percentile_cont``). Days are UTC dates
of the review's start.

Owns: every figure of the report, as SQL. Must not: shape or word the report
(`reviewbot.report.document`, `reviewbot.report.text`), or loop over a table's rows in Python
(``roll_up`` sums only the few aggregated groups).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    and_,
    case,
    cast,
    exists,
    false,
    func,
    literal,
    or_,
    select,
)
from sqlalchemy import String as SqlString
from sqlalchemy.orm import aliased

from reviewbot.states import FeedbackKind, MergeRequestState
from reviewbot.store.eval_queries import latest_comparison
from reviewbot.store.figures import review_seconds
from reviewbot.store.models import PUBLISHED_STATES, FindingState
from reviewbot.store.models import EvalRun as EvalRunRow
from reviewbot.store.models import Feedback as FeedbackRow
from reviewbot.store.models import Finding as FindingRow
from reviewbot.store.models import LLMCall as LLMCallRow
from reviewbot.store.models import MergeRequestRecord as MergeRequestRow
from reviewbot.store.models import Review as ReviewRow
from reviewbot.store.percentile_queries import calls_in, percentiles
from reviewbot.store.trend_queries import live_figures, week_number
from reviewbot.window import Window

__all__ = [
    "DIMENSIONS",
    "FEEDBACK_COUNT_FIELDS",
    "OUTCOME_FIELDS",
    "ReportScope",
    "daily_findings",
    "daily_ttft",
    "eval_runs",
    "finding_groups",
    "latency",
    "outcome_groups",
    "read_report_figures",
    "read_window_summary",
    "roll_up",
    "slowest_reviews",
    "tool_call_groups",
    "tool_calls_by_chunk",
    "totals",
    "without_jit",
]

TREND_WEEKS = 8  # the trend: this many ISO weeks up to the window's last
THUMBS_UP = "thumbsup"
THUMBS_DOWN = "thumbsdown"
# Findings found again on a later run: counted once, where they were first reported.
REFOUND_STATES = (FindingState.DUPLICATE.value, FindingState.DELETED.value)
POSTED_STATES = tuple(state.value for state in PUBLISHED_STATES)
DIMENSIONS = ("category", "prompt_version", "model", "severity", "rule", "source")
NO_RULE = ""  # the rule dimension of a finding that cites no rule
FEEDBACK_COUNT_FIELDS = (
    "thumbs_up",
    "thumbs_down",
    "addressed",
    "resolved_by_human",
    "replied",
    "replies",
    "suggestion_applied",
    "deleted",
    "ignored",
)
# The order is the order of the aggregate columns outcome_groups selects.
OUTCOME_FIELDS = ("findings_posted", *FEEDBACK_COUNT_FIELDS, "addressable")


@dataclass(frozen=True)
class ReportScope:
    """Reviews started in ``[since, until)`` (UTC), of one project (path or id) or all; of one
    trigger (``trigger``: e.g. the second looks, ``idle``) or any."""

    since: datetime
    until: datetime
    project: str | None = None
    trigger: str | None = None

    def review_conditions(self) -> list[Any]:
        """The window's reviews, a dry run's never (it posted nothing: no finding of it is on
        an MR, and the review that posts them is counted)."""
        conditions = [
            ReviewRow.started_at >= self.since,
            ReviewRow.started_at < self.until,
            ReviewRow.dry_run.is_(false()),
        ]
        if self.project is not None:
            by_path = ReviewRow.project == self.project
            if self.project.isdigit():
                conditions.append(or_(by_path, ReviewRow.project_id == int(self.project)))
            else:
                conditions.append(by_path)
        if self.trigger is not None:
            conditions.append(ReviewRow.trigger == self.trigger)
        return conditions


def utc_day(column: Any, dialect: str) -> Any:
    """``YYYY-MM-DD`` of a timestamp, in UTC (SQLite stores UTC text; PostgreSQL converts)."""
    if dialect == "sqlite":
        return func.date(column)
    return func.to_char(func.timezone("UTC", column), "YYYY-MM-DD")


def totals(connection: Connection, scope: ReportScope) -> dict[str, Any]:
    """Counts of the window: reviews (and by status), MRs, findings, posted, calls, tokens."""
    in_scope = scope.review_conditions()
    reviews, prompt, completion, cached = connection.execute(
        select(
            func.count(ReviewRow.id),
            func.sum(ReviewRow.prompt_tokens),
            func.sum(ReviewRow.completion_tokens),
            func.sum(ReviewRow.cached_tokens),
        ).where(*in_scope)
    ).one()
    by_status = dict(
        connection.execute(
            select(ReviewRow.status, func.count()).where(*in_scope).group_by(ReviewRow.status)
        ).all()
    )
    project_key = func.coalesce(cast(ReviewRow.project_id, SqlString), ReviewRow.project)
    merge_requests = (
        select(func.coalesce(ReviewRow.gitlab_url, ""), project_key, ReviewRow.mr_iid)
        .where(*in_scope, ReviewRow.mr_iid.is_not(None))
        .distinct()
        .subquery()
    )
    mrs = connection.scalar(select(func.count()).select_from(merge_requests))
    findings, posted = connection.execute(
        select(
            func.count(FindingRow.id),
            func.sum(case((FindingRow.state.in_(POSTED_STATES), 1), else_=0)),
        )
        .join(ReviewRow, FindingRow.review_id == ReviewRow.id)
        .where(*in_scope, FindingRow.state.not_in(REFOUND_STATES))
    ).one()
    calls = connection.scalar(
        select(func.count(LLMCallRow.id))
        .join(ReviewRow, LLMCallRow.review_id == ReviewRow.id)
        .where(*in_scope)
    )
    return {
        "reviews": int(reviews or 0),
        "reviews_by_status": {status: int(count) for status, count in sorted(by_status.items())},
        "mrs": int(mrs or 0),
        "findings": int(findings or 0),
        "findings_posted": int(posted or 0),
        "model_calls": int(calls or 0),
        "prompt_tokens": int(prompt or 0),
        "completion_tokens": int(completion or 0),
        "cached_tokens": int(cached or 0),
    }


def latency(connection: Connection, scope: ReportScope) -> dict[str, dict[str, float | None]]:
    """TTFT of the window's model calls (ms) and duration of its finished reviews (s)."""
    in_scope = scope.review_conditions()
    calls, _ = calls_in(in_scope)
    ((ttft_p50, ttft_p95, ttft_n),) = percentiles(connection, LLMCallRow.ttft_ms, calls, []) or [
        (None, None, 0)
    ]
    seconds = review_seconds(connection.dialect.name)
    ((review_p50, review_p95, review_n),) = percentiles(
        connection, seconds, ReviewRow.__table__, in_scope
    ) or [(None, None, 0)]
    return {
        "ttft_ms": {"p50": _float(ttft_p50), "p95": _float(ttft_p95), "count": int(ttft_n or 0)},
        "review_s": {
            "p50": _float(review_p50),
            "p95": _float(review_p95),
            "count": int(review_n or 0),
        },
    }


def _bucket(dialect: str, weeks_from: datetime | None) -> tuple[str, Any, Any]:
    """The per-day charts' bucket of a review: ("day", its UTC date, str) or, with
    ``weeks_from`` (a Monday), ("week", the whole weeks since then, int)."""
    if weeks_from is None:
        return "day", utc_day(ReviewRow.started_at, dialect), str
    return "week", week_number(ReviewRow.started_at, weeks_from, dialect), int


def daily_ttft(
    connection: Connection, scope: ReportScope, weeks_from: datetime | None = None
) -> list[dict[str, Any]]:
    """Per day (per week with ``weeks_from``): TTFT p50 and p95 (ms) and how many calls had
    a first token."""
    unit, bucket, kind = _bucket(connection.dialect.name, weeks_from)
    calls, day = calls_in(scope.review_conditions(), bucket)
    rows = percentiles(connection, LLMCallRow.ttft_ms, calls, [], day)
    return [
        {unit: kind(d), "p50_ms": _float(p50), "p95_ms": _float(p95), "calls": int(n)}
        for d, p50, p95, n in rows
    ]


def daily_findings(
    connection: Connection, scope: ReportScope, weeks_from: datetime | None = None
) -> list[dict[str, Any]]:
    """Per day (per week with ``weeks_from``) and severity: findings reported (found again on
    a later run: not again)."""
    unit, bucket, kind = _bucket(connection.dialect.name, weeks_from)
    bucket = bucket.label("bucket")
    rows = connection.execute(
        select(bucket, FindingRow.severity, func.count())
        .join(ReviewRow, FindingRow.review_id == ReviewRow.id)
        .where(*scope.review_conditions(), FindingRow.state.not_in(REFOUND_STATES))
        .group_by(bucket, FindingRow.severity)
        .order_by(bucket, FindingRow.severity)
    )
    return [{unit: kind(d), "severity": s, "findings": int(n)} for d, s, n in rows]


def _dimension_columns() -> list[Any]:
    """The columns of DIMENSIONS, in that order."""
    return [
        FindingRow.category,
        ReviewRow.prompt_version,
        ReviewRow.model,
        FindingRow.severity,
        func.coalesce(FindingRow.rule, NO_RULE),
        FindingRow.source,  # model / analyzer / both (issue 35)
    ]


def finding_groups(connection: Connection, scope: ReportScope) -> list[dict[str, Any]]:
    """Findings reported in the window, counted per combination of DIMENSIONS (a few hundred
    rows at most: 10 categories x 5 severities x the models and prompt versions in use)."""
    columns = _dimension_columns()
    rows = connection.execute(
        select(*columns, func.count())
        .select_from(FindingRow)
        .join(ReviewRow, FindingRow.review_id == ReviewRow.id)
        .where(*scope.review_conditions(), FindingRow.state.not_in(REFOUND_STATES))
        .group_by(*columns)
    )
    return [
        {**dict(zip(DIMENSIONS, row[:-1], strict=True)), "findings": int(row[-1])} for row in rows
    ]


def outcome_groups(
    connection: Connection, scope: ReportScope, week_since: datetime | None = None
) -> list[dict[str, Any]]:
    """What became of the window's posted findings, per combination of DIMENSIONS (and, with
    ``week_since``, per ``week``: whole weeks since then, for the trend).

    Each row holds OUTCOME_FIELDS; ``addressable`` counts the posted findings whose MR got a
    later version (a later review of another head, or a newer head seen by ``feedback sync``),
    was merged, or that were addressed (the addressed rate's denominator).
    """
    dimensions = dict(zip(DIMENSIONS, _dimension_columns(), strict=True))
    if week_since is not None:
        dialect = connection.dialect.name
        dimensions["week"] = week_number(ReviewRow.started_at, week_since, dialect)
    posted = (
        select(
            FindingRow.id.label("id"),
            *(column.label(name) for name, column in dimensions.items()),
            FindingRow.gitlab_url.label("gitlab_url"),
            FindingRow.project_id.label("project_id"),
            FindingRow.mr_iid.label("mr_iid"),
            ReviewRow.id.label("review_id"),
            ReviewRow.head_sha.label("head_sha"),
            ReviewRow.started_at.label("started_at"),
        )
        .join(ReviewRow, FindingRow.review_id == ReviewRow.id)
        .where(*scope.review_conditions(), FindingRow.state.in_(POSTED_STATES))
        .cte("posted")
    )
    votes = _current_votes(posted)
    outcomes = _outcome_flags(posted)
    moves = _moved_on(posted)
    addressed = func.coalesce(outcomes.c.addressed, 0)
    eligible = case((or_(addressed == 1, func.coalesce(moves.c.moved_on, 0) == 1), 1), else_=0)

    def total(column: Any) -> Any:
        return func.coalesce(func.sum(func.coalesce(column, 0)), 0)

    labels = [posted.c[name] for name in dimensions]
    query = (
        select(
            *labels,
            func.count(posted.c.id),
            total(votes.c.up),
            total(votes.c.down),
            total(outcomes.c.addressed),
            total(outcomes.c.resolution),
            total(case((outcomes.c.replies > 0, 1), else_=0)),
            total(outcomes.c.replies),
            total(outcomes.c.suggestion_applied),
            total(outcomes.c.deleted),
            total(outcomes.c.ignored),
            total(eligible),
        )
        .select_from(
            posted.outerjoin(votes, votes.c.finding_id == posted.c.id)
            .outerjoin(outcomes, outcomes.c.finding_id == posted.c.id)
            .outerjoin(moves, _same_review_and_mr(moves, posted))
        )
        .group_by(*labels)
    )
    width = len(dimensions)
    return [
        {
            **dict(zip(dimensions, row[:width], strict=True)),
            **dict(zip(OUTCOME_FIELDS, (int(v) for v in row[width:]), strict=True)),
        }
        for row in connection.execute(query)
    ]


def roll_up(
    groups: Sequence[Mapping[str, Any]], dimension: str | None, fields: Sequence[str]
) -> dict[str, dict[str, int]]:
    """Sum the grouped rows of finding_groups/outcome_groups by one dimension (None: all
    into one row, labelled ""). Runs over those few aggregated rows, never over findings."""
    totals: dict[str, dict[str, int]] = {}
    for group in groups:
        label = "" if dimension is None else str(group[dimension])
        into = totals.setdefault(label, dict.fromkeys(fields, 0))
        for name in fields:
            into[name] += int(group[name])
    return totals


def _about(posted: Any) -> Any:
    """The feedback rows about the ``posted`` findings: a join from them, so a week's report
    reads its own findings' feedback through the ``finding_id`` index, not every feedback
    row of the store (each probing its finding and review, as an EXISTS did: 3 s a query on
    the benchmark's year of data for a one-week window)."""
    return FeedbackRow.__table__.join(posted, posted.c.id == FeedbackRow.finding_id)


def _current_votes(posted: Any) -> Any:
    """Per posted finding: 👍 and 👎 in force (the newest event per finding, user and vote)."""
    vote = case((FeedbackRow.value.like(f"{THUMBS_UP}%"), THUMBS_UP), else_=THUMBS_DOWN)
    newest_first = func.row_number().over(
        partition_by=(FeedbackRow.finding_id, FeedbackRow.username, vote),
        order_by=(FeedbackRow.created_at.desc(), FeedbackRow.id.desc()),
    )
    ranked = (
        select(FeedbackRow.finding_id, FeedbackRow.value, newest_first.label("rank"))
        .select_from(_about(posted))
        .where(FeedbackRow.kind == FeedbackKind.AWARD.value)
        .subquery()
    )
    return (
        select(
            ranked.c.finding_id,
            func.sum(case((ranked.c.value == THUMBS_UP, 1), else_=0)).label("up"),
            func.sum(case((ranked.c.value == THUMBS_DOWN, 1), else_=0)).label("down"),
        )
        .where(ranked.c.rank == 1)
        .group_by(ranked.c.finding_id)
        .subquery()
    )


def _outcome_flags(posted: Any) -> Any:
    """Per posted finding: 1/0 for each outcome that happened, and the number of human replies."""

    def happened(kind: FeedbackKind) -> Any:
        return func.max(case((FeedbackRow.kind == kind.value, 1), else_=0))

    return (
        select(
            FeedbackRow.finding_id,
            happened(FeedbackKind.ADDRESSED).label("addressed"),
            happened(FeedbackKind.RESOLUTION).label("resolution"),
            func.sum(case((FeedbackRow.kind == FeedbackKind.REPLY.value, 1), else_=0)).label(
                "replies"
            ),
            happened(FeedbackKind.SUGGESTION_APPLIED).label("suggestion_applied"),
            happened(FeedbackKind.DELETED).label("deleted"),
            happened(FeedbackKind.IGNORED).label("ignored"),
        )
        .select_from(_about(posted))
        .where(FeedbackRow.kind != FeedbackKind.AWARD.value)
        .group_by(FeedbackRow.finding_id)
        .subquery()
    )


MOVED_ON_KEY = ("review_id", "gitlab_url", "project_id", "mr_iid")


def _moved_on(posted: Any) -> Any:
    """Per review of the ``posted`` findings (and their MR): 1 when that MR moved on
    (:func:`_later_version`), 0 if not. Evaluated once per review, not once per finding:
    the two correlated EXISTS were half of the outcomes' time on the benchmark's year (SQLite,
    300,000 posted findings of 50,000 reviews). A finding whose MR key holds a NULL finds no
    row here, as it found none in the EXISTS: not moved on either way."""
    reviews = (
        select(*(posted.c[name] for name in (*MOVED_ON_KEY, "head_sha", "started_at")))
        .distinct()
        .subquery()
    )
    moved = case((_later_version(reviews), 1), else_=0)
    return select(*(reviews.c[name] for name in MOVED_ON_KEY), moved.label("moved_on")).subquery()


def _same_review_and_mr(moves: Any, posted: Any) -> Any:
    return and_(*(moves.c[name] == posted.c[name] for name in MOVED_ON_KEY))


def _later_version(posted: Any) -> Any:
    """The posted finding's MR moved on: reviewed again at another head, or seen by
    ``feedback sync`` merged or at another head."""
    later = aliased(ReviewRow)
    reviewed_again = exists(
        select(literal(1)).where(
            later.gitlab_url == posted.c.gitlab_url,
            later.project_id == posted.c.project_id,
            later.mr_iid == posted.c.mr_iid,
            later.started_at > posted.c.started_at,
            later.head_sha != posted.c.head_sha,
        )
    )
    synced = exists(
        select(literal(1)).where(
            MergeRequestRow.gitlab_url == posted.c.gitlab_url,
            MergeRequestRow.project_id == posted.c.project_id,
            MergeRequestRow.mr_iid == posted.c.mr_iid,
            or_(
                MergeRequestRow.state == MergeRequestState.MERGED.value,
                and_(
                    MergeRequestRow.latest_head_sha.is_not(None),
                    MergeRequestRow.latest_head_sha != posted.c.head_sha,
                ),
            ),
        )
    )
    return or_(reviewed_again, synced)


def slowest_reviews(connection: Connection, scope: ReportScope, limit: int) -> list[dict[str, Any]]:
    """The ``limit`` longest finished reviews of the window, longest first."""
    seconds = review_seconds(connection.dialect.name).label("seconds")
    findings = (
        select(func.count(FindingRow.id))
        .where(FindingRow.review_id == ReviewRow.id, FindingRow.state.not_in(REFOUND_STATES))
        .scalar_subquery()
    )
    rows = connection.execute(
        select(
            ReviewRow.id,
            ReviewRow.project,
            ReviewRow.mr_iid,
            ReviewRow.gitlab_url,
            ReviewRow.head_sha,
            ReviewRow.model,
            ReviewRow.status,
            ReviewRow.started_at,
            ReviewRow.chunks,
            seconds,
            findings.label("findings"),
        )
        .where(*scope.review_conditions(), seconds.is_not(None))
        .order_by(seconds.desc(), ReviewRow.id)
        .limit(limit)
    )
    return [
        {
            "review_id": row.id,
            "project": row.project,
            "mr_iid": row.mr_iid,
            "gitlab_url": row.gitlab_url,
            "head_sha": row.head_sha,
            "model": row.model,
            "status": row.status,
            "started_at": row.started_at,
            "chunks": row.chunks,
            "seconds": float(row.seconds),
            "findings": int(row.findings),
        }
        for row in rows
    ]


def _tool_call_sums() -> list[Any]:
    """calls, unreadable calls, calls resent readably, model requests: over the calls that
    counted their tool calls (recorded before that: NULL, left out of the rate)."""
    counted = LLMCallRow.tool_calls.is_not(None)
    return [
        func.coalesce(func.sum(LLMCallRow.tool_calls), 0),
        func.coalesce(func.sum(case((counted, LLMCallRow.invalid_tool_calls), else_=0)), 0),
        func.coalesce(func.sum(case((counted, LLMCallRow.repaired_tool_calls), else_=0)), 0),
        func.count(LLMCallRow.id),
    ]


def _tool_call_row(calls: Any, invalid: Any, repaired: Any, requests: Any) -> dict[str, int]:
    return {
        "tool_calls": int(calls),
        "invalid_tool_calls": int(invalid),
        "repaired_tool_calls": int(repaired),
        "model_calls": int(requests),
    }


def tool_call_groups(connection: Connection, scope: ReportScope) -> list[dict[str, Any]]:
    """Per model and prompt version: the window's tool calls, how many could not be read and
    how many were resent readably (a model or prompt that writes unreadable calls shows here)."""
    rows = connection.execute(
        select(ReviewRow.model, ReviewRow.prompt_version, *_tool_call_sums())
        .join(ReviewRow, LLMCallRow.review_id == ReviewRow.id)
        .where(*scope.review_conditions())
        .group_by(ReviewRow.model, ReviewRow.prompt_version)
        .order_by(ReviewRow.model, ReviewRow.prompt_version)
    )
    return [
        {"model": model, "prompt_version": version, **_tool_call_row(*sums)}
        for model, version, *sums in rows
    ]


def tool_calls_by_chunk(connection: Connection, review_id: int) -> list[dict[str, Any]]:
    """Per chunk of one review: its tool calls, the unreadable ones, the ones resent readably
    and the model requests it took (repair turns and retries included)."""
    rows = connection.execute(
        select(LLMCallRow.chunk_index, *_tool_call_sums())
        .where(LLMCallRow.review_id == review_id)
        .group_by(LLMCallRow.chunk_index)
        .order_by(LLMCallRow.chunk_index)
    )
    return [{"chunk_index": chunk, **_tool_call_row(*sums)} for chunk, *sums in rows]


def eval_runs(connection: Connection, until: datetime, limit: int) -> list[dict[str, Any]]:
    """The newest eval runs started before ``until``, newest first (at most ``limit``)."""
    rows = connection.execute(
        select(EvalRunRow)
        .where(EvalRunRow.started_at < until)
        .order_by(EvalRunRow.started_at.desc(), EvalRunRow.id.desc())
        .limit(limit)
    ).mappings()
    return [{key: value for key, value in row.items() if key != "results"} for row in rows]


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def without_jit(connection: Connection) -> None:
    """On PostgreSQL, no JIT compilation for the rest of this transaction: the report's
    grouped queries are estimated far above ``jit_above_cost`` (the correlated EXISTS of the
    outcomes) and LLVM compiled one for 3.5 s of its 3.9 s (EXPLAIN ANALYZE, the trend's
    outcomes on a fifth of the benchmark's year); they run in milliseconds to a second
    without it (https://www.postgresql.org/docs/current/jit-decision.html)."""
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql("SET LOCAL jit = off")


def read_report_figures(
    connection: Connection,
    scope: ReportScope,
    *,
    slowest: int,
    eval_limit: int,
    weeks_from: datetime | None = None,
) -> dict[str, Any]:
    """Every figure of one window, read on one connection (see the module notes); the
    per-day figures per week counted from the Monday ``weeks_from`` when given (a long
    window's charts: reviewbot.report.days.chart_buckets)."""
    without_jit(connection)
    found, outcomes = finding_groups(connection, scope), outcome_groups(connection, scope)
    return {
        "totals": totals(connection, scope),
        "latency": latency(connection, scope),
        "outcomes": roll_up(outcomes, None, OUTCOME_FIELDS).get("", _no_outcomes()),
        "by": {
            dimension: {
                "findings": {
                    label: row["findings"]
                    for label, row in roll_up(found, dimension, ("findings",)).items()
                },
                "outcomes": roll_up(outcomes, dimension, OUTCOME_FIELDS),
            }
            for dimension in DIMENSIONS
        },
        "daily_findings": daily_findings(connection, scope, weeks_from),
        "daily_ttft": daily_ttft(connection, scope, weeks_from),
        "slowest_reviews": slowest_reviews(connection, scope, slowest),
        "eval_runs": eval_runs(connection, scope.until, eval_limit),
        "eval_comparison": latest_comparison(connection, scope.until),
        "tool_calls": tool_call_groups(connection, scope),
        "trend": read_trend(connection, scope),
    }


def read_window_summary(connection: Connection, scope: ReportScope) -> dict[str, Any]:
    """The headline figures only (totals, latency, outcomes): the previous window's."""
    without_jit(connection)
    outcomes = roll_up(outcome_groups(connection, scope), None, OUTCOME_FIELDS)
    return {
        "totals": totals(connection, scope),
        "latency": latency(connection, scope),
        "outcomes": outcomes.get("", _no_outcomes()),
    }


def read_trend(connection: Connection, scope: ReportScope) -> list[dict[str, Any]]:
    """The last TREND_WEEKS ISO weeks up to ``scope``'s end (Window.iso_weeks), each with
    its since/until, totals, first-token p95, outcomes, tool calls and live versions; the
    outcomes and percentiles of all weeks in one grouped query each
    (store.trend_queries.week_number)."""
    weeks = Window(scope.since, scope.until).iso_weeks(TREND_WEEKS)
    first = weeks[0].since
    whole = ReportScope(first, scope.until, scope.project)
    outcomes = roll_up(outcome_groups(connection, whole, first), "week", OUTCOME_FIELDS)
    week = week_number(ReviewRow.started_at, first, connection.dialect.name)
    calls, number_of_week = calls_in(whole.review_conditions(), week)
    p95 = {
        int(number): _float(at_p95)
        for number, _, at_p95, _ in percentiles(
            connection, LLMCallRow.ttft_ms, calls, [], number_of_week
        )
    }
    trend = []
    for number, week in enumerate(weeks):
        in_week = ReportScope(week.since, week.until, scope.project)
        trend.append(
            {
                "since": week.since,
                "until": week.until,
                "totals": totals(connection, in_week),
                "ttft_p95_ms": p95.get(number),
                "outcomes": outcomes.get(str(number), _no_outcomes()),
                **live_figures(connection, in_week.review_conditions()),
            }
        )
    return trend


def _no_outcomes() -> dict[str, int]:
    return dict.fromkeys(OUTCOME_FIELDS, 0)
