"""The model adapter: review chunks with an OpenAI-compatible model server, concurrently.

- ``backend``: the data, the errors and the two Protocols (:class:`LLMClient` for the pipeline,
  :class:`ModelBackend` for one HTTP request per call). No I/O.
- ``runner``: :class:`ChunkRunner`, the one :class:`LLMClient`: concurrency, model slots,
  retries, output-mode fallback, call timing.
- ``answers``: reading an answer into ``report_finding`` calls (pure).
- ``openai_compatible`` and ``vllm``: the transports (httpx).
- ``factory``: :func:`model_from_settings`, the backend chosen by ``REVIEWBOT_LLM_BACKEND``.

This package re-exports ``backend``'s names only (no I/O, no HTTP client), so code that needs
the data (the pipeline, ``reviewbot plan``) never loads a transport. The runner, the
transports and the factory are imported from their own modules by whoever uses them.

Owns: the package's public names, ``backend``'s only. Must not: import the runner, a transport or
the factory (an HTTP client would load with the data).
"""

from __future__ import annotations

from reviewbot.model import (
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
    "AnswerLostError",
    "CallRecord",
    "ChunkRequest",
    "ChunkResult",
    "ContextOverflowError",
    "LLMClient",
    "LLMError",
    "LLMSettings",
    "LLMUnavailableError",
    "ModelAnswer",
    "ModelBackend",
    "ModelNotFoundError",
    "ModelRequest",
    "OutputModeRefusedError",
    "RequestRefusedError",
    "RetryableModelError",
    "ServerAnswerError",
    "ServerInfo",
    "ToolCallText",
    "ToolsUnsupportedError",
]
