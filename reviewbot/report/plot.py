"""What every chart of the report does to its axes so that nothing drawn is hidden: headroom
above the highest value, the legend beside the plotted area, a note on an empty chart, whole
numbers on a count axis.

- A value axis runs from 0 (or a little below, for lines) to :data:`HEADROOM` of its length
  above the highest value drawn (a target line included): a week that missed the SLO, the
  tallest bar or a 100 % bar is drawn clear of the frame, never on it. A line's points keep
  the same room above the bottom edge, so a 0 % point is not half hidden by the axis; bars stand
  on it. Ticks run from 0 to the highest value only (never a negative count, never 110 %).
- The legend stands beside the plotted area, right of it and outside it, so it covers no point,
  line or bar whatever the data.
- A chart, or a panel of one, with nothing to draw says so in the middle of its plotted area
  (e.g. "no findings in this window") instead of showing a blank frame.
- A count axis (findings) has whole-number ticks only: no "0.5 findings".

Owns: the limits, ticks, legend place and empty-chart note of the report's charts. Must not:
choose what a chart draws, import `reviewbot.report.document`, or read anything.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
from matplotlib.ticker import MaxNLocator

__all__ = [
    "HEADROOM",
    "highest",
    "legend_beside",
    "no_data",
    "value_axis",
]

HEADROOM = 0.1  # of an axis' length, kept clear between the highest value and the frame
EMPTY_SPAN = 1.0  # an axis with nothing above 0 on it still runs from 0 to 1 (plus headroom)
LEGEND_GAP = 0.02  # of the plotted area's width, between it and the legend on its right
LEGEND_FONT = "small"
NO_DATA_COLOUR = "#636363"
TICK_STEPS = (1, 2, 5, 10)  # "nice" steps: 0, 20, 40 % rather than 0, 25, 50 %
TICK_SLACK = 1e-9  # relative: a tick computed as 100.00000000000001 is the tick 100
MIDDLE = 0.5  # of the plotted area, in axes coordinates


def highest(*series: Iterable[float | None]) -> float:
    """The highest finite value of ``series`` (None and NaN are gaps); 0 when there is none."""
    values = [
        float(value)
        for values in series
        for value in values
        if value is not None and math.isfinite(value)
    ]
    return max(values, default=0.0)


class _TicksWithin(MaxNLocator):
    """matplotlib's nice ticks, kept between ``lowest`` and ``top`` (the headroom and a line's
    room below 0 carry no tick)."""

    def __init__(self, lowest: float, top: float, *, integer: bool) -> None:
        super().__init__(nbins="auto", steps=list(TICK_STEPS), integer=integer)
        self.lowest, self.top = lowest, top

    def tick_values(self, vmin: float, vmax: float) -> Any:
        ticks = np.asarray(super().tick_values(vmin, vmax))
        slack = TICK_SLACK * max(abs(self.top), abs(self.lowest), EMPTY_SPAN)
        return ticks[(ticks >= self.lowest - slack) & (ticks <= self.top + slack)]


def value_axis(
    axes: Any,
    high: float,
    *,
    bars: bool,
    count: bool = False,
    ceiling: float | None = None,
    axis: str = "y",
) -> None:
    """Set ``axes``' value axis (``axis`` "y", or "x" for horizontal bars) to run from 0 to
    HEADROOM of its length above ``high``, the highest value drawn on it. Bars (``bars``) stand
    on 0; lines get the same room below 0. Ticks from 0 to ``high`` (to ``ceiling`` when one is
    given: 100 on a percent axis), whole numbers only on a ``count`` axis."""
    span = high if high > 0 and math.isfinite(high) else EMPTY_SPAN
    if bars:
        length = span / (1 - HEADROOM)
        lower = 0.0
    else:
        length = span / (1 - 2 * HEADROOM)
        lower = -HEADROOM * length
    upper = lower + length
    if axis == "y":
        axes.set_ylim(lower, upper)
        ruler = axes.yaxis
    else:
        axes.set_xlim(lower, upper)
        ruler = axes.xaxis
    ruler.set_major_locator(_TicksWithin(0.0, span if ceiling is None else ceiling, integer=count))


def legend_beside(axes: Any, **options: Any) -> Any:
    """The legend of ``axes``' labelled series, right of its plotted area and outside it (the
    figure's constrained layout makes room for it)."""
    return axes.legend(
        loc="upper left",
        bbox_to_anchor=(1 + LEGEND_GAP, 1),
        borderaxespad=0,
        fontsize=LEGEND_FONT,
        **options,
    )


def no_data(axes: Any, note: str) -> None:
    """Write ``note`` ("no findings in this window") in the middle of ``axes``' plotted area."""
    axes.text(
        MIDDLE,
        MIDDLE,
        note,
        transform=axes.transAxes,
        ha="center",
        va="center",
        color=NO_DATA_COLOUR,
    )
