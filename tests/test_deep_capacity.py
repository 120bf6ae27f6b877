"""How many deep reviews a day the pool could add (issue 37 part 3, docs/effort.md): the
arithmetic on plain data, and the line ``reviewbot capacity --workload`` and ``reviewbot
loadtest`` print (the fake vLLM serves the load test)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from reviewbot.commands import main
from reviewbot.ops.deep_capacity import (
    DEEP_PASS_CACHED_SHARE,
    DEEP_PASSES,
    PREFILL_SHARE,
    deep_capacity,
    deep_review_cost,
)
from tests.fakes.vllm_server import FakeVLLM, LatencyModel

FAST = LatencyModel(ttft_base_s=0.01, decode_s_per_token=0.001, max_num_seqs=4)


def test_a_deep_review_costs_its_first_pass_plus_the_uncached_later_ones() -> None:
    assert deep_review_cost(1) == 1.0
    assert deep_review_cost(3, cached_share=0.0) == 3.0
    assert deep_review_cost(3, cached_share=1.0, prefill_share=1.0) == 1.0
    assert deep_review_cost() == pytest.approx(
        1 + (DEEP_PASSES - 1) * (1 - DEEP_PASS_CACHED_SHARE * PREFILL_SHARE)
    )


def test_spare_capacity_over_the_cost_never_below_zero() -> None:
    deep = deep_capacity(1000.0, 200.0, passes=3, cached_share=0.5, prefill_share=0.4)
    assert deep.cost == pytest.approx(2.6)
    assert deep.deep_reviews_per_day == pytest.approx(round(800 / 2.6, 1))
    assert deep_capacity(100.0, 500.0).deep_reviews_per_day == 0.0
    words = deep_capacity(1000.0, None).describe()
    assert "capacity 1,000 reviews a day, nothing else served" in words
    assert "3 passes, later passes 95% cached, prefill assumed 20%" in words


def test_capacity_prints_the_deep_reviews_it_could_add() -> None:
    args = ["capacity", "--workload", "default", "--box", "t10x4", "--p95-first-comment", "5m"]
    plan = json.loads(CliRunner().invoke(main, [*args, "--json"]).output)
    deep = plan["deep_reviews"]
    capacity = plan["sustained_reviews_per_hour_one_box"] * 24
    assert deep["boxes"] == 1
    assert deep["capacity_reviews_per_day"] == pytest.approx(capacity, abs=0.1)
    spare = capacity - plan["inputs"]["reviews_per_day"]
    assert deep["deep_reviews_per_day"] == pytest.approx(
        max(0.0, spare) / deep["deep_review_cost_in_reviews"], abs=0.2
    )
    text = CliRunner().invoke(main, args).output
    assert "with 1 box(es): " in text and "deep reviews a day could be added" in text


def test_loadtest_prints_the_deep_reviews_it_could_add() -> None:
    with FakeVLLM(latency=FAST) as server:
        env = {"REVIEWBOT_CONFIG": "", "REVIEWBOT_LLM_BASE_URL": server.base_url}
        runner = CliRunner()
        base = ["loadtest", "--synthetic", "300", "--requests", "2"]
        text = runner.invoke(main, base, env=env)
        report = json.loads(runner.invoke(main, [*base, "--json"], env=env).output)
    assert text.exit_code == 0, text.output
    assert "deep reviews per day" in text.output
    deep = report["deep_reviews"]
    assert deep["capacity_reviews_per_day"] == pytest.approx(report["reviews_per_day"])
    assert deep["served_reviews_per_day"] is None and deep["passes"] == DEEP_PASSES
