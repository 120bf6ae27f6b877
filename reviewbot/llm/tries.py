"""One chunk's tries: what each attempt series and each reading of an answer left (pure data).

The chunk runner (:mod:`reviewbot.llm.runner`) keeps one :class:`ChunkTries` per chunk: its call
records, the unreadable calls' reasons, the best try so far, and, with repository tools, the
chunk's tool rounds (:class:`reviewbot.llm.rounds.ToolRounds`), the conversation they grew, and
the findings read in them (kept in every result, overflow and failure included).

Owns: the state of one chunk between its requests, the result it makes, and the words of why a
chunk is not a whole review (cut off, cut off while thinking, unreadable). Must not: send a
request or read an answer (the runner and ``reviewbot.llm.answers`` do).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reviewbot.llm.answers import FINISH_LENGTH, AnsweredCall, finding_key
from reviewbot.llm.rounds import ToolRounds, without_tools
from reviewbot.model import (
    MODE_TOOL_CALLS,
    CallRecord,
    ChunkRequest,
    ChunkResult,
    LLMError,
    ModelAnswer,
)

__all__ = [
    "Attempt",
    "ChunkTries",
    "Reading",
    "cut_off_error",
    "not_resent",
    "offered_repository",
    "thinking_cut_off_error",
    "thinking_off",
    "unreadable_error",
]

NOT_RESENT = " (not resent when asked)"  # said of an unreadable call the repair turn left out
REASONS_SHOWN = 3  # distinct reasons an unreadable chunk's error names


@dataclass
class Attempt:
    """One attempt series: an answer or the error that ended it, with its measurements."""

    answer: ModelAnswer | None
    failure: LLMError | None
    retries: int
    started_at: datetime
    latency_s: float
    slot_wait_s: float  # waited for the prefill share and the model slots, all tries


@dataclass
class Reading:
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
class ChunkTries:
    """One chunk's tries so far: its calls' records, and what the unreadable answers left."""

    request: ChunkRequest
    queued_s: float
    stream: bool
    records: list[CallRecord] = field(default_factory=list)
    unreadable_tries: int = 0  # tries asked again: calls lost, or unreadable after repairs
    invalid: list[str] = field(default_factory=list)  # every unreadable call's reason
    best: Reading = field(default_factory=Reading)  # the try that read the most calls
    rounds: ToolRounds | None = None  # the chunk's tool rounds (None: no repository tools)
    messages: list[dict] | None = None  # the conversation after tool rounds (None: the prompt)
    kept: list[dict] = field(default_factory=list)  # findings read in tool-round answers
    outstanding: list[AnsweredCall] = field(default_factory=list)  # unreadable in tool rounds
    prompt_tokens: int | None = None  # the conversation's size after the last tool round
    thinking_off: bool = False  # cut off while thinking once: asked again with thinking off

    def current(self, mode: str) -> ChunkRequest:
        """The request to send now: the conversation so far, with the tools ``mode`` may offer
        (the repository tools only in the tool-calls mode, on every request of the chunk)."""
        request = self.request
        if self.thinking_off:
            request = dataclasses.replace(request, enable_thinking=False)
        tools = request.tools
        if request.repository is not None and (self.rounds is None or mode != MODE_TOOL_CALLS):
            tools = without_tools(tools, request.repository.names)
        if self.messages is None:
            return dataclasses.replace(request, tools=tools)
        tokens = self.prompt_tokens or request.prompt_tokens
        return dataclasses.replace(
            request, messages=self.messages, tools=tools, prompt_tokens=tokens
        )

    def with_kept(self, calls: list[dict]) -> list[dict]:
        """The tool rounds' findings, then ``calls`` but those already read."""
        seen = {finding_key(arguments) for arguments in self.kept}
        return [*self.kept, *(c for c in calls if finding_key(c) not in seen)]

    @property
    def tool_round(self) -> int:
        return self.rounds.sent if self.rounds is not None else 0

    def ask_again(self) -> None:
        """The next try is asked from the start, without streaming."""
        self.unreadable_tries += 1
        self.stream = False

    def failed(self, error: str) -> ChunkResult:
        """Not reviewed: the readable calls of the best try are kept."""
        calls = self.with_kept(self.best.calls)
        return ChunkResult(
            self.request.chunk_index,
            calls,
            self.invalid,
            self.records,
            False,
            error,
            conversation=self.messages,
        )

    def result(self, calls: list[dict], *, overflow: bool = False, **named: Any) -> ChunkResult:
        """The chunk's result with ``calls`` and the tool rounds' findings."""
        return ChunkResult(
            self.request.chunk_index,
            self.with_kept(calls),
            self.invalid,
            self.records,
            overflow,
            named.pop("error", None),
            conversation=self.messages,
            **named,
        )


def offered_repository(
    request: ChunkRequest, mode: str, rounds: ToolRounds | None = None
) -> frozenset[str]:
    """The repository tools ``request`` offers in ``mode`` whose calls are answered (none once
    the chunk's rounds are over: the tools stay offered only for the prefix cache)."""
    if request.repository is None or mode != MODE_TOOL_CALLS:
        return frozenset()
    if rounds is not None and not rounds.open:
        return frozenset()
    names = {(tool.get("function") or {}).get("name") for tool in request.tools}
    return frozenset(name for name in request.repository.names if name in names)


def not_resent(entry: AnsweredCall) -> AnsweredCall:
    """An unreadable call that the answer to its repair turn left out."""
    reason = (entry.reason or "").removesuffix(NOT_RESENT) + NOT_RESENT
    return dataclasses.replace(entry, reason=reason)


def unreadable_error(reading: Reading, tries: int, repair_rounds: int) -> str:
    """Why a chunk whose answers stayed unreadable is not reviewed."""
    reasons = list(dict.fromkeys(reading.reasons))
    shown = "; ".join(reasons[:REASONS_SHOWN])
    if len(reasons) > REASONS_SHOWN:
        shown += f"; {len(reasons) - REASONS_SHOWN} more"
    return (
        f"the model's answer could not be read: {len(reading.outstanding)} of "
        f"{reading.total} calls invalid ({shown}); asked {tries} time(s), with up to "
        f"{repair_rounds} repair turn(s) each"
    )


def cut_off_error(answer: ModelAnswer, max_output_tokens: int) -> str | None:
    """Why a readable answer is not a whole review (it was cut off), or None when it is."""
    if answer.finish_reason != FINISH_LENGTH:
        return None
    if answer.completion_tokens < max_output_tokens:
        # vLLM (0.32) does not refuse a prompt that leaves less room than max_tokens: it
        # shortens the answer to the room left, so the cut comes before max_output_tokens.
        return (
            f"the answer was cut off at {answer.completion_tokens} tokens, short of "
            f"max_output_tokens={max_output_tokens}: the prompt's "
            f"{answer.prompt_tokens} tokens left no more room in the model's context "
            f"(the server shortened the answer instead of refusing the request)"
        )
    return f"the answer was cut off at max_output_tokens={max_output_tokens} (finish_reason=length)"


def thinking_cut_off_error(answer: ModelAnswer, max_output_tokens: int) -> str:
    """The cause named when the output budget ran out while the model was still thinking."""
    return (
        f"the model's thinking used the whole output budget ({answer.completion_tokens} "
        f"tokens, max_output_tokens={max_output_tokens}) before any answer"
    )


def thinking_off(request: ChunkRequest, setting: bool | None) -> bool:
    """Whether ``request`` asks for no thinking: its own switch, else the setting's."""
    if request.enable_thinking is not None:
        return not request.enable_thinking
    return setting is False
