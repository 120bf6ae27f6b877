"""Benchmark of interactive work first (vLLM priority scheduling, issue 34 part 3); prints
figures.

Run::

    .venv/bin/python -m tests.bench.bench_priority            # the fake, at scale
    REVIEWBOT_TEST_VLLM_PYTHON=~/.cache/reviewbot/vllm-venv/bin/python \\
        .venv/bin/python -m tests.bench.bench_priority --real # and the real CPU vLLM, small

A many-chunk review (a release branch: an incremental review's priority) saturates the server:
its chunks are sent more at once than the server has sequence slots (several workers' worth,
no prefill share), so requests queue in the server. A thread answer (streamed, its own request)
arrives once the queue has formed; its time to first token is measured from its sending, with
priorities (the setting ``priority_scheduling`` on: the answer 0, the review 20) and without
(off: both the server's default, first come first served). Both runs use one server started
with ``--scheduling-policy priority``, as the deploy profiles start it; the setting is the only
difference.

The fake: ``max_num_seqs`` 8, TTFT 0.05 s + 20,000 prompt tokens/s, 10 ms per output token, a
40-chunk review sent 32 at a time. The real CPU vLLM (the tier's scripted model, 128 sequences
and 2,048 prompt tokens a step): 6 chunks of about 5,900 distinct tokens, so the prefills queue.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reviewbot.llm.factory import runner_for
from reviewbot.model import (
    MODE_CONTENT,
    ChunkRequest,
    ChunkResult,
    LLMSettings,
    ModelRequest,
    request_priority,
)
from reviewbot.prompts import tool_schemas
from reviewbot.states import Workload
from tests.bench.bench_realvllm import real_server
from tests.fakes.vllm_server import FakeVLLM, LatencyModel
from tests.realvllm.server import SERVED_MODEL
from tests.test_prefill import diff_request

FAKE_LATENCY = LatencyModel(
    ttft_base_s=0.05, prefill_tokens_per_s=20_000, decode_s_per_token=0.01, max_num_seqs=8
)
FAKE_CHUNKS = 40
FAKE_CHUNK_LINES = 120  # about 3,000 prompt tokens
FAKE_CONCURRENCY = 32  # four workers' worth of one server's 8 slots
FAKE_OUTPUT_TOKENS = 1024  # room for the chunk's findings: about 100 tokens each, 1 s to decode
REAL_CHUNKS = 12
REAL_PROMPT_LINES = 600  # about 5,900 tokens: three prefill steps of the CPU backend each
REAL_CONCURRENCY = REAL_CHUNKS
REAL_OUTPUT_TOKENS = 8
THREAD_AFTER_S = {"fake": 0.5, "real": 1.0}  # once the queue has formed
THREAD_OUTPUT_TOKENS = 16
ROUNDS = 3  # each figure is the median of this many runs
QUESTION = [{"role": "user", "content": "Why is eval() on request data a problem here?"}]


@dataclass(frozen=True)
class Run:
    thread_ttft_s: float
    review_wall_s: float


def real_chunk(index: int) -> ChunkRequest:
    """A chunk of its own: its first line differs from any earlier run's (the prefix cache)."""
    lines = f"{uuid.uuid4().hex}\n" + "\n".join(
        f"line {n} of chunk {index} of the release" for n in range(REAL_PROMPT_LINES)
    )
    return ChunkRequest(index, [{"role": "user", "content": f"{lines}\nSay OK."}], tool_schemas())


def run_once(
    base_url: str,
    priorities: bool,
    chunks: list[ChunkRequest],
    concurrency: int,
    thread_after_s: float,
    output_tokens: int,
) -> Run:
    settings = LLMSettings(
        base_url=base_url,
        priority_scheduling=priorities,
        prefill_tokens_per_review=0,
        max_output_tokens=output_tokens,
        enable_thinking=False,
        concurrency=concurrency,
    )
    review_priority = request_priority(Workload.INCREMENTAL_REVIEW)
    load = [
        ChunkRequest(c.chunk_index, c.messages, c.tools, priority=review_priority) for c in chunks
    ]
    with runner_for(settings) as review_runner, runner_for(settings) as thread_runner:
        started = time.monotonic()
        results: list[ChunkResult] = []
        review = threading.Thread(target=lambda: results.extend(review_runner.review_chunks(load)))
        review.start()
        time.sleep(thread_after_s)
        question = ModelRequest(
            QUESTION,
            [],
            MODE_CONTENT,
            True,
            THREAD_OUTPUT_TOKENS,
            0.0,
            priority=request_priority(Workload.THREAD_ANSWER),
        )
        answer = thread_runner.backend.execute(question)
        review.join()
        wall = time.monotonic() - started
    assert answer.ttft_s is not None
    assert len(results) == len(load) and not any(r.error for r in results), results[0].error
    return Run(answer.ttft_s, wall)


def compare(name: str, once: Callable[[bool], Run]) -> None:
    """Both ways, interleaved round by round (so that a change of the machine's load falls on
    both), then the medians."""
    print(name)
    runs: dict[bool, list[Run]] = {False: [], True: []}
    for _ in range(ROUNDS):
        for priorities in (False, True):
            runs[priorities].append(once(priorities))
    for priorities, done in runs.items():
        ttft = statistics.median(run.thread_ttft_s for run in done)
        wall = statistics.median(run.review_wall_s for run in done)
        label = "with priorities   " if priorities else "without priorities"
        print(
            f"  {label}: thread answer's first token {ttft:6.2f} s "
            f"(runs: {', '.join(f'{r.thread_ttft_s:.2f}' for r in done)}); "
            f"review {wall:6.2f} s (runs: {', '.join(f'{r.review_wall_s:.2f}' for r in done)})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", action="store_true", help="also the real CPU vLLM, small")
    parser.add_argument("--real-only", action="store_true", help="only the real CPU vLLM")
    args = parser.parse_args()
    if not args.real_only:
        with FakeVLLM(latency=FAKE_LATENCY, scheduling_policy="priority") as fake:
            chunks = [diff_request(i, FAKE_CHUNK_LINES, f"part{i}") for i in range(FAKE_CHUNKS)]
            compare(
                f"fake vLLM: {FAKE_CHUNKS}-chunk review, {FAKE_CONCURRENCY} at once, "
                f"{FAKE_LATENCY.max_num_seqs} slots",
                lambda on: run_once(
                    fake.base_url,
                    on,
                    chunks,
                    FAKE_CONCURRENCY,
                    THREAD_AFTER_S["fake"],
                    FAKE_OUTPUT_TOKENS,
                ),
            )
    if args.real or args.real_only:
        with tempfile.TemporaryDirectory() as scratch, real_server(Path(scratch)) as url:
            rounds = iter(range(1_000_000))
            compare(
                f"real CPU vLLM ({SERVED_MODEL}, scripted): {REAL_CHUNKS} chunks of "
                f"{REAL_PROMPT_LINES} distinct lines at once",
                lambda on: run_once(
                    url,
                    on,
                    # distinct prompts every run: none is read from the prefix cache
                    [real_chunk(next(rounds)) for _ in range(REAL_CHUNKS)],
                    REAL_CONCURRENCY,
                    THREAD_AFTER_S["real"],
                    REAL_OUTPUT_TOKENS,
                ),
            )


if __name__ == "__main__":
    main()
