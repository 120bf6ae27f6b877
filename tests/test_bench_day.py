"""The simulated day (tests/bench/bench_day.py) at a tiny size, so it cannot rot (issue 38).

Real processes on PostgreSQL (several workers share one queue): the fakes in a child process,
the real vllm-router in front of two fake boxes, `reviewbot serve` and two `reviewbot worker`s;
in the busiest hour a box is stopped, a worker killed (SIGKILL) and one added. Behaviour only,
from the fake GitLab's own record: every MR reviewed, each with exactly one summary, no finding
posted twice, every job settled, and the GitLab requests of any 60 seconds within the shared
budget's limits (set low here so the budget binds). No timing is asserted.
"""

from __future__ import annotations

import math
import os

import pytest

from reviewbot.gitlab_budget import BURST_SHARE, SECONDS_PER_MINUTE
from tests.bench.bench_day import DayConfig, plan_day, run_day, union_s
from tests.router_pool import NO_ROUTER_REASON, ROUTER_BINARY
from tests.store_fixtures import POSTGRES_URL_ENV

pytestmark = pytest.mark.slow  # measured: see docs/development.md

SMOKE_MRS = 20
SMOKE_COMPRESS = 2_000.0  # the day in 43 s
SMOKE_NOTES_PER_MINUTE = 60
SMOKE_REQUESTS_PER_MINUTE = 240
# The fake records a request when it reads it, a little after the worker took its token: over
# a window of arrivals the budget may show up to one second of its pace more.
ARRIVAL_SLACK_S = 1.0


def _slack(per_minute: int) -> int:
    return math.ceil(per_minute * (1 - BURST_SHARE) / SECONDS_PER_MINUTE * ARRIVAL_SLACK_S)


def test_the_day_s_plan_has_a_morning_peak_and_follow_ups() -> None:
    plan = plan_day(2_000, 0.1, 0.05, seed=1)
    opens = [event for event in plan.events if event.kind == "open"]
    assert len(opens) == 2_000
    by_hour = [sum(1 for e in opens if int(e.at_s // 3_600) == hour) for hour in range(24)]
    assert by_hour.index(max(by_hour)) in (9, 10)
    assert {event.kind for event in plan.events} == {"open", "push", "command"}
    assert plan_day(2_000, 0.1, 0.05, seed=1) == plan


def test_union_of_intervals_counts_overlaps_once() -> None:
    assert union_s([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)]) == pytest.approx(4.0)
    assert union_s([]) == 0.0


@pytest.mark.skipif(ROUTER_BINARY is None, reason=NO_ROUTER_REASON)
@pytest.mark.skipif(not os.environ.get(POSTGRES_URL_ENV), reason=f"needs {POSTGRES_URL_ENV}")
def test_a_tiny_day_loses_nothing_doubles_nothing_and_keeps_the_budget() -> None:
    config = DayConfig(
        database_url=os.environ[POSTGRES_URL_ENV],
        mrs=SMOKE_MRS,
        boxes=2,
        workers=2,
        worker_concurrency=4,
        compress=SMOKE_COMPRESS,
        notes_per_minute=SMOKE_NOTES_PER_MINUTE,
        requests_per_minute=SMOKE_REQUESTS_PER_MINUTE,
    )
    progress: list[str] = []

    figures = run_day(config, log=progress.append)

    assert [what for _at, what in figures["chaos"]] == [
        "kill a box",
        "kill a worker",
        "add a worker",
    ], progress
    assert figures["queue"].get("queued", 0) == figures["queue"].get("running", 0) == 0
    why = (progress, figures["jobs"], figures["unsettled_jobs"])
    assert figures["mrs_commented"] == figures["mrs_opened"] == SMOKE_MRS, why
    assert figures["exactly_once"] == {
        "without_summary": 0,
        "extra_summaries": 0,
        "repeated_findings": 0,
    }
    assert set(figures["answers"]) == {202}
    settled = ("succeeded", "superseded")  # a push supersedes its MR's queued review
    assert not [job for job in figures["jobs"] if not job.endswith(settled)], figures["jobs"]
    notes_limit = SMOKE_NOTES_PER_MINUTE + _slack(SMOKE_NOTES_PER_MINUTE)
    requests_limit = SMOKE_REQUESTS_PER_MINUTE + _slack(SMOKE_REQUESTS_PER_MINUTE)
    assert figures["gitlab_peak_notes_per_minute"] <= notes_limit
    assert figures["gitlab_peak_requests_per_minute"] <= requests_limit
