"""The HTTP transport to an OpenAI-compatible chat server: Ollama, llama.cpp's llama-server...

:class:`OpenAICompatibleBackend` implements :class:`reviewbot.model.ModelBackend` with
httpx: one ``POST /chat/completions`` per :meth:`~OpenAICompatibleBackend.execute`, the event
stream decoded with ``json.loads`` line by line (an SDK's typed stream builds an object per
token, which tripled the client's CPU per chunk), and every failure mapped to the typed errors
of ``reviewbot.model``. :class:`reviewbot.llm.vllm.VLLMBackend` adds what only vLLM has.

What this backend does not expect of the server:

- ``/tokenize``: it is never called; the pipeline estimates prompt tokens locally.
- ``tool_choice``: never sent. ``tools`` alone mean "auto" in the OpenAI API; Ollama's OpenAI
  layer has no such field and ignores it (``ChatCompletionRequest`` in ollama's
  openai/openai.go), and llama-server without ``--jinja`` answers any value but "auto" with
  500 "tool_choice param requires --jinja flag".
- ``max_model_len`` in ``/v1/models``: Ollama's cards hold only id, object, created and
  owned_by, and llama-server's ``meta.n_ctx_train`` is the training context, not the served
  one; the context length comes from the settings.
- ``prompt_tokens_details.cached_tokens``: read when present, else None.

Output modes, in order: tool calls (read from ``tool_calls`` or written in ``content``), then a
JSON schema in ``response_format``.

Owns: :class:`OpenAICompatibleBackend`: the request body of each output mode, reading streamed and
whole answers, and the mapping of every HTTP failure to the typed errors. Must not: retry, wait for
a slot or choose the next output mode (the runner does), or let an httpx exception out.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx

from reviewbot.llm.answers import FINISH_LENGTH, FINISH_TOOL_CALLS
from reviewbot.model import (
    MODE_CONTENT,
    MODE_JSON_SCHEMA,
    MODE_TOOL_CALLS,
    AnswerLostError,
    ContextOverflowError,
    LLMError,
    LLMSettings,
    LLMUnavailableError,
    ModelAnswer,
    ModelNotFoundError,
    ModelRequest,
    OutputModeRefusedError,
    RequestRefusedError,
    RetryableModelError,
    ServerAnswerError,
    ServerInfo,
    ToolCallText,
    one_line,
)
from reviewbot.redaction import hide_url_password
from reviewbot.retry import retry_after_seconds
from reviewbot.toolcalls import DEFAULT_FINDINGS_TOOL

__all__ = [
    "TRANSPORT_ERRORS",
    "OpenAICompatibleBackend",
    "findings_response_format",
]

# Connection failures an HTTP call to the model can raise (the worker retries a job on them).
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (httpx.TransportError,)

MODELS_PATH = "/models"
CHAT_PATH = "/chat/completions"
HTTP_BAD_REQUEST = 400
HTTP_NOT_FOUND = 404
HTTP_TOO_MANY_REQUESTS = 429
HTTP_SERVER_ERROR = 500
FINDINGS_KEY = "findings"
JSON_SCHEMA_NAME = "review_findings"
SSE_DATA_FIELD = b"data"
SSE_BLANK_LINES = (b"\n", b"\r\n", b"\r")
EVENT_STREAM_TYPE = "text/event-stream"
SSE_DONE = "[DONE]"
SNIPPET_CHARS = 120

# vLLM's 400 texts: "This model's maximum context length is N tokens. ..." and "... longer than
# the maximum model length ..." (vllm/entrypoints/renderer.py, serving_engine.py). llama-server:
# "the request exceeds the available context size, try increasing it", error type
# exceed_context_size_error (status 500 before ggml-org/llama.cpp#16486 made it 400).
CONTEXT_OVERFLOW_MARKERS = (
    "maximum context length",
    "context length",
    "maximum model length",
    "available context size",
)
CONTEXT_OVERFLOW_TYPE = "exceed_context_size_error"
# vllm/entrypoints/openai/serving_chat.py: tool_choice "auto" without a tool parser; Ollama:
# "<model> does not support tools" (400); llama-server without --jinja: "tools param requires
# --jinja flag" and "tool_choice param requires --jinja flag", both answered with status 500;
# the other phrases are how OpenAI-compatible proxies and older servers refuse `tools`.
TOOLS_UNSUPPORTED_MARKERS = (
    "enable-auto-tool-choice",
    "tool-call-parser",
    "tool_call_parser",
    "tools are not supported",
    "does not support tools",
    "tool use is not supported",
    "requires --jinja flag",
    "unsupported param: tools",
)
SETUP_HINT = (
    "Point REVIEWBOT_LLM_BASE_URL at the server's OpenAI-compatible /v1 URL (Ollama: "
    "http://HOST:11434/v1; llama-server started with --jinja: http://HOST:8080/v1) and serve a "
    "model with tool calling"
)


class OpenAICompatibleBackend:
    """One OpenAI-compatible chat server; thread-safe (one httpx connection pool)."""

    output_modes: tuple[str, ...] = (MODE_TOOL_CALLS, MODE_JSON_SCHEMA)
    setup_hint: str = SETUP_HINT
    sends_priority: bool = False  # an OpenAI-compatible server has no such field

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self.base_url = settings.base_url.rstrip("/")
        self.shown_url = hide_url_password(self.base_url)  # for messages: never a password
        timeout = httpx.Timeout(settings.request_timeout_s, connect=settings.connect_timeout_s)
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self._http = httpx.Client(timeout=timeout, headers=headers)
        self._info_lock = threading.Lock()
        self._info: ServerInfo | None = None

    def close(self) -> None:
        self._http.close()

    # ----- server facts

    def server_info(self) -> ServerInfo:
        """The served models (GET /v1/models), read once."""
        with self._info_lock:
            if self._info is None:
                self._info = self._read_server_info()
            return self._info

    def count_prompt_tokens(self, messages: list[dict], tools: list[dict]) -> int | None:
        """None: this server has no tokenizer endpoint we rely on; the pipeline estimates."""
        return None

    def _read_server_info(self) -> ServerInfo:
        page = self._get_json(MODELS_PATH)
        cards = page.get("data") if isinstance(page, dict) else None
        if not isinstance(cards, list) or not all(
            isinstance(card, dict) and isinstance(card.get("id"), str) for card in cards
        ):
            raise ServerAnswerError(
                self._one_line(
                    f"the server at {self.shown_url} answered GET {MODELS_PATH} without a list "
                    f"of models: {_snippet(json.dumps(page))}"
                )
            )
        models = [card["id"] for card in cards]
        if not models:
            raise ModelNotFoundError(f"the server at {self.shown_url} serves no model")
        model = self.settings.model or models[0]
        if model not in models:
            raise self.model_not_found(model, models)
        return ServerInfo(model, self._max_model_len(cards[models.index(model)]), models)

    def _max_model_len(self, card: Mapping[str, Any]) -> int | None:
        return None

    def _get_json(self, path: str) -> Any:
        try:
            response = self._http.get(self.base_url + path)
        except httpx.TransportError as error:
            raise self.unavailable(error) from None
        status = response.status_code
        if status >= HTTP_SERVER_ERROR or status == HTTP_TOO_MANY_REQUESTS:
            # The server busy, or a router in front of a stopped box: tried again later.
            message, _ = _error_message(response)
            raise LLMUnavailableError(
                self._one_line(f"GET {path} answered HTTP {status} (busy or a box down): {message}")
            )
        if status >= HTTP_BAD_REQUEST:
            message, _ = _error_message(response)
            raise LLMError(
                self._one_line(f"GET {path} failed: HTTP {response.status_code}: {message}")
            )
        body = _json_or_none(response)
        if body is None:
            raise ServerAnswerError(
                self._one_line(
                    f"the server at {self.shown_url} answered GET {path} with "
                    f"{_described(response)}, not readable JSON: {_snippet(response.text)}. "
                    f"Is REVIEWBOT_LLM_BASE_URL the model server's OpenAI-compatible /v1 URL?"
                )
            )
        return body

    # ----- one request

    def execute(
        self, request: ModelRequest, *, on_first_token: Callable[[], None] | None = None
    ) -> ModelAnswer:
        """One chat request; the whole answer, or a typed error."""
        body = self.chat_body(request)
        url = self.base_url + CHAT_PATH
        sent = time.monotonic()
        headers = self.session_headers(request.session)
        try:
            if request.stream:
                with self._http.stream("POST", url, json=body, headers=headers) as response:
                    if response.status_code >= HTTP_BAD_REQUEST:
                        response.read()
                        raise self._refusal(response, request.mode)
                    if not _is_event_stream(response):
                        response.read()
                        raise self._lost(
                            f"answered with {_described(response)} instead of an event stream: "
                            f"{_snippet(response.text)}"
                        )
                    events = sse_data(response.iter_bytes())
                    return self._read_events(events, sent, on_first_token)
            response = self._http.post(url, json=body, headers=headers)
            if response.status_code >= HTTP_BAD_REQUEST:
                raise self._refusal(response, request.mode)
            return self._with_cut_told(self._read_completion(response), request)
        except httpx.TransportError as error:
            raise RetryableModelError(
                self._one_line(
                    f"the model server at {self.shown_url} failed: {type(error).__name__}: {error}"
                )
            ) from None
        except UnicodeDecodeError as error:
            raise AnswerLostError(
                self._one_line(f"the stream from {self.shown_url} is not UTF-8: {error}")
            ) from None

    def _with_cut_told(self, answer: ModelAnswer, request: ModelRequest) -> ModelAnswer:
        """A whole (not streamed) answer that spent every token it could have is cut, whatever
        its ``finish_reason``: vLLM 0.32 reports one cut inside a tool call as ``"tool_calls"``,
        its last call shortened to the parameters written whole (a stream says ``"length"``).
        The room is ``max_tokens``, or less where the prompt leaves less of the context."""
        if answer.finish_reason != FINISH_TOOL_CALLS:
            return answer
        room = request.max_tokens
        max_model_len = self._info.max_model_len if self._info is not None else None
        if max_model_len and answer.prompt_tokens:
            room = min(room, max_model_len - answer.prompt_tokens)
        if answer.completion_tokens < room:
            return answer
        return dataclasses.replace(answer, finish_reason=FINISH_LENGTH)

    def chat_body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.server_info().model,
            "messages": request.messages,
            "max_tokens": request.max_tokens,
        }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.seed is not None:
            body["seed"] = request.seed
        if request.session and self.settings.session_header:
            body["user"] = request.session
        body.update(self._output_fields(request.mode, request.tools))
        body.update(self._template_fields(request.enable_thinking))
        if request.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def session_headers(self, session: str | None) -> dict[str, str]:
        """The affinity header for a request of ``session`` (none without one, or when the
        setting is empty): vllm-router's consistent_hash keeps one key on one server."""
        header = self.settings.session_header
        return {header: session} if session and header else {}

    def _output_fields(self, mode: str, tools: list[dict]) -> dict[str, Any]:
        if mode == MODE_CONTENT and not tools:
            return {}  # a plain answer (reviewbot.replies.answer): any chat server gives one
        if mode == MODE_TOOL_CALLS:
            return {"tools": tools}
        if mode == MODE_JSON_SCHEMA:
            return {"response_format": findings_response_format(tools)}
        raise ValueError(f"output mode {mode!r} is not one of {', '.join(self.output_modes)}")

    def _template_fields(self, enable_thinking: bool | None) -> dict[str, Any]:
        """Fields for the server's chat template: none here (there is no one way to switch a
        model's thinking on every server, so ``enable_thinking`` is not sent)."""
        return {}

    def _read_events(
        self,
        events: Iterable[str],
        sent: float,
        on_first_token: Callable[[], None] | None,
    ) -> ModelAnswer:
        stream = _StreamedAnswer()
        done = False
        for data in events:
            if data == SSE_DONE:
                done = True
                continue
            try:
                event = json.loads(data)
            except (json.JSONDecodeError, RecursionError):  # not JSON, or nested too deep
                event = None
            if not isinstance(event, dict):
                raise self._lost(f"sent an event that is not a JSON object: {_snippet(data)}")
            if "error" in event:
                # vLLM sends one when generation fails mid-stream, typed BadRequestError/400
                # whatever the cause (create_streaming_error_response): always worth a retry.
                raise self._lost(f"sent an error mid-stream: {_event_error_text(event['error'])}")
            try:
                first_output = stream.ttft_s is None and _carries_output(event)
                stream.add(event)
            except (AttributeError, TypeError):  # a choice, delta or call that is no object
                raise self._lost(f"sent an event of another shape: {_snippet(data)}") from None
            if first_output:
                stream.ttft_s = time.monotonic() - sent
                if on_first_token is not None:
                    on_first_token()
        if stream.finish_reason is None:
            raise self._lost("ended its stream before a finish_reason")
        if not done:
            raise self._lost(f"ended its stream without {SSE_DONE}")
        return stream.answer()

    def _read_completion(self, response: httpx.Response) -> ModelAnswer:
        body = _json_or_none(response)
        if not isinstance(body, dict):
            raise self._lost(
                f"answered with {_described(response)}, not readable JSON: "
                f"{_snippet(response.text)}"
            )
        choices = body.get("choices")
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            raise self._lost(f"answered without a choice: {_snippet(response.text)}")
        if not choices[0].get("finish_reason"):
            raise self._lost(f"answered without a finish_reason: {_snippet(response.text)}")
        try:
            return answer_from_completion(body)
        except (AttributeError, TypeError):  # a message or call that is no object
            raise self._lost(f"answered with another shape: {_snippet(response.text)}") from None

    def _lost(self, what: str) -> AnswerLostError:
        """The answer to POST /chat/completions could not be read whole; worth another try."""
        return AnswerLostError(
            self._one_line(f"the server at {self.shown_url} {what} (POST {CHAT_PATH})")
        )

    # ----- errors

    def _refusal(self, response: httpx.Response, mode: str) -> LLMError:
        """The typed error for an HTTP error status."""
        status = response.status_code
        message, error_type = _error_message(response)
        text = self._one_line(f"HTTP {status}: {message}")
        lowered = message.lower()
        if status == HTTP_NOT_FOUND:
            info = self.server_info()
            return self.model_not_found(info.model, info.models)
        if error_type == CONTEXT_OVERFLOW_TYPE or (
            status == HTTP_BAD_REQUEST and any(m in lowered for m in CONTEXT_OVERFLOW_MARKERS)
        ):
            return ContextOverflowError(text)
        if any(marker in lowered for marker in TOOLS_UNSUPPORTED_MARKERS) or (
            status == HTTP_BAD_REQUEST and mode != MODE_TOOL_CALLS
        ):
            return OutputModeRefusedError(text)
        if status == HTTP_TOO_MANY_REQUESTS or status >= HTTP_SERVER_ERROR:
            retry_after = retry_after_seconds(
                response.headers.get("retry-after"), now=datetime.now(UTC)
            )
            # the server is named: a chunk's error and the review's say which server failed
            named = self._one_line(f"the model server at {self.shown_url} answered {text}")
            return RetryableModelError(named, status=status, retry_after_s=retry_after)
        return RequestRefusedError(text)

    def unavailable(self, error: Exception) -> LLMUnavailableError:
        cause = self._one_line(str(error.__cause__ or error))
        return LLMUnavailableError(
            f"cannot reach the model server at {self.shown_url} ({cause}). {self.setup_hint}"
        )

    def model_not_found(self, model: str, served: list[str]) -> ModelNotFoundError:
        return ModelNotFoundError(
            f"the model {model!r} is not served at {self.shown_url}; "
            f"it serves: {', '.join(served) or 'nothing'}"
        )

    def _one_line(self, text: str) -> str:
        return one_line(text, self.settings.api_key)


# ---------------------------------------------------------------------------------------------
# Reading answers (pure)


class _StreamedAnswer:
    """Merges streamed chunks: content, tool-call deltas by index, finish reason, usage."""

    def __init__(self) -> None:
        self.content: list[str] = []
        # index -> (name, arguments, id) pieces
        self.calls: dict[int, tuple[list[str], list[str], list[str]]] = {}
        self.reasoning: list[str] = []
        self.finish_reason: str | None = None
        self.usage: Mapping[str, Any] | None = None
        self.ttft_s: float | None = None

    def add(self, event: Mapping[str, Any]) -> None:
        usage = event.get("usage")
        if usage:
            self.usage = usage
        for choice in event.get("choices") or ():
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if text:
                self.content.append(text)
            thought = _reasoning_of(delta)
            if thought:
                self.reasoning.append(thought)
            for call in delta.get("tool_calls") or ():
                name, arguments, ids = self.calls.setdefault(call.get("index", 0), ([], [], []))
                function = call.get("function") or {}
                name.append(function.get("name") or "")
                arguments.append(function.get("arguments") or "")
                ids.append(call.get("id") or "")
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def answer(self) -> ModelAnswer:
        calls = [
            # the id comes with a call's first piece (some servers repeat it in every piece)
            ToolCallText("".join(name), "".join(arguments), next(filter(None, ids), None))
            for _, (name, arguments, ids) in sorted(self.calls.items())
        ]
        return ModelAnswer(
            "".join(self.content),
            calls,
            self.finish_reason,
            *_usage_counts(self.usage),
            self.ttft_s,
            "".join(self.reasoning),
            _reasoning_tokens(self.usage),
        )


def sse_data(chunks: Iterable[bytes]) -> Iterator[str]:
    """The data of each server-sent event in a byte stream.

    Lines end at CR, LF or CRLF only, as the SSE spec says
    (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
    ``bytes.splitlines`` splits exactly there, while ``str.splitlines`` (and line iterators
    built on it) also splits at U+2028, U+0085 and other characters that JSON text carries raw,
    cutting an event in two. An event's ``data`` lines are joined with LF and dispatched at the
    blank line that ends it; a last event without that blank line is dropped, as the spec says.
    """
    pending = b""
    data: list[bytes] = []
    for chunk in chunks:
        lines = (pending + chunk).splitlines(keepends=True)
        # A last line without its end, or ending in CR (its LF may come next), waits for more.
        pending = lines.pop() if lines and not lines[-1].endswith(b"\n") else b""
        for line in lines:
            if line in SSE_BLANK_LINES:
                if data:
                    yield b"\n".join(data).decode()
                    data = []
                continue
            field, _, value = line.rstrip(b"\r\n").partition(b":")
            if field == SSE_DATA_FIELD:
                data.append(value.removeprefix(b" "))
    if pending == b"\r" and data:  # the blank line that ends the last event, by a lone CR
        yield b"\n".join(data).decode()


def answer_from_completion(body: Mapping[str, Any]) -> ModelAnswer:
    """The answer of a non-streamed chat completion with at least one choice."""
    usage = _usage_counts(body.get("usage"))
    choice = body["choices"][0]
    message = choice.get("message") or {}
    calls = [
        ToolCallText(
            function.get("name") or "", function.get("arguments") or "", call.get("id") or None
        )
        for call in message.get("tool_calls") or ()
        if (function := call.get("function")) is not None
    ]
    return ModelAnswer(
        message.get("content") or "",
        calls,
        choice.get("finish_reason"),
        *usage,
        reasoning=_reasoning_of(message) or "",
        reasoning_tokens=_reasoning_tokens(body.get("usage")),
    )


def _carries_output(event: Mapping[str, Any]) -> bool:
    """Whether a streamed event holds the first generated output: text, reasoning or a tool
    call. vLLM's first event only names the role (``"content": ""``), so it does not count."""
    for choice in event.get("choices") or ():
        delta = choice.get("delta") or {}
        if delta.get("content") or delta.get("tool_calls") or _reasoning_of(delta):
            return True
    return False


def _reasoning_of(message: Mapping[str, Any]) -> str | None:
    """The reasoning text of a message or delta: ``reasoning`` (vLLM >= 0.10) or
    ``reasoning_content`` (older vLLM, DeepSeek's API); some vLLM versions send the same text in
    both, vLLM 0.32 only ``reasoning``."""
    text = message.get("reasoning") or message.get("reasoning_content")
    return text if isinstance(text, str) else None


def _usage_counts(usage: Mapping[str, Any] | None) -> tuple[int, int, int | None]:
    """prompt, completion and cached tokens; vLLM fills ``prompt_tokens_details`` only with
    --enable-prompt-tokens-details, Ollama never."""
    if not usage:
        return 0, 0, None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0, cached


def _reasoning_tokens(usage: Mapping[str, Any] | None) -> int | None:
    """Of the completion tokens, those spent thinking: vLLM 0.32 with a reasoning parser (and
    OpenAI's API) report ``completion_tokens_details.reasoning_tokens``; None when not told."""
    details = usage.get("completion_tokens_details") if usage else None
    count = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def findings_response_format(tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
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


def _json_or_none(response: httpx.Response) -> Any:
    """The JSON body, or None when the body is not JSON (an HTML page, plain text) or is nested
    deeper than ``json.loads`` can go (it recurses: ``[[[[...`` 100,000 deep from a server that
    lies is a RecursionError, not a JSONDecodeError)."""
    try:
        return response.json()
    except (ValueError, RecursionError):  # JSONDecodeError, bytes that are not text, too deep
        return None


def _is_event_stream(response: httpx.Response) -> bool:
    """True unless the server said it sends something else (no Content-Type: assume SSE)."""
    content_type = response.headers.get("content-type")
    return content_type is None or content_type.lower().startswith(EVENT_STREAM_TYPE)


def _described(response: httpx.Response) -> str:
    """e.g. ``HTTP 200 text/html``."""
    content_type = response.headers.get("content-type", "no content type").split(";")[0]
    return f"HTTP {response.status_code} {content_type}"


def _error_message(response: httpx.Response) -> tuple[str, str | None]:
    """The message and type of an error answer: OpenAI's ``{"error": {"message", "type"}}``,
    a bare ``{"error": "..."}``, ``{"message": ...}``, FastAPI's ``{"detail": ...}``, or text."""
    body = _json_or_none(response)
    if not isinstance(body, dict):
        return _snippet(response.text), None
    error = body.get("error")
    if isinstance(error, dict):
        error_type = error.get("type")
        return str(error.get("message", error)), error_type if isinstance(error_type, str) else None
    for key in ("error", "message", "detail"):
        if body.get(key) is not None:
            return str(body[key]), None
    return response.text, None


def _event_error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message", error))
    return str(error)


def _snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    flat = " ".join(text.split())
    return repr(flat[:limit] + ("…" if len(flat) > limit else ""))
