"""The deep-load benchmark (tests/bench/bench_deep_load.py) at a tiny size, so it cannot rot:
every new MR is answered in each load, the background passes are answered while they arrive,
and the report names each load. No timing is asserted."""

from __future__ import annotations

from tests.bench.bench_deep_load import BenchConfig, measure, report
from tests.fakes.vllm_server import LatencyModel

TINY = LatencyModel(ttft_base_s=0.01, decode_s_per_token=0.0, max_num_seqs=4)
SMOKE_MRS = 2
SMOKE_EVERY_S = 0.05


def test_the_benchmark_runs_each_load_and_reports_it() -> None:
    config = BenchConfig(mrs=SMOKE_MRS, every_s=SMOKE_EVERY_S, mr_chunks=1, latency=TINY)
    figures = measure(config)
    assert set(figures) == {"quiet", "saturating", "reserved"}
    assert all(len(found.first_comment_s) == SMOKE_MRS for found in figures.values())
    assert all(t > 0 for found in figures.values() for t in found.first_comment_s)
    assert figures["quiet"].background_answered == 0
    assert figures["saturating"].background_answered > 0
    lines = report(config, figures)
    assert [line.split(":")[0].strip() for line in lines[1:]] == [
        "quiet",
        "saturating",
        "reserved",
    ]
