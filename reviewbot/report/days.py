"""The x axis that every per-day chart of the report draws on: one position and one tick per
day of the report's window, whatever the data holds; per ISO week for a long window.

A window of up to :data:`MAX_DAY_TICKS` days (a quarter) is drawn per day: one tick per day
of the window. A longer one is drawn per ISO week (:func:`chart_buckets`): one tick per ISO
week the window touches (the first and last may be part weeks, marked ``(part)`` in the
table), and the chart's title, caption and table say "per ISO week" — a year's 366 day ticks
neither read nor draw in reasonable time (36,500 of them for a 100-year ``--since`` took 5
minutes). A window longer than :data:`MAX_WINDOW_DAYS` (three years) is refused with a
:class:`reviewbot.window.WindowError` naming the limit, before anything is read: nothing is
ever dropped from a chart to make it fit.

A chart asks :class:`DayAxis` for the place of each bucket and calls :meth:`DayAxis.draw` on
its axes: the x axis then spans exactly the window (a bucket without data is a zero bar or a
gap in a line, never a dropped one), one tick per bucket. Up to :data:`MAX_DAY_LABELS`
buckets every tick is labelled (``YYYY-MM-DD`` or ``YYYY-Www``); more keep every tick and
label every ``ceil(n / MAX_DAY_LABELS)``-th one, from the first, so the labels stay readable.
Each tick carries the SVG id ``<chart>-day-<YYYY-MM-DD>`` (``<chart>-week-<YYYY-Www>``) so a
reader of the file finds every bucket's position. Pure: the window in, buckets and axes out.

Owns: the buckets of per-day charts (days or ISO weeks), their positions, ticks and tick
labels. Must not: read the store, or choose what a chart draws.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any

from reviewbot.window import DAYS_PER_WEEK, Window, WindowError

__all__ = [
    "MAX_DAY_LABELS",
    "MAX_DAY_TICKS",
    "MAX_WINDOW_DAYS",
    "ChartBuckets",
    "DayAxis",
    "chart_buckets",
    "daily_json",
    "day_tick_id",
    "tick_id",
]

MAX_DAY_LABELS = 14  # two weeks of dates side by side still read; beyond, every n-th one
MAX_DAY_TICKS = 92  # a quarter is drawn a tick per day; a longer window per ISO week
MAX_WINDOW_DAYS = 1096  # three years (157 ISO week ticks); a longer window is refused
TICK_ID = "{chart}-{unit}-{key}"
DAY, WEEK = "day", "week"
PART = " (part)"  # an ISO week the window cuts
DAY_MARGIN = 0.5  # half a bucket either side of the first and last bucket's position
LABEL_ROTATION = 30  # degrees, once the labels are more than a week's
ROTATE_ABOVE = 7
LABELLED_TICK_LENGTH, UNLABELLED_TICK_LENGTH = 4.0, 2.0  # points


def tick_id(chart: str, unit: str, key: str) -> str:
    """The SVG id of bucket ``key``'s tick (``unit`` "day" or "week") on ``chart``'s x axis."""
    return TICK_ID.format(chart=chart, unit=unit, key=key)


def day_tick_id(chart: str, day: str) -> str:
    """The SVG id of ``day``'s tick on ``chart``'s x axis."""
    return tick_id(chart, DAY, day)


@dataclass(frozen=True)
class ChartBuckets:
    """What the per-day charts of a window draw on: ``unit`` "day" (keys ``YYYY-MM-DD``) or
    "week" (keys ``YYYY-Www``, counted by the store in whole weeks from ``weeks_from``)."""

    unit: str
    keys: tuple[str, ...]
    partial: tuple[bool, ...]
    weeks_from: datetime | None = None


def chart_buckets(window: Window) -> ChartBuckets:
    """The window's days, or its ISO weeks when it touches more than MAX_DAY_TICKS days; a
    window of more than MAX_WINDOW_DAYS days is a WindowError."""
    days = window.days()
    if len(days) > MAX_WINDOW_DAYS:
        raise WindowError(
            f"the report window touches {len(days):,} days, more than a report draws "
            f"({MAX_WINDOW_DAYS:,} days, three years: per ISO week beyond {MAX_DAY_TICKS} "
            "days); give a later --since"
        )
    if len(days) <= MAX_DAY_TICKS:
        return ChartBuckets(DAY, tuple(days), (False,) * len(days))
    weeks = window.weeks()
    first = window.since.astimezone(UTC).date()
    return ChartBuckets(
        WEEK,
        tuple(week.iso_week for week in weeks),
        tuple(week.length < timedelta(days=DAYS_PER_WEEK) for week in weeks),
        datetime.combine(first - timedelta(days=first.weekday()), time(), UTC),
    )


def daily_json(
    buckets: ChartBuckets, findings: Sequence[Mapping[str, Any]], ttft: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The report's ``daily`` section from the store's per-bucket rows (a week's rows carry
    its number since ``weeks_from``; they get the week's key)."""

    def keyed(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        if buckets.unit == DAY:
            return [dict(row) for row in rows]
        return [{**row, WEEK: buckets.keys[row[WEEK]]} for row in rows]

    return {
        "unit": buckets.unit,
        "buckets": list(buckets.keys),
        "partial": list(buckets.partial),
        "findings": keyed(findings),
        "ttft": keyed(ttft),
    }


@dataclass(frozen=True)
class DayAxis:
    """The buckets (days ``YYYY-MM-DD`` or ISO weeks, in order, at least one) on a chart
    named ``chart``."""

    chart: str
    days: tuple[str, ...]
    unit: str = DAY

    def __post_init__(self) -> None:
        if not self.days:
            raise ValueError("a per-day chart needs at least one day")

    @property
    def positions(self) -> list[int]:
        """The x position of each bucket: 0, 1, 2, … (a bar of width < 1 fits its bucket)."""
        return list(range(len(self.days)))

    def place(self, day: str) -> int:
        """The position of ``day``; a day outside the window is an error, not a new tick."""
        return self.days.index(day)

    def values(self, by_day: Mapping[str, Any], missing: Any) -> list[Any]:
        """One value per bucket: ``by_day``'s, or ``missing`` (0 or NaN for a gap)."""
        return [by_day.get(day, missing) for day in self.days]

    @property
    def label_step(self) -> int:
        """Label every this many buckets (1 up to MAX_DAY_LABELS buckets)."""
        return max(1, math.ceil(len(self.days) / MAX_DAY_LABELS))

    def labels(self) -> list[str]:
        """Each tick's label: its bucket, or "" for one between two labelled ones."""
        step = self.label_step
        return [day if n % step == 0 else "" for n, day in enumerate(self.days)]

    def draw(self, axes: Any) -> None:
        """Put the buckets on ``axes``' x axis: limits, a tick per bucket, its label."""
        axes.set_xlim(-DAY_MARGIN, len(self.days) - 1 + DAY_MARGIN)
        labels = self.labels()
        rotated = len(self.days) > ROTATE_ABOVE
        axes.set_xticks(
            self.positions,
            labels,
            fontsize="small",
            rotation=LABEL_ROTATION if rotated else 0,
            ha="right" if rotated else "center",
        )
        for day, label, tick in zip(
            self.days, labels, axes.xaxis.get_major_ticks(len(self.days)), strict=True
        ):
            tick.set_gid(tick_id(self.chart, self.unit, day))
            tick.tick1line.set_markersize(LABELLED_TICK_LENGTH if label else UNLABELLED_TICK_LENGTH)

    @classmethod
    def of(cls, chart: str, days: Sequence[str], unit: str = DAY) -> DayAxis:
        return cls(chart, tuple(days), unit)
