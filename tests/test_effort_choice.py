"""Tests for reviewbot.effort_choice: the effort that follows the load (issue 37, docs/effort.md).

Pure data in, a choice out: the figures below stand for the queue and each box's vLLM gauges.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reviewbot.effort import Effort, EffortChoice
from reviewbot.effort_choice import EFFORT_ORDER, BoxGauges, LoadLimits, choose_effort
from tests.hypothesis_profiles import examples

LIMITS = LoadLimits(idle_running_below=1, quick_queue_depth=20, first_comment_slo_s=300.0)
CEILING = EffortChoice(Effort.DEEP, "effort_follows_load")
IDLE_BOX = BoxGauges("http://box-1:8000", running=0.0, waiting=0.0)
BUSY_BOX = BoxGauges("http://box-2:8000", running=4.0, waiting=0.0)
QUEUED_BOX = BoxGauges("http://box-2:8000", running=0.0, waiting=2.0)
UNREAD_BOX = BoxGauges("http://box-3:8000", error="cannot reach it (ConnectError)")
MAX_FIGURE = 100


def test_idle_pool_and_empty_queue_is_deep_and_says_why() -> None:
    choice = choose_effort(0, None, [IDLE_BOX], LIMITS, CEILING)
    assert choice == EffortChoice(Effort.DEEP, "queue 0, 1 box idle (running 0, waiting 0): deep")


def test_a_busy_box_or_a_waiting_job_is_standard() -> None:
    assert choose_effort(0, None, [IDLE_BOX, BUSY_BOX], LIMITS, CEILING).effort is Effort.STANDARD
    assert choose_effort(0, None, [IDLE_BOX, QUEUED_BOX], LIMITS, CEILING).effort == "standard"
    waiting = choose_effort(1, 12.0, [IDLE_BOX], LIMITS, CEILING)
    assert waiting.effort is Effort.STANDARD
    assert waiting.reason.startswith("queue 1 (oldest waiting 12 s), 1 box idle")


def test_unknown_load_is_never_deep_and_is_named() -> None:
    choice = choose_effort(0, None, [IDLE_BOX, UNREAD_BOX], LIMITS, CEILING)
    assert choice.effort is Effort.STANDARD
    assert "metrics unread from http://box-3:8000 (counted busy)" in choice.reason
    assert choose_effort(0, None, [], LIMITS, CEILING).effort is Effort.STANDARD


def test_a_queue_past_the_slo_or_the_depth_is_quick() -> None:
    late = choose_effort(2, 301.0, [IDLE_BOX], LIMITS, CEILING)
    assert late.effort is Effort.QUICK
    assert "first-comment SLO of 300 s" in late.reason and late.reason.endswith(": quick")
    assert choose_effort(20, 1.0, [IDLE_BOX], LIMITS, CEILING).effort is Effort.QUICK


def test_the_ceiling_caps_the_choice() -> None:
    ceiling = EffortChoice(Effort.STANDARD, "setting review_effort = standard")
    choice = choose_effort(0, None, [IDLE_BOX], LIMITS, ceiling)
    assert choice.effort is Effort.STANDARD
    assert "at most standard (setting review_effort = standard)" in choice.reason


figures = st.integers(min_value=0, max_value=MAX_FIGURE)
box = st.tuples(figures, figures, st.booleans())  # running, waiting, unread


@st.composite
def load_pairs(draw: st.DrawFn) -> tuple[tuple, tuple]:
    """Two loads of the same pool, the second at least as heavy in every figure."""
    count = draw(st.integers(min_value=0, max_value=4))
    light = [draw(box) for _ in range(count)]
    heavy = [
        (run + draw(figures), wait + draw(figures), unread or draw(st.booleans()))
        for run, wait, unread in light
    ]
    depth = draw(figures)
    wait_s = draw(st.none() | st.floats(min_value=0, max_value=1000))
    more_depth = depth + draw(figures)
    more_wait = None if wait_s is None else wait_s + draw(st.floats(min_value=0, max_value=1000))
    return (depth, wait_s, light), (more_depth, more_wait, heavy)


def _boxes(spec: list[tuple[int, int, bool]]) -> list[BoxGauges]:
    return [
        BoxGauges(f"http://box-{n}", error="unread")
        if unread
        else BoxGauges(f"http://box-{n}", running=float(run), waiting=float(wait))
        for n, (run, wait, unread) in enumerate(spec)
    ]


@settings(max_examples=examples(300), deadline=None)
@given(load_pairs(), st.sampled_from(EFFORT_ORDER), st.integers(min_value=1, max_value=5))
def test_more_load_never_raises_the_effort(pair: tuple, ceiling: Effort, idle_below: int) -> None:
    (depth, wait_s, light), (more_depth, more_wait, heavy) = pair
    limits = LoadLimits(idle_below, quick_queue_depth=10, first_comment_slo_s=300.0)
    cap = EffortChoice(ceiling, "ceiling")
    before = choose_effort(depth, wait_s, _boxes(light), limits, cap)
    after = choose_effort(more_depth, more_wait, _boxes(heavy), limits, cap)
    assert EFFORT_ORDER.index(after.effort) <= EFFORT_ORDER.index(before.effort)
    assert EFFORT_ORDER.index(after.effort) <= EFFORT_ORDER.index(ceiling)
    assert after.reason.endswith(f": {after.effort.value}")
