"""`reviewbot capacity --workload`: how many boxes and workers a team's own reviews need.

Owns: reading the workload (the store over ``--window``, a JSON export, or the default mix),
choosing the box profile, printing every figure with its inputs, and ``--export-workload``.
The work is reviewbot.ops.workload and reviewbot.ops.pool_simulation.

Must not: simulate or summarise itself.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from reviewbot.commands.common import InputFile, emit_json, fail
from reviewbot.commands.terminal import console
from reviewbot.config import Settings
from reviewbot.errors import EXIT_BAD_INPUT, EXIT_DOES_NOT_FIT, EXIT_OK
from reviewbot.input_files import InputFileRefused, read_input_file
from reviewbot.ops.deep_capacity import DeepCapacity, deep_capacity
from reviewbot.ops.pool_simulation import BOX_PROFILES, PoolPlan, plan_pool, simulated_hours
from reviewbot.ops.workload import Workload, WorkloadError, default_workload, workload_from_json

__all__ = [
    "DEFAULT_WINDOW_DAYS",
    "DURATION",
    "MAX_REVIEWS_PER_DAY",
    "MAX_WINDOW_DAYS",
    "STORE",
    "WORKLOAD_DEFAULT",
    "WorkloadSource",
    "parse_duration",
    "workload_capacity",
]

STORE = "store"
WORKLOAD_DEFAULT = "default"
DEFAULT_WINDOW_DAYS = 28
MAX_WINDOW_DAYS = 3660
MAX_REVIEWS_PER_DAY = 1_000_000
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, None: 1}
MAX_WORKLOAD_BYTES = 256 * 1024 * 1024
HOURS_PER_DAY = 24


class WorkloadSource(InputFile):
    """``store``, ``default``, or a workload export: a regular file of at most
    ``MAX_WORKLOAD_BYTES`` (checked as every input file is)."""

    name = "source"

    def __init__(self) -> None:
        super().__init__(MAX_WORKLOAD_BYTES)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if value in (STORE, WORKLOAD_DEFAULT):
            return str(value)
        return super().convert(value, param, ctx)


def parse_duration(text: str) -> float:
    """``300``, ``300s``, ``5m`` or ``1.5h`` in seconds; ValueError naming the forms."""
    found = DURATION.match(text)
    if found is None or float(found[1]) <= 0:
        raise ValueError(f"{text!r} is not a duration: write 300, 300s, 5m or 1.5h")
    return float(found[1]) * UNIT_SECONDS[found[2]]


def read_workload(source: str, settings: Settings, window_days: int, now: datetime) -> Workload:
    """The workload of ``source``: ``store``, ``default`` or a JSON export's path."""
    if source == WORKLOAD_DEFAULT:
        return default_workload(now)
    if source == STORE:
        from reviewbot.store import make_engine
        from reviewbot.store.workload_queries import workload_between

        engine = make_engine(settings.database_url)
        try:
            start = now - timedelta(days=window_days)
            return workload_between(engine, start, now, f"the store, last {window_days} days")
        finally:
            engine.dispose()
    try:
        data = json.loads(read_input_file(source, MAX_WORKLOAD_BYTES).decode("utf-8"))
    except InputFileRefused as refused:
        fail(f"--workload {source}: it {refused}", EXIT_BAD_INPUT)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        fail(f"--workload {source}: cannot read it ({_reason(error)})", EXIT_BAD_INPUT)
    try:
        return workload_from_json(data, source)
    except WorkloadError as error:
        fail(str(error), EXIT_BAD_INPUT)


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError):
        return error.strerror or type(error).__name__
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def workload_capacity(
    source: str,
    settings: Settings,
    *,
    box: str,
    window_days: int,
    max_boxes: int,
    workers_per_box: int | None,
    target: str | None,
    export: Path | None,
    as_json: bool,
    reviews_per_day: int | None = None,
) -> None:
    """The whole command in workload mode; exits."""
    target_s = _target(target)
    workload = read_workload(source, settings, window_days, datetime.now(UTC))
    if export is not None:
        export.write_text(json.dumps(workload.to_json()), encoding="utf-8")
        click.echo(f"wrote {len(workload.reviews)} review(s) to {export}", err=True)
        sys.exit(EXIT_OK)
    too_small = workload.too_small()
    if too_small:
        fail(too_small, EXIT_DOES_NOT_FIT)  # exit 3, as a plan that cannot be made
    if reviews_per_day is not None:
        workload = workload.scaled(reviews_per_day)
    profile = BOX_PROFILES[box]
    plan = plan_pool(
        workload, profile, max_boxes=max_boxes, workers_per_box=workers_per_box, target_s=target_s
    )
    if as_json:
        emit_json(_as_dict(workload, box, plan))
    else:
        _print(workload, box, plan)
    sys.exit(EXIT_OK)


def _target(target: str | None) -> float | None:
    if target is None:
        return None
    try:
        return parse_duration(target)
    except ValueError as error:
        fail(f"--p95-first-comment {error}", EXIT_BAD_INPUT)


def _inputs(workload: Workload, box: str) -> dict[str, Any]:
    return {
        "workload": workload.source,
        "reviews": len(workload.reviews),
        "window": [workload.start.isoformat(), workload.end.isoformat()],
        "reviews_per_day": workload.per_day(),
        "busiest_hour": workload.busiest_hour().describe(),
        "box": BOX_PROFILES[box].describe(),
        "simulated": f"the busiest hour's rate held "
        f"{simulated_hours(workload.busiest_hour().reviews_per_hour):g} h, seeded Poisson arrivals",
        "mix_p50_p95": workload.percentiles(),
    }


def _deep(workload: Workload, plan: PoolPlan) -> DeepCapacity:
    """Deep reviews a day the pool (the boxes needed, else one) could add to this workload."""
    boxes = plan.boxes_needed or 1
    return deep_capacity(boxes * plan.sustained_per_box * HOURS_PER_DAY, workload.per_day())


def _as_dict(workload: Workload, box: str, plan: PoolPlan) -> dict[str, Any]:
    deep = {"boxes": plan.boxes_needed or 1, **_deep(workload, plan).to_dict()}
    return {"inputs": _inputs(workload, box), **plan.to_dict(), "deep_reviews": deep}


def _print(workload: Workload, box: str, plan: PoolPlan) -> None:
    out = console()
    inputs = _inputs(workload, box)
    out.print(f"workload: {inputs['workload']}: {inputs['reviews']} review(s)", highlight=False)
    out.print(f"busiest hour: {inputs['busiest_hour']}", highlight=False)
    for name, values in inputs["mix_p50_p95"].items():
        out.print(
            f"  {name:<19} p50 {values[50]:>9,.0f}   p95 {values[95]:>9,.0f}", highlight=False
        )
    out.print(f"box: {inputs['box']}", highlight=False)
    out.print(
        f"one box sustains {plan.sustained_per_box:,.0f} reviews/h of this mix; "
        f"{plan.gpu_hours_per_1000:.2f} GPU-hours per 1,000 reviews",
        highlight=False,
    )
    out.print(f"time to first comment at the busiest hour ({inputs['simulated']}):")
    for row in plan.rows:
        out.print(
            f"  {row.boxes} box(es), {row.workers} workers: p50 {_shown(row.p50_s)}, "
            f"p95 {_shown(row.p95_s)} ({row.reviews} reviews)",
            highlight=False,
        )
    if plan.target_s is not None:
        out.print(_needed(plan), highlight=False)
    boxes = plan.boxes_needed or 1
    out.print(f"with {boxes} box(es): {_deep(workload, plan).describe()}", highlight=False)


def _needed(plan: PoolPlan) -> str:
    target = _shown(plan.target_s or 0)
    if plan.boxes_needed is None:
        return f"no pool of up to 16 boxes keeps the p95 first comment within {target}"
    return (
        f"needed for a p95 first comment within {target}: {plan.boxes_needed} box(es) and "
        f"{plan.workers_needed} worker(s)"
    )


def _shown(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"
