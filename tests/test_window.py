"""Report and sync windows: ISO weeks, dates and ages (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from reviewbot.window import Window, WindowError, parse_age, parse_instant, previous_iso_week

WEDNESDAY = datetime(2026, 3, 18, 15, 30, tzinfo=UTC)


def test_previous_iso_week_is_the_last_complete_monday_to_monday() -> None:
    week = previous_iso_week(WEDNESDAY)
    assert (week.since, week.until) == (
        datetime(2026, 3, 9, tzinfo=UTC),
        datetime(2026, 3, 16, tzinfo=UTC),
    )
    assert week.iso_week == "2026-W11"
    # on Monday 00:00 the week that just ended is complete
    assert previous_iso_week(datetime(2026, 3, 16, tzinfo=UTC)).iso_week == "2026-W11"
    assert previous_iso_week(datetime(2026, 3, 15, 23, 59, tzinfo=UTC)).iso_week == "2026-W10"
    # a week across the new year keeps its ISO year
    assert previous_iso_week(datetime(2027, 1, 6, tzinfo=UTC)).iso_week == "2026-W53"


def test_previous_window_and_days() -> None:
    week = previous_iso_week(WEDNESDAY)
    assert week.previous() == Window(datetime(2026, 3, 2, tzinfo=UTC), week.since)
    assert week.days() == [f"2026-03-{d:02d}" for d in range(9, 16)]


def test_dates_and_times_are_utc() -> None:
    assert parse_instant("2026-03-10", "--since") == datetime(2026, 3, 10, tzinfo=UTC)
    assert parse_instant("2026-03-10T12:00:00Z", "--since") == datetime(2026, 3, 10, 12, tzinfo=UTC)
    plus_two = timezone(timedelta(hours=2))
    assert parse_instant("2026-03-10T12:00:00+02:00", "--since") == datetime(
        2026, 3, 10, 12, tzinfo=plus_two
    )
    with pytest.raises(WindowError, match="--until 'soon': give a date"):
        parse_instant("soon", "--until")


def test_ages() -> None:
    assert parse_age("14d", "--since", WEDNESDAY) == WEDNESDAY - timedelta(days=14)
    assert parse_age("12h", "--since", WEDNESDAY) == WEDNESDAY - timedelta(hours=12)
    assert parse_age("2w", "--since", WEDNESDAY) == WEDNESDAY - timedelta(weeks=2)
    assert parse_age("2026-03-01", "--since", WEDNESDAY) == datetime(2026, 3, 1, tzinfo=UTC)
    with pytest.raises(WindowError, match=r"give an age \(14d, 12h, 2w, 30m\)"):
        parse_age("fortnight", "--since", WEDNESDAY)


def test_an_empty_window_is_refused() -> None:
    with pytest.raises(WindowError, match="the window is empty"):
        Window(WEDNESDAY, WEDNESDAY)
