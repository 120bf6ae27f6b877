"""``reviewbot loadtest``: the prompts it replays, the figures it reports, the SLOs it judges.

Pure functions. The prompts are the bot's real review prompts: each input diff is cut into
chunks by :func:`reviewbot.chunking.plan` with the server's budget and rendered by
:func:`reviewbot.prompts.render_messages`, exactly as a review of that diff would send them.
Inputs are replayed in passes until the run ends; every pass is a new "merge request" (its
title names the pass), so the chunks of one review share their tools, system prompt and MR
context as in production, and a replayed diff is not served whole from the prefix cache.

Synthetic inputs (:func:`synthetic_input`) are a new Python file of a chosen size in tokens,
with a few lines any reviewer should flag, so that answers carry tool calls.

Sending the prompts and timing the answers is :mod:`reviewbot.ops.loadtest_driver`'s job;
this module turns the samples it measured into a :class:`LoadReport`.

Owns: the load's prompts (the bot's real ones), the synthetic input, the figures and the SLO
verdicts. Must not: send a request or read the clock (the driver does both), or print.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reviewbot.chunking import Budget, Chunk, Plan, PlanOptions, plan
from reviewbot.diff import FileDiff, parse_git_diff
from reviewbot.exclusions import skip_reason
from reviewbot.ops.deep_capacity import DeepCapacity, deep_capacity
from reviewbot.prompts import ReviewContext, file_summaries, render_messages
from reviewbot.tokens import TokenCounter

__all__ = [
    "SLO",
    "LoadPrompt",
    "LoadReport",
    "ReviewInput",
    "Sample",
    "percentile",
    "planned_reviews",
    "prompt_cycle",
    "summarize",
    "synthetic_input",
]

MS_PER_S = 1000.0
SECONDS_PER_DAY = 86_400
# Decode speed needs at least two output tokens: the first one's time is the TTFT.
MIN_DECODE_TOKENS = 2
DEFAULT_SLO_TTFT_P95_MS = 800.0
DEFAULT_SLO_DECODE_TOKENS_PER_S = 150.0
DEFAULT_SLO_ERROR_RATE = 0.001
PERCENTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99}

# Synthetic diffs: one new file of small functions, every FLAGGED_EVERY-th with a comparison to
# None that any reviewer (and the fake's) reports.
SYNTHETIC_DIR = "loadtest"
FLAGGED_EVERY = 8
SIZING_ROUNDS = 4  # the line count converges to the token target in two or three
SIZING_TOLERANCE = 0.02
# Tokens of one line rendered in a diff (a first guess; sizing measures the real figure).
TOKENS_PER_LINE_GUESS = 10
SAVE_SLOTS = 97  # varies the numbers in the code a little
UNLIMITED_BUDGET = Budget(max_model_len=10**9)


# ---------------------------------------------------------------------------------------------
# Inputs and prompts


@dataclass(frozen=True)
class ReviewInput:
    """One diff to replay as a review: its files, head contents (context lines), a label."""

    label: str
    files: list[FileDiff]
    contents: Mapping[str, str] = field(default_factory=dict)

    def context(self, replay: int, options: PlanOptions) -> ReviewContext:
        """The MR context of pass ``replay``: a new title each pass, like a new MR."""
        rules = options.exclusions
        skipped = {f.path: reason for f in self.files if (reason := skip_reason(f, rules))}
        title = self.label if replay == 0 else f"{self.label} (load test pass {replay + 1})"
        return ReviewContext(title=title, files=file_summaries(self.files, skipped))


@dataclass(frozen=True)
class LoadPrompt:
    """One request of the load: chunk ``chunk`` of review number ``review``."""

    review: int
    chunk: int
    messages: list[dict[str, str]]


def planned_reviews(
    inputs: Sequence[ReviewInput],
    budgets: Sequence[Budget],
    counter: TokenCounter,
    options: PlanOptions,
) -> list[tuple[ReviewInput, Plan]]:
    """Each input cut into chunks with its budget; inputs with nothing to review are dropped."""
    planned = []
    for review_input, budget in zip(inputs, budgets, strict=True):
        review_plan = plan(
            review_input.files, budget, counter, contents=review_input.contents, options=options
        )
        if review_plan.chunks:
            planned.append((review_input, review_plan))
    return planned


def prompt_cycle(
    planned: Sequence[tuple[ReviewInput, Plan]], options: PlanOptions
) -> Iterator[LoadPrompt]:
    """The chunks of every input, in order, pass after pass, without end."""
    if not planned:
        return
    review = 0
    for replay in itertools.count():
        for review_input, review_plan in planned:
            context = review_input.context(replay, options)
            chunks: Sequence[Chunk] = review_plan.chunks
            for chunk in chunks:
                messages = render_messages(context, chunk, part=chunk.index + 1, parts=len(chunks))
                yield LoadPrompt(review, chunk.index, messages)
            review += 1


def synthetic_input(tokens: int, counter: TokenCounter, seed: int = 0) -> ReviewInput:
    """A new Python file whose diff, as the chunk planner renders it, is about ``tokens``
    tokens long (within 2%, or a line for the smallest)."""
    line_count = max(1, tokens // TOKENS_PER_LINE_GUESS)
    files = _synthetic_files(line_count, seed)
    for _ in range(SIZING_ROUNDS):
        measured = sum(c.tokens for c in plan(files, UNLIMITED_BUDGET, counter).chunks)
        if abs(measured - tokens) <= SIZING_TOLERANCE * tokens:
            break
        line_count = max(1, round(line_count * tokens / measured))
        files = _synthetic_files(line_count, seed)
    return ReviewInput(f"synthetic diff of {tokens} tokens", files)


def _synthetic_lines(seed: int) -> Iterator[str]:
    """Functions of a request handler, every FLAGGED_EVERY-th with a comparison to None."""
    for block in itertools.count():
        comparison = "== None" if block % FLAGGED_EVERY == FLAGGED_EVERY - 1 else "is None"
        yield f"def handler_{seed}_{block}(request, store):"
        yield f'    value = request.get("field_{block}")'
        yield f"    if value {comparison}:"
        yield f'        raise ValueError("field_{block} is required")'
        yield f"    return store.save({block % SAVE_SLOTS}, value)"
        yield ""


def _synthetic_files(line_count: int, seed: int) -> list[FileDiff]:
    lines = list(itertools.islice(_synthetic_lines(seed), line_count))
    path = f"{SYNTHETIC_DIR}/synthetic_{seed}.py"
    body = "".join(f"+{line}\n" for line in lines)
    diff = (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )
    return parse_git_diff(diff)


# ---------------------------------------------------------------------------------------------
# Figures


@dataclass(frozen=True)
class Sample:
    """What one request measured, on the client. ``ttft_s`` runs from when the request was
    due (sent, closed loop; its arrival time, open loop) to the first streamed byte of
    content, reasoning or a tool call; ``queue_position`` is 1 + the requests that were
    waiting for their first token when it was sent."""

    review: int
    queue_position: int
    ttft_s: float | None
    e2e_s: float
    prompt_tokens: int = 0
    cached_tokens: int | None = None
    completion_tokens: int = 0
    finish_reason: str | None = None
    error: str | None = None

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Output tokens after the first, per second after the first token."""
        if self.ttft_s is None or self.completion_tokens < MIN_DECODE_TOKENS:
            return None
        decoding_s = self.e2e_s - self.ttft_s
        return (self.completion_tokens - 1) / decoding_s if decoding_s > 0 else None


@dataclass(frozen=True)
class SLO:
    ttft_p95_ms: float = DEFAULT_SLO_TTFT_P95_MS
    decode_tokens_per_s: float = DEFAULT_SLO_DECODE_TOKENS_PER_S
    error_rate: float = DEFAULT_SLO_ERROR_RATE


@dataclass(frozen=True)
class LoadReport:
    """Everything ``reviewbot loadtest`` prints; :meth:`to_dict` is its ``--json``."""

    requests: int
    errors: int
    error_rate: float
    truncated: int
    seconds: float
    ttft_ms: dict[str, float | None]
    e2e_ms: dict[str, float | None]
    decode_tokens_per_s: dict[str, float | None]
    aggregate_tokens_per_s: float
    aggregate_prompt_tokens_per_s: float
    requests_per_s: float
    prompt_tokens_mean: float | None
    prefix_cache_hit_rate: float | None
    ttft_by_queue_position: list[dict[str, Any]]
    queue_depth_within_ttft_slo: int
    chunks_per_review: float
    reviews_per_day: float
    slo: list[dict[str, Any]]
    first_errors: list[str]
    load: dict[str, Any] = field(default_factory=dict)
    # behind vllm-router: the boxes' own figures (reviewbot.ops.box_metrics.pool_figures)
    pool: dict[str, Any] | None = None

    @property
    def deep(self) -> DeepCapacity:
        """Deep reviews a day this pool could add at the measured rate (what it already serves
        is not known to a load test: the figure is for an otherwise idle pool)."""
        return deep_capacity(self.reviews_per_day, None)

    @property
    def slo_met(self) -> bool:
        return all(item["pass"] for item in self.slo)

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "error_rate": self.error_rate,
            "truncated": self.truncated,
            "seconds": self.seconds,
            "load": self.load,
            "ttft_ms": self.ttft_ms,
            "e2e_latency_ms": self.e2e_ms,
            "decode_tokens_per_s": self.decode_tokens_per_s,
            "aggregate_tokens_per_s": self.aggregate_tokens_per_s,
            "aggregate_prompt_tokens_per_s": self.aggregate_prompt_tokens_per_s,
            "requests_per_s": self.requests_per_s,
            "prompt_tokens_mean": self.prompt_tokens_mean,
            "prefix_cache_hit_rate": self.prefix_cache_hit_rate,
            "ttft_by_queue_position": self.ttft_by_queue_position,
            "queue_depth_within_ttft_slo": self.queue_depth_within_ttft_slo,
            "chunks_per_review": self.chunks_per_review,
            "reviews_per_day": self.reviews_per_day,
            "reviews_per_day_method": REVIEWS_PER_DAY_METHOD,
            "deep_reviews": self.deep.to_dict(),
            "pool": self.pool,
            "slo": self.slo,
            "slo_met": self.slo_met,
            "first_errors": self.first_errors,
        }


REVIEWS_PER_DAY_METHOD = (
    "successful requests per second of this run x 86400 / mean chunks per review of the "
    "input: the reviews one day of this load completes, around the clock (behind a router: "
    "the whole pool's, pool.boxes boxes)"
)
FIRST_ERRORS_SHOWN = 3


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """The ``fraction`` percentile, interpolated between the closest ranks; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _percentiles(values: Sequence[float], scale: float = 1.0) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, fraction in PERCENTILES.items():
        value = percentile(values, fraction)
        out[name] = None if value is None else round(value * scale, 3)
    return out


def summarize(
    samples: Sequence[Sample],
    seconds: float,
    chunks_per_review: float,
    slo: SLO,
    load: Mapping[str, Any] | None = None,
    pool: Mapping[str, Any] | None = None,
) -> LoadReport:
    """The figures and SLO verdicts of a run that took ``seconds`` of wall time; ``pool``:
    what the boxes behind a router counted themselves."""
    answered = [s for s in samples if s.error is None]
    errors = len(samples) - len(answered)
    error_rate = errors / len(samples) if samples else 1.0
    ttfts = [s.ttft_s for s in answered if s.ttft_s is not None]
    decode = [v for s in answered if (v := s.decode_tokens_per_s) is not None]
    reported = [s for s in answered if s.cached_tokens is not None]
    reported_prompt = sum(s.prompt_tokens for s in reported)
    wall = max(seconds, 1e-9)
    ttft_ms = _percentiles(ttfts, MS_PER_S)
    decode_rates = _percentiles(decode)
    by_position = _ttft_by_queue_position(answered)
    requests_per_s = len(answered) / wall
    reviews_per_day = (
        requests_per_s * SECONDS_PER_DAY / chunks_per_review if chunks_per_review else 0.0
    )
    verdicts = [
        _verdict("ttft_p95_ms", slo.ttft_p95_ms, ttft_ms["p95"], at_most=True),
        _verdict(
            "decode_tokens_per_s_p50", slo.decode_tokens_per_s, decode_rates["p50"], at_most=False
        ),
        _verdict("error_rate", slo.error_rate, round(error_rate, 6), at_most=True),
    ]
    return LoadReport(
        requests=len(samples),
        errors=errors,
        error_rate=round(error_rate, 6),
        truncated=sum(s.finish_reason == "length" for s in answered),
        seconds=round(seconds, 3),
        ttft_ms=ttft_ms,
        e2e_ms=_percentiles([s.e2e_s for s in answered], MS_PER_S),
        decode_tokens_per_s=decode_rates,
        aggregate_tokens_per_s=round(sum(s.completion_tokens for s in answered) / wall, 1),
        aggregate_prompt_tokens_per_s=round(sum(s.prompt_tokens for s in answered) / wall, 1),
        requests_per_s=round(requests_per_s, 3),
        prompt_tokens_mean=(
            round(sum(s.prompt_tokens for s in answered) / len(answered), 1) if answered else None
        ),
        prefix_cache_hit_rate=(
            round(sum(s.cached_tokens or 0 for s in reported) / reported_prompt, 4)
            if reported_prompt
            else None
        ),
        ttft_by_queue_position=by_position,
        queue_depth_within_ttft_slo=_depth_within(by_position, slo.ttft_p95_ms),
        chunks_per_review=round(chunks_per_review, 3),
        reviews_per_day=round(reviews_per_day, 1),
        slo=verdicts,
        first_errors=[s.error for s in samples if s.error][:FIRST_ERRORS_SHOWN],
        load=dict(load or {}),
        pool=None if pool is None else dict(pool),
    )


def _verdict(name: str, target: float, value: float | None, *, at_most: bool) -> dict[str, Any]:
    met = value is not None and (value <= target if at_most else value >= target)
    return {"name": name, "target": target, "value": value, "pass": met}


def _ttft_by_queue_position(answered: Sequence[Sample]) -> list[dict[str, Any]]:
    positions: dict[int, list[float]] = {}
    for sample in answered:
        if sample.ttft_s is not None:
            positions.setdefault(sample.queue_position, []).append(sample.ttft_s)
    rows = []
    for position in sorted(positions):
        ttfts = positions[position]
        p50, p95 = percentile(ttfts, 0.5), percentile(ttfts, 0.95)
        assert p50 is not None and p95 is not None
        rows.append(
            {
                "position": position,
                "requests": len(ttfts),
                "p50_ms": round(p50 * MS_PER_S, 3),
                "p95_ms": round(p95 * MS_PER_S, 3),
            }
        )
    return rows


def _depth_within(rows: Sequence[Mapping[str, Any]], target_ms: float) -> int:
    """The deepest queue position up to which every position's TTFT p95 meets the SLO."""
    depth = 0
    for row in rows:
        if row["position"] != depth + 1 or row["p95_ms"] > target_ms:
            break
        depth = row["position"]
    return depth
