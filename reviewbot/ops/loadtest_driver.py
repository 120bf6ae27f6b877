"""The sending half of ``reviewbot loadtest``: the prompts to the model server, timed.

Requests go through the configured :class:`~reviewbot.model.ModelBackend` (the transport
reviews use), streamed, in its first output mode (tool calls), one HTTP request each and never
retried: a failure is an error of the run, which the error-rate SLO judges.

Two ways to load the server:

- closed loop (``concurrency``): that many requests in flight; each one that ends is replaced
  at once. TTFT runs from sending.
- open loop (``rate``): requests arrive as a Poisson process of that mean rate (exponential
  gaps, seeded, so a run can be repeated), whether or not the earlier ones were answered; at
  most :data:`MAX_IN_FLIGHT` are in flight, and a request that waits for a place waits on its
  own clock: TTFT runs from its arrival, so an overloaded server cannot hide its queue.

A run ends after ``requests`` requests or once ``duration_s`` has passed (no new request is
sent then; those in flight finish and count), whichever comes first.

Owns: the two schedules, sending each request once and timing it into a ``Sample``. Must not: retry
a request, judge the figures (`reviewbot.ops.loadtest` does), or print.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from reviewbot.model import LLMError, ModelBackend, ModelRequest, request_priority
from reviewbot.ops.loadtest import LoadPrompt, Sample
from reviewbot.states import Workload

__all__ = ["MAX_IN_FLIGHT", "LoadRun", "Schedule", "run_load"]

# httpx's default connection pool holds 100 connections: more requests at once would wait for
# one inside the client and blur what is measured.
MAX_IN_FLIGHT = 100
LOADTEST_SESSION_PREFIX = "loadtest/"  # + the replayed review's number: its affinity key


@dataclass(frozen=True)
class Schedule:
    """Closed loop (``concurrency``) or open loop (``rate_per_s``), and when to stop."""

    concurrency: int | None = None
    rate_per_s: float | None = None
    requests: int | None = None
    duration_s: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate_per_s is None):
            raise ValueError("a schedule is either closed loop (concurrency) or open (rate)")
        if self.requests is None and self.duration_s is None:
            raise ValueError("a schedule needs a number of requests or a duration")

    @property
    def open_loop(self) -> bool:
        return self.rate_per_s is not None

    def describe(self) -> dict[str, object]:
        if self.open_loop:
            loop = {"mode": "open", "rate_per_s": self.rate_per_s, "arrivals": "poisson"}
        else:
            loop = {"mode": "closed", "concurrency": self.concurrency}
        return {**loop, "requests": self.requests, "duration_s": self.duration_s}


@dataclass(frozen=True)
class LoadRun:
    samples: list[Sample]
    seconds: float


class _Queue:
    """Requests sent and still waiting for their first token: a new one's queue position."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting = 0

    def join(self) -> int:
        with self._lock:
            self._waiting += 1
            return self._waiting

    def leave(self) -> None:
        with self._lock:
            self._waiting -= 1


def run_load(
    backend: ModelBackend,
    prompts: Iterator[LoadPrompt],
    tools: list[dict],
    schedule: Schedule,
    *,
    max_tokens: int,
    temperature: float | None,
    on_sample: Callable[[Sample], None] | None = None,
) -> LoadRun:
    """Send ``prompts`` as ``schedule`` says; every request's :class:`Sample`, as they end."""
    queue = _Queue()
    mode = backend.output_modes[0]
    lock = threading.Lock()
    samples: list[Sample] = []
    sent = 0
    started = time.monotonic()
    ends_at = started + schedule.duration_s if schedule.duration_s is not None else None

    def next_prompt() -> LoadPrompt | None:
        """The next prompt, or None when the run has sent all it should."""
        nonlocal sent
        with lock:
            if schedule.requests is not None and sent >= schedule.requests:
                return None
            if ends_at is not None and time.monotonic() >= ends_at:
                return None
            prompt = next(prompts, None)
            sent += prompt is not None
            return prompt

    def send(prompt: LoadPrompt, due: float) -> None:
        sample = _send(backend, prompt, tools, mode, max_tokens, temperature, queue, due)
        with lock:
            samples.append(sample)
        if on_sample is not None:
            on_sample(sample)

    if schedule.open_loop:
        assert schedule.rate_per_s is not None
        _open_loop(next_prompt, send, schedule.rate_per_s, schedule.seed, started, ends_at)
    else:
        assert schedule.concurrency is not None
        _closed_loop(next_prompt, send, schedule.concurrency)
    return LoadRun(samples, time.monotonic() - started)


def _closed_loop(
    next_prompt: Callable[[], LoadPrompt | None],
    send: Callable[[LoadPrompt, float], None],
    concurrency: int,
) -> None:
    def worker() -> None:
        while (prompt := next_prompt()) is not None:
            send(prompt, time.monotonic())

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="load") as pool:
        for future in [pool.submit(worker) for _ in range(concurrency)]:
            future.result()


def _open_loop(
    next_prompt: Callable[[], LoadPrompt | None],
    send: Callable[[LoadPrompt, float], None],
    rate_per_s: float,
    seed: int,
    started: float,
    ends_at: float | None,
) -> None:
    """Send at Poisson arrivals; never sleep past ``ends_at`` waiting for the next one."""
    arrivals = random.Random(seed)
    due = started
    with ThreadPoolExecutor(max_workers=MAX_IN_FLIGHT, thread_name_prefix="load") as pool:
        futures = []
        while True:
            due += arrivals.expovariate(rate_per_s)
            delay = (due if ends_at is None else min(due, ends_at)) - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            prompt = next_prompt()
            if prompt is None:
                break
            futures.append(pool.submit(send, prompt, due))
        for future in futures:
            future.result()


def _send(
    backend: ModelBackend,
    prompt: LoadPrompt,
    tools: list[dict],
    mode: str,
    max_tokens: int,
    temperature: float | None,
    queue: _Queue,
    due: float,
) -> Sample:
    # Each replayed review has its own session key, as each MR does: behind vllm-router's
    # consistent_hash the load spreads over the boxes as reviews would (docs/several-boxes.md).
    session = f"{LOADTEST_SESSION_PREFIX}{prompt.review}"
    request = ModelRequest(
        prompt.messages,
        tools,
        mode,
        True,
        max_tokens,
        temperature,
        session,
        request_priority(Workload.LOAD_TEST),  # never ahead of the reviews it shares a box with
    )
    position = queue.join()
    first_output: list[float] = []

    def on_first_token() -> None:
        first_output.append(time.monotonic())
        queue.leave()

    try:
        answer = backend.execute(request, on_first_token=on_first_token)
    except LLMError as error:
        if not first_output:
            queue.leave()
        return Sample(prompt.review, position, None, time.monotonic() - due, error=str(error))
    if not first_output:
        queue.leave()
    ended = time.monotonic()
    return Sample(
        review=prompt.review,
        queue_position=position,
        ttft_s=first_output[0] - due if first_output else None,
        e2e_s=ended - due,
        prompt_tokens=answer.prompt_tokens,
        cached_tokens=answer.cached_tokens,
        completion_tokens=answer.completion_tokens,
        finish_reason=answer.finish_reason,
    )
