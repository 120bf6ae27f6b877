"""The model adapter's vocabulary: its data, its errors and its two Protocols.

- The pipeline (``reviewbot.review``) asks an :class:`LLMClient` for the server's facts, for
  prompt token counts and to review a list of chunks. :class:`reviewbot.llm.runner.ChunkRunner`
  is that client: it owns concurrency, model slots, retries, the output-mode fallback and call
  timing.
- The runner sends each request through a :class:`ModelBackend`: one HTTP request per
  :meth:`ModelBackend.execute` call (the shape of simonw/llm's ``Model.execute()``), which
  answers a :class:`ModelAnswer` or raises one of the typed errors below, never an HTTP
  library's exception.

No I/O and no HTTP client here: the offline path (``reviewbot plan``) and the pipeline import
this module without loading one. The defaults that are settings (the prefill share, the repair
turns) come from ``reviewbot.config``, their one home.

Owns: the model adapter's data (settings, requests, answers, call records), its typed errors and the
two Protocols. Must not: do I/O or import an HTTP client.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from reviewbot.config import (
    DEFAULT_MAX_REPAIR_ROUNDS,
    DEFAULT_PREFILL_TOKENS_PER_REVIEW,
    DEFAULT_PRIORITY_SCHEDULING,
    DEFAULT_SESSION_HEADER,
    DEFAULT_TOOL_ROUNDS,
    DEFAULT_TOOL_TOKENS,
)
from reviewbot.redaction import without_userinfo
from reviewbot.states import CallPurpose, Workload

if TYPE_CHECKING:
    from reviewbot.repo.tools import RepositoryTools

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
    "one_line",
    "request_priority",
    "session_key",
]

# Structured output, in the order the runner tries them (see reviewbot.llm.runner).
MODE_TOOL_CALLS = "tool_calls"
MODE_JSON_SCHEMA = "json_schema"
MODE_CONTENT = "content"

# vLLM's ``priority`` of a request (started with --scheduling-policy priority): lower runs
# sooner, ties first come first served. Spaced by ten so a level can go between two later.
PRIORITY_THREAD_ANSWER = 0
PRIORITY_FIRST_REVIEW = 10
PRIORITY_INCREMENTAL_REVIEW = 20
PRIORITY_EVAL = 30
PRIORITY_LOAD_TEST = 40
PRIORITY_BACKGROUND = 40
PRIORITIES: dict[Workload, int] = {
    Workload.THREAD_ANSWER: PRIORITY_THREAD_ANSWER,
    Workload.FIRST_REVIEW: PRIORITY_FIRST_REVIEW,
    Workload.INCREMENTAL_REVIEW: PRIORITY_INCREMENTAL_REVIEW,
    Workload.EVAL: PRIORITY_EVAL,
    Workload.LOAD_TEST: PRIORITY_LOAD_TEST,
    Workload.BACKGROUND: PRIORITY_BACKGROUND,
}

REDACTED = "***"
MAX_ERROR_CHARS = 500


# ---------------------------------------------------------------------------------------------
# Settings and server facts


@dataclass(frozen=True)
class LLMSettings:
    """Knobs of one model connection; the backend reads the transport ones, the runner the rest."""

    base_url: str = "http://127.0.0.1:8000/v1"
    api_key: str | None = field(default=None, repr=False)  # never logged, never in errors
    model: str | None = None  # None -> first model of /v1/models
    concurrency: int = 8  # requests in flight through one runner (vLLM --max-num-seqs)
    connect_timeout_s: float = 5.0
    request_timeout_s: float = 300.0
    # per chunk, on connection errors, timeouts, 429, 5xx, lost answers, and answers that
    # stay unreadable after their repair turns
    max_retries: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 20.0  # also caps a server's Retry-After
    stream: bool = True
    enable_thinking: bool | None = None  # None: leave to server
    max_output_tokens: int = 4096
    temperature: float | None = 0.2
    # Send the first chunk alone until its first token, then the rest. Off by default: with the
    # fake's latency model (tests/bench/bench_llm.py) it raised cache hits from 34% to 54% but
    # cost 0.5 s of wall time on a 20-chunk review, as concurrent prefills do not slow each
    # other there. Turn it on where prefill is the bottleneck (long shared prefixes, slow GPUs).
    warm_prefix: bool = False
    # Prompt tokens of one review waiting for their first token at once (0: no limit); a
    # request larger than this goes alone. See reviewbot.llm.prefill.
    prefill_tokens_per_review: int = DEFAULT_PREFILL_TOKENS_PER_REVIEW
    # Repair turns for an answer with unreadable calls (0: none); see reviewbot.llm.runner.
    max_repair_rounds: int = DEFAULT_MAX_REPAIR_ROUNDS
    # The header that carries a request's session key (ModelRequest.session), also sent as
    # the OpenAI ``user`` field, for a router's affinity ("": neither is sent).
    session_header: str = DEFAULT_SESSION_HEADER
    # Send each request's ``priority`` (vLLM's backend only; see reviewbot.llm.vllm).
    priority_scheduling: bool = DEFAULT_PRIORITY_SCHEDULING


@dataclass(frozen=True)
class ServerInfo:
    model: str
    max_model_len: int | None  # None: the server does not say (the settings or a default rule)
    models: list[str]


# ---------------------------------------------------------------------------------------------
# The pipeline's side: chunks in, results out


@dataclass(frozen=True)
class ChunkRequest:
    chunk_index: int
    messages: list[dict]
    tools: list[dict]
    # The prompt's size as the pipeline estimated it (None: unknown, not limited by the
    # runner's prefill share).
    prompt_tokens: int | None = None
    # The context the prompt and the answer must fit in, as the pipeline budgets it (None: the
    # server's max_model_len). The runner sends no repair turn or tool round that would not fit.
    max_model_len: int | None = None
    # The model's repository tools for this chunk (None: none). Their schemas are in ``tools``
    # after report_finding; the runner offers them only in the tool-calls output mode, on
    # every request of the chunk, and answers their calls while the chunk's tool budget lasts
    # (reviewbot.llm.rounds).
    repository: RepositoryTools | None = None
    # With ``repository``: at most this many tool rounds (continuations after tool answers)
    # and tokens of tool answers for this chunk (the settings tool_rounds and tool_tokens).
    tool_rounds: int = DEFAULT_TOOL_ROUNDS
    tool_tokens: int = DEFAULT_TOOL_TOKENS
    # Which review the request belongs to (``<gitlab host>/<project id>/<mr iid>``), sent with
    # every request for it (repair turns, tool rounds, verification) so a router keeps the MR
    # on one server; None: no affinity (a local diff).
    session: str | None = None
    # Thinking for this chunk's requests (None: the setting enable_thinking); the runner asks
    # a chunk again with False when its answer was cut off while thinking.
    enable_thinking: bool | None = None
    # How soon the server should run it (request_priority of the review's workload), sent
    # with every request for it like ``session``; None: the server's default (0).
    priority: int | None = None
    # At most this many output tokens (None: the setting max_output_tokens).
    max_output_tokens: int | None = None
    # A deep review's later passes (reviewbot.passes): their own sampling temperature (None:
    # the setting temperature) and ``seed`` (None: none sent), on every request of the chunk.
    temperature: float | None = None
    seed: int | None = None

    def sampling(self, temperature: float | None) -> dict[str, Any]:
        """``ModelRequest``'s sampling fields: this chunk's temperature (else ``temperature``,
        the setting) and seed."""
        chosen = self.temperature if self.temperature is not None else temperature
        return {"temperature": chosen, "seed": self.seed}


@dataclass(frozen=True)
class CallRecord:
    """One HTTP attempt series (retries included) for a chunk; stored in ``llm_calls``.

    ``tool_calls``: the calls its answer held, readable or not; ``invalid_tool_calls``: those
    that were not; ``repaired_tool_calls`` (a repair turn): unreadable calls of the earlier
    answers that this answer resent readably.
    """

    chunk_index: int
    mode: str  # "tool_calls" | "json_schema" | "content"
    outcome: str  # "ok" | "error" | "context_overflow" | "no_tool_calls_retry" | ...
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None
    ttft_ms: float | None
    latency_ms: float
    # Before the first try was sent and between tries: the wait for a worker thread, for the
    # review's prefill share (reviewbot.llm.prefill) and for the model slots.
    slot_wait_ms: float
    retries: int
    invalid_tool_calls: int
    error: str | None
    started_at: datetime
    tool_calls: int = 0
    repaired_tool_calls: int = 0
    tool_round: int = 0
    repo_tool_calls: int = 0
    tool_answer_tokens: int = 0
    purpose: str = CallPurpose.REVIEW  # or CallPurpose.VERIFY
    # Calls read from where the server's parsers should have taken them out: written in the
    # content of a tool-calls answer, or in the model's thinking (reviewbot.llm.answers).
    recovered_tool_calls: int = 0
    reasoning_tokens: int | None = None  # ModelAnswer.reasoning_tokens
    thinking_off: bool = False  # asked with thinking off (after an answer cut off while thinking)


@dataclass(frozen=True)
class ChunkResult:
    chunk_index: int
    calls: list[dict]  # arguments of each readable report_finding call (JSON-decoded)
    invalid: list[str]  # why each unreadable call of every answer was refused (repaired or not)
    records: list[CallRecord]
    context_overflow: bool  # the pipeline re-splits the chunk
    # final failure after retries: the chunk was not reviewed (``calls`` still holds what
    # could be read of it, to publish)
    error: str | None
    truncated: bool = False  # the answer hit max_output_tokens: the pipeline re-splits the chunk
    # the conversation after the chunk's tool rounds (None: no round was made): the evidence
    # the model read, which the verification pass must see too
    conversation: list[dict] | None = None


class LLMClient(Protocol):
    """What the review pipeline needs from the model."""

    def server_info(self) -> ServerInfo: ...

    def count_prompt_tokens(self, messages: list[dict], tools: list[dict]) -> int | None: ...

    def review_chunks(
        self,
        requests: Sequence[ChunkRequest],
        on_done: Callable[[ChunkResult], None] | None = None,
    ) -> list[ChunkResult]: ...

    def verify_chunk(self, request: ChunkRequest) -> tuple[ModelAnswer | None, CallRecord]:
        """One verification call (reviewbot.verify)."""
        ...

    def one_call(
        self, request: ChunkRequest, purpose: CallPurpose, mode: str | None = None
    ) -> tuple[ModelAnswer | None, CallRecord]:
        """One model call of its own ``purpose`` (the walkthrough), in ``mode`` (None: the
        review's output mode)."""
        ...


# ---------------------------------------------------------------------------------------------
# The backend's side: one request, one answer


@dataclass(frozen=True)
class ModelRequest:
    """One chat request, in one output mode."""

    messages: list[dict]
    tools: list[dict]
    mode: str  # MODE_TOOL_CALLS | MODE_JSON_SCHEMA | MODE_CONTENT
    stream: bool
    max_tokens: int
    temperature: float | None
    session: str | None = None  # ChunkRequest.session
    # Qwen3.5's thinking for this request only (None: the setting enable_thinking); the runner
    # asks a chunk again with False when its answer was cut off while thinking.
    enable_thinking: bool | None = None
    priority: int | None = None  # ChunkRequest.priority
    seed: int | None = None  # ChunkRequest.seed


@dataclass(frozen=True, slots=True)
class ToolCallText:
    """One tool call as the server sent it: the name and the JSON arguments, not yet decoded,
    and its id (None when the server gave none), which a reply in the conversation names."""

    name: str
    arguments: str
    id: str | None = None


@dataclass(frozen=True)
class ModelAnswer:
    content: str = ""
    tool_calls: list[ToolCallText] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None  # None: the server does not report prefix-cache hits
    # Streamed answers only: from sending the request to the first generated output (text,
    # reasoning or a tool call; the event that only names the role does not count).
    ttft_s: float | None = None
    reasoning: str = ""  # the model's thinking, as the server's reasoning parser split it off
    # Of completion_tokens, those spent thinking, as the server counts them (vLLM >= 0.32 with
    # a reasoning parser: usage.completion_tokens_details.reasoning_tokens); None: not told.
    reasoning_tokens: int | None = None


class ModelBackend(Protocol):
    """One model server's HTTP API. Safe to use from several threads at once."""

    base_url: str
    # The output modes this server can be asked for, in the order to try them.
    output_modes: tuple[str, ...]
    # One sentence on how to set the server up, appended to "cannot work with it" errors.
    setup_hint: str
    # Whether requests carry their ``priority`` (ModelRequest.priority) to this server.
    sends_priority: bool

    def server_info(self) -> ServerInfo:
        """The served models and context length; cached after the first call."""
        ...

    def count_prompt_tokens(self, messages: list[dict], tools: list[dict]) -> int | None:
        """Exact prompt tokens (chat template and tools included), or None when unknown."""
        ...

    def execute(
        self, request: ModelRequest, *, on_first_token: Callable[[], None] | None = None
    ) -> ModelAnswer:
        """Send one request and read its whole answer; raises the errors of this module."""
        ...

    def close(self) -> None: ...


# ---------------------------------------------------------------------------------------------
# Errors: one clear line each


class LLMError(Exception):
    """Base of the adapter's errors; the message is one clear line."""


class LLMUnavailableError(LLMError):
    """The model server cannot be reached."""


class ModelNotFoundError(LLMError):
    """The configured model is not served."""


class ToolsUnsupportedError(LLMError):
    """The server accepts none of the output modes the backend can ask for."""


class ServerAnswerError(LLMError):
    """The server answered something its API does not promise (a bad field, an HTML page)."""


class ContextOverflowError(LLMError):
    """The prompt and the requested output do not fit the model's context."""


class OutputModeRefusedError(LLMError):
    """The server refused the request's output mode (tools, JSON schema, tool choice)."""


class RequestRefusedError(LLMError):
    """The server refused the request for another reason; sending it again will not help."""


class RetryableModelError(LLMError):
    """A failure worth another try: connection lost, timeout, 429, 5xx, an answer lost."""

    def __init__(
        self, message: str, *, status: int | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


class AnswerLostError(RetryableModelError):
    """The server accepted the request but its answer could not be read whole."""


def session_key(gitlab_url: str, project_id: int, iid: int) -> str:
    """``<gitlab host>/<project id>/<mr iid>``: what every model request of an MR's review
    carries (``ChunkRequest.session``), so a router keeps the MR on one server. The host keeps
    its port and never the URL's ``user:password@``; ids, not paths, as a project may be
    renamed."""
    address = without_userinfo(gitlab_url)
    host = urlsplit(address).netloc or address.rstrip("/")
    return f"{host}/{project_id}/{iid}"


def request_priority(workload: Workload) -> int:
    """vLLM's ``priority`` for a request made for ``workload``: a thread answer before a first
    review, before an incremental review, before an eval, before load tests and background
    work (lower runs sooner)."""
    return PRIORITIES[workload]


def one_line(text: str, secret: str | None = None) -> str:
    """``text`` on one line, at most ``MAX_ERROR_CHARS`` long, with ``secret`` masked."""
    if secret:
        text = text.replace(secret, REDACTED)
    return " ".join(text.split())[:MAX_ERROR_CHARS]
