"""`eval --compare` of 1, 3 and 5 passes on the context set with the fake's per-pass noise
(issue 37; the measured table is in docs/effort.md, printed by tests/bench/bench_effort.py)."""

from __future__ import annotations

import json

import pytest

from tests.bench.bench_effort import (
    DEFAULT_FALSE_POSITIVE_RATE,
    DEFAULT_RECALL,
    NOISE_SEED,
    compare_efforts,
)
from tests.fakes.pass_noise import PassNoise

pytestmark = pytest.mark.slow  # four configurations of 26 items each


def test_voting_removes_the_noise_and_the_cost_grows_with_the_passes() -> None:
    noise = PassNoise(DEFAULT_RECALL, DEFAULT_FALSE_POSITIVE_RATE, NOISE_SEED)
    code, output = compare_efforts(noise, "--json")
    assert code == 0, output
    document = json.loads(output)
    by_name = {entry["name"]: entry for entry in document["configurations"]}
    one, union, deep, five = (
        by_name[name] for name in ("passes-1", "passes-3-k1", "passes-3-k2", "passes-5-k3")
    )
    # the measured figures (docs/effort.md): the draws depend on the request seeds only
    assert (one["total"]["tp"], one["total"]["fp"]) == (16, 2)
    assert (deep["total"]["tp"], deep["total"]["fp"]) == (20, 0)
    assert deep["total"]["f1"] > union["total"]["f1"] > one["total"]["f1"]
    assert five["total"]["fp"] == 0 and five["total"]["f1"] > one["total"]["f1"]
    assert union["voted_out"]["findings"] == 0 and one["voted_out"]["findings"] == 0
    assert deep["voted_out"] == {"findings": 2, "would_be_true_positives": 0}
    pairs = {(pair["b"], pair["a"]): pair for pair in document["pairs"]}
    assert pairs["passes-3-k2", "passes-1"]["better"] == "passes-3-k2"
    # each pass is one call per chunk; passes after the first are served from the cache
    for entry, passes in ((one, 1), (deep, 3), (five, 5)):
        assert entry["cost_per_item"]["model_calls"] == passes
    cached_share = deep["cost"]["cached_tokens"] / deep["cost"]["prompt_tokens"]
    assert cached_share > one["cost"]["cached_tokens"] / one["cost"]["prompt_tokens"]
