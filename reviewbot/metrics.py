"""Prometheus text exposition: plain numbers in, text out (no I/O, no registry, no globals).

The listener (`reviewbot.webhook`) gathers the numbers from the database and its own counters
and hands them here as `MetricFamily` values. The output follows the text format 0.0.4
(https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format):
one ``# HELP`` and one ``# TYPE`` line per family, label values escaped (``\\``, ``"``,
newline), histograms as cumulative ``_bucket{le=...}`` series ending with ``le="+Inf"``,
then ``_sum`` and ``_count``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "CONTENT_TYPE",
    "Histogram",
    "MetricFamily",
    "MetricKind",
    "Sample",
    "histogram_from_counts",
    "render",
]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class MetricKind(StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


@dataclass(frozen=True)
class Histogram:
    """Observations counted per upper bound (cumulative, ascending bounds, no +Inf bound)."""

    bounds: tuple[float, ...]
    cumulative_counts: tuple[int, ...]
    count: int
    total: float

    def __post_init__(self) -> None:
        if len(self.bounds) != len(self.cumulative_counts):
            raise ValueError("a histogram needs one cumulative count per bound")
        if list(self.bounds) != sorted(set(self.bounds)):
            raise ValueError("histogram bounds must be strictly ascending")
        counts = [*self.cumulative_counts, self.count]
        if any(later < earlier for earlier, later in itertools.pairwise(counts)):
            raise ValueError("cumulative counts must not decrease (and end at most at count)")


def histogram_from_counts(
    bounds: Sequence[float], cumulative_counts: Sequence[int | None], count: int, total: float
) -> Histogram:
    """A Histogram from SQL aggregates, where an empty table answers NULL sums."""
    return Histogram(
        bounds=tuple(float(bound) for bound in bounds),
        cumulative_counts=tuple(int(value or 0) for value in cumulative_counts),
        count=int(count or 0),
        total=float(total or 0.0),
    )


@dataclass(frozen=True)
class Sample:
    """One series of a family: its labels and either a number or a Histogram."""

    value: float | Histogram
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MetricFamily:
    name: str
    kind: MetricKind
    help: str
    samples: tuple[Sample, ...]


def render(families: Iterable[MetricFamily]) -> str:
    """The families in Prometheus text format, newline-terminated."""
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {_escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind.value}")
        for sample in family.samples:
            lines.extend(_sample_lines(family, sample))
    return "\n".join(lines) + "\n"


def _sample_lines(family: MetricFamily, sample: Sample) -> list[str]:
    if family.kind is MetricKind.HISTOGRAM:
        if not isinstance(sample.value, Histogram):
            raise TypeError(f"{family.name}: a histogram family needs Histogram samples")
        return _histogram_lines(family.name, sample.labels, sample.value)
    if isinstance(sample.value, Histogram):
        raise TypeError(f"{family.name}: only histogram families take Histogram samples")
    return [f"{family.name}{_labels(sample.labels)} {_number(sample.value)}"]


def _histogram_lines(name: str, labels: Mapping[str, str], histogram: Histogram) -> list[str]:
    lines = [
        f"{name}_bucket{_labels({**labels, 'le': _number(bound)})} {count}"
        for bound, count in zip(histogram.bounds, histogram.cumulative_counts, strict=True)
    ]
    lines.append(f"{name}_bucket{_labels({**labels, 'le': '+Inf'})} {histogram.count}")
    lines.append(f"{name}_sum{_labels(labels)} {_number(histogram.total)}")
    lines.append(f"{name}_count{_labels(labels)} {histogram.count}")
    return lines


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{key}="{_escape_label(str(value))}"' for key, value in labels.items())
    return "{" + inner + "}"


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    """Integers without a decimal point, floats in shortest form, infinities as Go writes them."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer():
        return f"{value:.1f}"
    return repr(value)
