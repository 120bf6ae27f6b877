"""The chunk runner: reviews the chunks of merge requests through one model backend.

:class:`ChunkRunner` implements :class:`reviewbot.model.LLMClient` on top of a
:class:`~reviewbot.model.ModelBackend` and owns everything between "review these chunks"
and "send this one request":

- concurrency: at most ``concurrency`` requests of one ``review_chunks`` call in flight, and
  ``settings.concurrency`` in the whole runner (a worker holds one for all its jobs); each
  HTTP request holds one of the shared model slots (``reviewbot.slots``);
- the prefill share (``reviewbot.llm.prefill``): the prompt tokens of one ``review_chunks`` call
  waiting for their first token stay within ``settings.prefill_tokens_per_review``, so a review
  of large chunks never puts another merge request's first token behind all of them;
- retries with backoff, jitter and the server's ``Retry-After``;
- the output mode: the backend's first until the server refuses it, then the next, learnt once;
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
- tool rounds (a request with ``repository``, in the tool-calls mode only): an answer that
  calls repository tools has its findings kept and every call answered
  (:mod:`reviewbot.llm.rounds`: the assistant message repeats its calls, one ``tool`` message
  per id, the budget left in each), and the chunk is asked again, up to ``tool_rounds`` times
  and ``tool_tokens`` tokens of answers. Every request of the chunk offers the same tools (one
  cached prefix); after the last round the tool messages ask for the findings now, and the
  repository calls of a later answer are dropped unanswered. Each round's continuation is
  counted like a repair turn before it is sent and its answers cut to the room the context
  leaves (nothing was reserved for them when the chunks were planned); with no room left the
  calls are refused, the model told to report now; one that cannot fit even so is a context
  overflow (the findings read so far kept, the chunk re-split), as is a 400 "maximum context
  length" answer to a round. A repair turn after a tool round goes on from the round's
  conversation with the same tools, its repository calls dropped; unreadable calls of a
  round's answer are told why in their tool message, and the final answer's resends repair
  them (else they go into its repair turn). A chunk asked again (calls lost, unreadable after
  repairs) starts from the last round's conversation, not the first prompt; an output-mode
  downgrade starts from the prompt without tools. Rounds are bounded by ``tool_rounds``,
  repairs by ``max_repair_rounds``, tries by ``max_retries``: a chunk always ends;
- timing: one :class:`~reviewbot.model.CallRecord` per attempt series (tokens, cached tokens,
  TTFT, latency, slot wait, retries; ``tool_round``, ``repo_tool_calls``, ``tool_answer_tokens``).

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
from contextlib import contextmanager, nullcontext
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
from reviewbot.llm.prefill import PrefillGate, check_prefill_limit, first_token_callback
from reviewbot.llm.rounds import Continuation, ToolBudget, ToolRounds, without_calls
from reviewbot.llm.tries import (
    Attempt,
    ChunkTries,
    Reading,
    cut_off_error,
    not_resent,
    offered_repository,
    thinking_cut_off_error,
    thinking_off,
    unreadable_error,
)
from reviewbot.model import (
    MODE_CONTENT,
    MODE_JSON_SCHEMA,
    MODE_TOOL_CALLS,
    PRIORITY_BACKGROUND,
    PRIORITY_THREAD_ANSWER,
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
from reviewbot.retry import backoff_s
from reviewbot.states import CallPurpose
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
OUTCOME_TOOL_ROUND = "tool_round"  # the answer called repository tools: answered, asked again
# The output budget ran out while the model was thinking: asked again with thinking off.
OUTCOME_THINKING_CUT_OFF = "thinking_cut_off"
OUTCOME_EMPTY_RETRY = "empty_retry"  # no call and no text at all: the chunk is asked again
# Tries at fitting a tool round's answers into the context, each cut to the room the last
# count left; the last sends every call "over budget" (a few tokens each).
FIT_TRIES = 3
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

    def chat(
        self,
        messages: list[dict],
        max_tokens: int,
        session: str | None = None,
        priority: int | None = None,
    ) -> ModelAnswer:
        """One plain-text answer (no tools), holding a slot like every request: an answer in
        a thread (``reviewbot.replies.answer``; ``session``: its MR's key; ``priority``: how
        soon the server runs it). Errors are this module's (not retried here: the job is).

        An answer of the most urgent priority, to a server that is sent priorities, takes no
        slot: it queues in the server, ahead of every review, not behind the reviews' slots."""
        request = ModelRequest(
            messages=messages,
            tools=[],
            mode=MODE_CONTENT,
            stream=False,
            max_tokens=max_tokens,
            temperature=self.settings.temperature,
            session=session,
            priority=priority,
        )
        urgent = priority is not None and priority <= PRIORITY_THREAD_ANSWER
        with nullcontext() if urgent and self.backend.sends_priority else self._hold_slots():
            return self._execute_in_flight(request, None)

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

    def verify_chunk(self, request: ChunkRequest) -> tuple[ModelAnswer | None, CallRecord]:
        """One verification call (reviewbot.verify), purpose "verify". No repair turn: its
        caller keeps findings without a readable verdict."""
        return self.one_call(request, CallPurpose.VERIFY)

    def one_call(
        self, request: ChunkRequest, purpose: CallPurpose, mode: str | None = None
    ) -> tuple[ModelAnswer | None, CallRecord]:
        """One call of ``purpose``: the answer (None: lost after retries, or refused), its
        record (the verification pass, the walkthrough)."""
        mode = mode or self._mode
        attempt = self._attempt(request, mode, False, PrefillGate(0), None)
        error = str(attempt.failure) if attempt.failure is not None else None
        outcome = OUTCOME_ERROR if error else OUTCOME_OK
        record = self._record(request, mode, outcome, attempt, 0.0, None, error, 0)
        calls = len(attempt.answer.tool_calls) if attempt.answer else 0
        return attempt.answer, dataclasses.replace(record, purpose=purpose, tool_calls=calls)

    # ----- one chunk

    def _review_one(
        self,
        request: ChunkRequest,
        queued_s: float,
        gate: PrefillGate,
        first_token: threading.Event | None,
    ) -> ChunkResult:
        tries = ChunkTries(request, queued_s, self.settings.stream)
        if request.repository is not None and request.tool_rounds > 0:
            budget = ToolBudget(request.tool_rounds, request.tool_tokens)
            tries.rounds = ToolRounds(request.repository, budget)
        while True:
            mode = self._mode
            current = tries.current(mode)
            attempt = self._attempt(current, mode, tries.stream, gate, first_token)
            failure = attempt.failure
            if isinstance(failure, ContextOverflowError):
                # a tool round's conversation too: its findings are kept, the chunk re-split
                self._keep(tries, mode, attempt, OUTCOME_CONTEXT_OVERFLOW, error=str(failure))
                return tries.result([], overflow=True)
            if isinstance(failure, OutputModeRefusedError):
                self._keep(tries, mode, attempt, OUTCOME_MODE_UNSUPPORTED, error=str(failure))
                self._downgrade(mode, str(failure))
                tries.messages = tries.prompt_tokens = None  # no tool calls in another mode
                continue
            if failure is not None:
                self._keep(tries, mode, attempt, OUTCOME_ERROR, error=str(failure))
                return tries.failed(str(failure))
            answer = attempt.answer
            assert answer is not None
            if mode == MODE_JSON_SCHEMA and format_ignored(answer):
                self._keep(tries, mode, attempt, OUTCOME_FORMAT_IGNORED)
                self._downgrade(mode, "the server ignored response_format")
                tries.messages = tries.prompt_tokens = None
                continue
            result = self._read(tries, mode, attempt, answer, gate, current)
            if result is not None:
                return result

    def _read(
        self,
        tries: ChunkTries,
        mode: str,
        attempt: Attempt,
        answer: ModelAnswer,
        gate: PrefillGate,
        current: ChunkRequest,
    ) -> ChunkResult | None:
        """The chunk's result from a try's answer, or None to ask again (without streaming,
        or, after a tool round, with the tools' answers)."""
        if tries.rounds is not None and not tries.rounds.open:
            answer = tries.rounds.final(answer)  # told to report now: no more rounds
        offered = offered_repository(current, mode, tries.rounds)
        spent = current.repository.names - offered if current.repository else frozenset()
        off = thinking_off(current, self.settings.enable_thinking)
        parsed = parse_answer(answer, mode, current.tools, offered, spent, thinking_off=off)
        if parsed.cut_in_thinking and answer.completion_tokens >= self.settings.max_output_tokens:
            # (cut short of the budget, the context had no more room: re-split, as below)
            return self._cut_in_thinking(tries, mode, attempt, answer, parsed)
        if parsed.repository and answer.finish_reason != FINISH_LENGTH:
            return self._tool_round(tries, mode, attempt, answer, parsed, current)
        if empty_tool_calls(answer, parsed):
            # A known vLLM bug: finish_reason "tool_calls" with no call streamed. The calls
            # were lost, so the chunk is asked again, without streaming.
            why = "the model answered finish_reason=tool_calls without any tool call"
            return self._nothing_read(tries, mode, attempt, parsed, why)
        if parsed.blank and answer.finish_reason != FINISH_LENGTH and not tries.kept:
            # No call and no text, not even "No issues found.": no review, never 0 findings;
            # after tool rounds too, unless the rounds' answers already reported findings.
            why = "the model's answer was empty (no finding and no text)"
            return self._nothing_read(tries, mode, attempt, parsed, why, OUTCOME_EMPTY_RETRY)
        repaired = self._resent_in_final(tries, parsed, current)
        if (not parsed.invalid and not tries.outstanding) or answer.finish_reason == FINISH_LENGTH:
            # readable, or cut off (the pipeline re-splits the chunk; never a repair turn)
            error = cut_off_error(answer, self.settings.max_output_tokens)
            outcome = OUTCOME_OK if error is None else OUTCOME_LENGTH
            self._keep(tries, mode, attempt, outcome, parsed, error=error, repaired=repaired)
            tries.invalid += parsed.invalid
            return tries.result(parsed.calls, error=error, truncated=error is not None)
        self._keep(tries, mode, attempt, OUTCOME_INVALID_CALLS, parsed, repaired=repaired)
        return self._unreadable(tries, mode, answer, parsed, gate, current)

    def _nothing_read(
        self,
        tries: ChunkTries,
        mode: str,
        attempt: Attempt,
        parsed: ParsedAnswer,
        why: str,
        outcome: str = OUTCOME_NO_TOOL_CALLS_RETRY,
    ) -> ChunkResult | None:
        """An answer that read as nothing: the chunk is asked again, without streaming (None),
        until ``max_retries``; then it is not reviewed, with ``why``."""
        if tries.unreadable_tries >= self.settings.max_retries:
            error = f"{why}, {tries.unreadable_tries + 1} times"
            self._keep(tries, mode, attempt, OUTCOME_ERROR, parsed, error=error)
            return tries.failed(error)
        self._keep(tries, mode, attempt, outcome, parsed, error=why)
        tries.ask_again()
        return None

    def _cut_in_thinking(
        self,
        tries: ChunkTries,
        mode: str,
        attempt: Attempt,
        answer: ModelAnswer,
        parsed: ParsedAnswer,
    ) -> ChunkResult | None:
        """An answer cut off at the output budget while the model was still thinking. A
        smaller chunk thinks just as long, so it is not re-split: it is asked again once with
        thinking off (None); cut off while thinking again, it is not reviewed."""
        cause = thinking_cut_off_error(answer, self.settings.max_output_tokens)
        if not tries.thinking_off:
            self._keep(tries, mode, attempt, OUTCOME_THINKING_CUT_OFF, parsed, error=cause)
            tries.thinking_off = True
            return None
        error = f"{cause}, also when asked again with thinking off"
        self._keep(tries, mode, attempt, OUTCOME_ERROR, parsed, error=error)
        return tries.failed(error)

    def _resent_in_final(
        self, tries: ChunkTries, parsed: ParsedAnswer, current: ChunkRequest
    ) -> int:
        """Unreadable calls of the tool rounds that this answer resent: they are read now."""
        if not tries.outstanding or not parsed.calls:
            return 0
        resent = match_resent(tries.outstanding, parsed, tries.kept, current.tools)
        tries.outstanding = resent.still_unreadable
        return len(resent.repaired)

    def _tool_round(
        self,
        tries: ChunkTries,
        mode: str,
        attempt: Attempt,
        answer: ModelAnswer,
        parsed: ParsedAnswer,
        current: ChunkRequest,
    ) -> ChunkResult | None:
        """An answer that called repository tools: keep its findings, answer every call and
        ask the chunk again (None), or the chunk's result when the round does not fit."""
        assert tries.rounds is not None
        self._keep(tries, mode, attempt, OUTCOME_TOOL_ROUND, parsed)
        tries.kept = tries.with_kept(parsed.calls)
        tries.invalid += parsed.invalid
        tries.outstanding += parsed.unreadable
        fitted = self._fitted(tries.rounds, current, answer, parsed)
        if isinstance(fitted, str):
            tries.records[-1] = dataclasses.replace(
                tries.records[-1], outcome=OUTCOME_CONTEXT_OVERFLOW, error=self._one_line(fitted)
            )
            return tries.result([], overflow=True)
        continuation, messages, tries.prompt_tokens = fitted
        tries.records[-1] = dataclasses.replace(
            tries.records[-1],
            repo_tool_calls=continuation.repo_calls,
            tool_answer_tokens=continuation.answer_tokens,
        )
        tries.rounds.commit(continuation)
        tries.messages = messages
        return None

    def _fitted(
        self, rounds: ToolRounds, current: ChunkRequest, answer: ModelAnswer, parsed: ParsedAnswer
    ) -> tuple[Continuation, list[dict], int | None] | str:
        """The round's continuation cut to fit the context (its answers get no more room than
        the prompt, the answer and max_output_tokens leave), or why it cannot fit."""
        limit = current.max_model_len or self.backend.server_info().max_model_len
        output = self.settings.max_output_tokens
        known = answer.prompt_tokens + answer.completion_tokens
        framing = MESSAGE_FRAMING_TOKENS * (len(answer.tool_calls) + 1)
        room = rounds.budget.tokens
        if limit is not None and answer.prompt_tokens:
            room = limit - output - known - framing
        why = "the tool round would not fit the model's context"
        for attempt in range(FIT_TRIES):
            if attempt == FIT_TRIES - 1:
                room = 0
            continuation = rounds.continuation(answer, parsed, room)
            messages = [*current.messages, *continuation.messages]
            turn = dataclasses.replace(current, messages=messages)
            tokens = self._turn_tokens(turn, continuation.messages, answer.prompt_tokens)
            why = self._overflow(turn, tokens, "the tool round") or ""
            if not why:
                return continuation, messages, tokens
            assert tokens is not None and limit is not None
            room = max(0, room - (tokens + output - limit) - framing)
        return why

    def _unreadable(
        self,
        tries: ChunkTries,
        mode: str,
        answer: ModelAnswer,
        parsed: ParsedAnswer,
        gate: PrefillGate,
        current: ChunkRequest,
    ) -> ChunkResult | None:
        """An answer with unreadable calls: repair turns, then the result or None (ask again)."""

        def record(attempt: Attempt, outcome: str, *details: Any, **named: Any) -> None:
            self._keep(tries, mode, attempt, outcome, *details, **named)

        before = [not_resent(entry) for entry in tries.outstanding]
        reading = self._repaired(current, mode, tries.stream, gate, answer, parsed, record, before)
        tries.invalid += reading.invalid
        if reading.overflow is not None:
            # As a first request the server finds too long: the pipeline re-splits the chunk.
            if tries.records[-1].outcome != OUTCOME_CONTEXT_OVERFLOW:
                tries.records[-1] = dataclasses.replace(
                    tries.records[-1],
                    outcome=OUTCOME_CONTEXT_OVERFLOW,
                    error=self._one_line(reading.overflow),
                )
            return tries.result(reading.calls, overflow=True)
        if not reading.outstanding:
            tries.outstanding = []
            return tries.result(reading.calls)
        if len(reading.calls) >= len(tries.best.calls):
            tries.best = reading
        if tries.unreadable_tries >= self.settings.max_retries:
            error = unreadable_error(
                tries.best, tries.unreadable_tries + 1, self.settings.max_repair_rounds
            )
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
        tries: ChunkTries,
        mode: str,
        attempt: Attempt,
        outcome: str,
        parsed: ParsedAnswer | None = None,
        error: str | None = None,
        repaired: int = 0,
    ) -> None:
        """Record one model call of the chunk (with the tool round it belongs to)."""
        record = self._record(
            tries.request, mode, outcome, attempt, tries.queued_s, parsed, error, repaired
        )
        tries.records.append(
            dataclasses.replace(
                record, tool_round=tries.tool_round, thinking_off=tries.thinking_off
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
        before: Sequence[AnsweredCall] = (),
    ) -> Reading:
        """Tell the model which calls of ``answer`` could not be read and why, and take the
        calls it resends, up to ``max_repair_rounds`` times or until every call is read.
        ``before``: unreadable calls of earlier tool rounds that were not resent yet."""
        outstanding = [*parsed.unreadable, *before]
        reading = Reading(list(parsed.calls), outstanding, list(parsed.invalid))
        messages = list(request.messages)
        last_answer, last_parsed = answer, parsed
        left_out: list[AnsweredCall] = list(before)
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
            assert attempt.answer is not None
            # a repair turn offers the chunk's tools (one cached prefix) but wants findings only
            reply = without_calls(attempt.answer, _repository_names(request))
            off = thinking_off(request, self.settings.enable_thinking)
            replied = parse_answer(reply, mode, request.tools, thinking_off=off)
            resent = match_resent(reading.outstanding, replied, reading.calls, request.tools)
            # Calls still unreadable: those the answer sent unreadably again, then (beyond
            # their number) those it left out.
            left_out = [
                not_resent(entry) for entry in resent.still_unreadable[len(replied.unreadable) :]
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

    def _overflow(
        self, turn: ChunkRequest, turn_tokens: int | None, what: str = "the repair turn"
    ) -> str | None:
        """Why ``turn`` would not fit the model's context, or None (it fits, or cannot tell)."""
        limit = turn.max_model_len or self.backend.server_info().max_model_len
        if limit is None or turn_tokens is None:
            return None
        output = self.settings.max_output_tokens
        if turn_tokens + output <= limit:
            return None
        return (
            f"{what} would not fit the model's context: {turn_tokens} prompt tokens "
            f"+ max_output_tokens={output} > {limit} tokens; not sent, the chunk is split"
        )

    def _one_line(self, text: str) -> str:
        return one_line(text, self.settings.api_key)

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
    ) -> Attempt:
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
            max_tokens=request.max_output_tokens or self.settings.max_output_tokens,
            **request.sampling(self.settings.temperature),
            session=request.session,
            enable_thinking=request.enable_thinking,
            priority=request.priority,
        )
        while True:
            try:
                ticket = gate.enter(request.prompt_tokens or 0)
                slot_wait_s += ticket.waited_s
                try:
                    with self._hold_slots(request.priority) as waited:
                        slot_wait_s += waited
                        on_first_token = first_token_callback(ticket, first_token)
                        answer = self._execute_in_flight(model_request, on_first_token)
                finally:
                    ticket.release()  # not streamed, or failed: the prefill is over anyway
                latency_s = time.monotonic() - started
                return Attempt(answer, None, retries, started_at, latency_s, slot_wait_s)
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
                return Attempt(None, failure, retries, started_at, latency_s, slot_wait_s)
            time.sleep(self._backoff(retries, retry_after_s))
            retries += 1

    @contextmanager
    def _hold_slots(self, priority: int | None = None) -> Iterator[float]:
        """The runner's slot, then a shared one (background ``priority``: never a reserved one,
        reviewbot.slots), so a request never sits on a shared slot (a PostgreSQL connection)
        while it waits for one of this process; yields the seconds waited."""
        started = time.monotonic()
        with self._runner_slots:
            runner_wait_s = time.monotonic() - started
            if self._slots is None:
                yield runner_wait_s
                return
            background = priority is not None and priority >= PRIORITY_BACKGROUND
            with self._slots.hold(background=background) as shared_wait_s:
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
        attempt: Attempt,
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
            recovered_tool_calls=parsed.recovered,
            reasoning_tokens=answer.reasoning_tokens,
        )


def _repository_names(request: ChunkRequest) -> frozenset[str]:
    return request.repository.names if request.repository is not None else frozenset()
