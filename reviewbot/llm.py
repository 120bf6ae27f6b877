"""The model adapter: send each chunk's prompt to a vLLM OpenAI-compatible server, concurrently.

One :class:`VLLMClient` reviews the chunks of a merge request: it keeps at most
``settings.concurrency`` requests in flight (vLLM's ``--max-num-seqs``), streams the answers,
accumulates ``report_finding`` tool calls, retries what is worth retrying, and measures every
attempt series (:class:`CallRecord`: tokens, cached tokens, TTFT, latency, slot wait).

Structured output, learnt once per client and reused for every later chunk:

1. ``tool_calls``: ``tools`` with ``tool_choice: "auto"`` (vLLM needs
   ``--enable-auto-tool-choice --tool-call-parser qwen3_coder``; without them it answers 400
   ``"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set``,
   see vllm/entrypoints/openai/serving_chat.py).
2. ``json_schema``: ``response_format`` with ``{"findings": [<report_finding parameters>]}``,
   no tools (guided decoding; the answer must start with ``{``).
3. ``content``: the tools are sent with ``tool_choice: "none"`` (vLLM >= 0.10 still renders them
   in the chat template, so Qwen writes its XML calls as text), and the calls are parsed from
   ``content`` with :func:`reviewbot.toolcalls.parse_tool_calls_from_content`.

Model output is never repaired: a call that cannot be decoded is counted in ``invalid``.
The pipeline depends only on the :class:`LLMClient` Protocol.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import httpx
import openai

from reviewbot.slots import ModelSlots
from reviewbot.toolcalls import (
    DEFAULT_FINDINGS_TOOL,
    ArgumentsError,
    parse_arguments,
    parse_tool_calls_from_content,
    strip_reasoning,
)

__all__ = [
    "CallRecord",
    "ChunkRequest",
    "ChunkResult",
    "LLMClient",
    "LLMError",
    "LLMSettings",
    "LLMUnavailableError",
    "ModelNotFoundError",
    "ServerInfo",
    "ToolsUnsupportedError",
    "VLLMClient",
]

MODE_TOOL_CALLS = "tool_calls"
MODE_JSON_SCHEMA = "json_schema"
MODE_CONTENT = "content"
NEXT_MODE = {MODE_TOOL_CALLS: MODE_JSON_SCHEMA, MODE_JSON_SCHEMA: MODE_CONTENT}

OUTCOME_OK = "ok"
OUTCOME_ERROR = "error"
OUTCOME_CONTEXT_OVERFLOW = "context_overflow"
OUTCOME_NO_TOOL_CALLS_RETRY = "no_tool_calls_retry"
OUTCOME_MODE_UNSUPPORTED = "mode_unsupported"
OUTCOME_FORMAT_IGNORED = "format_ignored"
OUTCOME_LENGTH = "length"

FINDINGS_KEY = "findings"
JSON_SCHEMA_NAME = "review_findings"
FINISH_TOOL_CALLS = "tool_calls"
FINISH_LENGTH = "length"
TOOL_CALL_MARKERS = ("<tool_call>", "<function=")
HTTP_BAD_REQUEST = 400
HTTP_NOT_FOUND = 404
HTTP_TOO_MANY_REQUESTS = 429
HTTP_SERVER_ERROR = 500
MS_PER_S = 1000.0
# The openai client insists on a key; vLLM ignores it unless started with --api-key.
API_KEY_PLACEHOLDER = "EMPTY"
REDACTED = "***"
MAX_ERROR_CHARS = 500
VERSION_SUFFIX = "/v1"

# vLLM's 400 texts: "This model's maximum context length is N tokens. ..." and
# "... longer than the maximum model length ..." (vllm/entrypoints/renderer.py, serving_engine.py)
CONTEXT_OVERFLOW_MARKERS = ("maximum context length", "context length", "maximum model length")
# vllm/entrypoints/openai/serving_chat.py: tool_choice "auto" without a tool parser; the other
# phrases are how OpenAI-compatible proxies and older servers refuse a `tools` field outright.
TOOLS_UNSUPPORTED_MARKERS = (
    "enable-auto-tool-choice", "tool-call-parser", "tool_call_parser",
    "tools are not supported", "does not support tools", "tool use is not supported",
)  # fmt: skip
START_VLLM_HINT = (
    "Start vLLM with: vllm serve MODEL --enable-auto-tool-choice "
    "--tool-call-parser qwen3_coder --max-num-seqs 8 --enable-prefix-caching"
)


# ---------------------------------------------------------------------------------------------
# Public data


@dataclass(frozen=True)
class LLMSettings:
    base_url: str = "http://127.0.0.1:8000/v1"
    api_key: str | None = field(default=None, repr=False)  # never logged, never in errors
    model: str | None = None  # None -> first model of /v1/models
    concurrency: int = 8  # in-flight requests for one review (vLLM --max-num-seqs)
    connect_timeout_s: float = 5.0
    request_timeout_s: float = 300.0
    max_retries: int = 4  # on connection errors, timeouts, 429, 5xx; none on other 4xx
    backoff_base_s: float = 0.5
    backoff_max_s: float = 20.0
    stream: bool = True
    enable_thinking: bool | None = None  # None: leave to server
    max_output_tokens: int = 4096
    temperature: float | None = 0.2
    # Send the first chunk alone until its first token, then the rest. Off by default: with the
    # fake's latency model (tests/bench/bench_llm.py) it raised cache hits from 34% to 54% but
    # cost 0.5 s of wall time on a 20-chunk review, as concurrent prefills do not slow each
    # other there. Turn it on where prefill is the bottleneck (long shared prefixes, slow GPUs).
    warm_prefix: bool = False


@dataclass(frozen=True)
class ServerInfo:
    model: str
    max_model_len: int | None
    models: list[str]


@dataclass(frozen=True)
class ChunkRequest:
    chunk_index: int
    messages: list[dict]
    tools: list[dict]


@dataclass(frozen=True)
class CallRecord:
    """One HTTP attempt series (retries included) for a chunk; stored in ``llm_calls``."""

    chunk_index: int
    mode: str  # "tool_calls" | "json_schema" | "content"
    outcome: str  # "ok" | "error" | "context_overflow" | "no_tool_calls_retry" | ...
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None
    ttft_ms: float | None
    latency_ms: float
    slot_wait_ms: float
    retries: int
    invalid_tool_calls: int
    error: str | None
    started_at: datetime


@dataclass(frozen=True)
class ChunkResult:
    chunk_index: int
    calls: list[dict]  # arguments of each report_finding call (JSON-decoded)
    invalid: list[str]  # reasons for calls that could not be decoded
    records: list[CallRecord]
    context_overflow: bool  # the pipeline re-splits the chunk
    error: str | None  # final failure after retries
    truncated: bool = False  # the answer hit max_output_tokens: the pipeline re-splits the chunk


class LLMError(Exception):
    """Base of the adapter's errors; the message is one clear line."""


class LLMUnavailableError(LLMError):
    """The model server cannot be reached."""


class ModelNotFoundError(LLMError):
    """The configured model is not served."""


class ToolsUnsupportedError(LLMError):
    """Neither tool calls, nor a JSON schema, nor tool calls in content worked."""


class LLMClient(Protocol):
    def server_info(self) -> ServerInfo: ...

    def count_prompt_tokens(self, messages: list[dict], tools: list[dict]) -> int | None: ...

    def review_chunks(
        self,
        requests: Sequence[ChunkRequest],
        on_done: Callable[[ChunkResult], None] | None = None,
        *,
        concurrency: int | None = None,
    ) -> list[ChunkResult]: ...


# ---------------------------------------------------------------------------------------------
# One answer, as read from the wire


@dataclass
class _Answer:
    content: str = ""
    tool_calls: dict[int, dict[str, str]] = field(default_factory=dict)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None
    ttft_s: float | None = None


@dataclass(frozen=True)
class _Failure:
    """An attempt series that ended without an answer."""

    status: int | None
    message: str


@dataclass
class _Attempt:
    """The outcome of one attempt series: an answer or a failure, with its measurements."""

    answer: _Answer | None
    failure: _Failure | None
    retries: int
    started_at: datetime
    latency_s: float
    slot_wait_s: float = 0.0  # waited for shared model slots (reviewbot.slots), all tries


@dataclass
class _Parsed:
    calls: list[dict] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)


class _ModeUnsupported(Exception):
    """The server refused the current output mode (400)."""


# ---------------------------------------------------------------------------------------------
# The client


class VLLMClient:
    """Talks to vLLM's OpenAI-compatible server; implements :class:`LLMClient`."""

    def __init__(self, settings: LLMSettings, *, slots: ModelSlots | None = None) -> None:
        """``slots``: a limit shared with other clients (every worker on one database); each
        HTTP request to the model holds one slot, on top of ``settings.concurrency``."""
        self.settings = settings
        self._slots = slots
        self._root_url = settings.base_url.rstrip("/").removesuffix(VERSION_SUFFIX)
        timeout = httpx.Timeout(settings.request_timeout_s, connect=settings.connect_timeout_s)
        self._openai = openai.OpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key or API_KEY_PLACEHOLDER,
            max_retries=0,  # our own loop: backoff with jitter, Retry-After, counted retries
            timeout=timeout,
        )
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self._http = httpx.Client(timeout=timeout, headers=headers)
        self._lock = threading.Lock()
        self._info: ServerInfo | None = None
        self._tokenize_supported: bool | None = None
        self._mode = MODE_TOOL_CALLS
        self._in_flight = 0
        self.peak_in_flight = 0

    # ----- lifecycle

    def close(self) -> None:
        self._openai.close()
        self._http.close()

    def __enter__(self) -> VLLMClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def mode(self) -> str:
        """The output mode learnt so far (``tool_calls`` until the server refuses it)."""
        return self._mode

    # ----- server facts

    def server_info(self) -> ServerInfo:
        """The served models and ``max_model_len`` (GET /v1/models), cached."""
        if self._info is not None:
            return self._info
        try:
            page = self._openai.models.list()
        except openai.APIConnectionError as error:
            raise self._unavailable(error) from None
        except openai.APIStatusError as error:
            raise LLMError(f"GET /v1/models failed: {self._status_text(error)}") from None
        cards = list(page.data)
        models = [card.id for card in cards]
        if not models:
            raise ModelNotFoundError(f"the server at {self.settings.base_url} serves no model")
        model = self.settings.model or models[0]
        if model not in models:
            raise self._model_not_found(model, models)
        card = cards[models.index(model)]
        max_len = (card.model_extra or {}).get("max_model_len")
        info = ServerInfo(model, int(max_len) if max_len is not None else None, models)
        self._info = info
        return info

    def count_prompt_tokens(self, messages: list[dict], tools: list[dict]) -> int | None:
        """Exact prompt tokens from vLLM's ``POST /tokenize`` (chat template and tools included).

        vLLM serves ``/tokenize`` at the server root (vllm/entrypoints/openai/api_server.py);
        ``None`` when the server has no such endpoint, which is remembered.
        """
        if self._tokenize_supported is False:
            return None
        body: dict[str, Any] = {
            "model": self.server_info().model,
            "messages": messages,
            "add_generation_prompt": True,
        }
        if tools:
            body["tools"] = tools
        body.update(self._template_kwargs())
        try:
            response = self._http.post(f"{self._root_url}/tokenize", json=body)
        except httpx.TransportError as error:
            raise self._unavailable(error) from None
        if response.status_code in (HTTP_NOT_FOUND, 405, 501):
            self._tokenize_supported = False
            return None
        if response.status_code >= HTTP_BAD_REQUEST:
            raise LLMError(f"POST /tokenize failed: HTTP {response.status_code}")
        self._tokenize_supported = True
        return int(response.json()["count"])

    # ----- reviewing

    def review_chunks(
        self,
        requests: Sequence[ChunkRequest],
        on_done: Callable[[ChunkResult], None] | None = None,
        *,
        concurrency: int | None = None,
    ) -> list[ChunkResult]:
        """Review every chunk, at most ``concurrency`` (default: the settings') at once;
        results in request order. Safe to call from several threads at once."""
        if not requests:
            return []
        self.server_info()  # fails fast with a clear error when the server is not there
        started = time.monotonic()
        # Only a stream tells when the first token (so the prefilled prefix) is there.
        warm = self.settings.warm_prefix and self.settings.stream and len(requests) >= 2
        first_token = threading.Event()
        workers = max(1, min(concurrency or self.settings.concurrency, len(requests)))

        def run(request: ChunkRequest, signal: threading.Event | None) -> ChunkResult:
            slot_wait = time.monotonic() - started
            try:
                result = self._review_one(request, slot_wait, signal)
            finally:
                if signal is not None:
                    signal.set()  # never hold the others back, whatever happened
            if on_done is not None:
                on_done(result)
            return result

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm") as pool:
            futures: list[Future[ChunkResult]] = []
            if warm:
                futures.append(pool.submit(run, requests[0], first_token))
                first_token.wait()
                rest: Iterable[ChunkRequest] = requests[1:]
            else:
                rest = requests
            futures.extend(pool.submit(run, request, None) for request in rest)
            return [future.result() for future in futures]

    def _review_one(
        self, request: ChunkRequest, slot_wait_s: float, first_token: threading.Event | None
    ) -> ChunkResult:
        records: list[CallRecord] = []
        stream = self.settings.stream
        while True:
            mode = self._mode
            attempt = self._attempt(request, mode, stream, first_token)
            failure = attempt.failure
            if failure is not None and _is_context_overflow(failure):
                records.append(
                    self._record(
                        request,
                        mode,
                        OUTCOME_CONTEXT_OVERFLOW,
                        attempt,
                        slot_wait_s,
                        0,
                        failure.message,
                    )
                )
                return ChunkResult(request.chunk_index, [], [], records, True, None)
            if failure is not None and _is_mode_refusal(failure, mode):
                records.append(
                    self._record(
                        request,
                        mode,
                        OUTCOME_MODE_UNSUPPORTED,
                        attempt,
                        slot_wait_s,
                        0,
                        failure.message,
                    )
                )
                self._downgrade(mode, failure.message)
                continue
            if failure is not None:
                if failure.status == HTTP_NOT_FOUND:
                    raise self._model_not_found(self.server_info().model, self.server_info().models)
                records.append(
                    self._record(
                        request, mode, OUTCOME_ERROR, attempt, slot_wait_s, 0, failure.message
                    )
                )
                return ChunkResult(request.chunk_index, [], [], records, False, failure.message)
            answer = attempt.answer
            assert answer is not None
            if mode == MODE_JSON_SCHEMA and _format_ignored(answer):
                records.append(
                    self._record(
                        request, mode, OUTCOME_FORMAT_IGNORED, attempt, slot_wait_s, 0, None
                    )
                )
                self._downgrade(mode, "the server ignored response_format")
                continue
            parsed = _parse_answer(answer, mode, request.tools)
            if stream and _empty_tool_calls(answer, parsed):
                # A known vLLM bug: finish_reason "tool_calls" with no call streamed. Once,
                # non-streaming.
                records.append(
                    self._record(
                        request, mode, OUTCOME_NO_TOOL_CALLS_RETRY, attempt, slot_wait_s, 0, None
                    )
                )
                stream = False
                continue
            error = None
            outcome = OUTCOME_OK
            if answer.finish_reason == FINISH_LENGTH:
                outcome = OUTCOME_LENGTH
                error = (
                    f"the answer was cut off at max_output_tokens="
                    f"{self.settings.max_output_tokens} (finish_reason=length)"
                )
            records.append(
                self._record(
                    request, mode, outcome, attempt, slot_wait_s, len(parsed.invalid), error
                )
            )
            return ChunkResult(
                request.chunk_index,
                parsed.calls,
                parsed.invalid,
                records,
                False,
                error,
                truncated=outcome == OUTCOME_LENGTH,
            )

    def _downgrade(self, failed_mode: str, reason: str) -> None:
        with self._lock:
            if self._mode != failed_mode:
                return  # another chunk already learnt it
            following = NEXT_MODE.get(failed_mode)
            if following is None:
                raise ToolsUnsupportedError(
                    f"the server at {self.settings.base_url} accepts neither tool calls, nor a "
                    f"JSON schema, nor tool calls in text ({reason}). {START_VLLM_HINT}"
                )
            self._mode = following

    # ----- one attempt series

    def _attempt(
        self,
        request: ChunkRequest,
        mode: str,
        stream: bool,
        first_token: threading.Event | None,
    ) -> _Attempt:
        started_at = datetime.now(UTC)
        started = time.monotonic()
        retries = 0
        slot_wait_s = 0.0
        body = self._body(request, mode, stream)
        while True:
            try:
                with self._hold_slot() as waited:
                    slot_wait_s += waited
                    answer = self._send_in_flight(body, stream, first_token)
                latency_s = time.monotonic() - started
                return _Attempt(answer, None, retries, started_at, latency_s, slot_wait_s)
            except openai.APIStatusError as error:
                failure = _Failure(error.status_code, self._status_text(error))
                retryable = _retryable_status(error.status_code)
                wait = self._backoff(retries, _retry_after_s(error.response))
            except (openai.APIConnectionError, *TRANSPORT_ERRORS) as error:
                failure = _Failure(None, self._redact(f"{type(error).__name__}: {error}"))
                retryable = True
                wait = self._backoff(retries, None)
            if not retryable or retries >= self.settings.max_retries:
                latency_s = time.monotonic() - started
                return _Attempt(None, failure, retries, started_at, latency_s, slot_wait_s)
            retries += 1
            time.sleep(wait)

    def _hold_slot(self) -> AbstractContextManager[float]:
        """One shared model slot for one HTTP request (nothing to wait for without slots)."""
        return self._slots.hold() if self._slots is not None else nullcontext(0.0)

    def _send_in_flight(
        self, body: dict[str, Any], stream: bool, first_token: threading.Event | None
    ) -> _Answer:
        self._enter_flight()
        try:
            return self._send(body, stream, first_token)
        finally:
            self._leave_flight()

    def _send(
        self, body: dict[str, Any], stream: bool, first_token: threading.Event | None
    ) -> _Answer:
        sent = time.monotonic()
        if not stream:
            response = self._openai.chat.completions.create(**body, stream=False)
            return _answer_from_completion(response)
        answer = _Answer()
        # The raw event stream, decoded with json.loads: the SDK's typed stream builds a model
        # object per token, which tripled the client's CPU per chunk.
        with self._openai.chat.completions.with_streaming_response.create(
            **body, stream=True, stream_options={"include_usage": True}
        ) as response:
            for line in response.iter_lines():
                event = _sse_event(line)
                if event is None:
                    continue
                if answer.ttft_s is None and event.get("choices"):
                    answer.ttft_s = time.monotonic() - sent
                    if first_token is not None:
                        first_token.set()
                _accumulate(answer, event)
        return answer

    def _body(self, request: ChunkRequest, mode: str, stream: bool) -> dict[str, Any]:
        settings = self.settings
        body: dict[str, Any] = {
            "model": self.server_info().model,
            "messages": request.messages,
            "max_tokens": settings.max_output_tokens,
        }
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if mode == MODE_TOOL_CALLS:
            body["tools"] = request.tools
            body["tool_choice"] = "auto"
        elif mode == MODE_JSON_SCHEMA:
            body["response_format"] = _findings_response_format(request.tools)
        else:
            body["tools"] = request.tools
            body["tool_choice"] = "none"
        extra = self._template_kwargs()
        if extra:
            body["extra_body"] = extra
        return body

    def _template_kwargs(self) -> dict[str, Any]:
        if self.settings.enable_thinking is None:
            return {}
        # Qwen3.5's chat template reads enable_thinking; vLLM passes chat_template_kwargs on.
        return {"chat_template_kwargs": {"enable_thinking": self.settings.enable_thinking}}

    def _backoff(self, retries: int, retry_after_s: float | None) -> float:
        ceiling = min(self.settings.backoff_max_s, self.settings.backoff_base_s * 2**retries)
        jitter = random.uniform(0.0, ceiling)  # "full jitter"
        if retry_after_s is None:
            return jitter
        return max(jitter, min(retry_after_s, self.settings.backoff_max_s))

    def _enter_flight(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)

    def _leave_flight(self) -> None:
        with self._lock:
            self._in_flight -= 1

    # ----- records and errors

    def _record(
        self,
        request: ChunkRequest,
        mode: str,
        outcome: str,
        attempt: _Attempt,
        slot_wait_s: float,
        invalid: int,
        error: str | None,
    ) -> CallRecord:
        answer = attempt.answer or _Answer()
        return CallRecord(
            chunk_index=request.chunk_index,
            mode=mode,
            outcome=outcome,
            prompt_tokens=answer.prompt_tokens,
            completion_tokens=answer.completion_tokens,
            cached_tokens=answer.cached_tokens,
            ttft_ms=answer.ttft_s * MS_PER_S if answer.ttft_s is not None else None,
            latency_ms=attempt.latency_s * MS_PER_S,
            slot_wait_ms=(slot_wait_s + attempt.slot_wait_s) * MS_PER_S,
            retries=attempt.retries,
            invalid_tool_calls=invalid,
            error=self._redact(error) if error else None,
            started_at=attempt.started_at,
        )

    def _status_text(self, error: openai.APIStatusError) -> str:
        body = error.body
        message = body.get("message") if isinstance(body, Mapping) else None
        text = message if isinstance(message, str) else error.response.text
        return self._redact(f"HTTP {error.status_code}: {text}")

    def _redact(self, text: str) -> str:
        key = self.settings.api_key
        if key:
            text = text.replace(key, REDACTED)
        return " ".join(text.split())[:MAX_ERROR_CHARS]

    def _unavailable(self, error: Exception) -> LLMUnavailableError:
        cause = self._redact(str(error.__cause__ or error))
        return LLMUnavailableError(
            f"cannot reach the model server at {self.settings.base_url} ({cause}). "
            f"{START_VLLM_HINT}"
        )

    def _model_not_found(self, model: str, served: list[str]) -> ModelNotFoundError:
        return ModelNotFoundError(
            f"the model {model!r} is not served at {self.settings.base_url}; "
            f"it serves: {', '.join(served) or 'nothing'}"
        )


# ---------------------------------------------------------------------------------------------
# Reading answers (pure)


def _transport_errors() -> tuple[type[Exception], ...]:
    """Connection failures while reading a stream: openai 1.x uses httpx, newer ones httpx2."""
    errors: list[type[Exception]] = [httpx.TransportError]
    try:
        import httpx2
    except ImportError:
        return tuple(errors)
    return (*errors, httpx2.TransportError)


TRANSPORT_ERRORS = _transport_errors()
SSE_DATA_PREFIX = "data:"
SSE_DONE = "[DONE]"


class StreamError(openai.APIError):
    """An error event inside a stream (vLLM sends ``data: {"error": ...}`` mid-stream)."""


def _sse_event(line: str) -> dict[str, Any] | None:
    """The JSON object of one server-sent ``data:`` line; None for other lines and [DONE]."""
    if not line.startswith(SSE_DATA_PREFIX):
        return None
    data = line[len(SSE_DATA_PREFIX) :].strip()
    if not data or data == SSE_DONE:
        return None
    try:
        event = json.loads(data)
    except json.JSONDecodeError:
        return None  # not an event we understand; the answer's checks catch a broken stream
    if isinstance(event, dict) and "error" in event:
        error = event["error"]
        message = error.get("message", str(error)) if isinstance(error, dict) else str(error)
        raise StreamError(message, request=None, body=event)  # type: ignore[arg-type]
    return event if isinstance(event, dict) else None


def _accumulate(answer: _Answer, event: dict[str, Any]) -> None:
    """Merge one streamed chunk: content, tool-call deltas by index, finish reason, usage."""
    usage = event.get("usage")
    if usage:
        _read_usage(answer, usage)
    for choice in event.get("choices") or ():
        delta = choice.get("delta") or {}
        if delta.get("content"):
            answer.content += delta["content"]
        for call in delta.get("tool_calls") or ():
            slot = answer.tool_calls.setdefault(call.get("index", 0), {"name": "", "arguments": ""})
            function = call.get("function") or {}
            slot["name"] += function.get("name") or ""
            slot["arguments"] += function.get("arguments") or ""
        if choice.get("finish_reason"):
            answer.finish_reason = choice["finish_reason"]


def _answer_from_completion(response: Any) -> _Answer:
    answer = _Answer()
    if response.usage is not None:
        _read_usage(answer, response.usage.model_dump())
    if not response.choices:
        return answer
    choice = response.choices[0]
    answer.finish_reason = choice.finish_reason
    answer.content = choice.message.content or ""
    for index, call in enumerate(choice.message.tool_calls or ()):
        function = getattr(call, "function", None)
        if function is not None:
            answer.tool_calls[index] = {
                "name": function.name or "",
                "arguments": function.arguments or "",
            }
    return answer


def _read_usage(answer: _Answer, usage: Mapping[str, Any]) -> None:
    answer.prompt_tokens = usage.get("prompt_tokens") or 0
    answer.completion_tokens = usage.get("completion_tokens") or 0
    details = usage.get("prompt_tokens_details")
    # vLLM fills prompt_tokens_details only with --enable-prompt-tokens-details.
    answer.cached_tokens = details.get("cached_tokens") if isinstance(details, dict) else None


def _parse_answer(answer: _Answer, mode: str, tools: Sequence[Mapping[str, Any]]) -> _Parsed:
    """The decoded ``report_finding`` arguments; reasoning is never read as an answer.

    ``message.reasoning``/``reasoning_content`` are separate fields and are not read; a
    ``<think>`` block leaked into ``content`` is stripped by the content parser.
    """
    parsed = _Parsed()
    for index in sorted(answer.tool_calls):
        _take_tool_call(answer.tool_calls[index], parsed)
    content = strip_reasoning(answer.content)
    if mode == MODE_TOOL_CALLS and not any(marker in content for marker in TOOL_CALL_MARKERS):
        return parsed  # prose next to tool calls is not a finding
    from_text = parse_tool_calls_from_content(content, tools)
    for call in from_text.calls:
        if call.name == DEFAULT_FINDINGS_TOOL:
            parsed.calls.append(call.arguments)
        else:
            parsed.invalid.append(f"call to unknown tool {call.name!r}")
    parsed.invalid.extend(from_text.errors)
    return parsed


def _take_tool_call(call: Mapping[str, str], parsed: _Parsed) -> None:
    if call["name"] != DEFAULT_FINDINGS_TOOL:
        parsed.invalid.append(f"call to unknown tool {call['name']!r}")
        return
    arguments = parse_arguments(call["arguments"])
    if isinstance(arguments, ArgumentsError):
        parsed.invalid.append(arguments.reason)
    else:
        parsed.calls.append(arguments)


def _empty_tool_calls(answer: _Answer, parsed: _Parsed) -> bool:
    return answer.finish_reason == FINISH_TOOL_CALLS and not parsed.calls and not parsed.invalid


def _format_ignored(answer: _Answer) -> bool:
    """Guided JSON decoding makes the answer start with ``{``; anything else means it was off."""
    if answer.finish_reason == FINISH_LENGTH:
        return False
    return not strip_reasoning(answer.content).lstrip().startswith("{")


def _findings_response_format(tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"findings": [<report_finding parameters>]}`` as an OpenAI ``json_schema`` format."""
    item: dict[str, Any] = {"type": "object"}
    for tool in tools:
        function = tool.get("function", tool)
        if isinstance(function, Mapping) and function.get("name") == DEFAULT_FINDINGS_TOOL:
            item = dict(function.get("parameters") or item)
    schema = {
        "type": "object",
        "properties": {FINDINGS_KEY: {"type": "array", "items": item}},
        "required": [FINDINGS_KEY],
    }
    return {"type": "json_schema", "json_schema": {"name": JSON_SCHEMA_NAME, "schema": schema}}


def _is_context_overflow(failure: _Failure) -> bool:
    text = failure.message.lower()
    return failure.status == HTTP_BAD_REQUEST and any(m in text for m in CONTEXT_OVERFLOW_MARKERS)


def _is_mode_refusal(failure: _Failure, mode: str) -> bool:
    if failure.status != HTTP_BAD_REQUEST:
        return False
    if mode == MODE_TOOL_CALLS:
        message = failure.message.lower()
        return any(marker in message for marker in TOOLS_UNSUPPORTED_MARKERS)
    return True  # json_schema or tool_choice "none" refused: try the next way, or give up


def _retryable_status(status: int) -> bool:
    return status == HTTP_TOO_MANY_REQUESTS or status >= HTTP_SERVER_ERROR


def _retry_after_s(response: httpx.Response | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds form only)."""
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None
