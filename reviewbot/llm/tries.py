"""One chunk's tries: what each attempt series and each reading of an answer left (pure data).

The chunk runner (:mod:`reviewbot.llm.runner`) keeps one :class:`ChunkTries` per chunk: its call
records, the unreadable calls' reasons, the best try so far, and, with repository tools, the
chunk's tool rounds (:class:`reviewbot.llm.rounds.ToolRounds`), the conversation they grew, and
the findings read in them (kept in every result, overflow and failure included).

Owns: the state of one chunk between its requests, and the result it makes. Must not: send a
request or read an answer (the runner and ``reviewbot.llm.answers`` do).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reviewbot.llm.answers import AnsweredCall, finding_key
from reviewbot.llm.rounds import ToolRounds, without_tools
from reviewbot.model import (
    MODE_TOOL_CALLS,
    CallRecord,
    ChunkRequest,
    ChunkResult,
    LLMError,
    ModelAnswer,
)

__all__ = ["Attempt", "ChunkTries", "Reading"]


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

    def current(self, mode: str) -> ChunkRequest:
        """The request to send now: the conversation so far, with the tools ``mode`` may offer
        (the repository tools only in the tool-calls mode, on every request of the chunk)."""
        request = self.request
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
