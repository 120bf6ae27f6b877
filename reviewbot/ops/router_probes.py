"""Ask a vllm-router and every box behind it what they serve (``reviewbot doctor``).

The router answers ``GET /workers`` with its worker list (vLLM itself answers 404 there: then
there is no router and nothing here runs). Each box is then asked directly, all at once:
``/health``, ``/v1/models``, ``/metrics`` and one request with tools and ``max_tokens`` 1 (a
box without a tool parser refuses it at once). What the answers mean is
:mod:`reviewbot.ops.router`'s job.

The worker reads every box's load gauges before each job (:func:`pool_gauges`, the effort that
follows the load): behind a router each box it lists, else the one server.

``reviewbot loadtest`` through a router reads every box's ``/metrics`` before and after its
run (:func:`pool_reading`, :func:`pool_load`); :mod:`reviewbot.ops.box_metrics` turns the two
readings into per-box figures.

Owns: the HTTP questions to the router and its boxes. Must not: judge the answers (the pure
:mod:`reviewbot.ops.router` and :mod:`reviewbot.ops.box_metrics` do) or print.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from reviewbot.config import Settings
from reviewbot.effort_choice import BoxGauges
from reviewbot.llm.factory import llm_settings_from
from reviewbot.llm.vllm import VLLMBackend
from reviewbot.model import (
    MODE_TOOL_CALLS,
    LLMError,
    ModelRequest,
    OutputModeRefusedError,
)
from reviewbot.ops.box_metrics import (
    BoxCounters,
    BoxLoad,
    box_load,
    pool_figures,
    read_counters,
    read_gauges,
)
from reviewbot.ops.doctor import Check
from reviewbot.ops.router import ROUTER_WORKERS_PATH, BoxFacts, pool_checks, router_workers
from reviewbot.prompts import tool_schemas
from reviewbot.redaction import hide_url_password

__all__ = [
    "PoolReading",
    "box_facts",
    "pool_gauges",
    "pool_load",
    "pool_reading",
    "router_pool_checks",
    "workers_of",
]

VERSION_SUFFIX = "/v1"
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"
PING_MESSAGES = [{"role": "user", "content": "Reply with one word."}]
PING_MAX_TOKENS = 1
MAX_PARALLEL_BOXES = 16
# After a load test the boxes may count its last answers a moment after sending them (vLLM
# records a finished request's stats after its output is queued): their /metrics are read
# again until they count every answered request, for at most this long.
SETTLE_S = 3.0
METRICS_TIMEOUT_S = 10.0  # one box's /metrics during a load test
SETTLE_POLL_S = 0.1


def workers_of(
    http: httpx.Client, root_url: str, timeout_s: float
) -> list[tuple[str, bool | None]] | None:
    """The router's workers (url, healthy), or None when ``root_url`` is no vllm-router."""
    try:
        response = http.get(root_url + ROUTER_WORKERS_PATH, timeout=timeout_s)
    except httpx.HTTPError:
        return None
    if not response.is_success:
        return None
    try:
        return router_workers(response.json())
    except (ValueError, RecursionError):  # not JSON, or nested too deep
        return None


def router_pool_checks(
    settings: Settings, http: httpx.Client, root_url: str, timeout_s: float
) -> list[Check]:
    """The router's checks (none when ``root_url`` is a plain vLLM)."""
    workers = workers_of(http, root_url, timeout_s)
    if workers is None:
        return []
    with ThreadPoolExecutor(min(len(workers), MAX_PARALLEL_BOXES)) as pool:
        boxes = list(
            pool.map(lambda worker: box_facts(settings, worker[0], worker[1], timeout_s), workers)
        )
    return pool_checks(hide_url_password(root_url), boxes)


def box_facts(
    settings: Settings, url: str, healthy_by_router: bool | None, timeout_s: float
) -> BoxFacts:
    """Ask one box directly (with the model API key, as the router would)."""
    shown = hide_url_password(url)
    facts = BoxFacts(shown, healthy_by_router)
    llm = dataclasses.replace(
        llm_settings_from(settings),
        base_url=url.rstrip("/") + VERSION_SUFFIX,
        connect_timeout_s=timeout_s,
        request_timeout_s=timeout_s,
        max_retries=0,
    )
    headers = {"Authorization": f"Bearer {settings.llm_api_key}"} if settings.llm_api_key else {}
    backend = VLLMBackend(llm)
    try:
        with httpx.Client(timeout=timeout_s, headers=headers) as http:
            try:
                health = http.get(url.rstrip("/") + HEALTH_PATH)
            except httpx.HTTPError as error:
                return dataclasses.replace(facts, error=f"cannot reach it ({type(error).__name__})")
            if not health.is_success:
                return dataclasses.replace(
                    facts, error=f"{HEALTH_PATH} answered {health.status_code}"
                )
            try:
                info = backend.server_info()
            except LLMError as error:
                return dataclasses.replace(facts, error=str(error))
            metrics = _metrics(http, url)
        return dataclasses.replace(
            facts,
            model=info.model,
            max_model_len=info.max_model_len,
            tool_calls=_takes_tools(backend),
            metrics_text=metrics,
        )
    finally:
        backend.close()


def _metrics(http: httpx.Client, url: str) -> str | None:
    try:
        response = http.get(url.rstrip("/") + METRICS_PATH)
    except httpx.HTTPError:
        return None
    return response.text if response.is_success else None


def _takes_tools(backend: VLLMBackend) -> bool | None:
    """False: the box refused a request with tools; None: it failed otherwise."""
    request = ModelRequest(
        PING_MESSAGES, tool_schemas(), MODE_TOOL_CALLS, False, PING_MAX_TOKENS, 0.0
    )
    try:
        backend.execute(request)
    except OutputModeRefusedError:
        return False
    except LLMError:
        return None
    return True


@dataclass(frozen=True)
class PoolReading:
    """Every box's ``/metrics`` behind a router at one moment: counters, or why not."""

    router_url: str  # shown, password hidden
    urls: list[str]  # as the router lists them
    readings: list[BoxCounters | str]


def _auth_headers(settings: Settings) -> dict[str, str]:
    return {"Authorization": f"Bearer {settings.llm_api_key}"} if settings.llm_api_key else {}


def _read_box(http: httpx.Client, url: str) -> BoxCounters | str:
    shown = f"{hide_url_password(url).rstrip('/')}{METRICS_PATH}"
    try:
        response = http.get(url.rstrip("/") + METRICS_PATH)
    except httpx.HTTPError as error:
        return f"{shown}: cannot reach it ({type(error).__name__})"
    if not response.is_success:
        return f"{shown} answered {response.status_code}"
    try:
        return read_counters(response.text)
    except ValueError as error:
        return f"{shown}: {error}"


def _read_boxes(
    settings: Settings, urls: Sequence[str], timeout_s: float
) -> list[BoxCounters | str]:
    with (
        httpx.Client(timeout=timeout_s, headers=_auth_headers(settings)) as http,
        ThreadPoolExecutor(min(len(urls), MAX_PARALLEL_BOXES)) as pool,
    ):
        return list(pool.map(lambda url: _read_box(http, url), urls))


def pool_reading(
    settings: Settings, root_url: str, timeout_s: float = METRICS_TIMEOUT_S
) -> PoolReading | None:
    """The boxes' counters behind the router at ``root_url``; None when it is no router."""
    with httpx.Client(timeout=timeout_s, headers=_auth_headers(settings)) as http:
        workers = workers_of(http, root_url, timeout_s)
    if workers is None:
        return None
    urls = [url for url, _ in workers]
    return PoolReading(hide_url_password(root_url), urls, _read_boxes(settings, urls, timeout_s))


def _loads(before: PoolReading, after: Sequence[BoxCounters | str]) -> list[BoxLoad]:
    loads = []
    for url, start, end in zip(before.urls, before.readings, after, strict=True):
        shown = hide_url_password(url)
        if isinstance(start, str):
            loads.append(BoxLoad(shown, error=f"before the run: {start}"))
        elif isinstance(end, str):
            loads.append(BoxLoad(shown, error=f"after the run: {end}"))
        else:
            loads.append(box_load(shown, start, end))
    return loads


def pool_load(
    settings: Settings, before: PoolReading, answered: int, timeout_s: float = METRICS_TIMEOUT_S
) -> dict[str, object]:
    """Read the boxes again (until they count ``answered`` requests, or SETTLE_S) and report
    what each served since ``before`` (:func:`reviewbot.ops.box_metrics.pool_figures`)."""
    settle_until = time.monotonic() + SETTLE_S
    while True:
        loads = _loads(before, _read_boxes(settings, before.urls, timeout_s))
        counted = sum(load.requests or 0 for load in loads if load.error is None)
        if counted >= answered or time.monotonic() >= settle_until:
            return pool_figures(before.router_url, loads)
        time.sleep(SETTLE_POLL_S)  # waiting for the boxes' own count, bounded by SETTLE_S


def _box_gauges(http: httpx.Client, url: str) -> BoxGauges:
    shown = hide_url_password(url).rstrip("/")
    try:
        response = http.get(url.rstrip("/") + METRICS_PATH)
    except httpx.HTTPError as error:
        return BoxGauges(shown, error=f"cannot reach it ({type(error).__name__})")
    if not response.is_success:
        return BoxGauges(shown, error=f"{METRICS_PATH} answered {response.status_code}")
    try:
        running, waiting = read_gauges(response.text)
    except ValueError as error:
        return BoxGauges(shown, error=str(error))
    return BoxGauges(shown, running=running, waiting=waiting)


def pool_gauges(settings: Settings, timeout_s: float) -> list[BoxGauges]:
    """Every box's running and waiting gauges now: each box the vllm-router at
    ``llm_base_url`` lists, or the one server there; a box that cannot be read says why."""
    root_url = settings.llm_base_url.rstrip("/").removesuffix(VERSION_SUFFIX)
    with httpx.Client(timeout=timeout_s, headers=_auth_headers(settings)) as http:
        workers = workers_of(http, root_url, timeout_s)
        urls = [root_url] if workers is None else [url for url, _ in workers]
        if len(urls) == 1:
            return [_box_gauges(http, urls[0])]
        with ThreadPoolExecutor(min(len(urls), MAX_PARALLEL_BOXES)) as pool:
            return list(pool.map(lambda url: _box_gauges(http, url), urls))
