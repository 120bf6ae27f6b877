"""How a pool of model boxes and reviewbot workers serves a workload: a seeded discrete-event
simulation, in simulated time, of the reviews arriving at the busiest measured hour.

The model of a box (docs/capacity.md, "From your own history", says what it leaves out):

- at most ``max_num_seqs`` calls run on a box at once; the others wait, first come first served;
- a running call's prompt is prefilled by the box's one prefill engine, one prompt after
  another, at ``prefill_tokens_per_s`` for the tokens the prefix cache did not hold, plus
  ``fixed_first_token_s`` (API server, tokenizer, scheduling);
- then it decodes its completion at ``decode_tokens_per_s / (1 + decode_slowdown x (k - 1))``,
  k the calls decoding on that box when it starts (the per-request rate the H200 bursts
  measured falls so with concurrency);
- calls go to the box with the fewest running calls (vllm-router's least-loaded policy).

A review holds one worker from its start to its end; its chunks run side by side, at most
``chunk_concurrency`` at once, and each chunk's calls one after another. Its first comment is
posted when its last chunk is answered (reviewbot publishes a review at once), so the time to
first comment is the wait for a worker plus the review; GitLab's own time is not modelled.

Owns: box profiles, the simulation, what one box sustains and what a target needs. Must not:
read the store or print.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from reviewbot.ops.workload import ReviewShape, Workload, percentile

__all__ = [
    "BOX_PROFILES",
    "BoxProfile",
    "PoolPlan",
    "PoolResult",
    "plan_pool",
    "simulate",
    "sustained_per_hour",
]

SECONDS_PER_HOUR = 3600.0
DEFAULT_CHUNK_CONCURRENCY = 4  # reviewbot's per-review model requests at once (llm_concurrency)
SIMULATED_HOURS = 8  # the busiest hour's rate, held this long: enough reviews for a p95
MAX_SIMULATED_REVIEWS = 20_000  # past this, fewer hours are simulated (the plan says how many)
SATURATION_REVIEWS = 240  # reviews queued at once to measure what one box sustains
MIDDLE = (0.1, 0.9)  # the share of completions a sustained rate is measured between
MAX_BOXES = 16
SEED = 20261204


@dataclass(frozen=True)
class BoxProfile:
    """One model box as the simulation sees it, and where its figures come from."""

    name: str
    gpus: int
    prefill_tokens_per_s: float
    fixed_first_token_s: float
    decode_tokens_per_s: float
    decode_slowdown: float
    max_num_seqs: int
    source: str

    def describe(self) -> str:
        return (
            f"{self.name} ({self.gpus} GPU(s); prefill {self.prefill_tokens_per_s:,.0f} tok/s + "
            f"{self.fixed_first_token_s:g} s; decode {self.decode_tokens_per_s:g} tok/s alone, "
            f"/(1 + {self.decode_slowdown:g} x (k-1)) with k decoding; {self.max_num_seqs} "
            f"sequences; {self.source})"
        )


# H200: docs/capacity.md, "Concurrent reviews on one H200" (2026-12-04, the shipped FP8 profile,
# dummy weights, the scripted model): prefill under load fitted to 16 reviews of 2,000-6,000
# lines sent at once (65.5 s makespan; a lone 57K prompt is prefilled at 37,344 tokens/s, but
# concurrent prompts share the engine with decode); checked on the burst of 32 (131 s predicted,
# 151 s measured; p95 last answer 120 s against 123 s). Fixed first-token cost 0.225 s and decode
# 146 tok/s alone, 115 at 8, 62 at 32 ("Measured on one H200", 2026-12-02: fitted
# 1 + 0.0386 x (k - 1)); 32 sequences.
# T10 x4: the seed team's published figures (first token 0.78 s at 32K with tensor parallel 4:
# 42,010 tokens/s alone; 150-180 tok/s decode), with the H200's loaded-to-lone prefill ratio
# (19,400 / 37,344) and its decode slowdown applied: assumed, not measured on T10s.
LOADED_PREFILL_SHARE = 19_400 / 37_344
BOX_PROFILES = {
    "h200": BoxProfile(
        "h200", 1, 19_400, 0.225, 146, 0.0386, 32,
        "fitted to 16 concurrent reviews on one H200, 2026-12-04 (docs/capacity.md)",
    ),
    "t10x4": BoxProfile(
        "t10x4", 4, 32_768 / 0.78 * LOADED_PREFILL_SHARE, 0.0, 165, 0.0386, 16,
        "the seed's published figures, with the H200's prefill-under-load share and decode "
        "slowdown assumed",
    ),
}  # fmt: skip


@dataclass
class _Box:
    running: int = 0
    decoding: int = 0
    prefill_free_at: float = 0.0
    waiting: deque[tuple[int, int]] = field(default_factory=deque)  # (review, chunk)


@dataclass
class _Review:
    shape: ReviewShape
    arrived: float
    started: float | None = None
    next_chunk: int = 0
    chunks_done: int = 0
    call_of_chunk: list[int] = field(default_factory=list)
    box_of_chunk: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class PoolResult:
    """One simulated run: each review's time to first comment, when each finished."""

    first_comment_s: tuple[float, ...]
    finished_at: tuple[float, ...]

    def p(self, value: int) -> float:
        return percentile(self.first_comment_s, value)


class _Simulation:
    def __init__(
        self, profile: BoxProfile, boxes: int, workers: int, chunk_concurrency: int
    ) -> None:
        self.profile = profile
        self.boxes = [_Box() for _ in range(boxes)]
        self.free_workers = workers
        self.chunk_concurrency = chunk_concurrency
        self.reviews: list[_Review] = []
        self.queue: deque[int] = deque()
        self.events: list[tuple[float, int, str, tuple[Any, ...]]] = []
        self.order = itertools.count()
        self.first_comment: list[float] = []
        self.finished: list[float] = []

    def at(self, when: float, kind: str, *args: Any) -> None:
        heapq.heappush(self.events, (when, next(self.order), kind, args))

    def run(self, arrivals: Sequence[tuple[float, ReviewShape]]) -> PoolResult:
        for when, shape in arrivals:
            self.at(when, "arrive", shape)
        while self.events:
            now, _, kind, args = heapq.heappop(self.events)
            getattr(self, f"_{kind}")(now, *args)
        return PoolResult(tuple(self.first_comment), tuple(self.finished))

    def _arrive(self, now: float, shape: ReviewShape) -> None:
        self.reviews.append(_Review(shape, now))
        self.queue.append(len(self.reviews) - 1)
        self._take_work(now)

    def _take_work(self, now: float) -> None:
        while self.free_workers and self.queue:
            self.free_workers -= 1
            index = self.queue.popleft()
            review = self.reviews[index]
            review.started = now
            review.call_of_chunk = [0] * len(review.shape.chunks)
            review.box_of_chunk = [0] * len(review.shape.chunks)
            if not review.shape.chunks:
                self._review_done(now, index)
                continue
            for _ in range(min(self.chunk_concurrency, len(review.shape.chunks))):
                self._start_chunk(now, index)

    def _start_chunk(self, now: float, index: int) -> None:
        review = self.reviews[index]
        chunk = review.next_chunk
        review.next_chunk += 1
        self._send(now, index, chunk)

    def _send(self, now: float, index: int, chunk: int) -> None:
        number = min(range(len(self.boxes)), key=lambda b: (self.boxes[b].running, b))
        box = self.boxes[number]
        self.reviews[index].box_of_chunk[chunk] = number
        if box.running >= self.profile.max_num_seqs:
            box.waiting.append((index, chunk))
            return
        self._admit(now, number, index, chunk)

    def _admit(self, now: float, number: int, index: int, chunk: int) -> None:
        box, profile = self.boxes[number], self.profile
        review = self.reviews[index]
        call = review.shape.chunks[chunk][review.call_of_chunk[chunk]]
        box.running += 1
        start = max(now, box.prefill_free_at)
        box.prefill_free_at = start + call.uncached_tokens / profile.prefill_tokens_per_s
        first_token = box.prefill_free_at + profile.fixed_first_token_s
        self.at(first_token, "decode", number, index, chunk)

    def _decode(self, now: float, number: int, index: int, chunk: int) -> None:
        box, profile = self.boxes[number], self.profile
        review = self.reviews[index]
        call = review.shape.chunks[chunk][review.call_of_chunk[chunk]]
        box.decoding += 1
        rate = profile.decode_tokens_per_s / (1 + profile.decode_slowdown * (box.decoding - 1))
        self.at(now + call.completion_tokens / rate, "answered", number, index, chunk)

    def _answered(self, now: float, number: int, index: int, chunk: int) -> None:
        box = self.boxes[number]
        box.running -= 1
        box.decoding -= 1
        if box.waiting and box.running < self.profile.max_num_seqs:
            self._admit(now, number, *box.waiting.popleft())
        review = self.reviews[index]
        review.call_of_chunk[chunk] += 1
        if review.call_of_chunk[chunk] < len(review.shape.chunks[chunk]):
            self._send(now, index, chunk)
            return
        review.chunks_done += 1
        if review.next_chunk < len(review.shape.chunks):
            self._start_chunk(now, index)
        elif review.chunks_done == len(review.shape.chunks):
            self._review_done(now, index)

    def _review_done(self, now: float, index: int) -> None:
        self.first_comment.append(now - self.reviews[index].arrived)
        self.finished.append(now)
        self.free_workers += 1
        self._take_work(now)


def simulate(
    arrivals: Sequence[tuple[float, ReviewShape]],
    profile: BoxProfile,
    boxes: int,
    workers: int,
    chunk_concurrency: int = DEFAULT_CHUNK_CONCURRENCY,
) -> PoolResult:
    """The pool serving ``arrivals`` ((seconds, review) each) until every review is done."""
    return _Simulation(profile, boxes, workers, chunk_concurrency).run(arrivals)


def poisson_arrivals(
    workload: Workload, per_hour: float, hours: float, rng: random.Random
) -> list[tuple[float, ReviewShape]]:
    """Reviews drawn from ``workload`` arriving at ``per_hour`` on average (exponential gaps)."""
    arrivals, now = [], 0.0
    while per_hour > 0:
        now += rng.expovariate(per_hour / SECONDS_PER_HOUR)
        if now >= hours * SECONDS_PER_HOUR:
            break
        arrivals.append((now, rng.choice(workload.reviews)))
    return arrivals


def sustained_per_hour(
    workload: Workload, profile: BoxProfile, chunk_concurrency: int = DEFAULT_CHUNK_CONCURRENCY
) -> float:
    """Reviews per hour one box finishes with a queue that never empties (as many workers as
    it has sequences), measured between the 10th and the 90th percent of completions."""
    rng = random.Random(SEED)
    backlog = [(0.0, rng.choice(workload.reviews)) for _ in range(SATURATION_REVIEWS)]
    result = simulate(backlog, profile, 1, profile.max_num_seqs, chunk_concurrency)
    done = sorted(result.finished_at)
    first, last = (int(share * len(done)) for share in MIDDLE)
    span = done[last] - done[first]
    return (last - first) / span * SECONDS_PER_HOUR if span > 0 else float("inf")


@dataclass(frozen=True)
class PoolRow:
    boxes: int
    workers: int
    reviews: int
    p50_s: float
    p95_s: float


@dataclass(frozen=True)
class PoolPlan:
    """What the workload needs of the pool, and every input it was computed from."""

    per_hour: float  # the busiest hour's arrival rate
    sustained_per_box: float
    gpu_hours_per_1000: float
    rows: tuple[PoolRow, ...]
    target_s: float | None
    boxes_needed: int | None
    workers_needed: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "busiest_hour_reviews": self.per_hour,
            "sustained_reviews_per_hour_one_box": self.sustained_per_box,
            "gpu_hours_per_1000_reviews": self.gpu_hours_per_1000,
            "by_boxes": [row.__dict__ for row in self.rows],
            "target_p95_first_comment_s": self.target_s,
            "boxes_needed": self.boxes_needed,
            "workers_needed": self.workers_needed,
        }


def simulated_hours(per_hour: float) -> float:
    """The hours the busiest hour's rate is held: ``SIMULATED_HOURS``, fewer when that would
    be more than ``MAX_SIMULATED_REVIEWS`` reviews."""
    if per_hour <= 0:
        return SIMULATED_HOURS
    return min(SIMULATED_HOURS, MAX_SIMULATED_REVIEWS / per_hour)


def _row(workload: Workload, profile: BoxProfile, boxes: int, workers: int, per_hour: float,
         concurrency: int) -> PoolRow:  # fmt: skip
    hours = simulated_hours(per_hour)
    arrivals = poisson_arrivals(workload, per_hour, hours, random.Random(SEED))
    result = simulate(arrivals, profile, boxes, workers, concurrency)
    return PoolRow(boxes, workers, len(arrivals), result.p(50), result.p(95))


def plan_pool(
    workload: Workload,
    profile: BoxProfile,
    *,
    max_boxes: int = 4,
    workers_per_box: int | None = None,
    target_s: float | None = None,
    chunk_concurrency: int = DEFAULT_CHUNK_CONCURRENCY,
) -> PoolPlan:
    """p50/p95 time to first comment at the busiest hour for 1..``max_boxes`` boxes (each with
    ``workers_per_box`` workers; default: as many as it has sequences), what one box sustains,
    GPU-hours per 1,000 reviews, and the fewest boxes, then workers, that meet ``target_s``."""
    per_hour = workload.busiest_hour().reviews_per_hour
    per_box = workers_per_box or profile.max_num_seqs
    rows = [
        _row(workload, profile, boxes, boxes * per_box, per_hour, chunk_concurrency)
        for boxes in range(1, max_boxes + 1)
    ]
    sustained = sustained_per_hour(workload, profile, chunk_concurrency)
    boxes_needed = workers_needed = None
    if target_s is not None:
        boxes_needed = _fewest_boxes(workload, profile, per_hour, target_s, chunk_concurrency)
        if boxes_needed is not None:
            workers_needed = _fewest_workers(
                workload, profile, boxes_needed, per_hour, target_s, chunk_concurrency
            )
    return PoolPlan(
        per_hour,
        sustained,
        1000 / sustained * profile.gpus if sustained else float("inf"),
        tuple(rows),
        target_s,
        boxes_needed,
        workers_needed,
    )


def _fewest_boxes(workload: Workload, profile: BoxProfile, per_hour: float, target_s: float,
                  concurrency: int) -> int | None:  # fmt: skip
    for boxes in range(1, MAX_BOXES + 1):
        workers = boxes * profile.max_num_seqs
        if _row(workload, profile, boxes, workers, per_hour, concurrency).p95_s <= target_s:
            return boxes
    return None


def _fewest_workers(workload: Workload, profile: BoxProfile, boxes: int, per_hour: float,
                    target_s: float, concurrency: int) -> int:  # fmt: skip
    """Searched by halves: with more workers a review waits less for one, so the p95 falls
    (more reviews at once also share the boxes, which this search assumes weighs less)."""
    low, high = 1, boxes * profile.max_num_seqs
    while low < high:
        middle = (low + high) // 2
        if _row(workload, profile, boxes, middle, per_hour, concurrency).p95_s <= target_s:
            high = middle
        else:
            low = middle + 1
    return low
