"""A chunk's tool rounds: what the repository tools answer, and what the model is told (pure).

When a :class:`~reviewbot.model.ChunkRequest` carries ``repository`` (the model's
repository tools, :class:`reviewbot.repo.tools.RepositoryTools`) and the answer to the chunk
calls some of them, the chunk runner executes the calls and asks the chunk again: a **tool
round**. :class:`ToolRounds` holds one chunk's rounds: how many were sent, the tokens of tool
answers spent, and the findings read on the way. :meth:`ToolRounds.continuation` builds the
messages appended to the conversation, in the shape the real vLLM expects: the assistant
message repeating its content, its thinking (``reasoning``, which Qwen3.5's template renders
back: :func:`reviewbot.llm.answers.assistant_message`) and every ``tool_calls`` entry with its
id, then one ``tool`` message per ``tool_call_id`` in order: a repository call's answer
(delimited data) followed by the budget left, ``Recorded.`` for a readable ``report_finding``
call, the reason and "resend" for an unreadable one (as a repair turn says it).

Bounds (:class:`ToolBudget`, the settings ``tool_rounds`` and ``tool_tokens``): at most
``rounds`` continuations per chunk; at most ``tokens`` tokens (estimated, an upper bound) of
tool answers per chunk, shared out among the calls of a round, each answer cut to its share;
at most ``MAX_CALLS_PER_ROUND`` repository calls answered per round (the others are refused).
Nothing is reserved for the rounds when the chunks are planned: the runner checks each
continuation against the real context before sending it, with ``room_tokens``, and the answers
get no more than the context leaves; when it leaves less than ``MIN_SHARE_TOKENS``, the calls
are refused with :data:`NO_ROOM` and the rounds end.

Every request of a chunk offers the same tools (one cached prefix for the whole conversation):
when the rounds or the tokens are spent, the last tool messages say so and ask for the findings
now (:func:`budget_note`), and the repository calls of any later answer are dropped unanswered
(:meth:`ToolRounds.final`): that answer is the chunk's last.

Owns: one chunk's round bookkeeping, the continuation messages and the budget notes. Must not:
send a request or count tokens with a server (the runner does), or answer a tool itself (the
tools do).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reviewbot.llm.answers import (
    FINISH_TOOL_CALLS,
    RECORDED_TEXT,
    AnsweredCall,
    ParsedAnswer,
    assistant_message,
    echoed,
    error_text,
)
from reviewbot.model import ModelAnswer, ToolCallText
from reviewbot.toolcalls import DEFAULT_FINDINGS_TOOL

if TYPE_CHECKING:
    from reviewbot.repo.tools import RepositoryTools

__all__ = [
    "BUDGET_SPENT",
    "MAX_CALLS_PER_ROUND",
    "NO_ROOM",
    "Continuation",
    "ToolBudget",
    "ToolRounds",
    "budget_note",
    "without_calls",
    "without_tools",
]

MAX_CALLS_PER_ROUND = 8
# Below this many tokens for one answer, a call is refused as over budget, not cut to nothing.
MIN_SHARE_TOKENS = 64
FINISH_STOP = "stop"  # the finish reason of an answer whose dropped calls were all it had
GENERATED_ID = "reviewbot-call-{round}-{index}"  # for a call the server sent without an id
OVER_BUDGET = "refused: the tool budget of this part is spent"
NO_ROOM = (
    "refused: no room left in the model's context for repository answers; report your "
    "findings with report_finding now"
)
TOO_MANY = f"refused: at most {MAX_CALLS_PER_ROUND} repository calls are answered per round"


BUDGET_SPENT = (
    "[Tool budget spent: no more repository answers for this part. Report your findings "
    "with report_finding now; a repository call from here on is not answered.]"
)


@dataclass(frozen=True)
class ToolBudget:
    rounds: int
    tokens: int


@dataclass(frozen=True)
class Continuation:
    """The messages to append and the round's figures (for its call record); not yet counted
    against the budget until :meth:`ToolRounds.commit`."""

    messages: list[dict[str, Any]]
    repo_calls: int
    answer_tokens: int
    refused: int
    open_after: bool  # whether the request after it may still offer the repository tools


@dataclass
class ToolRounds:
    """One chunk's tool rounds (see the module notes)."""

    tools: RepositoryTools
    budget: ToolBudget
    sent: int = 0  # continuations sent so far: the round number of the next call
    tokens_used: int = 0
    closed: bool = False  # the context left no room for answers: the rounds are over

    @property
    def names(self) -> frozenset[str]:
        return self.tools.names

    @property
    def open(self) -> bool:
        """Whether the next request may offer the repository tools."""
        return self._open(self.sent, self.tokens_used)

    def _open(self, sent: int, used: int) -> bool:
        return (
            not self.closed
            and sent < self.budget.rounds
            and self.budget.tokens - used >= MIN_SHARE_TOKENS
        )

    def final(self, answer: ModelAnswer) -> ModelAnswer:
        """``answer`` as the chunk's last one once the rounds are over: its repository calls
        dropped unanswered (the model was told to report now), its findings kept."""
        return without_calls(answer, self.names)

    def continuation(
        self, answer: ModelAnswer, parsed: ParsedAnswer, room_tokens: int
    ) -> Continuation:
        """The messages after ``answer``: its repository calls answered within at most
        ``room_tokens`` (and the tokens left), its report_finding calls acknowledged."""
        repository = [call for call in answer.tool_calls if call.name in self.names]
        no_room = room_tokens < MIN_SHARE_TOKENS
        budget = max(0, min(room_tokens, self.budget.tokens - self.tokens_used))
        share = budget // max(1, min(len(repository), MAX_CALLS_PER_ROUND))
        entries = iter(parsed.entries)
        calls, replies, notes = [], [], []
        answered = spent = refused = 0
        for index, call in enumerate(answer.tool_calls):
            call_id = call.id or GENERATED_ID.format(round=self.sent, index=index)
            calls.append(_echo(call, call_id))
            if call.name not in self.names:
                replies.append(_finding_reply(next(entries, None), call_id))
                continue
            answered += 1
            text, tokens, was_refused = self._answer(call, share, answered, no_room)
            spent += tokens
            refused += was_refused
            notes.append(len(replies))
            replies.append({"role": "tool", "tool_call_id": call_id, "content": text})
        open_after = not no_room and self._open(self.sent + 1, self.tokens_used + spent)
        note = budget_note(
            open_after,
            self.budget.rounds - self.sent - 1,
            self.budget.tokens - self.tokens_used - spent,
        )
        for position in notes:
            replies[position]["content"] += "\n" + note
        assistant = assistant_message(answer, calls)
        return Continuation([assistant, *replies], len(repository), spent, refused, open_after)

    def commit(self, continuation: Continuation) -> None:
        """``continuation`` was sent: its round and its answers' tokens are spent (and, when
        it said so, the rounds are over)."""
        self.sent += 1
        self.tokens_used += continuation.answer_tokens
        self.closed = self.closed or not continuation.open_after

    def _answer(
        self, call: ToolCallText, share: int, answered: int, no_room: bool
    ) -> tuple[str, int, bool]:
        if no_room:
            return NO_ROOM, self.tools.count(NO_ROOM), True
        if answered > MAX_CALLS_PER_ROUND:
            return TOO_MANY, self.tools.count(TOO_MANY), True
        if share < MIN_SHARE_TOKENS:
            return OVER_BUDGET, self.tools.count(OVER_BUDGET), True
        result = self.tools.answer(call.name, call.arguments, share)
        return result.text, result.tokens, result.refused


def budget_note(open_after: bool, rounds_left: int, tokens_left: int) -> str:
    """What the model is told after a round's answers: the budget left, or that it is spent
    and the findings are wanted now (the tools stay offered, for the prefix cache, but a
    later repository call is not answered)."""
    if not open_after:
        return BUDGET_SPENT
    return (
        f"[Tool budget left for this part: {rounds_left} round(s) and {max(0, tokens_left):,} "
        "tokens of tool answers.]"
    )


def without_calls(answer: ModelAnswer, names: frozenset[str]) -> ModelAnswer:
    """``answer`` without its calls to the tools named in ``names`` (an answer left with no
    call finishes with ``stop``, not ``tool_calls``: nothing was lost; one cut at its length
    stays so)."""
    kept = [call for call in answer.tool_calls if call.name not in names]
    if len(kept) == len(answer.tool_calls):
        return answer
    ended = answer.finish_reason == FINISH_TOOL_CALLS and not kept
    finish = FINISH_STOP if ended else answer.finish_reason
    return dataclasses.replace(answer, tool_calls=kept, finish_reason=finish)


def without_tools(tools: Sequence[dict[str, Any]], names: frozenset[str]) -> list[dict[str, Any]]:
    """``tools`` but those named in ``names``."""
    return [tool for tool in tools if _name(tool) not in names]


def _name(tool: dict[str, Any]) -> str | None:
    function = tool.get("function")
    return function.get("name") if isinstance(function, dict) else None


def _echo(call: ToolCallText, call_id: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": call.name, "arguments": echoed(call.arguments)},
    }


def _finding_reply(entry: AnsweredCall | None, call_id: str) -> dict[str, Any]:
    """The tool message of a report_finding call (or of a call to a tool not offered)."""
    if entry is None:
        text = f"Error: not a {DEFAULT_FINDINGS_TOOL} call."
    else:
        text = RECORDED_TEXT if entry.readable else error_text(entry)
    return {"role": "tool", "tool_call_id": call_id, "content": text}
