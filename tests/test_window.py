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


def test_iso_weeks_end_with_the_window_and_start_on_mondays() -> None:
    monday = datetime(2026, 3, 9, tzinfo=UTC)
    week = Window(monday, monday + timedelta(days=7))
    weeks = week.iso_weeks(8)
    assert [w.iso_week for w in weeks] == [f"2026-W{n:02d}" for n in range(4, 12)]
    assert all(w.since.weekday() == 0 and w.length == timedelta(days=7) for w in weeks)
    assert weeks[-1] == week
    # a window ending on a Thursday noon: its last week is the part up to then
    thursday = monday + timedelta(days=3, hours=12)
    (part,) = Window(monday - timedelta(days=90), thursday).iso_weeks(1)
    assert (part.since, part.until, part.iso_week) == (monday, thursday, "2026-W11")
    # across a year's end: ISO 2026-W01 starts on Monday 2025-12-29
    new_year = Window(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 5, tzinfo=UTC))
    assert [w.iso_week for w in new_year.iso_weeks(2)] == ["2025-W52", "2026-W01"]
