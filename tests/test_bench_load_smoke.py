"""The load benchmark (tests/bench/bench_load.py) end to end at a tiny size, on SQLite.

Real processes: the fakes in a child process, one `reviewbot serve` and one `reviewbot worker`.
Behaviour only (every delivery accepted, every job succeeded, nothing posted twice, the
throw-away database removed); no timing is asserted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.bench_load import HTTP_ACCEPTED, LoadConfig, run_load
from tests.fakes.vllm_server import LatencyModel

pytestmark = pytest.mark.slow  # measured: see docs/development.md

SMOKE_EVENTS = 6
SMOKE_WORKER_CONCURRENCY = 3
SMOKE_CLIENT_THREADS = 3
SMOKE_WAIT_LIMIT_S = 20.0
TINY_LATENCY = LatencyModel(ttft_base_s=0.01, decode_s_per_token=0.0, max_num_seqs=4)


def test_small_burst_is_reviewed_once_per_mr(tmp_path: Path) -> None:
    database = tmp_path / "load.db"
    config = LoadConfig(
        database_url=f"sqlite:///{database}",
        events=SMOKE_EVENTS,
        workers=1,
        worker_concurrency=SMOKE_WORKER_CONCURRENCY,
        client_threads=SMOKE_CLIENT_THREADS,
        latency=TINY_LATENCY,
        wait_limit_s=SMOKE_WAIT_LIMIT_S,
    )
    progress: list[str] = []

    figures = run_load(config, log=progress.append)

    assert figures.answer_statuses == {HTTP_ACCEPTED: SMOKE_EVENTS}
    assert figures.jobs.get("succeeded") == SMOKE_EVENTS, progress
    assert figures.duplicates == 0
    assert figures.model_stats.requests >= SMOKE_EVENTS
    assert not database.exists()  # the throw-away database is gone
