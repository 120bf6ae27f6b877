"""Nearest-rank percentiles in SQL (reviewbot.store.percentile_queries) at their edges: one
value, ties, two values, a day without first tokens, an empty window, and lists of many
sizes, each against the definition computed in Python: the value at rank ceil(p * n).

Runs on SQLite and, when REVIEWBOT_TEST_POSTGRES_URL is set, on PostgreSQL.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest

from reviewbot.store import Store
from reviewbot.store.models import LLMCall as LLMCallRow
from reviewbot.store.models import Review as ReviewRow
from reviewbot.store.percentile_queries import calls_in, percentiles
from reviewbot.store.report_queries import ReportScope, utc_day
from tests.builders import MONDAY, FakeClock
from tests.store_fixtures import migrated_store, store_url  # noqa: F401
from tests.test_report import _review as record_review

WEEK = ReportScope(MONDAY, MONDAY + timedelta(days=7))
SIZES = (1, 2, 3, 19, 20, 21, 39, 40, 41, 99, 100, 101, 1000)
SEED = 25


def nearest_rank(values: Sequence[float], fraction: Fraction) -> float:
    """The documented definition: the value at rank ceil(p * n) of the values ascending."""
    ordered = sorted(values)
    return ordered[math.ceil(fraction * len(ordered)) - 1]


def _review(
    clocked: tuple[Store, FakeClock], started: datetime, ttfts: Sequence[float | None], iid: int
) -> None:
    store, clock = clocked
    record_review(store, clock, started, iid=iid, ttfts=tuple(ttfts))


def _ttft(store: Store, scope: ReportScope, by_day: bool) -> list[tuple[object, ...]]:
    with store.engine.connect() as connection:
        day = utc_day(ReviewRow.started_at, connection.dialect.name) if by_day else None
        source, group = calls_in(scope.review_conditions(), day)
        return percentiles(connection, LLMCallRow.ttft_ms, source, [], group)


def _expected(values: Sequence[float]) -> tuple[float, float, int]:
    return (
        nearest_rank(values, Fraction(1, 2)),
        nearest_rank(values, Fraction(95, 100)),
        len(values),
    )


@pytest.mark.slow
def test_edges_per_day_equal_the_nearest_rank_definition(clocked: tuple[Store, FakeClock]) -> None:
    days = {
        "2026-03-09": [250.0],  # one call: it is p50 and p95
        "2026-03-10": [300.0, 100.0],  # two values: p50 the first, p95 the second
        "2026-03-11": [7.0, 7.0, 7.0, 5.0, 7.0],  # ties
        "2026-03-13": [9.5, 1.5, 3.0, 3.0, 9.5, 2.0, 8.0, 4.0, 6.0, 9.5, 0.5],
    }
    for number, (day, values) in enumerate(days.items()):
        started = datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(hours=9)
        _review(clocked, started, [*values, None], iid=number + 1)
    # a day whose calls have no first token: no row, not a row of NULLs
    _review(clocked, MONDAY + timedelta(days=3, hours=9), [None, None], iid=9)
    rows = _ttft(clocked[0], WEEK, by_day=True)
    assert [(str(day), *rest) for day, *rest in rows] == [
        (day, *_expected(values)) for day, values in days.items()
    ]
    assert rows[1][1:] == (100.0, 300.0, 2)
    everything = [value for values in days.values() for value in values]
    assert _ttft(clocked[0], WEEK, by_day=False) == [_expected(everything)]


def test_an_empty_window_has_no_percentiles(clocked: tuple[Store, FakeClock]) -> None:
    _review(clocked, MONDAY - timedelta(hours=1), [100.0], iid=1)  # the week before
    assert _ttft(clocked[0], WEEK, by_day=False) == []
    assert _ttft(clocked[0], WEEK, by_day=True) == []


@pytest.mark.parametrize("size", SIZES)
def test_any_size_equals_the_nearest_rank_definition(
    clocked: tuple[Store, FakeClock], size: int
) -> None:
    rng = random.Random(SEED + size)
    values = [float(rng.randint(1, size)) for _ in range(size)]  # ties at every size
    _review(clocked, MONDAY + timedelta(hours=1), values, iid=1)
    assert _ttft(clocked[0], WEEK, by_day=False) == [_expected(values)]
