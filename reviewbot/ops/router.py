"""Several model servers behind vllm-router: what the router and each box answered, as checks,
and the router's flags sized for N boxes of one profile.

Pure: the answers of the router's ``GET /workers`` and of each box (``/health``,
``/v1/models``, ``/metrics``, a one-token tool request) come in as data
(:mod:`reviewbot.ops.router_probes` asks for them); :class:`reviewbot.ops.doctor.Check` objects
and text come out. What vllm-router 0.1.17 does was read from its ``--help`` and tried against
three fake vLLMs (docs/several-boxes.md).

Owns: reading the router's worker list, the per-box and pool checks, and the router flags and
reviewbot settings for ``capacity --replicas``. Must not: ask a server, or print.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reviewbot.ops.doctor import Check, Status, prefix_caching_check

__all__ = [
    "MAX_REPLICAS",
    "ROUTER_WORKERS_PATH",
    "BoxFacts",
    "RouterPlan",
    "pool_checks",
    "router_plan",
    "router_workers",
]

# vllm-router 0.1.17: GET /workers lists every worker with "url" and "is_healthy" (/list_workers
# only the URLs); vLLM itself answers 404 there, so an answer means a router is in front.
ROUTER_WORKERS_PATH = "/workers"
ROUTER_PORT = 30000  # vllm-router's default --port
MAX_REPLICAS = 256  # boxes in one pool, at most (capacity --replicas)
ROUTER_PROMETHEUS_PORT = 29000  # the router's own metrics, on loopback
# The router's health check: a dead box is out of the ring after interval x failure threshold.
HEALTH_CHECK_INTERVAL_S = 5
HEALTH_FAILURE_THRESHOLD = 2
HEALTH_CHECK_TIMEOUT_S = 5
# The router retries a failed request on the same consistent-hash box (seen on 0.1.17), so
# its retries only help a box that blinks; after CB_FAILURE_THRESHOLD failures its circuit
# breaker takes the box out and the next try (reviewbot's) lands on another box.
ROUTER_RETRIES = 2
CB_FAILURE_THRESHOLD = 4
CB_TIMEOUT_S = 30
# The longest answer anyone waits for: 65,536 tokens at ~20 tokens/s under load, ~55 minutes
# (nginx's proxy_read_timeout for the model API is the same hour). reviewbot gives up first
# (REQUEST_TIMEOUT_S, 300 s) and retries; the router never cuts an answer still being read.
ROUTER_REQUEST_TIMEOUT_S = 3600
# Requests queued at the router beyond its in-flight limit, and how long one may wait there:
# reviewbot's slots keep the pool at the limit, so the queue only absorbs other clients.
QUEUE_PER_BOX = 8
QUEUE_TIMEOUT_S = 120


@dataclass(frozen=True)
class BoxFacts:
    """What one box behind the router answered, asked directly (not through the router)."""

    url: str
    healthy_by_router: bool | None = None  # the router's own verdict (/workers is_healthy)
    error: str | None = None  # unreachable, or /health failed: the other fields are unknown
    model: str | None = None
    max_model_len: int | None = None
    tool_calls: bool | None = None  # False: refused a request with tools (no tool parser)
    metrics_text: str | None = None  # its /metrics (prefix caching), None when it has none


def router_workers(body: Any) -> list[tuple[str, bool | None]] | None:
    """(url, healthy) of each worker in a ``GET /workers`` answer; None when the answer is not
    a router's (a vLLM answers 404, or something else)."""
    workers = body.get("workers") if isinstance(body, Mapping) else None
    if not isinstance(workers, list) or not workers:
        return None
    found: list[tuple[str, bool | None]] = []
    for worker in workers:
        url = worker.get("url") if isinstance(worker, Mapping) else None
        if not isinstance(url, str):
            return None
        healthy = worker.get("is_healthy")
        found.append((url, healthy if isinstance(healthy, bool) else None))
    return found


def _box_problem(box: BoxFacts) -> str | None:
    if box.error is not None:
        return box.error
    if box.healthy_by_router is False:
        return "the router marks it unhealthy (its health check failed)"
    if box.tool_calls is False:
        return "it refuses requests with tools: no --enable-auto-tool-choice --tool-call-parser"
    return None


def _prefix_caching(box: BoxFacts) -> str:
    status = prefix_caching_check(box.metrics_text).status
    return "on" if status is Status.OK else "off or unknown"


def pool_checks(router_url: str, boxes: Sequence[BoxFacts]) -> list[Check]:
    """One check for the router, one per box (a failing box is named with its reason), and
    one that every reachable box serves the same model, context, tool calls and caching."""
    failing = [(box, problem) for box in boxes if (problem := _box_problem(box))]
    healthy = len(boxes) - len(failing)
    checks = [
        Check(
            "router",
            Status.OK if not failing else (Status.WARN if healthy else Status.FAIL),
            f"vllm-router at {router_url}: {healthy} of {len(boxes)} box(es) answer",
            ""
            if not failing
            else "start or fix the failing box(es) below; the router sends "
            "their MRs to the others meanwhile",
        )
    ]
    for box in boxes:
        problem = _box_problem(box)
        if problem is None:
            detail = (
                f"serves {box.model} ({box.max_model_len or 'unknown'} tokens), tool calls, "
                f"prefix caching {_prefix_caching(box)}"
            )
            checks.append(Check(f"box {box.url}", Status.OK, detail))
        else:
            fix = (
                "see the box's vLLM unit: `systemctl status reviewbot-vllm@…` and its log"
                if box.error is not None or box.healthy_by_router is False
                else "start vLLM with the profile's flags (deploy/vllm/)"
            )
            checks.append(Check(f"box {box.url}", Status.FAIL, problem, fix))
    checks.append(_agreement([box for box in boxes if box.error is None]))
    return checks


def _agreement(boxes: Sequence[BoxFacts]) -> Check:
    """Every box the same: a review's chunks may land on any of them after a failover, and the
    budget is cut for one max_model_len."""
    if len(boxes) < 2:
        return Check("boxes agree", Status.OK, "fewer than two boxes answered: nothing to compare")
    facts = {
        "model": {box.url: box.model for box in boxes},
        "max_model_len": {box.url: box.max_model_len for box in boxes},
        "tool calls": {box.url: box.tool_calls for box in boxes},
        "prefix caching": {box.url: _prefix_caching(box) for box in boxes},
    }
    differ = {name: by_box for name, by_box in facts.items() if len(set(by_box.values())) > 1}
    if not differ:
        return Check("boxes agree", Status.OK, f"{len(boxes)} boxes serve the same setup")
    words = "; ".join(
        f"{name}: " + ", ".join(f"{url} {value}" for url, value in by_box.items())
        for name, by_box in differ.items()
    )
    return Check(
        "boxes agree",
        Status.FAIL,
        f"the boxes differ: {words}",
        "start every box from the same profile (deploy/vllm/*.env)",
    )


@dataclass(frozen=True)
class RouterPlan:
    """The router's flags and reviewbot's settings for ``replicas`` boxes of one profile."""

    replicas: int
    max_num_seqs: int  # per box (vLLM --max-num-seqs)
    flags: list[str]
    settings: dict[str, str]
    notes: list[str]


def router_plan(
    replicas: int, max_num_seqs: int, worker_urls: Sequence[str] | None = None
) -> RouterPlan:
    """``--policy consistent_hash`` in front of ``replicas`` boxes of ``max_num_seqs`` each.

    The pool's limit is per box x boxes: LLM_TOTAL_CONCURRENCY counts requests in flight from
    every worker, and the router's ``--max-concurrent-requests`` is the same number, so the
    router never queues what reviewbot's slots let through. CONCURRENCY (chunks of one review
    at once) stays per box: one MR's chunks all land on one box."""
    if replicas < 1 or max_num_seqs < 1:
        raise ValueError("replicas and max_num_seqs must be at least 1")
    urls = list(worker_urls or [f"https://gpu-box-{n}:8443" for n in range(1, replicas + 1)])
    total = replicas * max_num_seqs
    flags = [
        "--host 127.0.0.1",
        f"--port {ROUTER_PORT}",
        "--policy consistent_hash",
        "--worker-urls " + " ".join(urls),
        f"--request-timeout-secs {ROUTER_REQUEST_TIMEOUT_S}",
        f"--max-concurrent-requests {total}",
        f"--queue-size {QUEUE_PER_BOX * replicas}",
        f"--queue-timeout-secs {QUEUE_TIMEOUT_S}",
        f"--health-check-interval-secs {HEALTH_CHECK_INTERVAL_S}",
        f"--health-check-timeout-secs {HEALTH_CHECK_TIMEOUT_S}",
        f"--health-failure-threshold {HEALTH_FAILURE_THRESHOLD}",
        f"--retry-max-retries {ROUTER_RETRIES}",
        f"--cb-failure-threshold {CB_FAILURE_THRESHOLD}",
        f"--cb-timeout-duration-secs {CB_TIMEOUT_S}",
        f"--prometheus-host 127.0.0.1 --prometheus-port {ROUTER_PROMETHEUS_PORT}",
    ]
    settings = {
        "REVIEWBOT_LLM_BASE_URL": f"http://127.0.0.1:{ROUTER_PORT}/v1",
        "REVIEWBOT_LLM_SESSION_HEADER": "X-Session-ID",
        "REVIEWBOT_CONCURRENCY": str(max_num_seqs),
        "REVIEWBOT_LLM_TOTAL_CONCURRENCY": str(total),
    }
    out_after_s = HEALTH_CHECK_INTERVAL_S * HEALTH_FAILURE_THRESHOLD
    notes = [
        f"{replicas} box(es) x --max-num-seqs {max_num_seqs} = {total} requests in flight "
        "for the pool (LLM_TOTAL_CONCURRENCY = --max-concurrent-requests)",
        f"one MR's chunks go to one box: CONCURRENCY {max_num_seqs} fills that box; "
        f"{math.ceil(total / max_num_seqs)} or more MRs at once, spread by the hash, fill the pool",
        f"a dead box leaves the ring after about {out_after_s} s of failed health checks (or "
        f"{CB_FAILURE_THRESHOLD} failed requests); its MRs move to the others and reviewbot's "
        "retries (4 per request, with backoff) resend the chunks that failed",
    ]
    return RouterPlan(replicas, max_num_seqs, flags, settings, notes)
