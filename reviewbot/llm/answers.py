"""Reading a model answer into ``report_finding`` calls (pure functions, no I/O).

Model output is never repaired: a call that cannot be decoded, or whose arguments do not fit
the tool's schema (:func:`reviewbot.toolcalls.check_arguments`: the check findings make too), is
unreadable and counted in ``invalid`` with its reason. The runner may send the reasons back to
the model (:func:`repair_messages`) and ask it to resend those calls, in the message shape the
output mode allows: with tool calls, one ``tool`` message per call (``tool_call_id``: vLLM's
Qwen3 chat templates render them in order as ``<tool_response>`` blocks of one user turn);
without ids (JSON schema, tool calls in text), one ``user`` message naming the reasons.
``message.reasoning``/``reasoning_content`` (the transport keeps them in
``ModelAnswer.reasoning``) are the model's thinking, not its answer; a ``<think>`` block leaked
into ``content`` is stripped by the content parser. Three shapes of Qwen3.5 behind vLLM's
parsers are read all the same, and the calls read so are counted (``ParsedAnswer.recovered``):

- calls written in ``content`` of a tool-calls answer (the tool parser left them there,
  vllm#42021);
- calls written inside the thinking, which an older reasoning parser keeps in ``reasoning``
  (vllm#39056): when the answer has no call anywhere else and no text, the complete, well-formed
  ``<tool_call>`` blocks of the reasoning are read; one that is not is an unreadable call (a
  repair turn, then the chunk is asked again, then not reviewed), never "no findings";
- the whole answer in ``reasoning`` with thinking off (vllm#19839): with ``thinking_off`` and no
  text in ``content``, the reasoning is read as the answer.

Two answers are no review at all and say so: ``ParsedAnswer.blank`` (no call and no text: the
model said nothing, not "No issues found.") and ``ParsedAnswer.cut_in_thinking`` (the output
budget ran out before the thinking ended); the runner asks again rather than read either as
"0 findings".

The answer to a repair turn is judged call by call (:func:`match_resent`), never by count: a
readable call there repairs the unreadable call it is a resend of, found by the tool-call id
when the model reuses it, else by the fields the unreadable call did give readably (``path``
and ``line``: a call whose reason was its ``line`` is matched by its ``path``; one that was not
JSON at all names nothing and is matched by any resend). A resend of a call already read (the
same path, side, line, category and title) is a duplicate: no repair, and not read twice. A
readable call that matches no unreadable one is a new finding, kept but no repair.

Owns: decoding an answer's calls (from ``tool_calls`` or written in ``content``) into readable and
unreadable ones with their reasons, the repair turn, and matching its answer's calls to the
unreadable ones. Must not: send a request, or repair model output (an unreadable call stays
unreadable).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reviewbot.model import MODE_TOOL_CALLS, ModelAnswer, ToolCallText
from reviewbot.toolcalls import (
    DEFAULT_FINDINGS_TOOL,
    THINK_OPEN,
    ArgumentsError,
    check_arguments,
    decode_json,
    parse_arguments,
    parse_tool_calls_from_content,
    strip_reasoning,
    tool_parameters,
)
from reviewbot.verify import VERDICT_TOOL

__all__ = [
    "FINISH_LENGTH",
    "FINISH_TOOL_CALLS",
    "AnsweredCall",
    "ParsedAnswer",
    "Resent",
    "assistant_message",
    "echoed",
    "empty_tool_calls",
    "error_text",
    "finding_key",
    "format_ignored",
    "match_resent",
    "parse_answer",
    "repair_messages",
]

FINISH_TOOL_CALLS = "tool_calls"
FINISH_LENGTH = "length"
TOOL_CALL_MARKERS = ("<tool_call>", "<function=")
# What a readable call's tool message says, and what an unreadable one's ends with.
RECORDED_TEXT = "Recorded."
RESEND_TEXT = "Resend this finding with the corrected arguments."
# vLLM renders an assistant call's arguments through the chat template as an object; older
# vLLM refused arguments that are not JSON (400), newer ones read them as {}: send {}.
EMPTY_ARGUMENTS = "{}"
SENT_SNIPPET_CHARS = 200  # of arguments that could not be echoed, quoted back to the model
# The fields that say which finding an unreadable call meant, compared with a resent call's.
IDENTITY_FIELDS = ("path", "line")
DEFAULT_SIDE = "new"  # a call without `side` means the new side


@dataclass(frozen=True)
class AnsweredCall:
    """One call of an answer: its arguments when readable, else why it is not.

    ``call_id``: the server's tool-call id, None for a call written in the content (or an
    error in the content that no call can be told apart for). ``sent``: the decoded arguments
    of an unreadable call that decoded but did not fit the schema (what it did say).
    """

    arguments: dict[str, Any] | None
    reason: str | None
    call_id: str | None = None
    name: str = DEFAULT_FINDINGS_TOOL
    raw_arguments: str = ""  # as the server sent them (tool calls only)
    sent: Mapping[str, Any] | None = None

    @property
    def readable(self) -> bool:
        return self.reason is None


@dataclass
class ParsedAnswer:
    entries: list[AnsweredCall] = field(default_factory=list)
    # calls to the repository tools offered (reviewbot.llm.rounds answers them), in order
    repository: list[ToolCallText] = field(default_factory=list)
    # readable calls read from the content of a tool-calls answer or from the reasoning
    recovered: int = 0
    # no call and no text at all (after the thinking): the model answered nothing
    blank: bool = False
    # cut off at the output budget while still thinking: no answer was begun
    cut_in_thinking: bool = False

    @property
    def calls(self) -> list[dict[str, Any]]:
        """The readable calls' arguments."""
        return [entry.arguments for entry in self.entries if entry.arguments is not None]

    @property
    def invalid(self) -> list[str]:
        """Why each unreadable call was refused."""
        return [entry.reason for entry in self.entries if entry.reason is not None]

    @property
    def unreadable(self) -> list[AnsweredCall]:
        return [entry for entry in self.entries if not entry.readable]


def parse_answer(
    answer: ModelAnswer,
    mode: str,
    tools: Sequence[Mapping[str, Any]],
    repository_names: frozenset[str] = frozenset(),
    spent_names: frozenset[str] = frozenset(),
    *,
    thinking_off: bool = False,
) -> ParsedAnswer:
    """The ``report_finding`` calls of an answer, readable or not, in the order given.

    Calls come from ``tool_calls`` and from tool calls written in ``content`` (the content and
    JSON-schema modes, or a server whose tool parser left them there); prose next to real tool
    calls is not a finding. Each call's arguments are checked against the tool's parameters in
    ``tools``. A tool call named in ``repository_names`` (the repository tools this request
    offered) is no finding and no unreadable call: it goes to ``repository``, to be answered.
    A call to one in ``spent_names`` (repository tools no longer offered: the chunk's tool
    budget is spent) is unreadable with that reason, so its repair turn says so. A ``verdict``
    call is ignored: that tool is offered with the review's tools only so that the verification
    pass (reviewbot.verify) shares their prefix, and it holds no finding. ``thinking_off``: the
    request asked for no thinking, so reasoning without any content is the answer misplaced
    (see the module notes for the shapes read from the reasoning).
    """
    parameters = tool_parameters(tools).get(DEFAULT_FINDINGS_TOOL, {})
    parsed = ParsedAnswer()
    for call in answer.tool_calls:
        if call.name == VERDICT_TOOL:
            continue
        if call.name in repository_names:
            parsed.repository.append(call)
            continue
        if call.name in spent_names:
            reason = f"{call.name} is not offered any more: the tool budget of this part is spent"
            parsed.entries.append(AnsweredCall(None, reason, call.id, call.name, call.arguments))
            continue
        parsed.entries.append(_tool_call_entry(call, parameters))
    content = strip_reasoning(answer.content)
    wordless = not content.strip() and not answer.tool_calls
    if wordless and answer.finish_reason == FINISH_LENGTH and _thought(answer):
        parsed.cut_in_thinking = True
        return parsed
    misplaced = wordless and thinking_off and bool(answer.reasoning.strip())
    if misplaced:
        content = answer.reasoning  # vllm#19839: with thinking off, the answer in reasoning
    if mode != MODE_TOOL_CALLS or _has_calls(content):
        counted = mode == MODE_TOOL_CALLS or misplaced
        _read_text_calls(parsed, content, tools, parameters, counted=counted)
    elif wordless and _has_calls(answer.reasoning):
        _read_text_calls(parsed, answer.reasoning, tools, parameters, counted=True, where=THOUGHT)
    parsed.blank = not parsed.entries and not parsed.repository and not content.strip()
    return parsed


# Where the calls of an answer's reasoning were written, named in their unreadable reasons.
THOUGHT = "in the model's thinking"


def _has_calls(text: str) -> bool:
    return any(marker in text for marker in TOOL_CALL_MARKERS)


def _thought(answer: ModelAnswer) -> bool:
    """Whether the answer holds thinking: reasoning split off, or a ``<think>`` in content."""
    return bool(answer.reasoning.strip()) or THINK_OPEN in answer.content


def _read_text_calls(
    parsed: ParsedAnswer,
    text: str,
    tools: Sequence[Mapping[str, Any]],
    parameters: Mapping[str, Any],
    *,
    counted: bool,
    where: str = "",
) -> None:
    """The calls written in ``text`` into ``parsed``; ``counted``: each readable one is a
    recovered call (written where the server's parsers should have taken it out)."""
    from_text = parse_tool_calls_from_content(text, tools)
    prefix = f"{where}: " if where else ""
    for text_call in from_text.calls:
        if text_call.name == DEFAULT_FINDINGS_TOOL:
            entry = _checked(text_call.arguments, parameters)
            if where and entry.reason is not None:
                entry = dataclasses.replace(entry, reason=prefix + entry.reason)
            parsed.entries.append(entry)
            parsed.recovered += int(counted and entry.readable)
        elif text_call.name != VERDICT_TOOL:
            reason = f"{prefix}call to unknown tool {text_call.name!r}"
            parsed.entries.append(AnsweredCall(None, reason, None, text_call.name))
    parsed.entries.extend(AnsweredCall(None, prefix + error) for error in from_text.errors)


def _tool_call_entry(call: ToolCallText, parameters: Mapping[str, Any]) -> AnsweredCall:
    if call.name != DEFAULT_FINDINGS_TOOL:
        reason = f"call to unknown tool {call.name!r}"
        return AnsweredCall(None, reason, call.id, call.name, call.arguments)
    arguments = parse_arguments(call.arguments)
    if isinstance(arguments, ArgumentsError):
        return AnsweredCall(None, arguments.reason, call.id, call.name, call.arguments)
    checked = _checked(arguments, parameters)
    return AnsweredCall(
        checked.arguments, checked.reason, call.id, call.name, call.arguments, checked.sent
    )


def _checked(arguments: dict[str, Any], parameters: Mapping[str, Any]) -> AnsweredCall:
    reasons = check_arguments(arguments, parameters)
    if reasons:
        return AnsweredCall(None, "; ".join(reasons), sent=arguments)
    return AnsweredCall(arguments, None)


def repair_messages(
    answer: ModelAnswer, parsed: ParsedAnswer, left_out: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """The turn that tells the model which of its calls could not be read and why, to append
    to the conversation after ``answer``.

    The assistant message repeats the answer (its content, and its tool calls with their ids;
    arguments that are not JSON go as ``{}``). Then one ``tool`` message per tool call, in
    order: "Recorded." for a readable call, the reason and "Resend this finding with the
    corrected arguments." for an unreadable one. Calls without an id (written in the content)
    are named in one ``user`` message instead, as are all of them in the JSON-schema mode, and
    ``left_out``: the reasons of unreadable calls an earlier repair turn asked for in vain.
    """
    with_ids = [entry for entry in parsed.entries if entry.call_id is not None]
    assistant = assistant_message(answer)
    if with_ids:
        assistant["tool_calls"] = [
            {
                "id": entry.call_id,
                "type": "function",
                "function": {"name": entry.name, "arguments": echoed(entry.raw_arguments)},
            }
            for entry in with_ids
        ]
    messages = [assistant]
    messages += [
        {
            "role": "tool",
            "tool_call_id": entry.call_id,
            "content": RECORDED_TEXT if entry.readable else error_text(entry),
        }
        for entry in with_ids
    ]
    in_text = [
        entry.reason
        for entry in parsed.entries
        if entry.call_id is None and entry.reason is not None
    ]
    if in_text or left_out:
        messages.append({"role": "user", "content": _resend_request([*in_text, *left_out])})
    return messages


def assistant_message(
    answer: ModelAnswer, tool_calls: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The assistant turn that repeats ``answer`` in the next request of its conversation: its
    content, ``tool_calls`` when given, and its thinking as ``reasoning``. Qwen3.5's chat
    template renders the thinking of the assistant turns after the last user turn back inside
    ``<think>`` (interleaved thinking across tool rounds); vLLM (0.32) hands an input message's
    ``reasoning`` to the template, as ``reasoning_content`` too. Without it the template renders
    a turn the model never wrote, and the model's thinking leaks into its content."""
    message: dict[str, Any] = {"role": "assistant", "content": answer.content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    if answer.reasoning.strip():
        message["reasoning"] = answer.reasoning
    return message


def error_text(entry: AnsweredCall) -> str:
    """An unreadable call's tool message: why, what was sent when it cannot be echoed, and
    "resend"."""
    sent = ""
    if echoed(entry.raw_arguments) != entry.raw_arguments:
        sent = f" You sent: {entry.raw_arguments[:SENT_SNIPPET_CHARS]!r}."
    return f"Error: {entry.reason}.{sent} {RESEND_TEXT}"


def echoed(raw_arguments: str) -> str:
    """Arguments as an assistant message may repeat them: the JSON object sent, else ``{}``."""
    try:
        value = decode_json(raw_arguments)
    except (TypeError, ValueError):  # not JSON, or nested too deep (JSONTooDeepError)
        return EMPTY_ARGUMENTS
    return raw_arguments if isinstance(value, dict) else EMPTY_ARGUMENTS


def _resend_request(reasons: Sequence[str]) -> str:
    items = "\n".join(f"{number}. {reason}" for number, reason in enumerate(reasons, 1))
    return (
        f"Your answer could not be read completely:\n{items}\n"
        "Send again, in the same format as before, every finding that could not be read, "
        "with corrected arguments. Do not repeat the findings that were read."
    )


@dataclass
class Resent:
    """What the readable calls of a repair turn's answer were (see the module notes)."""

    repaired: list[dict[str, Any]] = field(default_factory=list)  # resends of unreadable calls
    new: list[dict[str, Any]] = field(default_factory=list)  # readable, but no resend
    duplicates: int = 0  # calls already read, sent again: dropped
    still_unreadable: list[AnsweredCall] = field(default_factory=list)  # not matched by a resend

    @property
    def calls(self) -> list[dict[str, Any]]:
        """The calls read from the answer: the repaired ones and the new ones."""
        return [*self.repaired, *self.new]


def match_resent(
    unreadable: Sequence[AnsweredCall],
    replied: ParsedAnswer,
    read: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
) -> Resent:
    """Match each readable call of ``replied`` (the answer to a repair turn) to the call of
    ``unreadable`` it resends, given the calls already ``read`` (see the module notes)."""
    parameters = tool_parameters(tools).get(DEFAULT_FINDINGS_TOOL, {})
    waiting = list(unreadable)
    seen = {finding_key(arguments) for arguments in read}
    resent = Resent()
    for entry in replied.entries:
        if entry.arguments is None:
            continue
        key = finding_key(entry.arguments)
        if key in seen:
            resent.duplicates += 1
            continue
        seen.add(key)
        match = _resend_of(entry.arguments, entry.call_id, waiting, parameters)
        if match is None:
            resent.new.append(entry.arguments)
        else:
            waiting.remove(match)
            resent.repaired.append(entry.arguments)
    resent.still_unreadable = waiting
    return resent


def finding_key(arguments: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes two readable calls one finding: path, side, line, category and title."""
    title = arguments.get("title")
    return (
        arguments.get("path"),
        arguments.get("side") or DEFAULT_SIDE,
        arguments.get("line"),
        arguments.get("category"),
        " ".join(title.split()).casefold() if isinstance(title, str) else title,
    )


def _resend_of(
    arguments: Mapping[str, Any],
    call_id: str | None,
    waiting: Sequence[AnsweredCall],
    parameters: Mapping[str, Any],
) -> AnsweredCall | None:
    """The unreadable call that a readable call resends: the one with its id, else the one
    whose readable identity fields all agree with it and say the most; None when none agrees."""
    if call_id is not None:
        for candidate in waiting:
            if candidate.call_id == call_id:
                return candidate
    best, best_known = None, -1
    for candidate in waiting:
        known = _identity(candidate, parameters)
        agrees = all(arguments.get(name) == value for name, value in known.items())
        if agrees and len(known) > best_known:
            best, best_known = candidate, len(known)
    return best


def _identity(entry: AnsweredCall, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The identity fields an unreadable call gave readably (present and fitting the schema)."""
    sent = entry.sent or {}
    properties = parameters.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    known = {}
    for name in IDENTITY_FIELDS:
        if sent.get(name) is None:
            continue
        schema = {"properties": {name: properties.get(name, {})}}
        if not check_arguments({name: sent[name]}, schema):
            known[name] = sent[name]
    return known


def empty_tool_calls(answer: ModelAnswer, parsed: ParsedAnswer) -> bool:
    """``finish_reason: "tool_calls"`` without any call: the answer's calls were lost."""
    return answer.finish_reason == FINISH_TOOL_CALLS and not parsed.calls and not parsed.invalid


def format_ignored(answer: ModelAnswer) -> bool:
    """Guided JSON decoding makes the answer start with ``{``; anything else means it was off."""
    if answer.finish_reason == FINISH_LENGTH:
        return False
    return not strip_reasoning(answer.content).lstrip().startswith("{")
