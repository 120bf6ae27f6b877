"""``reviewbot loadtest`` through the real vllm-router in front of fake vLLMs: the report's
per-box figures come from each box's own ``/metrics`` and agree with what each box recorded.

The router's answers name no box (no header of theirs carries the worker; tried on 0.1.17), so
loadtest reads the boxes' counters before and after the run (reviewbot.ops.box_metrics).
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

import pytest
from click.testing import CliRunner

from reviewbot.commands import main
from tests.fakes.vllm_server import LatencyModel
from tests.router_pool import NO_ROUTER_REASON, ROUTER_BINARY, RouterPool, router_pool

pytestmark = [pytest.mark.slow, pytest.mark.skipif(ROUTER_BINARY is None, reason=NO_ROUTER_REASON)]

FAST = LatencyModel(ttft_base_s=0.01, decode_s_per_token=0.001, max_num_seqs=4)
SMALL_DIFF_TOKENS = 300
# Each replayed review has its own session key; with one chunk per review, 24 requests are 24
# keys: over the ring of two (or three) boxes' random ports, all 24 on one box is about a
# 2^-23 chance, so each box serves some.
REQUESTS = 24


def loadtest(pool: RouterPool, *args: str) -> tuple[int, dict[str, Any], str]:
    env = {
        "REVIEWBOT_CONFIG": "",
        "REVIEWBOT_LLM_BASE_URL": pool.base_url,
        "REVIEWBOT_ENABLE_THINKING": "false",
    }
    argv = ["loadtest", "--synthetic", str(SMALL_DIFF_TOKENS), "--concurrency", "4"]
    result = CliRunner().invoke(main, [*argv, "--requests", str(REQUESTS), *args], env=env)
    assert result.exit_code in (0, 3), result.output
    report = json.loads(result.stdout) if "--json" in args else {}
    return result.exit_code, report, result.output


def test_per_box_requests_come_from_each_box_and_sum_to_the_total() -> None:
    with router_pool(2, latency=FAST) as pool:
        _, report, _ = loadtest(pool, "--json")
        counts = pool.chat_counts()
        stats = [box.stats for box in pool.boxes]
        urls = pool.urls
    assert report["requests"] == REQUESTS and report["errors"] == 0
    figures = report["pool"]
    assert figures["boxes"] == 2 and figures["boxes_read"] == 2
    by_url = {box["url"]: box for box in figures["per_box"]}
    assert set(by_url) == set(urls)
    assert [by_url[url]["requests"] for url in urls] == counts
    assert sum(counts) == REQUESTS and min(counts) > 0, counts
    assert figures["requests_counted_by_boxes"] == REQUESTS
    for url, box_stats in zip(urls, stats, strict=True):
        box = by_url[url]
        assert box["error"] is None
        assert box["prompt_tokens"] == box_stats.prompt_tokens
        assert box["cached_prompt_tokens"] == box_stats.cached_tokens
        assert box["ttft_ms"]["p50"] is not None and box["ttft_ms"]["p95"] >= box["ttft_ms"]["p50"]
    prompt = sum(s.prompt_tokens for s in stats)
    assert figures["cache_share_by_boxes"] == round(sum(s.cached_tokens for s in stats) / prompt, 4)
    assert report["prefix_cache_hit_rate"] == figures["cache_share_by_boxes"]
    assert report["reviews_per_day"] > 0


def test_a_box_whose_metrics_cannot_be_read_is_named_not_counted_as_zero() -> None:
    with router_pool(3, latency=FAST) as pool:
        broken = pool.boxes[1]
        broken.answer_with(
            "GET /metrics", "gone", status=HTTPStatus.NOT_FOUND, content_type="text/plain"
        )
        _, report, _ = loadtest(pool, "--json")
        counts = pool.chat_counts()
        _, _, text = loadtest(pool)
        urls = pool.urls
    figures = report["pool"]
    assert figures["boxes"] == 3 and figures["boxes_read"] == 2
    by_url = {box["url"]: box for box in figures["per_box"]}
    dead = by_url[urls[1]]
    assert dead["requests"] is None and f"{urls[1]}/metrics answered 404" in dead["error"]
    others = [by_url[url]["requests"] for url in (urls[0], urls[2])]
    assert others == [counts[0], counts[2]]
    assert figures["requests_counted_by_boxes"] == counts[0] + counts[2]
    assert figures["cache_share_by_boxes"] is None  # not the pool's without that box
    assert f"{urls[1]}" in text and "unreadable" in text and "of 3 box(es)" in text
