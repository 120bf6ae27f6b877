"""The chunk runner: reviews the chunks of merge requests through one model backend.

:class:`ChunkRunner` implements :class:`reviewbot.llm.backend.LLMClient` on top of a
:class:`~reviewbot.llm.backend.ModelBackend` and owns everything between "review these chunks"
and "send this one request":

- concurrency: at most ``concurrency`` requests of one ``review_chunks`` call in flight, and at
  most ``settings.concurrency`` through the whole runner, however many threads call it (a worker
  holds one runner for all its jobs);
- shared model slots (``reviewbot.slots``): each HTTP request holds one;
- the prefill share (``reviewbot.llm.prefill``): the prompt tokens of one ``review_chunks`` call
  waiting for their first token stay within ``settings.prefill_tokens_per_review``, so a review
  of large chunks never puts another merge request's first token behind all of them;
- retries with backoff, jitter and the server's ``Retry-After``;
- the output mode: the backend's first mode until the server refuses it, then the next one,
  learnt once per runner and reused for every later chunk;
- lost answers: a stream that did not arrive whole is sent again like any retryable failure;
  an answer whose tool calls were lost (``finish_reason: "tool_calls"`` with no call, a known
  vLLM bug when streaming) is asked again without streaming; a chunk still without an answer
  after ``max_retries`` gets ``ChunkResult.error``, never an empty success;
- unreadable answers: a call whose arguments cannot be decoded (bad JSON, JSON nested too
  deep, content that is JSON but no findings object) or do not fit the tool's schema is
  answered in the same conversation (``repair_messages``: the reason, "resend this finding"),
  up to ``max_repair_rounds`` times. A call of the answer to that turn repairs an unreadable
  call only if it is a resend of it (``match_resent``: by id, else by path and line); a resend
  of a call already read is dropped, and ``repaired_tool_calls`` counts only true repairs. An
  answer still unreadable is asked again from the start without streaming, like a lost one,
  and after ``max_retries`` the chunk gets ``ChunkResult.error`` (not reviewed) with the
  readable calls of its best try kept, to be published;
- a repair turn that would not fit the context: the turn repeats the chunk's prompt plus the
  answer plus the reasons, so its prompt tokens are counted before it is sent (the server's
  ``/tokenize`` when it has one, else the last prompt's tokens as the server reported them plus
  a byte estimate of what the turn adds). When they and ``max_output_tokens`` exceed the
  context (``ChunkRequest.max_model_len``, else the server's), the turn is not sent and the
  chunk is a context overflow, exactly as when the server answers the first request with 400
  "maximum context length" (and as when it answers the repair turn so): the pipeline re-splits
  the chunk and sends the smaller parts, whose repair turns have room; a chunk that cannot be
  split is reported not reviewed. The readable calls already read are kept, as for an answer
  cut off at ``max_output_tokens``;
- timing: one :class:`~reviewbot.llm.backend.CallRecord` per attempt series (tokens, cached
  tokens, TTFT, latency, slot wait, retries).

Owns: everything in that list, between "review these chunks" and one request. Must not: speak HTTP
(the backend does), decode an answer's calls itself (`reviewbot.llm.answers`), or anchor, dedupe or
store a finding (the pipeline does).
"""

from __future__ import annotations

import dataclasses
import json
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from reviewbot.llm.answers import (
    FINISH_LENGTH,
    AnsweredCall,
    ParsedAnswer,
    empty_tool_calls,
    format_ignored,
    match_resent,
    parse_answer,
    repair_messages,
)
from reviewbot.llm.backend import (
    MODE_CONTENT,
    MODE_JSON_SCHEMA,
    MODE_TOOL_CALLS,
    CallRecord,
    ChunkRequest,
    ChunkResult,
    ContextOverflowError,
    LLMError,
    LLMSettings,
    ModelAnswer,
    ModelBackend,
    ModelNotFoundError,
    ModelRequest,
    OutputModeRefusedError,
    RetryableModelError,
    ServerInfo,
    ToolsUnsupportedError,
    one_line,
)
from reviewbot.llm.prefill import PrefillGate, PrefillTicket, check_prefill_limit
from reviewbot.retry import backoff_s
from reviewbot.tokens import ByteEstimateCounter

if TYPE_CHECKING:
    from reviewbot.slots import ModelSlots

__all__ = ["ChunkRunner"]

OUTCOME_OK = "ok"
OUTCOME_ERROR = "error"
OUTCOME_CONTEXT_OVERFLOW = "context_overflow"
OUTCOME_NO_TOOL_CALLS_RETRY = "no_tool_calls_retry"
OUTCOME_MODE_UNSUPPORTED = "mode_unsupported"
OUTCOME_FORMAT_IGNORED = "format_ignored"
OUTCOME_LENGTH = "length"
OUTCOME_INVALID_CALLS = "invalid_calls"  # unreadable calls, answered with a repair turn
OUTCOME_REPAIR = "repair"  # the answer to a repair turn
OUTCOME_UNREADABLE_RETRY = "unreadable_retry"  # still unreadable: the chunk is asked again
NOT_RESENT = " (not resent when asked)"  # said of an unreadable call the repair turn left out
REASONS_SHOWN = 3  # distinct reasons an unreadable chunk's error names
# A chat template's tokens around one message (role markers, <tool_response> tags), on top of
# its text, when a repair turn's size is estimated without the server's /tokenize.
MESSAGE_FRAMING_TOKENS = 16
MS_PER_S = 1000.0
# How an error names each output mode the server would not take.
MODE_NAMES = {
    MODE_TOOL_CALLS: "tool calls",
    MODE_JSON_SCHEMA: "a JSON schema",
    MODE_CONTENT: "tool calls in text",
}


@dataclass
class _Attempt:
    """One attempt series: an answer or the error that ended it, with its measurements."""

    answer: ModelAnswer | None
    failure: LLMError | None
    retries: int
    started_at: datetime
    latency_s: float
    slot_wait_s: float  # waited for the prefill share and the model slots, all tries


@dataclass
class _Reading:
    """What one try of a chunk (an answer and its repair turns) could read."""

    calls: list[dict] = field(default_factory=list)  # readable calls' arguments
    outstanding: list[AnsweredCall] = field(default_factory=list)  # the calls still unreadable
    invalid: list[str] = field(default_factory=list)  # every unreadable call's reason
    overflow: str | None = None  # why the next repair turn was not sent: it would not fit

    @property
    def reasons(self) -> list[str]:
        """Why each call still unreadable is."""
        return [entry.reason or "" for entry in self.outstanding]

    @property
    def total(self) -> int:
        """The calls the model meant to make: those read and those still unreadable."""
        return len(self.calls) + len(self.outstanding)


@dataclass
class _ChunkTries:
    """One chunk's tries so far: its calls' records, and what the unreadable answers left."""

    request: ChunkRequest
    queued_s: float
    stream: bool
    records: list[CallRecord] = field(default_factory=list)
    unreadable_tries: int = 0  # tries asked again: calls lost, or unreadable after repairs
    invalid: list[str] = field(default_factory=list)  # every unreadable call's reason
    best: _Reading = field(default_factory=_Reading)  # the try that read the most calls

    def ask_again(self) -> None:
        """The next try is asked from the start, without streaming."""
        self.unreadable_tries += 1
        self.stream = False

    def failed(self, error: str) -> ChunkResult:
        """Not reviewed: the readable calls of the best try are kept."""
        return ChunkResult(
            self.request.chunk_index, self.best.calls, self.invalid, self.records, False, error
        )


class ChunkRunner:
    """Reviews chunks through one backend; safe to call from several threads at once."""

    def __init__(
        self,
        backend: ModelBackend,
        settings: LLMSettings,
        *,
        slots: ModelSlots | None = None,
    ) -> None:
        """``slots``: a limit shared with other runners (every worker on one database); each
        HTTP request to the model holds one, on top of ``settings.concurrency``."""
        if settings.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {settings.concurrency}")
        check_prefill_limit(settings.prefill_tokens_per_review, "prefill_tokens_per_review")
        if settings.max_repair_rounds < 0:
            raise ValueError(
                f"max_repair_rounds must be 0 or more, got {settings.max_repair_rounds}"
            )
        self.backend = backend
        self.settings = settings
        self._slots = slots
        self._runner_slots = threading.BoundedSemaphore(settings.concurrency)
        self._lock = threading.Lock()
        self._mode = backend.output_modes[0]
        self._in_flight = 0
        self.peak_in_flight = 0

    # ----- lifecycle

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> ChunkRunner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def mode(self) -> str:
        """The output mode learnt so far (the backend's first until the server refuses it)."""
        return self._mode

    # ----- LLMClient

    def server_info(self) -> ServerInfo:
        return self.backend.server_info()

    def count_prompt_tokens(self, messages: list[dict], tools: list[dict]) -> int | None:
        return self.backend.count_prompt_tokens(messages, tools)

    def review_chunks(
        self,
        requests: Sequence[ChunkRequest],
        on_done: Callable[[ChunkResult], None] | None = None,
        *,
        concurrency: int | None = None,
    ) -> list[ChunkResult]:
        """Review every chunk, at most ``concurrency`` (default: the settings') at once.

        Results come in request order; ``on_done`` sees each as it finishes (from a worker
        thread).
        """
        if not requests:
            return []
        limit = self.settings.concurrency if concurrency is None else concurrency
        if limit < 1:
            raise ValueError(f"concurrency must be at least 1, got {limit}")
        self.backend.server_info()  # fails fast with a clear error when the server is not there
        started = time.monotonic()
        # Only a stream tells when the first token (so the prefilled prefix) is there.
        warm = self.settings.warm_prefix and self.settings.stream and len(requests) >= 2
        first_token = threading.Event()
        gate = PrefillGate(self.settings.prefill_tokens_per_review)

        def run(request: ChunkRequest, signal: threading.Event | None) -> ChunkResult:
            queued_s = time.monotonic() - started
            try:
                result = self._review_one(request, queued_s, gate, signal)
            finally:
                if signal is not None:
                    signal.set()  # never hold the others back, whatever happened
            if on_done is not None:
                on_done(result)
            return result

        workers = min(limit, len(requests))
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

    # ----- one chunk

    def _review_one(
        self,
        request: ChunkRequest,
        queued_s: float,
        gate: PrefillGate,
        first_token: threading.Event | None,
    ) -> ChunkResult:
        tries = _ChunkTries(request, queued_s, self.settings.stream)
        while True:
            mode = self._mode
            attempt = self._attempt(request, mode, tries.stream, gate, first_token)
            failure = attempt.failure
            if isinstance(failure, ContextOverflowError):
                self._keep(tries, mode, attempt, OUTCOME_CONTEXT_OVERFLOW, error=str(failure))
                return ChunkResult(
                    request.chunk_index, [], tries.invalid, tries.records, True, None
                )
            if isinstance(failure, OutputModeRefusedError):
                self._keep(tries, mode, attempt, OUTCOME_MODE_UNSUPPORTED, error=str(failure))
                self._downgrade(mode, str(failure))
                continue
            if failure is not None:
                self._keep(tries, mode, attempt, OUTCOME_ERROR, error=str(failure))
                return tries.failed(str(failure))
            answer = attempt.answer
            assert answer is not None
            if mode == MODE_JSON_SCHEMA and format_ignored(answer):
                self._keep(tries, mode, attempt, OUTCOME_FORMAT_IGNORED)
                self._downgrade(mode, "the server ignored response_format")
                continue
            result = self._read(tries, mode, attempt, answer, gate)
            if result is not None:
                return result

    def _read(
        self,
        tries: _ChunkTries,
        mode: str,
        attempt: _Attempt,
        answer: ModelAnswer,
        gate: PrefillGate,
    ) -> ChunkResult | None:
        """The chunk's result from a try's answer, or None to ask again (without streaming)."""
        parsed = parse_answer(answer, mode, tries.request.tools)
        if empty_tool_calls(answer, parsed):
            if tries.unreadable_tries >= self.settings.max_retries:
                error = (
                    f"the model answered finish_reason=tool_calls without any tool call "
                    f"{tries.unreadable_tries + 1} times"
                )
                self._keep(tries, mode, attempt, OUTCOME_ERROR, parsed, error=error)
                return tries.failed(error)
            # A known vLLM bug: finish_reason "tool_calls" with no call streamed. The calls
            # were lost, so the chunk is asked again, without streaming.
            self._keep(tries, mode, attempt, OUTCOME_NO_TOOL_CALLS_RETRY, parsed)
            tries.ask_again()
            return None
        if not parsed.invalid or answer.finish_reason == FINISH_LENGTH:
            # readable, or cut off (the pipeline re-splits the chunk; never a repair turn)
            outcome, error = self._outcome(answer)
            self._keep(tries, mode, attempt, outcome, parsed, error=error)
            return ChunkResult(
                tries.request.chunk_index,
                parsed.calls,
                tries.invalid + parsed.invalid,
                tries.records,
                False,
                error,
                truncated=outcome == OUTCOME_LENGTH,
            )
        self._keep(tries, mode, attempt, OUTCOME_INVALID_CALLS, parsed)
        return self._unreadable(tries, mode, answer, parsed, gate)

    def _unreadable(
        self,
        tries: _ChunkTries,
        mode: str,
        answer: ModelAnswer,
        parsed: ParsedAnswer,
        gate: PrefillGate,
    ) -> ChunkResult | None:
        """An answer with unreadable calls: repair turns, then the result or None (ask again)."""

        def record(attempt: _Attempt, outcome: str, *details: Any, **named: Any) -> None:
            self._keep(tries, mode, attempt, outcome, *details, **named)

        reading = self._repaired(tries.request, mode, tries.stream, gate, answer, parsed, record)
        tries.invalid += reading.invalid
        if reading.overflow is not None:
            # As a first request the server finds too long: the pipeline re-splits the chunk.
            if tries.records[-1].outcome != OUTCOME_CONTEXT_OVERFLOW:
                tries.records[-1] = dataclasses.replace(
                    tries.records[-1],
                    outcome=OUTCOME_CONTEXT_OVERFLOW,
                    error=self._one_line(reading.overflow),
                )
            return ChunkResult(
                tries.request.chunk_index, reading.calls, tries.invalid, tries.records, True, None
            )
        if not reading.outstanding:
            return ChunkResult(
                tries.request.chunk_index, reading.calls, tries.invalid, tries.records, False, None
            )
        if len(reading.calls) >= len(tries.best.calls):
            tries.best = reading
        if tries.unreadable_tries >= self.settings.max_retries:
            error = self._unreadable_error(tries.best, tries.unreadable_tries + 1)
            tries.records[-1] = dataclasses.replace(
                tries.records[-1], outcome=OUTCOME_ERROR, error=self._one_line(error)
            )
            return tries.failed(error)
        # Still unreadable: asked again from the start, without streaming (a streaming tool
        # parser may have broken the arguments).
        tries.records[-1] = dataclasses.replace(tries.records[-1], outcome=OUTCOME_UNREADABLE_RETRY)
        tries.ask_again()
        return None

    def _keep(
        self,
        tries: _ChunkTries,
        mode: str,
        attempt: _Attempt,
        outcome: str,
        parsed: ParsedAnswer | None = None,
        error: str | None = None,
        repaired: int = 0,
    ) -> None:
        """Record one model call of the chunk."""
        tries.records.append(
            self._record(
                tries.request, mode, outcome, attempt, tries.queued_s, parsed, error, repaired
            )
        )

    def _repaired(
        self,
        request: ChunkRequest,
        mode: str,
        stream: bool,
        gate: PrefillGate,
        answer: ModelAnswer,
        parsed: ParsedAnswer,
        record: Callable[..., None],
    ) -> _Reading:
        """Tell the model which calls of ``answer`` could not be read and why, and take the
        calls it resends, up to ``max_repair_rounds`` times or until every call is read."""
        reading = _Reading(list(parsed.calls), parsed.unreadable, list(parsed.invalid))
        messages = list(request.messages)
        last_answer, last_parsed = answer, parsed
        left_out: list[AnsweredCall] = []
        prompt_tokens = answer.prompt_tokens or request.prompt_tokens
        for _ in range(self.settings.max_repair_rounds):
            if not reading.outstanding:
                break
            added = repair_messages(last_answer, last_parsed, [e.reason or "" for e in left_out])
            turn = dataclasses.replace(request, messages=[*messages, *added])
            turn_tokens = self._turn_tokens(turn, added, prompt_tokens)
            reading.overflow = self._overflow(turn, turn_tokens)
            if reading.overflow is not None:
                break
            messages = turn.messages
            attempt = self._attempt(turn, mode, stream, gate, None)
            if isinstance(attempt.failure, ContextOverflowError):
                reading.overflow = str(attempt.failure)
                record(attempt, OUTCOME_CONTEXT_OVERFLOW, error=reading.overflow)
                break
            if attempt.failure is not None:
                record(attempt, OUTCOME_REPAIR, error=str(attempt.failure))
                break
            reply = attempt.answer
            assert reply is not None
            replied = parse_answer(reply, mode, request.tools)
            resent = match_resent(reading.outstanding, replied, reading.calls, request.tools)
            # Calls still unreadable: those the answer sent unreadably again, then (beyond
            # their number) those it left out.
            left_out = [
                _not_resent(entry) for entry in resent.still_unreadable[len(replied.unreadable) :]
            ]
            reading.outstanding = [*replied.unreadable, *left_out]
            reading.calls += resent.calls
            reading.invalid += replied.invalid
            record(attempt, OUTCOME_REPAIR, replied, repaired=len(resent.repaired))
            if reply.finish_reason == FINISH_LENGTH:
                break
            last_answer, last_parsed = reply, replied
            prompt_tokens = reply.prompt_tokens or turn_tokens
        return reading

    def _turn_tokens(
        self, turn: ChunkRequest, added: Sequence[dict], prompt_tokens: int | None
    ) -> int | None:
        """A repair turn's prompt tokens: the server's count, else ``prompt_tokens`` (the
        conversation so far) plus an estimate of the ``added`` messages; None when unknown."""
        try:
            counted = self.backend.count_prompt_tokens(turn.messages, turn.tools)
        except LLMError:
            counted = None  # the estimate below; the server still refuses what does not fit
        if counted is not None:
            return counted
        if not prompt_tokens:
            return None
        estimate = ByteEstimateCounter()
        texts = [
            str(message.get("content") or "") + json.dumps(message.get("tool_calls") or "")
            for message in added
        ]
        return prompt_tokens + sum(
            count + MESSAGE_FRAMING_TOKENS for count in estimate.count_many(texts)
        )

    def _overflow(self, turn: ChunkRequest, turn_tokens: int | None) -> str | None:
        """Why ``turn`` would not fit the model's context, or None (it fits, or cannot tell)."""
        limit = turn.max_model_len or self.backend.server_info().max_model_len
        if limit is None or turn_tokens is None:
            return None
        output = self.settings.max_output_tokens
        if turn_tokens + output <= limit:
            return None
        return (
            f"the repair turn would not fit the model's context: {turn_tokens} prompt tokens "
            f"+ max_output_tokens={output} > {limit} tokens; not sent, the chunk is split"
        )

    def _unreadable_error(self, reading: _Reading, tries: int) -> str:
        reasons = list(dict.fromkeys(reading.reasons))
        shown = "; ".join(reasons[:REASONS_SHOWN])
        if len(reasons) > REASONS_SHOWN:
            shown += f"; {len(reasons) - REASONS_SHOWN} more"
        rounds = self.settings.max_repair_rounds
        return (
            f"the model's answer could not be read: {len(reading.outstanding)} of "
            f"{reading.total} calls invalid ({shown}); asked {tries} time(s), with up to "
            f"{rounds} repair turn(s) each"
        )

    def _one_line(self, text: str) -> str:
        return one_line(text, self.settings.api_key)

    def _outcome(self, answer: ModelAnswer) -> tuple[str, str | None]:
        """The outcome of a readable answer, and the error when it is not a whole review."""
        if answer.finish_reason != FINISH_LENGTH:
            return OUTCOME_OK, None
        if answer.completion_tokens < self.settings.max_output_tokens:
            # vLLM (0.32) does not refuse a prompt that leaves less room than max_tokens: it
            # shortens the answer to the room left, so the cut comes before max_output_tokens.
            return OUTCOME_LENGTH, (
                f"the answer was cut off at {answer.completion_tokens} tokens, short of "
                f"max_output_tokens={self.settings.max_output_tokens}: the prompt's "
                f"{answer.prompt_tokens} tokens left no more room in the model's context "
                f"(the server shortened the answer instead of refusing the request)"
            )
        return OUTCOME_LENGTH, (
            f"the answer was cut off at max_output_tokens="
            f"{self.settings.max_output_tokens} (finish_reason=length)"
        )

    def _downgrade(self, failed_mode: str, reason: str) -> None:
        """Learn the next output mode after ``failed_mode`` (once for all threads)."""
        modes = self.backend.output_modes
        with self._lock:
            if self._mode != failed_mode:
                return  # another chunk already learnt it
            position = modes.index(failed_mode) + 1
            if position >= len(modes):
                raise ToolsUnsupportedError(
                    f"the server at {self.backend.base_url} accepts neither "
                    f"{', nor '.join(MODE_NAMES[mode] for mode in modes)} ({reason}). "
                    f"{self.backend.setup_hint}"
                )
            self._mode = modes[position]

    # ----- one attempt series

    def _attempt(
        self,
        request: ChunkRequest,
        mode: str,
        stream: bool,
        gate: PrefillGate,
        first_token: threading.Event | None,
    ) -> _Attempt:
        """Send the request until it is answered, refused, or out of retries."""
        started_at = datetime.now(UTC)
        started = time.monotonic()
        retries = 0
        slot_wait_s = 0.0
        model_request = ModelRequest(
            messages=request.messages,
            tools=request.tools,
            mode=mode,
            stream=stream,
            max_tokens=self.settings.max_output_tokens,
            temperature=self.settings.temperature,
        )
        while True:
            try:
                ticket = gate.enter(request.prompt_tokens or 0)
                slot_wait_s += ticket.waited_s
                try:
                    with self._hold_slots() as waited:
                        slot_wait_s += waited
                        on_first_token = _first_token_callback(ticket, first_token)
                        answer = self._execute_in_flight(model_request, on_first_token)
                finally:
                    ticket.release()  # not streamed, or failed: the prefill is over anyway
                latency_s = time.monotonic() - started
                return _Attempt(answer, None, retries, started_at, latency_s, slot_wait_s)
            except ModelNotFoundError:
                raise
            except RetryableModelError as error:
                failure: LLMError = error
                retry_after_s = error.retry_after_s
                retryable = True
            except LLMError as error:
                failure, retry_after_s, retryable = error, None, False
            if not retryable or retries >= self.settings.max_retries:
                latency_s = time.monotonic() - started
                return _Attempt(None, failure, retries, started_at, latency_s, slot_wait_s)
            time.sleep(self._backoff(retries, retry_after_s))
            retries += 1

    @contextmanager
    def _hold_slots(self) -> Iterator[float]:
        """One of the runner's slots, then one shared slot; yields the seconds waited.

        The runner's own slot comes first, so a request never sits on a shared slot (a
        PostgreSQL connection) while it waits for one of this process.
        """
        started = time.monotonic()
        with self._runner_slots:
            runner_wait_s = time.monotonic() - started
            if self._slots is None:
                yield runner_wait_s
                return
            with self._slots.hold() as shared_wait_s:
                yield runner_wait_s + shared_wait_s

    def _execute_in_flight(
        self, request: ModelRequest, on_first_token: Callable[[], None] | None
    ) -> ModelAnswer:
        with self._lock:
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        try:
            return self.backend.execute(request, on_first_token=on_first_token)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _backoff(self, retries: int, retry_after_s: float | None) -> float:
        """Full jitter up to an exponential ceiling; a Retry-After, capped, is a floor."""
        return backoff_s(
            retries,
            base_s=self.settings.backoff_base_s,
            cap_s=self.settings.backoff_max_s,
            uniform=random.uniform,
            retry_after_s=retry_after_s,
        )

    # ----- records

    def _record(
        self,
        request: ChunkRequest,
        mode: str,
        outcome: str,
        attempt: _Attempt,
        queued_s: float,
        parsed: ParsedAnswer | None,
        error: str | None,
        repaired: int,
    ) -> CallRecord:
        answer = attempt.answer or ModelAnswer()
        parsed = parsed or ParsedAnswer()
        return CallRecord(
            chunk_index=request.chunk_index,
            mode=mode,
            outcome=outcome,
            prompt_tokens=answer.prompt_tokens,
            completion_tokens=answer.completion_tokens,
            cached_tokens=answer.cached_tokens,
            ttft_ms=answer.ttft_s * MS_PER_S if answer.ttft_s is not None else None,
            latency_ms=attempt.latency_s * MS_PER_S,
            slot_wait_ms=(queued_s + attempt.slot_wait_s) * MS_PER_S,
            retries=attempt.retries,
            invalid_tool_calls=len(parsed.invalid),
            error=self._one_line(error) if error else None,
            started_at=attempt.started_at,
            tool_calls=len(parsed.entries),
            repaired_tool_calls=repaired,
        )


def _not_resent(entry: AnsweredCall) -> AnsweredCall:
    """An unreadable call that the answer to its repair turn left out."""
    reason = (entry.reason or "").removesuffix(NOT_RESENT) + NOT_RESENT
    return dataclasses.replace(entry, reason=reason)


def _first_token_callback(
    ticket: PrefillTicket, first_token: threading.Event | None
) -> Callable[[], None]:
    """What to do at a request's first token: leave the prefill gate, wake the warm-up wait."""

    def on_first_token() -> None:
        ticket.release()
        if first_token is not None:
            first_token.set()

    return on_first_token
