"""Benchmark of the prefill share (reviewbot.llm.prefill); prints figures.

Run: ``.venv/bin/python -m tests.bench.bench_prefill``

The H200 measurement of issue 12, scaled down tenfold in tokens: one 61K-token prompt took
1.8 s to its first token, and concurrent prompts were prefilled one after another. Here a
large review has 8 chunks of about 6,100 tokens against a fake that prefills 3,400 tokens/s,
one prompt at a time, first come first served (``LatencyModel(prefill_in_turn=True)``), so each
prefill takes about 1.8 s, and decodes at 10 ms per token with 8 sequences at once. A small
merge request (one chunk of about 300 tokens) arrives while the large review is being sent.

Both reviews share one runner (one worker, ``concurrency`` 8), as two jobs of a worker do.
Each scenario runs with the limit off (0) and with one large chunk's worth (the default,
65,536 tokens, is one full 64K chunk). Figures: the small review's first token and end, from
the moment it started (slot waits included), and the large review's wall time, alone and
beside the small one.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from reviewbot.llm.factory import runner_for
from reviewbot.model import ChunkResult, LLMSettings
from tests.fakes.vllm_server import FakeVLLM, LatencyModel
from tests.test_prefill import diff_request, sized

LATENCY = LatencyModel(
    prefill_tokens_per_s=3_400, decode_s_per_token=0.01, max_num_seqs=8, prefill_in_turn=True
)
LARGE_CHUNKS = 8
LARGE_LINES = 287  # about 6,100 prompt tokens
SMALL_LINES = 12  # about 300
SMALL_ARRIVES_AFTER_S = 0.1
MS_PER_S = 1000.0


@dataclass(frozen=True)
class Figures:
    limit: int
    large_wall_s: float
    small_ttft_s: float | None
    small_end_s: float | None


def run(limit: int, with_small: bool) -> Figures:
    with FakeVLLM(latency=LATENCY, prefix_caching=False) as server:
        settings = LLMSettings(base_url=server.base_url, prefill_tokens_per_review=limit)
        with runner_for(settings) as runner:
            large = [
                sized(runner, diff_request(i, LARGE_LINES, f"large{i}"))
                for i in range(LARGE_CHUNKS)
            ]
            small = sized(runner, diff_request(0, SMALL_LINES, "small"))
            small_result: list[ChunkResult] = []
            small_end: list[float] = []
            started = time.monotonic()

            def small_review() -> None:
                time.sleep(SMALL_ARRIVES_AFTER_S)
                small_result.extend(runner.review_chunks([small]))
                small_end.append(time.monotonic() - started)

            thread = threading.Thread(target=small_review)
            if with_small:
                thread.start()
            results = runner.review_chunks(large)
            large_wall_s = time.monotonic() - started
            if with_small:
                thread.join()
    assert all(result.error is None for result in results + small_result)
    # From the small review's start: waiting for a slot of the runner, then for the server.
    record = small_result[0].records[-1] if small_result else None
    ttft_ms = record.slot_wait_ms + record.ttft_ms if record and record.ttft_ms else None
    return Figures(
        limit=limit,
        large_wall_s=large_wall_s,
        small_ttft_s=ttft_ms / MS_PER_S if ttft_ms else None,
        small_end_s=(small_end[0] - SMALL_ARRIVES_AFTER_S) if small_end else None,
    )


def main() -> None:
    with FakeVLLM() as server, runner_for(LLMSettings(base_url=server.base_url)) as runner:
        one_large = sized(runner, diff_request(0, LARGE_LINES, "large0")).prompt_tokens or 0
    print(
        f"large review: {LARGE_CHUNKS} chunks of {one_large} tokens; "
        f"prefill {LATENCY.prefill_tokens_per_s:,.0f} tokens/s, one at a time"
    )
    for limit in (0, one_large):
        name = "off" if limit == 0 else f"{limit} tokens (one large chunk)"
        alone = run(limit, with_small=False)
        beside = run(limit, with_small=True)
        print(f"limit {name}:")
        print(f"  large review alone: {alone.large_wall_s:.2f} s")
        print(
            f"  with a small MR arriving after {SMALL_ARRIVES_AFTER_S:.1f} s: its first token "
            f"{beside.small_ttft_s:.2f} s and its end {beside.small_end_s:.2f} s after it "
            f"arrived; large review {beside.large_wall_s:.2f} s"
        )


if __name__ == "__main__":
    main()
