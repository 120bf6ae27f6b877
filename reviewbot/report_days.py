"""The per-day x axis that every per-day chart of the report draws on: one position and one
tick per day of the report's window, whatever the data holds.

A chart that plots something per day asks :class:`DayAxis` for the place of each day and calls
:meth:`DayAxis.draw` on its axes: the x axis then spans exactly the window (a day without data
is a zero bar or a gap in a line, never a dropped day, and never an hour or a year off the
window), one tick per day. Up to :data:`MAX_DAY_LABELS` days every tick is labelled with its
date (``YYYY-MM-DD``); a longer window (``--since 90d``) keeps every day's tick and labels
every ``ceil(days / MAX_DAY_LABELS)``-th one, from the first day, so the labels stay readable.
Each tick carries the SVG id ``<chart>-day-<YYYY-MM-DD>`` so a reader of the file finds every
day's position. Pure: days in, axes drawn.

Owns: the day positions, ticks and tick labels of per-day charts. Must not: read the store or the
report document (it is handed the window's days), or choose what a chart draws.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_DAY_LABELS", "DayAxis", "day_tick_id"]

MAX_DAY_LABELS = 14  # two weeks of dates side by side still read; beyond, every n-th day
DAY_TICK_ID = "{chart}-day-{day}"
DAY_MARGIN = 0.5  # half a day either side of the first and last day's position
LABEL_ROTATION = 30  # degrees, once the labels are more than a week's
ROTATE_ABOVE = 7
LABELLED_TICK_LENGTH, UNLABELLED_TICK_LENGTH = 4.0, 2.0  # points


def day_tick_id(chart: str, day: str) -> str:
    """The SVG id of ``day``'s tick on ``chart``'s x axis."""
    return DAY_TICK_ID.format(chart=chart, day=day)


@dataclass(frozen=True)
class DayAxis:
    """The window's days (``YYYY-MM-DD``, in order, at least one) on a chart named ``chart``."""

    chart: str
    days: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.days:
            raise ValueError("a per-day chart needs at least one day")

    @property
    def positions(self) -> list[int]:
        """The x position of each day: 0, 1, 2, … (a bar of width < 1 fits its day)."""
        return list(range(len(self.days)))

    def place(self, day: str) -> int:
        """The position of ``day``; a day outside the window is an error, not a new tick."""
        return self.days.index(day)

    def values(self, by_day: dict[str, Any], missing: Any) -> list[Any]:
        """One value per day of the window: ``by_day``'s, or ``missing`` (0 or NaN for a gap)."""
        return [by_day.get(day, missing) for day in self.days]

    @property
    def label_step(self) -> int:
        """Label every this many days (1 up to MAX_DAY_LABELS days)."""
        return max(1, math.ceil(len(self.days) / MAX_DAY_LABELS))

    def labels(self) -> list[str]:
        """Each day's tick label: its date, or "" for a day between two labelled ones."""
        step = self.label_step
        return [day if n % step == 0 else "" for n, day in enumerate(self.days)]

    def draw(self, axes: Any) -> None:
        """Put the window's days on ``axes``' x axis: limits, a tick per day, its label."""
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
            tick.set_gid(day_tick_id(self.chart, day))
            tick.tick1line.set_markersize(LABELLED_TICK_LENGTH if label else UNLABELLED_TICK_LENGTH)

    @classmethod
    def of(cls, chart: str, days: Sequence[str]) -> DayAxis:
        return cls(chart, tuple(days))
