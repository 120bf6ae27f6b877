"""Ask a vllm-router and every box behind it what they serve (``reviewbot doctor``).

The router answers ``GET /workers`` with its worker list (vLLM itself answers 404 there: then
there is no router and nothing here runs). Each box is then asked directly, all at once:
``/health``, ``/v1/models``, ``/metrics`` and one request with tools and ``max_tokens`` 1 (a
box without a tool parser refuses it at once). What the answers mean is
:mod:`reviewbot.ops.router`'s job.

Owns: the HTTP questions to the router and its boxes. Must not: judge the answers (the pure
:mod:`reviewbot.ops.router` does) or print.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import httpx

from reviewbot.config import Settings
from reviewbot.llm.backend import (
    MODE_TOOL_CALLS,
    LLMError,
    ModelRequest,
    OutputModeRefusedError,
)
from reviewbot.llm.factory import llm_settings_from
from reviewbot.llm.vllm import VLLMBackend
from reviewbot.ops.doctor import Check
from reviewbot.ops.router import ROUTER_WORKERS_PATH, BoxFacts, pool_checks, router_workers
from reviewbot.prompts import tool_schemas
from reviewbot.redaction import hide_url_password

__all__ = ["box_facts", "router_pool_checks", "workers_of"]

VERSION_SUFFIX = "/v1"
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"
PING_MESSAGES = [{"role": "user", "content": "Reply with one word."}]
PING_MAX_TOKENS = 1
MAX_PARALLEL_BOXES = 16


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
