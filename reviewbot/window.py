"""Time windows for reports and syncs: ISO weeks, dates and ages given on the command line.

A window is half-open, ``[since, until)`` in UTC: a review started at 23:59:59 on Sunday is
in that ISO week, one started at 00:00:00 on Monday is in the next. Pure: the current time
is always passed in.

Owns: the half-open window, ISO weeks, and the parsing of dates and ages. Must not: read the clock
(``now`` is passed in) or query anything (the store takes the window's bounds).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

__all__ = ["Window", "WindowError", "parse_age", "parse_instant", "previous_iso_week"]

DAYS_PER_WEEK = 7
AGE = re.compile(r"\A\s*(\d+)\s*([mhdw])\s*\Z")
AGE_UNITS = {
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
    "w": timedelta(weeks=1),
}


class WindowError(ValueError):
    """A date, an age or a window that cannot be used (one line, for the user)."""


@dataclass(frozen=True)
class Window:
    """Reviews started at or after ``since`` and before ``until`` (both UTC)."""

    since: datetime
    until: datetime

    def __post_init__(self) -> None:
        if self.since.tzinfo is None or self.until.tzinfo is None:
            raise WindowError("window bounds must carry a time zone")
        if self.until <= self.since:
            raise WindowError(
                f"the window is empty: --until {self.until.isoformat()} is not after "
                f"--since {self.since.isoformat()}"
            )

    @property
    def length(self) -> timedelta:
        return self.until - self.since

    def previous(self) -> Window:
        """The window of the same length that ends where this one starts."""
        return Window(self.since - self.length, self.since)

    @property
    def iso_week(self) -> str:
        """The ISO week of the window's last instant, e.g. ``2025-W11``."""
        year, week, _ = (self.until - timedelta(microseconds=1)).isocalendar()
        return f"{year}-W{week:02d}"

    def iso_weeks(self, count: int) -> list[Window]:
        """The ``count`` ISO weeks (Monday to Monday, UTC) up to the one holding this window's
        last instant, oldest first; the last one ends with this window (it may be a part)."""
        last = (self.until - timedelta(microseconds=1)).astimezone(UTC).date()
        monday = datetime.combine(last - timedelta(days=last.weekday()), time(), UTC)
        weeks = []
        for back in range(count - 1, -1, -1):
            since = monday - timedelta(days=DAYS_PER_WEEK * back)
            until = min(since + timedelta(days=DAYS_PER_WEEK), self.until)
            weeks.append(Window(since, until))
        return weeks

    def weeks(self) -> list[Window]:
        """Every ISO week (Monday to Monday, UTC) the window touches, oldest first, each cut
        to the window: the first and the last may be part weeks."""
        first = self.since.astimezone(UTC).date()
        monday = datetime.combine(first - timedelta(days=first.weekday()), time(), UTC)
        weeks = []
        while monday < self.until:
            following = monday + timedelta(days=DAYS_PER_WEEK)
            weeks.append(Window(max(monday, self.since), min(following, self.until)))
            monday = following
        return weeks

    def days(self) -> list[str]:
        """Every UTC date the window touches, ``YYYY-MM-DD``, in order."""
        first = self.since.astimezone(UTC).date()
        last = (self.until - timedelta(microseconds=1)).astimezone(UTC).date()
        return [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]


def previous_iso_week(now: datetime) -> Window:
    """The last complete ISO week (Monday 00:00 to the next Monday 00:00, UTC) before ``now``."""
    today = now.astimezone(UTC).date()
    this_monday = today - timedelta(days=today.weekday())
    start = datetime.combine(this_monday - timedelta(days=DAYS_PER_WEEK), time(), UTC)
    return Window(start, start + timedelta(days=DAYS_PER_WEEK))


def parse_instant(text: str, option: str) -> datetime:
    """``YYYY-MM-DD`` (midnight UTC) or an ISO 8601 time (UTC unless it names a zone)."""
    value = text.strip()
    try:
        if len(value) == len("YYYY-MM-DD"):
            return datetime.combine(date.fromisoformat(value), time(), UTC)
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise WindowError(
            f"{option} {text!r}: give a date (2025-03-10) or a time (2025-03-10T12:00:00Z)"
        ) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def parse_age(text: str, option: str, now: datetime) -> datetime:
    """``14d``, ``12h``, ``2w``, ``30m`` before ``now``, or a date/time as parse_instant."""
    match = AGE.match(text)
    if match is None:
        try:
            return parse_instant(text, option)
        except WindowError:
            raise WindowError(
                f"{option} {text!r}: give an age (14d, 12h, 2w, 30m) or a date (2025-03-10)"
            ) from None
    amount, unit = int(match.group(1)), match.group(2)
    return now - amount * AGE_UNITS[unit]
