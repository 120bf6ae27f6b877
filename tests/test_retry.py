"""One reading of ``Retry-After`` and one backoff formula (reviewbot.retry), on plain data.

``Retry-After`` is RFC 9110 section 10.2.3 (``HTTP-date / delay-seconds``); the HTTP-date
forms are section 5.6.7. The GitLab adapter and the model runner used two parsers that
disagreed: GitLab's ignored ``"1.5"`` and crashed on ``"²"`` (``str.isdigit`` is true for it,
``float`` refuses it); the model's read ``"1.5"`` and refused a 400-digit delay. Both now
read what this module reads.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, formatdate

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewbot.retry import backoff_s, retry_after_seconds

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
THIRTY_S_LATER = "Thu, 01 Jan 2026 12:00:30 GMT"


def test_delay_seconds_and_the_two_parsers_old_disagreement() -> None:
    assert retry_after_seconds("7", now=NOW) == 7.0
    assert retry_after_seconds(" 7 ", now=NOW) == 7.0
    assert retry_after_seconds("0", now=NOW) == 0.0
    # Not RFC delay-seconds, but read as meant (see reviewbot.retry): the GitLab parser
    # ignored it, the model's read it.
    assert retry_after_seconds("1.5", now=NOW) == 1.5


@pytest.mark.parametrize(
    "unreadable",
    [
        None,
        "",
        "   ",
        "soon",
        "-3",
        "+3",
        "-1.5",
        "nan",
        "inf",
        "-inf",
        "1e3",
        "1.",
        ".5",
        "1.5.2",
        "0x10",
        "²",
        "٣",
        "7 s",
        "1_000",
    ],
)
def test_what_is_not_a_retry_after(unreadable: str | None) -> None:
    assert retry_after_seconds(unreadable, now=NOW) is None


def test_a_huge_delay_is_a_long_wait_that_the_caller_caps() -> None:
    asked = retry_after_seconds("9" * 400, now=NOW)
    assert asked == math.inf
    assert backoff_s(0, base_s=0.1, cap_s=10.0, retry_after_s=asked, retry_after_cap_s=60.0) == 60.0


def test_http_dates_in_all_three_forms() -> None:
    assert retry_after_seconds(THIRTY_S_LATER, now=NOW) == 30.0
    assert retry_after_seconds("Thursday, 01-Jan-26 12:00:30 GMT", now=NOW) == 30.0  # RFC 850
    assert retry_after_seconds("Thu Jan  1 12:00:30 2026", now=NOW) == 30.0  # asctime: UTC
    assert retry_after_seconds("Thu, 01 Jan 2026 11:00:00 GMT", now=NOW) == 0.0  # past
    assert retry_after_seconds(formatdate(0, usegmt=True), now=NOW) == 0.0
    assert retry_after_seconds("Thu, 01 Jan 2026 13:00:30 +0100", now=NOW) == 30.0


def test_an_http_date_counts_from_now() -> None:
    now = datetime.now(UTC)
    later = retry_after_seconds(formatdate(time.time() + 120, usegmt=True), now=now)
    assert later is not None and 100 < later <= 120


@pytest.mark.parametrize(
    "broken", ["Thu, 31 Feb 2026 12:00:00 GMT", "Thu, 01 Jan 99999 12:00:00 GMT", "a, 1 b 2 3:4:5"]
)
def test_a_date_that_is_no_date_is_not_a_retry_after(broken: str) -> None:
    assert retry_after_seconds(broken, now=NOW) is None


@given(st.text(max_size=40))
def test_any_header_value_reads_as_none_or_a_wait(value: str) -> None:
    asked = retry_after_seconds(value, now=NOW)
    assert asked is None or asked >= 0.0


@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 1, 1)))
def test_a_date_reads_as_the_seconds_until_it(moment: datetime) -> None:
    moment = moment.replace(microsecond=0, tzinfo=UTC)
    expected = max((moment - NOW).total_seconds(), 0.0)
    assert retry_after_seconds(format_datetime(moment, usegmt=True), now=NOW) == expected


def test_backoff_doubles_from_its_base_up_to_its_cap() -> None:
    waits = [backoff_s(attempt, base_s=0.1, cap_s=1.0) for attempt in range(6)]
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert backoff_s(-1, base_s=0.1, cap_s=1.0) == 0.1  # the queue's first try: no retry yet
    assert backoff_s(10_000, base_s=0.1, cap_s=1.0) == 1.0  # 2**10000 is beyond a float


def test_jitter_draws_from_zero_to_the_ceiling() -> None:
    drawn: list[tuple[float, float]] = []

    def uniform(low: float, high: float) -> float:
        drawn.append((low, high))
        return high / 4

    assert backoff_s(3, base_s=0.5, cap_s=20.0, uniform=uniform) == 1.0
    assert drawn == [(0.0, 4.0)]


def test_retry_after_is_a_floor_within_its_cap() -> None:
    lowest = lambda low, high: low  # noqa: E731
    assert backoff_s(0, base_s=0.5, cap_s=20.0, uniform=lowest, retry_after_s=3.0) == 3.0
    assert backoff_s(0, base_s=0.5, cap_s=20.0, uniform=lowest, retry_after_s=3600.0) == 20.0
    assert backoff_s(5, base_s=0.5, cap_s=20.0, retry_after_s=1.0) == 16.0  # our wait is longer
    assert backoff_s(0, base_s=0.1, cap_s=10.0, retry_after_s=30.0, retry_after_cap_s=60.0) == 30.0
    assert backoff_s(0, base_s=0.1, cap_s=10.0, retry_after_s=0.0) == 0.1


@given(
    attempt=st.integers(min_value=-5, max_value=5000),
    base_s=st.floats(min_value=0.0, max_value=1e6),
    cap_s=st.floats(min_value=0.0, max_value=1e6),
    asked=st.none() | st.floats(min_value=0.0, allow_infinity=True),
    draw=st.floats(min_value=0.0, max_value=1.0),
)
def test_a_wait_is_never_negative_nor_above_both_caps(
    attempt: int, base_s: float, cap_s: float, asked: float | None, draw: float
) -> None:
    wait = backoff_s(
        attempt,
        base_s=base_s,
        cap_s=cap_s,
        uniform=lambda low, high: low + (high - low) * draw,
        retry_after_s=asked,
        retry_after_cap_s=2 * cap_s,
    )
    assert 0.0 <= wait <= 2 * cap_s
    if asked is not None:
        assert wait >= min(asked, 2 * cap_s)


def test_the_past_is_no_wait_however_far() -> None:
    long_ago = NOW - timedelta(days=365 * 50)
    assert retry_after_seconds(format_datetime(long_ago, usegmt=True), now=NOW) == 0.0
