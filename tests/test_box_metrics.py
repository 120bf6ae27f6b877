"""A box's ``/metrics`` as ``reviewbot loadtest`` reads it behind a router, on plain data
(reviewbot.ops.box_metrics); the run through the real router is tests/test_loadtest_router.py."""

from __future__ import annotations

import pytest

from reviewbot.ops.box_metrics import box_load, bucket_percentile, read_counters

# As vLLM 0.32's prometheus_client writes them: labels model_name then engine, a _created
# sample per counter, one request_success sample per finish reason, two engines.
VLLM_METRICS = """\
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 3.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 1.0
vllm:request_success_total{engine="1",finished_reason="stop",model_name="m"} 2.0
vllm:request_success_created{engine="0",finished_reason="stop",model_name="m"} 1.7e+09
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 1000.0
# TYPE vllm:prompt_tokens_cached_total counter
vllm:prompt_tokens_cached_total{engine="0",model_name="m"} 400.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.25",model_name="m"} 5.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} 6.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 6.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 6.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 1.1
"""


def test_counters_are_summed_over_labels_and_ttft_is_read_at_bucket_resolution() -> None:
    before = read_counters(
        "# TYPE vllm:request_success_total counter\n"
        'vllm:request_success_total{finished_reason="stop"} 0.0\n'
    )
    after = read_counters(VLLM_METRICS)
    assert after.counters["vllm:request_success_total"] == 6
    assert after.counters["vllm:prefix_cache_hits_total"] is None  # not in this text
    load = box_load("http://box:8000", before, after)
    assert load.requests == 6 and load.prompt_tokens is None  # not in the earlier reading
    assert load.ttft_ms == {"p50": 250.0, "p95": 500.0}
    assert bucket_percentile({0.1: 2.0, 0.25: 5.0, float("inf"): 10.0}, 0.95) is None
    assert bucket_percentile({}, 0.5) is None
    restarted = box_load("http://box:8000", after, before)
    assert restarted.error is not None and "went back" in restarted.error
    with pytest.raises(ValueError, match="not a vLLM"):
        read_counters("# TYPE up gauge\nup 1\n")
