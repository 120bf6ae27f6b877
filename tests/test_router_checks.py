"""reviewbot.ops.router: the router's worker list, the per-box and pool checks, the plan.

Plain data in, checks out (tests/test_router.py shows the same against the real router)."""

from __future__ import annotations

import pytest

from reviewbot.ops.doctor import Status
from reviewbot.ops.router import BoxFacts, pool_checks, router_plan, router_workers

CACHING_ON = 'vllm:cache_config_info{block_size="16",enable_prefix_caching="True"} 1.0\n'
CACHING_OFF = 'vllm:cache_config_info{block_size="16",enable_prefix_caching="False"} 1.0\n'
MODEL = "Qwen/Qwen3.5-35B-A3B-GPTQ-Int4"


def box(url: str, **facts: object) -> BoxFacts:
    values: dict[str, object] = {
        "healthy_by_router": True,
        "model": MODEL,
        "max_model_len": 65536,
        "tool_calls": True,
        "metrics_text": CACHING_ON,
    }
    values.update(facts)
    return BoxFacts(url, **values)  # type: ignore[arg-type]


def by_name(checks: list) -> dict:
    return {check.name: check for check in checks}


def test_the_router_worker_list_is_read_and_a_vllm_answer_is_not_one() -> None:
    body = {"workers": [{"url": "http://a:8000", "is_healthy": True}, {"url": "http://b:8000"}]}
    assert router_workers(body) == [("http://a:8000", True), ("http://b:8000", None)]
    assert router_workers({"detail": "Not Found"}) is None
    assert router_workers({"workers": []}) is None
    assert router_workers({"workers": [{"name": "x"}]}) is None
    assert router_workers([1, 2]) is None


def test_three_equal_boxes_are_all_ok() -> None:
    checks = by_name(pool_checks("http://r:30000", [box("http://a"), box("http://b"), box("c")]))
    assert checks["router"].status is Status.OK and "3 of 3" in checks["router"].detail
    assert checks["boxes agree"].status is Status.OK
    assert all(c.status is Status.OK for c in checks.values())


def test_a_dead_box_is_named_and_the_pool_still_answers() -> None:
    boxes = [box("http://a"), box("http://b", error="cannot reach it (ConnectError)")]
    checks = by_name(pool_checks("http://r", boxes))
    assert checks["box http://b"].status is Status.FAIL
    assert "cannot reach" in checks["box http://b"].detail
    assert checks["router"].status is Status.WARN and "1 of 2" in checks["router"].detail
    assert checks["boxes agree"].status is Status.OK  # only the living are compared


def test_no_box_answering_fails_the_router() -> None:
    checks = by_name(pool_checks("http://r", [box("http://a", error="cannot reach it")]))
    assert checks["router"].status is Status.FAIL


@pytest.mark.parametrize(
    ("facts", "words"),
    [
        ({"model": "Qwen/Qwen3.5-9B"}, "model"),
        ({"max_model_len": 32768}, "max_model_len"),
        ({"metrics_text": CACHING_OFF}, "prefix caching"),
    ],
)
def test_boxes_that_differ_fail_naming_the_fact(facts: dict, words: str) -> None:
    checks = by_name(pool_checks("http://r", [box("http://a"), box("http://b", **facts)]))
    assert checks["boxes agree"].status is Status.FAIL
    assert words in checks["boxes agree"].detail and "http://b" in checks["boxes agree"].detail


def test_a_box_without_a_tool_parser_or_marked_unhealthy_fails() -> None:
    boxes = [box("http://a", tool_calls=False), box("http://b", healthy_by_router=False)]
    checks = by_name(pool_checks("http://r", boxes))
    assert "tool" in checks["box http://a"].detail
    assert "unhealthy" in checks["box http://b"].detail
    assert checks["router"].status is Status.FAIL


def test_the_plan_sizes_the_pool_per_box() -> None:
    plan = router_plan(4, 8)
    assert "--max-concurrent-requests 32" in plan.flags
    assert plan.settings["REVIEWBOT_LLM_TOTAL_CONCURRENCY"] == "32"
    assert plan.settings["REVIEWBOT_CONCURRENCY"] == "8"
    assert len(plan.flags[3].split()) == 1 + 4  # --worker-urls and four boxes
    with pytest.raises(ValueError):
        router_plan(0, 8)
