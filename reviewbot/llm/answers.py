"""Reading a model answer into ``report_finding`` calls (pure functions, no I/O).

Model output is never repaired: a call that cannot be decoded is counted in ``invalid``.
``message.reasoning``/``reasoning_content`` are separate fields and are never read for findings
(the transport keeps them in ``ModelAnswer.reasoning``, which ``reviewbot doctor`` looks at); a
``<think>`` block leaked into ``content`` is stripped by the content parser.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reviewbot.llm.backend import MODE_TOOL_CALLS, ModelAnswer, ToolCallText
from reviewbot.toolcalls import (
    DEFAULT_FINDINGS_TOOL,
    ArgumentsError,
    parse_arguments,
    parse_tool_calls_from_content,
    strip_reasoning,
)

__all__ = [
    "FINISH_LENGTH",
    "FINISH_TOOL_CALLS",
    "ParsedAnswer",
    "empty_tool_calls",
    "format_ignored",
    "parse_answer",
]

FINISH_TOOL_CALLS = "tool_calls"
FINISH_LENGTH = "length"
TOOL_CALL_MARKERS = ("<tool_call>", "<function=")


@dataclass
class ParsedAnswer:
    calls: list[dict[str, Any]] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)


def parse_answer(
    answer: ModelAnswer, mode: str, tools: Sequence[Mapping[str, Any]]
) -> ParsedAnswer:
    """The decoded ``report_finding`` arguments of an answer, and why others were refused.

    Calls come from ``tool_calls`` and from tool calls written in ``content`` (the content and
    JSON-schema modes, or a server whose tool parser left them there); prose next to real tool
    calls is not a finding.
    """
    parsed = ParsedAnswer()
    for call in answer.tool_calls:
        _take_tool_call(call, parsed)
    content = strip_reasoning(answer.content)
    if mode == MODE_TOOL_CALLS and not any(marker in content for marker in TOOL_CALL_MARKERS):
        return parsed
    from_text = parse_tool_calls_from_content(content, tools)
    for text_call in from_text.calls:
        if text_call.name == DEFAULT_FINDINGS_TOOL:
            parsed.calls.append(text_call.arguments)
        else:
            parsed.invalid.append(f"call to unknown tool {text_call.name!r}")
    parsed.invalid.extend(from_text.errors)
    return parsed


def _take_tool_call(call: ToolCallText, parsed: ParsedAnswer) -> None:
    if call.name != DEFAULT_FINDINGS_TOOL:
        parsed.invalid.append(f"call to unknown tool {call.name!r}")
        return
    arguments = parse_arguments(call.arguments)
    if isinstance(arguments, ArgumentsError):
        parsed.invalid.append(arguments.reason)
    else:
        parsed.calls.append(arguments)


def empty_tool_calls(answer: ModelAnswer, parsed: ParsedAnswer) -> bool:
    """``finish_reason: "tool_calls"`` without any call: the answer's calls were lost."""
    return answer.finish_reason == FINISH_TOOL_CALLS and not parsed.calls and not parsed.invalid


def format_ignored(answer: ModelAnswer) -> bool:
    """Guided JSON decoding makes the answer start with ``{``; anything else means it was off."""
    if answer.finish_reason == FINISH_LENGTH:
        return False
    return not strip_reasoning(answer.content).lstrip().startswith("{")
