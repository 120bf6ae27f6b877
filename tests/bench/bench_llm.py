"""Benchmark of reviewbot.llm against the fake vLLM's latency model; prints figures.

Run: ``.venv/bin/python -m tests.bench.bench_llm``

A 20-chunk review (a shared ~3,000-token prefix, a ~2,500-token diff per chunk) against a fake
with ``LatencyModel(ttft_base_s=0.3, prefill_tokens_per_s=20000, decode_s_per_token=0.01,
max_num_seqs=8)``, once with ``warm_prefix`` on and once off. The fake runs in its own process
(a fresh one per run, so the prefix cache starts empty), so the CPU time measured here is the
bot's own. The ideal time is the latency model's best schedule with zero client overhead: the
better of "all at once" (the first wave prefills the shared prefix in every slot) and "first
alone until its first token" (every later request finds the prefix cached); both FCFS over 8
slots.
"""

from __future__ import annotations

import heapq
import multiprocessing
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from reviewbot.llm.factory import runner_for
from reviewbot.model import ChunkRequest, ChunkResult, LLMSettings
from tests.fakes.vllm_server import (
    FakeVLLM,
    LatencyModel,
)

LATENCY = LatencyModel(
    ttft_base_s=0.3, prefill_tokens_per_s=20000, decode_s_per_token=0.01, max_num_seqs=8
)
CHUNKS = 20
PREFIX_SENTENCES = 95  # about 3,000 tokens with the tool schema
DIFF_LINES = 90  # about 2,500 tokens
RISKY_EVERY = 45  # two findings per chunk
TARGET_RATIO = 1.10
TARGET_CPU_MS = 20.0
MS_PER_S = 1000.0


def _serve(latency: LatencyModel, pipe: Connection) -> None:
    """Child process: run a fake until the parent says stop, then send back its stats."""
    with FakeVLLM(latency=latency) as fake:
        pipe.send(fake.base_url)
        pipe.recv()
        stats = fake.stats
        pipe.send({"peak_in_flight": stats.peak_in_flight, "hit_ratio": stats.cache_hit_ratio})


def _tools() -> list[dict[str, Any]]:
    try:
        from reviewbot.prompts import tool_schemas
    except ImportError:
        from tests.test_llm import REPORT_FINDING_TOOL

        return [REPORT_FINDING_TOOL]
    return tool_schemas()


def _requests(tools: list[dict[str, Any]]) -> list[ChunkRequest]:
    system = " ".join(
        f"Rule {i}: review the change for correctness, security and error handling "
        f"before style; section {i} of the merge request guide applies."
        for i in range(PREFIX_SENTENCES)
    )
    requests = []
    for index in range(CHUNKS):
        lines = []
        for number in range(1, DIFF_LINES + 1):
            text = f"    value_{index}_{number} = compute(item_{number}, limit={number * 7})"
            if number % RISKY_EVERY == 0:
                text = f"    result_{number} = eval(payload_{index})"
            lines.append(f"+ {number:>3} | {text}")
        diff = (
            f'<file path="src/module_{index}.py" status="modified">\n'
            + "\n".join(lines)
            + "\n</file>\n"
        )
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": f"Review this chunk.\n{diff}"},
        ]
        requests.append(ChunkRequest(index, messages, tools))
    return requests


@dataclass(frozen=True)
class RunFigures:
    wall_s: float
    cpu_ms_per_chunk: float
    results: list[ChunkResult]
    client_peak: int
    server: dict[str, Any]


def _run(requests: Sequence[ChunkRequest], warm_prefix: bool) -> RunFigures:
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_serve, args=(LATENCY, child))
    process.start()
    try:
        base_url = parent.recv()
        settings = LLMSettings(base_url=base_url, warm_prefix=warm_prefix, concurrency=8)
        with runner_for(settings) as client:
            client.server_info()
            cpu_start, wall_start = time.process_time(), time.perf_counter()
            results = client.review_chunks(requests)
            wall = time.perf_counter() - wall_start
            cpu = time.process_time() - cpu_start
            peak = client.peak_in_flight
        parent.send("stop")
        server = parent.recv()
    finally:
        process.join()
    return RunFigures(wall, cpu * MS_PER_S / len(requests), results, peak, server)


def _makespan(durations: Sequence[float], starts: Sequence[float], slots: int) -> float:
    """FCFS list scheduling: request i starts at max(its release, first free slot)."""
    free = [0.0] * slots
    end = 0.0
    for duration, release in zip(durations, starts, strict=True):
        slot_free = heapq.heappop(free)
        finish = max(slot_free, release) + duration
        heapq.heappush(free, finish)
        end = max(end, finish)
    return end


def ideal_time(
    requests: Sequence[ChunkRequest], results: Sequence[ChunkResult], model: LatencyModel
) -> float:
    """The latency model's best wall time for these prompts and outputs."""
    records = [result.records[-1] for result in results]
    shared = max(record.cached_tokens or 0 for record in records)

    def duration(prompt: int, uncached: int, completion: int) -> float:
        return (
            model.ttft_base_s
            + uncached / model.prefill_tokens_per_s
            + completion * model.decode_s_per_token
        )

    slots = model.max_num_seqs
    cold = [
        duration(
            r.prompt_tokens,
            r.prompt_tokens if i < slots else r.prompt_tokens - shared,
            r.completion_tokens,
        )
        for i, r in enumerate(records)
    ]
    all_at_once = _makespan(cold, [0.0] * len(cold), slots)
    first = records[0]
    first_ttft = model.ttft_base_s + first.prompt_tokens / model.prefill_tokens_per_s
    warm = [duration(first.prompt_tokens, first.prompt_tokens, first.completion_tokens)]
    warm += [
        duration(r.prompt_tokens, r.prompt_tokens - shared, r.completion_tokens)
        for r in records[1:]
    ]
    first_alone = _makespan(warm, [0.0] + [first_ttft] * (len(warm) - 1), slots)
    return min(all_at_once, first_alone)


def _report(label: str, requests: Sequence[ChunkRequest], figures: RunFigures) -> None:
    records = [r.records[-1] for r in figures.results]
    prompt = sum(r.prompt_tokens for r in records)
    cached = sum(r.cached_tokens or 0 for r in records)
    ideal = ideal_time(requests, figures.results, LATENCY)
    ratio = figures.wall_s / ideal
    ttfts = sorted(r.ttft_ms or 0.0 for r in records)
    errors = sum(r.error is not None for r in figures.results)
    findings = sum(len(r.calls) for r in figures.results)
    print(f"--- warm_prefix={label}")
    print(f"wall time            {figures.wall_s:7.2f} s")
    print(f"ideal (latency model){ideal:7.2f} s")
    print(f"ratio                {ratio:7.3f}   (target <= {TARGET_RATIO})")
    print(f"client CPU per chunk {figures.cpu_ms_per_chunk:7.2f} ms (target < {TARGET_CPU_MS})")
    print(
        f"prefix-cache hits    {cached / prompt:7.1%}   (fake: {figures.server['hit_ratio']:.1%})"
    )
    print(
        f"peak in flight       client {figures.client_peak}, fake "
        f"{figures.server['peak_in_flight']}"
    )
    print(f"TTFT median / max    {ttfts[len(ttfts) // 2]:.0f} / {ttfts[-1]:.0f} ms")
    print(
        f"prompt tokens/chunk  {prompt / len(records):.0f}, shared prefix "
        f"{max(r.cached_tokens or 0 for r in records)}"
    )
    print(f"findings {findings}, errors {errors}")


def main() -> None:
    requests = _requests(_tools())
    for warm_prefix in (True, False):
        _report("on" if warm_prefix else "off", requests, _run(requests, warm_prefix))


if __name__ == "__main__":
    main()
