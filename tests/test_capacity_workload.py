"""`reviewbot capacity --workload` (issue 38 part 1): the boxes and workers a team's own reviews
need, from the store's history, a JSON export of it, or the named default mix.

The store's reviews and calls become a workload (sizes and arrivals: the busiest hour of the
week), the simulation plays it on a box profile, and every figure names its inputs; a
workload too small to judge says so (exit 3); bad input is one line (exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from reviewbot.commands import main
from reviewbot.commands.workload import parse_duration
from reviewbot.ops.pool_simulation import (
    BOX_PROFILES,
    plan_pool,
    poisson_arrivals,
    simulate,
    sustained_per_hour,
)
from reviewbot.ops.workload import (
    MIN_REVIEWS,
    CallShape,
    ReviewShape,
    Workload,
    default_workload,
    workload_from_json,
)
from reviewbot.store import Store
from reviewbot.store.workload_queries import workload_between

# The command reads the store up to the real now, so the history is placed before it: the
# latest Tuesday 10:15 at least three days back (its week's Friday morning is then past too).
NOW = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
TUESDAY = 1
_BACK = NOW - timedelta(days=3)
TUESDAY_TEN = (_BACK - timedelta(days=(_BACK.weekday() - TUESDAY) % 7)).replace(
    hour=10, minute=15
) - (timedelta(weeks=1) if _BACK.weekday() == TUESDAY and _BACK.hour < 11 else timedelta(0))
WEEKS = 3
PEAK_PER_WEEK = 6  # reviews in each Tuesday 10:00 hour
H200 = BOX_PROFILES["h200"]


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def review_at(store: Store, clock: Clock, when: datetime, chunks: int) -> None:
    clock.now = when
    review_id = store.start_review(
        project="g/p",
        mr_iid=1,
        head_sha="a" * 40,
        base_sha=None,
        start_sha=None,
        trigger="cli",
        model="m",
        prompt_version="v",
    )
    calls = [
        {
            "chunk_index": chunk,
            "mode": "tool_calls",
            "outcome": "ok",
            "prompt_tokens": 5_000,
            "cached_tokens": 1_000,
            "completion_tokens": 300,
            "tool_round": round_,
        }
        for chunk in range(chunks)
        for round_ in (0, 1)
    ]
    store.record_llm_calls(review_id, calls)


@pytest.fixture
def history(store_url: str) -> Iterator[str]:
    """Three weeks of reviews: one every weekday at 08:15, six every Tuesday at 10:00."""
    clock = Clock(NOW)
    store = Store.from_url(store_url, clock=clock)
    for week in range(WEEKS):
        tuesday = TUESDAY_TEN - timedelta(weeks=week)
        for n in range(PEAK_PER_WEEK):
            review_at(store, clock, tuesday + timedelta(minutes=5 * n), chunks=2)
        for day in range(5):
            monday = tuesday - timedelta(days=1)
            review_at(store, clock, monday + timedelta(days=day, hours=-2), chunks=1)
    store.close()
    yield store_url


def test_the_store_gives_the_sizes_and_the_busiest_hour_of_the_week(history: str) -> None:
    store = Store.from_url(history)
    workload = workload_between(store.engine, NOW - timedelta(days=28), NOW, "the store")
    store.close()
    assert len(workload.reviews) == WEEKS * (PEAK_PER_WEEK + 5)
    busiest = workload.busiest_hour()
    assert (busiest.weekday, busiest.hour) == (1, 10)
    # 28 days hold four Tuesdays at 10:00; three of them had six reviews
    assert busiest.weeks == 4 and busiest.reviews_per_hour == WEEKS * PEAK_PER_WEEK / 4
    two_chunks = next(r for r in workload.reviews if len(r.chunks) == 2)
    assert [len(chunk) for chunk in two_chunks.chunks] == [2, 2]  # two rounds each, in order
    assert two_chunks.figure("prompt tokens") == 4 * 5_000
    assert two_chunks.figure("cached tokens") == 4 * 1_000
    assert two_chunks.figure("tool rounds") == 2
    assert two_chunks.chunks[0][0] == CallShape(4_000, 300, 1_000, "review", 0)


def test_an_export_reads_back_as_the_same_workload(history: str, tmp_path: Path) -> None:
    export = tmp_path / "workload.json"
    env = {"REVIEWBOT_CONFIG": "", "REVIEWBOT_DATABASE_URL": history}
    args = ["capacity", "--workload", "store", "--window", "30", "--export-workload", str(export)]
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 0, result.output
    again = workload_from_json(json.loads(export.read_text()), str(export))
    assert len(again.reviews) == WEEKS * (PEAK_PER_WEEK + 5)
    busiest = again.busiest_hour()
    assert (busiest.weekday, busiest.hour) == (TUESDAY, 10)
    assert busiest.reviews_per_hour == pytest.approx(WEEKS * PEAK_PER_WEEK / busiest.weeks)
    assert len(again.reviews) >= MIN_REVIEWS and again.days >= 7
    planned = CliRunner().invoke(main, ["capacity", "--workload", str(export), "--json"])
    assert planned.exit_code == 0, planned.output
    inputs = json.loads(planned.output)["inputs"]
    assert inputs["workload"].startswith(str(export)) and inputs["reviews"] == len(again.reviews)
    assert inputs["busiest_hour"].startswith("Tue 10:00 UTC")


def test_a_workload_too_small_to_judge_says_so_with_exit_3(history: str) -> None:
    env = {"REVIEWBOT_CONFIG": "", "REVIEWBOT_DATABASE_URL": history}
    result = CliRunner().invoke(main, ["capacity", "--workload", "store", "--window", "5"], env=env)
    assert result.exit_code == 3
    assert "too small to judge" in result.output and "--workload default" in result.output


def test_every_figure_of_the_plan_names_its_inputs() -> None:
    args = ["capacity", "--workload", "default", "--box", "t10x4", "--p95-first-comment", "5m"]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    inputs = plan["inputs"]
    assert inputs["workload"] == "reviewbot's default mix (assumed, not measured)"
    assert "assumed" in inputs["busiest_hour"] and "seed's published figures" in inputs["box"]
    assert [row["boxes"] for row in plan["by_boxes"]] == [1, 2, 3, 4]
    assert plan["boxes_needed"] == 1 and plan["workers_needed"] >= 1
    assert plan["gpu_hours_per_1000_reviews"] == pytest.approx(
        1000 / plan["sustained_reviews_per_hour_one_box"] * 4
    )
    text = CliRunner().invoke(main, args)
    assert "needed for a p95 first comment within 5.0 min: 1 box(es)" in text.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--p95-first-comment", "soon"], "is not a duration"),
        (["--p95-first-comment", "0"], "is not a duration"),
        (["--box", "a100"], "Invalid value for '--box'"),
        (["--window", "0"], "--window"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["capacity", "--workload", "default", *args])
    assert result.exit_code == 2 and message in result.output


@pytest.mark.parametrize(
    "content",
    ["not json", '{"version": 9}', '{"version": 1, "reviews": [{"started_at": "x"}]}', "[]"],
)
def test_a_broken_export_is_refused_in_one_line(tmp_path: Path, content: str) -> None:
    path = tmp_path / "w.json"
    path.write_text(content)
    result = CliRunner().invoke(main, ["capacity", "--workload", str(path)])
    assert result.exit_code == 2 and str(path) in result.output
    assert "Traceback" not in result.output


def test_without_workload_the_memory_planner_still_wants_a_gpu() -> None:
    result = CliRunner().invoke(main, ["capacity", "--model", "Qwen/Qwen3.5-9B"])
    assert result.exit_code == 2 and "--gpu" in result.output


@pytest.mark.parametrize(
    ("text", "seconds"), [("300", 300), ("90s", 90), ("5m", 300), ("1.5h", 5400)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


# --- the simulation --------------------------------------------------------------------------


def uniform(chunks: int, uncached: int, completion: int, count: int = 50) -> Workload:
    call = CallShape(uncached, completion)
    review = ReviewShape(NOW, tuple((call,) for _ in range(chunks)))
    return Workload((review,) * count, "test", NOW - timedelta(days=14), NOW)


def test_a_lone_review_takes_its_prefills_one_after_another_then_its_decode() -> None:
    workload = uniform(chunks=1, uncached=37_344, completion=146)
    result = simulate([(0.0, workload.reviews[0])], H200, boxes=1, workers=1)
    expected = 37_344 / H200.prefill_tokens_per_s + H200.fixed_first_token_s + 1.0
    assert result.first_comment_s[0] == pytest.approx(expected, rel=0.01)


def test_what_one_box_sustains_stays_under_its_prefill_and_decode_bounds() -> None:
    workload = uniform(chunks=2, uncached=20_000, completion=400)
    sustained = sustained_per_hour(workload, H200)
    prefill_bound = H200.prefill_tokens_per_s * 3600 / 40_000
    assert 0.5 * prefill_bound < sustained <= prefill_bound * 1.01


def test_past_what_one_box_sustains_the_queue_grows_and_a_second_box_takes_it() -> None:
    workload = uniform(chunks=2, uncached=20_000, completion=400)
    rate = 1.5 * sustained_per_hour(workload, H200)
    plan = plan_pool(workload_at(workload, rate), H200, max_boxes=2, target_s=60)
    one, two = plan.rows
    assert one.p95_s > 10 * two.p95_s and two.p95_s < 60
    assert plan.boxes_needed == 2


def test_an_unreachable_target_is_said_plainly() -> None:
    workload = uniform(chunks=1, uncached=100_000, completion=4_000, count=30)
    plan = plan_pool(workload_at(workload, 10), H200, max_boxes=1, target_s=1)
    assert plan.boxes_needed is None and plan.workers_needed is None


def test_poisson_arrivals_hold_the_rate_on_average() -> None:
    import random

    arrivals = poisson_arrivals(default_workload(NOW), 60, 50, random.Random(1))
    assert 2_700 < len(arrivals) < 3_300


def workload_at(workload: Workload, per_hour: float) -> Workload:
    from reviewbot.ops.workload import BusiestHour

    return Workload(
        workload.reviews, "test", workload.start, workload.end, BusiestHour(0, 0, per_hour, 0, "t")
    )


def test_reviews_per_day_scales_the_busiest_hour_with_the_day() -> None:
    base = default_workload(NOW)
    grown = base.scaled(2_000)
    assert grown.per_day() == 2_000
    assert grown.busiest_hour().reviews_per_hour == pytest.approx(
        base.busiest_hour().reviews_per_hour * 10
    )
    assert "scaled from 200.0 to 2,000 reviews a day" in grown.busiest_hour().describe()
    result = CliRunner().invoke(
        main, ["capacity", "--workload", "default", "--reviews-per-day", "2000", "--json"]
    )
    assert json.loads(result.output)["busiest_hour_reviews"] == pytest.approx(240)


BURST_RESULTS = Path(__file__).parents[1] / "deploy" / "h200-check" / "results"


def burst_shapes(size: str) -> tuple[list[ReviewShape], dict]:
    """The reviews of the first H200 burst of ``size`` as the simulation sees them: each call
    an even share of its review's uncached and cached prompt, 300 completion tokens (the
    scripted model's short reviews; the run did not record them)."""
    burst = json.loads((BURST_RESULTS / "2026-12-04-burst-first.json").read_text())["burst"][size]
    shapes = []
    for review in burst["reviews"]:
        calls = review["calls"]
        uncached = (review["prompt_tokens"] - review["cached_tokens"]) // calls
        call = CallShape(uncached, 300, review["cached_tokens"] // calls)
        shapes.append(ReviewShape(NOW, tuple((call,) for _ in range(calls))))
    return shapes, burst


@pytest.mark.parametrize(("size", "within"), [("16", 0.05), ("32", 0.2)])
def test_the_h200_profile_reproduces_the_measured_bursts(size: str, within: float) -> None:
    """Fitted to the burst of 16 (makespan), checked on the burst of 32 (docs/capacity.md)."""
    shapes, measured = burst_shapes(size)
    result = simulate([(0.0, shape) for shape in shapes], H200, 1, len(shapes))
    assert max(result.finished_at) == pytest.approx(measured["makespan_s"], rel=within)
    p95 = sorted(result.finished_at)[int(0.95 * len(shapes)) - 1]
    assert p95 == pytest.approx(measured["summary"]["last_answer_s"]["p95"], rel=0.1)


@pytest.mark.parametrize(
    "option", [["--p95-first-comment", "5m"], ["--box", "t10x4"], ["--export-workload", "w.json"]]
)
def test_a_workload_option_without_workload_is_refused_not_ignored(option: list[str]) -> None:
    args = ["capacity", "--model", "Qwen/Qwen3.5-9B", "--gpu", "L4", *option]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and f"{option[0]} needs --workload" in result.output


def test_a_huge_day_is_simulated_for_fewer_hours_and_says_so() -> None:
    args = ["capacity", "--workload", "default", "--reviews-per-day", "1000000", "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert "held 0.166667 h" in plan["inputs"]["simulated"]  # 20,000 reviews at 120,000/h
    assert all(row["reviews"] <= 20_500 for row in plan["by_boxes"])
