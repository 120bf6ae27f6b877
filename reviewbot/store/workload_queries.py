"""The review workload of a window, read from the store for ``reviewbot capacity --workload``.

Every review that sent the model at least one call counts (dry runs and failed reviews too: they
used the GPU); its calls are grouped by chunk, in the order they started.

Owns: the one query. Must not: summarise or simulate (reviewbot.ops.workload and
reviewbot.ops.pool_simulation do).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

from sqlalchemy import Engine, select

from reviewbot.ops.workload import CallShape, ReviewShape, Workload
from reviewbot.store.models import LLMCall as LLMCallRow
from reviewbot.store.models import Review as ReviewRow

__all__ = ["workload_between"]


def workload_between(engine: Engine, start: datetime, end: datetime, source: str) -> Workload:
    """The reviews started in [``start``, ``end``) with their calls."""
    query = (
        select(
            ReviewRow.id,
            ReviewRow.started_at,
            LLMCallRow.chunk_index,
            LLMCallRow.prompt_tokens,
            LLMCallRow.cached_tokens,
            LLMCallRow.completion_tokens,
            LLMCallRow.purpose,
            LLMCallRow.tool_round,
        )
        .join(LLMCallRow, LLMCallRow.review_id == ReviewRow.id)
        .where(ReviewRow.started_at >= start, ReviewRow.started_at < end)
        .order_by(ReviewRow.id, LLMCallRow.chunk_index, LLMCallRow.started_at, LLMCallRow.id)
    )
    started: dict[int, datetime] = {}
    chunks: dict[int, dict[int, list[CallShape]]] = defaultdict(lambda: defaultdict(list))
    with engine.connect() as connection:
        for row in connection.execute(query):
            started[row.id] = _utc(row.started_at)
            cached = min(row.cached_tokens or 0, row.prompt_tokens or 0)
            call = CallShape(
                (row.prompt_tokens or 0) - cached,
                row.completion_tokens or 0,
                cached,
                row.purpose,
                row.tool_round or 0,
            )
            chunks[row.id][row.chunk_index].append(call)
    reviews = tuple(
        ReviewShape(started[review], tuple(tuple(calls) for _, calls in sorted(by.items())))
        for review, by in chunks.items()
    )
    return Workload(reviews, source, start, end)


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
