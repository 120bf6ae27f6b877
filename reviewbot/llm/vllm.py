"""The transport to vLLM's OpenAI-compatible server: the OpenAI-compatible one plus vLLM's facts.

- ``POST /tokenize`` at the server root counts a prompt exactly, chat template and tools
  included (vllm/entrypoints/openai/api_server.py).
- ``GET /v1/models`` gives each model's ``max_model_len``.
- ``chat_template_kwargs`` reach the chat template (Qwen3.5 reads ``enable_thinking``).
- ``priority`` (the setting ``priority_scheduling``): lower runs sooner on a server started
  with ``--scheduling-policy priority``. vLLM 0.32 takes it whatever its policy (and ignores it
  under ``fcfs``); the V0 engine (vLLM < 0.11) answers a non-zero one 400 ``Got priority N but
  Priority scheduling is not enabled.``: then this backend sends the request again without it,
  and no later request carries one (said once in the log), so a priority never fails a review.
- Three output modes:

  1. ``tool_calls``: ``tools`` with ``tool_choice: "auto"`` (vLLM needs
     ``--enable-auto-tool-choice --tool-call-parser qwen3_coder``; without them it answers 400
     ``"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set``).
  2. ``json_schema``: ``response_format`` with ``{"findings": [<report_finding parameters>]}``,
     no tools (guided decoding; the answer must start with ``{``).
  3. ``content``: the tools with ``tool_choice: "none"`` (vLLM >= 0.10 still renders them in the
     chat template, so Qwen writes its XML calls as text, parsed from ``content``).

Owns: :class:`VLLMBackend`: what only vLLM has (above), on top of the OpenAI-compatible transport it
extends. Must not: redo what that transport does, or retry (the runner does).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from reviewbot.llm.openai_compatible import (
    HTTP_BAD_REQUEST,
    SNIPPET_CHARS,
    OpenAICompatibleBackend,
)
from reviewbot.model import (
    MODE_CONTENT,
    MODE_JSON_SCHEMA,
    MODE_TOOL_CALLS,
    LLMError,
    LLMSettings,
    LLMUnavailableError,
    ModelAnswer,
    ModelRequest,
    OutputModeRefusedError,
    RequestRefusedError,
    ServerAnswerError,
)
from reviewbot.redaction import hide_url_password

__all__ = ["PRIORITY_FIELD", "PRIORITY_REFUSED_MARKERS", "START_VLLM_HINT", "VLLMBackend"]

log = logging.getLogger(__name__)

PRIORITY_FIELD = "priority"
# How a vLLM that does not schedule by priority refuses the field: the V0 engine's
# "Got priority 1 but Priority scheduling is not enabled." (vllm/engine/llm_engine.py,
# add_request) and the early V1 engine's "V1 does not support priority yet.".
PRIORITY_REFUSED_MARKERS = ("priority scheduling is not enabled", "does not support priority")
VERSION_SUFFIX = "/v1"
TOKENIZE_PATH = "/tokenize"
# No such endpoint: not found, method not allowed, not implemented.
TOKENIZE_ABSENT_STATUSES = frozenset({404, 405, 501})
# A 429 or a 5xx from /tokenize is the server (or the router in front of a stopped box) for now,
# not the request: the job is tried again (reviewbot.errors: transient), never failed for it.
HTTP_TOO_MANY_REQUESTS = 429
HTTP_SERVER_ERROR = 500
# The flags every reviewbot server needs (deploy/vllm/ profiles; `reviewbot capacity` sizes the
# rest): without --enable-prompt-tokens-details vLLM never reports cached tokens.
START_VLLM_HINT = (
    "Start vLLM with: vllm serve MODEL --enable-auto-tool-choice "
    "--tool-call-parser qwen3_coder --reasoning-parser qwen3 --enable-prefix-caching "
    "--enable-prompt-tokens-details --generation-config vllm --max-num-seqs 8 "
    "--scheduling-policy priority "
    "(`reviewbot capacity` sizes it for your GPUs)"
)


class VLLMBackend(OpenAICompatibleBackend):
    """vLLM's server; thread-safe."""

    output_modes = (MODE_TOOL_CALLS, MODE_JSON_SCHEMA, MODE_CONTENT)
    setup_hint = START_VLLM_HINT

    def __init__(self, settings: LLMSettings) -> None:
        super().__init__(settings)
        self._root_url = self.base_url.removesuffix(VERSION_SUFFIX)
        self._shown_root_url = hide_url_password(self._root_url)
        self._tokenize_supported: bool | None = None
        self._priority_lock = threading.Lock()
        self._send_priority = settings.priority_scheduling

    @property
    def sends_priority(self) -> bool:
        """Whether requests carry their ``priority``: the setting, until the server refused one."""
        return self._send_priority

    def execute(
        self, request: ModelRequest, *, on_first_token: Callable[[], None] | None = None
    ) -> ModelAnswer:
        """One chat request; sent again without its priority when the server refuses that."""
        try:
            return super().execute(request, on_first_token=on_first_token)
        except (RequestRefusedError, OutputModeRefusedError) as error:
            if not self._refused_priority(request, error):
                raise
        return super().execute(request, on_first_token=on_first_token)

    def chat_body(self, request: ModelRequest) -> dict[str, Any]:
        body = super().chat_body(request)
        if request.priority is not None and self._send_priority:
            body[PRIORITY_FIELD] = request.priority
        return body

    def _refused_priority(self, request: ModelRequest, error: Exception) -> bool:
        """Whether ``error`` refused the request's priority; then none is sent any more."""
        if request.priority is None or not self.settings.priority_scheduling:
            return False
        if not any(marker in str(error).lower() for marker in PRIORITY_REFUSED_MARKERS):
            return False
        with self._priority_lock:
            told, self._send_priority = self._send_priority, False
        if told:
            log.warning(
                "the model server at %s refuses request priorities (%s): sending none from "
                "now on; start it with --scheduling-policy priority, or set "
                "REVIEWBOT_PRIORITY_SCHEDULING=false",
                self.shown_url,
                error,
            )
        return True

    def count_prompt_tokens(self, messages: list[dict], tools: list[dict]) -> int | None:
        """Exact prompt tokens from ``POST /tokenize``; None (remembered) when it is absent."""
        if self._tokenize_supported is False:
            return None
        body: dict[str, Any] = {
            "model": self.server_info().model,
            "messages": messages,
            "add_generation_prompt": True,
        }
        if tools:
            body["tools"] = tools
        body.update(self._template_fields(None))
        try:
            response = self._http.post(self._root_url + TOKENIZE_PATH, json=body)
        except httpx.TransportError as error:
            raise self.unavailable(error) from None
        if response.status_code in TOKENIZE_ABSENT_STATUSES:
            self._tokenize_supported = False
            return None
        status = response.status_code
        if status >= HTTP_SERVER_ERROR or status == HTTP_TOO_MANY_REQUESTS:
            raise LLMUnavailableError(
                f"the model server at {self._shown_root_url} answered POST {TOKENIZE_PATH} "
                f"with HTTP {status}: busy or a box down; tried again later"
            )
        if status >= HTTP_BAD_REQUEST:
            raise LLMError(f"POST {TOKENIZE_PATH} failed: HTTP {status}")
        count = _json_field(response, "count")
        if not _is_integer(count):
            # llama-server, for one, answers a /tokenize without "content" with {"tokens": []}.
            raise ServerAnswerError(
                self._one_line(
                    f"the server at {self._shown_root_url} answered POST {TOKENIZE_PATH} "
                    f"without an integer count: {response.text[:SNIPPET_CHARS]!r}. "
                    "If it is not vLLM, set REVIEWBOT_LLM_BACKEND=openai-compatible"
                )
            )
        self._tokenize_supported = True
        return count

    def _max_model_len(self, card: Mapping[str, Any]) -> int | None:
        max_len = card.get("max_model_len")
        if max_len is None or _is_integer(max_len):
            return max_len
        raise ServerAnswerError(
            self._one_line(
                f"the server at {self.shown_url} answered GET /models with max_model_len "
                f"{max_len!r} for {card.get('id')!r}, not an integer; set "
                f"REVIEWBOT_MAX_MODEL_LEN, or REVIEWBOT_LLM_BACKEND=openai-compatible if it is "
                f"not vLLM"
            )
        )

    def _output_fields(self, mode: str, tools: list[dict]) -> dict[str, Any]:
        if mode == MODE_TOOL_CALLS:
            return {"tools": tools, "tool_choice": "auto"}
        if mode == MODE_CONTENT:
            # a plain answer (a thread reply) sends no tools field: vLLM refuses "tools": []
            return {"tools": tools, "tool_choice": "none"} if tools else {}
        return super()._output_fields(mode, tools)

    def _template_fields(self, enable_thinking: bool | None) -> dict[str, Any]:
        """``enable_thinking`` (one request's, else the setting's) for Qwen3.5's template."""
        thinking = enable_thinking
        if thinking is None:
            thinking = self.settings.enable_thinking
        if thinking is None:
            return {}
        # Qwen3.5's chat template reads enable_thinking; vLLM passes chat_template_kwargs on.
        return {"chat_template_kwargs": {"enable_thinking": thinking}}


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _json_field(response: httpx.Response, name: str) -> object:
    """``name`` of a JSON object body; None when the body is no such object (not JSON, or
    nested deeper than ``json.loads`` can go)."""
    try:
        body = response.json()
    except (ValueError, RecursionError):
        return None
    return body.get(name) if isinstance(body, dict) else None
