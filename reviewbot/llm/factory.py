"""Build the model client from the settings: the chosen backend under one chunk runner.

Owns: which backend class ``llm_backend`` names, and mapping ``Settings`` to ``LLMSettings``.
Must not: send a request (building a backend and its runner does no I/O) or hold a client of its
own (the App keeps the one it builds).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reviewbot.config import LLM_BACKEND_OPENAI_COMPATIBLE, LLM_BACKEND_VLLM, Settings
from reviewbot.llm.openai_compatible import OpenAICompatibleBackend
from reviewbot.llm.runner import ChunkRunner
from reviewbot.llm.vllm import VLLMBackend
from reviewbot.model import LLMSettings, ModelBackend

if TYPE_CHECKING:
    from reviewbot.slots import ModelSlots

__all__ = ["BACKENDS", "model_from_settings", "runner_for"]

BACKENDS: dict[str, type[OpenAICompatibleBackend]] = {
    LLM_BACKEND_VLLM: VLLMBackend,
    LLM_BACKEND_OPENAI_COMPATIBLE: OpenAICompatibleBackend,
}


def runner_for(
    settings: LLMSettings,
    *,
    backend: str = LLM_BACKEND_VLLM,
    slots: ModelSlots | None = None,
) -> ChunkRunner:
    """A runner over the named backend (``vllm`` or ``openai-compatible``)."""
    try:
        backend_class = BACKENDS[backend]
    except KeyError:
        raise ValueError(
            f"unknown model backend {backend!r} (one of {', '.join(BACKENDS)})"
        ) from None
    transport: ModelBackend = backend_class(settings)
    return ChunkRunner(transport, settings, slots=slots)


def llm_settings_from(settings: Settings) -> LLMSettings:
    """The model client's settings taken from reviewbot's ``Settings``."""
    return LLMSettings(
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key,
        model=settings.llm_model,
        concurrency=settings.concurrency,
        request_timeout_s=settings.request_timeout_s,
        enable_thinking=settings.enable_thinking,
        max_output_tokens=settings.max_output_tokens,
        prefill_tokens_per_review=settings.llm_prefill_tokens_per_review,
        max_repair_rounds=settings.llm_max_repair_rounds,
        session_header=settings.llm_session_header,
        priority_scheduling=settings.priority_scheduling,
    )


def model_from_settings(settings: Settings, *, slots: ModelSlots | None = None) -> ChunkRunner:
    """The model client for ``settings``; ``slots`` limits requests in flight across runners
    (see reviewbot.slots). The caller closes it (it is a context manager)."""
    llm_settings = llm_settings_from(settings)
    return runner_for(llm_settings, backend=settings.llm_backend, slots=slots)
