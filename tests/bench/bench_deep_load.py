"""Benchmark: deep passes at the lowest priority while new MRs arrive (issue 37); prints figures.

Run::

    .venv/bin/python -m tests.bench.bench_deep_load

The fake vLLM schedules by priority as ``--scheduling-policy priority`` does (tests/fakes:
waiting requests lowest priority first; like vLLM V1 it never takes a slot from a running
request). Background deep passes (``Workload.BACKGROUND``, the lowest priority) are sent
without pause, ``--background-in-flight`` at once, while ``--mrs`` new MRs arrive one every
``--every-s`` seconds, each a first review (``Workload.FIRST_REVIEW``) of ``--mr-chunks``
chunks. A new MR's time to first comment is taken as the time from its arrival until every
chunk of its review is answered (the comments are posted after that; GitLab's time is the
same in both runs). The same arrivals on a quiet pool give the reference; the goal is a p95
within 10% of it.

Two loads are measured: background passes filling every slot and queueing past them
(``saturating``: a new MR's chunk waits for a running pass to end, as on vLLM, which preempts
only when the KV cache is full), and the same background sent through reviewbot's shared model
slots with ``--reserve`` of them kept from background work (``reserved``: the product's
``background_reserved_slots``, reviewbot.slots; default two MRs' chunks: two fresh MRs overlap
at this arrival rate).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from dataclasses import dataclass, field

from reviewbot.llm.factory import runner_for
from reviewbot.model import ChunkRequest, LLMSettings, request_priority
from reviewbot.slots import LocalSlots, ModelSlots
from reviewbot.states import Workload
from tests.fakes.vllm_server import FakeVLLM, LatencyModel
from tests.test_prefill import diff_request

FAKE_LATENCY = LatencyModel(
    ttft_base_s=0.05, prefill_tokens_per_s=20_000, decode_s_per_token=0.01, max_num_seqs=8
)
CHUNK_LINES = 60  # about 1,500 prompt tokens
OUTPUT_TOKENS = 1024
DEFAULT_MRS = 12
DEFAULT_EVERY_S = 1.5
DEFAULT_MR_CHUNKS = 2
DEFAULT_DEEP_PASSES = 3
RESERVED_MRS = 2  # the default reserve: this many MRs' chunks
SATURATING_FACTOR = 2  # background requests in flight per slot when saturating
P95 = 0.95
GOAL_RATIO = 1.10


@dataclass(frozen=True)
class BenchConfig:
    mrs: int = DEFAULT_MRS
    every_s: float = DEFAULT_EVERY_S
    mr_chunks: int = DEFAULT_MR_CHUNKS
    deep_passes: int = DEFAULT_DEEP_PASSES
    reserve: int | None = None  # slots the background leaves free (None: RESERVED_MRS MRs')
    latency: LatencyModel = field(default_factory=lambda: FAKE_LATENCY)


@dataclass(frozen=True)
class Figures:
    """New MRs' times to first comment (seconds, in arrival order) and the background passes
    answered meanwhile."""

    first_comment_s: list[float]
    background_answered: int

    def p(self, fraction: float) -> float:
        ordered = sorted(self.first_comment_s)
        rank = max(1, round(fraction * len(ordered) + 0.4999))  # nearest rank
        return ordered[min(rank, len(ordered)) - 1]


def _settings(base_url: str, concurrency: int) -> LLMSettings:
    return LLMSettings(
        base_url=base_url,
        priority_scheduling=True,
        prefill_tokens_per_review=0,
        max_output_tokens=OUTPUT_TOKENS,
        enable_thinking=False,
        concurrency=concurrency,
    )


def _chunks(name: str, count: int, workload: Workload) -> list[ChunkRequest]:
    priority = request_priority(workload)
    return [
        ChunkRequest(
            i,
            (c := diff_request(i, CHUNK_LINES, f"{name}_{i}")).messages,
            c.tools,
            priority=priority,
        )
        for i in range(count)
    ]


def _background(
    base_url: str, in_flight: int, passes: int, stop: threading.Event, slots: ModelSlots | None
) -> int:
    """Deep passes until ``stop``: ``passes`` requests of the same prompt per chunk (its later
    passes read the prefix cache), ``in_flight`` at once, a finished one replaced at once (so
    slots free up one by one, as under a steady load)."""
    answered = 0
    round_number = 0
    with runner_for(_settings(base_url, in_flight), slots=slots) as runner:
        while not stop.is_set():
            round_number += 1
            chunks = _chunks(
                f"deep{round_number}", max(1, in_flight // passes), Workload.BACKGROUND
            )
            load = [c for c in chunks for _ in range(passes)]
            answered += len(runner.review_chunks(load, concurrency=in_flight))
    return answered


def run_arrivals(
    base_url: str,
    config: BenchConfig,
    background_in_flight: int,
    slots: ModelSlots | None = None,
) -> Figures:
    """The new MRs' arrivals, with ``background_in_flight`` deep passes at once meanwhile (0:
    a quiet pool); ``slots``: reviewbot's shared model slots, which every request holds."""
    stop = threading.Event()
    answered: list[int] = []
    feeder = threading.Thread(
        target=lambda: answered.append(
            _background(base_url, background_in_flight, config.deep_passes, stop, slots)
        )
    )
    if background_in_flight:
        feeder.start()
        time.sleep(config.every_s)  # the queue forms first
    times: list[float] = [0.0] * config.mrs

    def review(number: int) -> None:
        chunks = _chunks(
            f"mr{number}_{time.monotonic_ns()}", config.mr_chunks, Workload.FIRST_REVIEW
        )
        started = time.monotonic()
        with runner_for(_settings(base_url, config.mr_chunks), slots=slots) as runner:
            results = runner.review_chunks(chunks)
        assert not any(result.error for result in results), results
        times[number] = time.monotonic() - started

    threads = []
    for number in range(config.mrs):
        thread = threading.Thread(target=review, args=(number,))
        thread.start()
        threads.append(thread)
        time.sleep(config.every_s)
    for thread in threads:
        thread.join()
    stop.set()
    if background_in_flight:
        feeder.join()
    return Figures(times, sum(answered))


def measure(config: BenchConfig) -> dict[str, Figures]:
    """Quiet, saturating and reserved, each on a fresh fake vLLM."""
    slots = config.latency.max_num_seqs
    saturating = SATURATING_FACTOR * slots
    loads: dict[str, tuple[int, ModelSlots | None]] = {
        "quiet": (0, None),
        "saturating": (saturating, None),
        "reserved": (saturating, LocalSlots(slots, reserved=_reserve(config, slots))),
    }
    figures = {}
    for name, (in_flight, shared) in loads.items():
        with FakeVLLM(latency=config.latency, scheduling_policy="priority") as fake:
            figures[name] = run_arrivals(fake.base_url, config, in_flight, shared)
    return figures


def _reserve(config: BenchConfig, slots: int) -> int:
    """The slots kept from background work (background always keeps one)."""
    return min(slots - 1, config.reserve or RESERVED_MRS * config.mr_chunks)


def report(config: BenchConfig, figures: dict[str, Figures]) -> list[str]:
    quiet = figures["quiet"]
    lines = [
        f"fake vLLM, {config.latency.max_num_seqs} slots, priority scheduling; {config.mrs} new "
        f"MRs of {config.mr_chunks} chunks, one every {config.every_s:g} s; deep passes "
        f"x{config.deep_passes} at priority {request_priority(Workload.BACKGROUND)}; "
        f"reserved: {_reserve(config, config.latency.max_num_seqs)} shared slots kept from "
        "background work",
    ]
    for name, found in figures.items():
        ratio = found.p(P95) / quiet.p(P95)
        verdict = (
            ""
            if name == "quiet"
            else (
                f", p95 ratio {ratio:.3f} ({'within' if ratio <= GOAL_RATIO else 'past'} "
                f"the {GOAL_RATIO:.2f} goal)"
            )
        )
        lines.append(
            f"  {name:<10}: first comment p50 {found.p(0.5):.2f} s, p95 {found.p(P95):.2f} s, "
            f"median {statistics.median(found.first_comment_s):.2f} s; "
            f"{found.background_answered} deep passes answered{verdict}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mrs", type=int, default=DEFAULT_MRS)
    parser.add_argument("--every-s", type=float, default=DEFAULT_EVERY_S)
    parser.add_argument("--mr-chunks", type=int, default=DEFAULT_MR_CHUNKS)
    parser.add_argument("--reserve", type=int, default=None, help="slots left to new MRs")
    args = parser.parse_args()
    config = BenchConfig(
        mrs=args.mrs, every_s=args.every_s, mr_chunks=args.mr_chunks, reserve=args.reserve
    )
    for line in report(config, measure(config)):
        print(line, flush=True)


if __name__ == "__main__":
    main()
