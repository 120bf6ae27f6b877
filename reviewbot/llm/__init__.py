"""The model adapter: review chunks with an OpenAI-compatible model server, concurrently.

- ``backend``: the data, the errors and the two Protocols (:class:`LLMClient` for the pipeline,
  :class:`ModelBackend` for one HTTP request per call). No I/O.
- ``runner``: :class:`ChunkRunner`, the one :class:`LLMClient`: concurrency, model slots,
  retries, output-mode fallback, call timing.
- ``answers``: reading an answer into ``report_finding`` calls (pure).
- ``openai_compatible`` and ``vllm``: the transports (httpx).
- ``factory``: :func:`model_from_settings`, the backend chosen by ``REVIEWBOT_LLM_BACKEND``.

The runner, the transports and the factory load on first use (PEP 562), so code that only
needs the data (the settings, the pipeline, ``reviewbot plan``) never imports an HTTP client.
"""

from __future__ import annotations

import importlib

from reviewbot.llm.backend import (
    MODE_CONTENT,
    MODE_JSON_SCHEMA,
    MODE_TOOL_CALLS,
    AnswerLostError,
    CallRecord,
    ChunkRequest,
    ChunkResult,
    ContextOverflowError,
    LLMClient,
    LLMError,
    LLMSettings,
    LLMUnavailableError,
    ModelAnswer,
    ModelBackend,
    ModelNotFoundError,
    ModelRequest,
    OutputModeRefusedError,
    RequestRefusedError,
    RetryableModelError,
    ServerAnswerError,
    ServerInfo,
    ToolCallText,
    ToolsUnsupportedError,
)

__all__ = [
    "MODE_CONTENT",
    "MODE_JSON_SCHEMA",
    "MODE_TOOL_CALLS",
    "TRANSPORT_ERRORS",
    "AnswerLostError",
    "CallRecord",
    "ChunkRequest",
    "ChunkResult",
    "ChunkRunner",
    "ContextOverflowError",
    "LLMClient",
    "LLMError",
    "LLMSettings",
    "LLMUnavailableError",
    "ModelAnswer",
    "ModelBackend",
    "ModelNotFoundError",
    "ModelRequest",
    "OpenAICompatibleBackend",
    "OutputModeRefusedError",
    "RequestRefusedError",
    "RetryableModelError",
    "ServerAnswerError",
    "ServerInfo",
    "ToolCallText",
    "ToolsUnsupportedError",
    "VLLMBackend",
    "model_from_settings",
    "runner_for",
]

_LAZY = {
    "ChunkRunner": "reviewbot.llm.runner",
    "TRANSPORT_ERRORS": "reviewbot.llm.openai_compatible",
    "OpenAICompatibleBackend": "reviewbot.llm.openai_compatible",
    "VLLMBackend": "reviewbot.llm.vllm",
    "model_from_settings": "reviewbot.llm.factory",
    "runner_for": "reviewbot.llm.factory",
}


def __getattr__(name: str) -> object:
    """The runner and the transport-side names, imported when first asked for (the settings
    import this package's ``backend`` for a default, and should not load the runner)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
