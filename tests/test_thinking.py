"""Qwen3.5's thinking, in every shape vLLM's parsers return it, never read as "no findings".

Against the fake vLLM over real HTTP: the shapes of older parsers are its faults
(``calls_in_reasoning``, ``xml_in_content``, ``answer_in_reasoning``); an answer cut off while
thinking is a small ``max_output_tokens`` with thinking on. docs/fake-and-real-vllm.md says
which shapes vLLM 0.32 itself still returns (tests/realvllm/test_fake_and_real.py).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest

from reviewbot.commands.render import thinking_line
from reviewbot.llm.answers import assistant_message, parse_answer
from reviewbot.llm.factory import runner_for
from reviewbot.llm.openai_compatible import answer_from_completion
from reviewbot.model import MODE_TOOL_CALLS, ChunkRequest, ChunkResult, ModelAnswer
from reviewbot.prompts import tool_schemas
from tests.fakes.vllm_server import FakeVLLM, qwen_xml_call
from tests.test_llm import (
    RISKY_FINDING_LINES,
    chunk,
    diff_message,
    reported_lines,
    settings_for,
)

FINDING = {"path": "src/app.py", "line": 11, "severity": "major", "title": "eval", "body": "b"}
# Room for the fake's findings, not for the long_thinking fault's reasoning before them.
OUTPUT_TOKENS = 512


@pytest.fixture
def server() -> Iterator[FakeVLLM]:
    with FakeVLLM() as fake:
        yield fake


def review(server: FakeVLLM, **overrides: Any) -> ChunkResult:
    with runner_for(settings_for(server, **overrides)) as client:
        [result] = client.review_chunks([chunk(0)])
    return result


def thinking_sent(server: FakeVLLM) -> list[bool | None]:
    """Each chat request's enable_thinking, as sent (None: not sent)."""
    return [
        (request.get("chat_template_kwargs") or {}).get("enable_thinking")
        for request in server.requests
        if "messages" in request
    ]


# -- the shapes, read and counted --------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_calls_written_inside_the_thinking_are_recovered_and_counted(
    server: FakeVLLM, stream: bool
) -> None:
    server.add_faults("calls_in_reasoning")
    result = review(server, enable_thinking=True, stream=stream)
    assert result.error is None and reported_lines(result) == RISKY_FINDING_LINES
    [record] = result.records
    assert record.outcome == "ok" and record.recovered_tool_calls == len(RISKY_FINDING_LINES)


def test_xml_calls_left_in_the_content_are_read_and_counted(server: FakeVLLM) -> None:
    server.add_faults("xml_in_content")
    result = review(server, enable_thinking=True)
    assert result.error is None and reported_lines(result) == RISKY_FINDING_LINES
    assert result.records[0].recovered_tool_calls == len(RISKY_FINDING_LINES)


def test_an_answer_landing_in_the_reasoning_with_thinking_off_is_read(server: FakeVLLM) -> None:
    server.add_faults("answer_in_reasoning")
    result = review(server, enable_thinking=False)
    assert result.error is None and reported_lines(result) == RISKY_FINDING_LINES
    assert result.records[0].recovered_tool_calls == len(RISKY_FINDING_LINES)
    assert thinking_sent(server) == [False]


def test_ordinary_calls_are_not_counted_as_recovered(server: FakeVLLM) -> None:
    result = review(server, enable_thinking=True)
    assert reported_lines(result) == RISKY_FINDING_LINES
    assert [record.recovered_tool_calls for record in result.records] == [0]


# -- never "0 findings" from thinking alone ----------------------------------------------------


def answer(content: str = "", reasoning: str = "", finish: str = "stop") -> ModelAnswer:
    return ModelAnswer(content=content, reasoning=reasoning, finish_reason=finish)


def test_a_broken_call_in_the_thinking_is_unreadable_not_clean() -> None:
    broken = qwen_xml_call("report_finding", FINDING).replace("</tool_call>", "")
    parsed = parse_answer(
        answer(reasoning=f"Let me look.\n{broken}"), MODE_TOOL_CALLS, tool_schemas()
    )
    assert not parsed.calls and not parsed.blank
    assert parsed.invalid and parsed.invalid[0].startswith("in the model's thinking: ")


def test_a_call_drafted_in_the_thinking_is_not_read_when_the_answer_says_no_issues() -> None:
    thought = f"Maybe {qwen_xml_call('report_finding', FINDING)}? No, it is fine."
    parsed = parse_answer(
        answer(content="No issues found.", reasoning=thought), MODE_TOOL_CALLS, tool_schemas()
    )
    assert not parsed.entries and not parsed.blank and parsed.recovered == 0


def test_thinking_then_nothing_is_blank_and_the_chunk_is_not_reviewed(server: FakeVLLM) -> None:
    """An answer with only thinking (no call, no text) is asked again, then not reviewed."""
    body = empty_answer_body(reasoning="I looked at the change.\n")
    server.answer_with("POST /v1/chat/completions", json.dumps(body))
    result = review(server, enable_thinking=True, stream=False, max_retries=2)
    assert result.error == "the model's answer was empty (no finding and no text), 3 times"
    assert [record.outcome for record in result.records] == ["empty_retry", "empty_retry", "error"]
    assert not result.calls


def empty_answer_body(reasoning: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": None, "tool_calls": [], "reasoning": reasoning}
    return {
        "id": "chatcmpl-empty",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def test_no_issues_found_is_a_clean_answer() -> None:
    parsed = parse_answer(answer(content="\n\nNo issues found."), MODE_TOOL_CALLS, tool_schemas())
    assert not parsed.entries and not parsed.blank and not parsed.cut_in_thinking


# -- cut off while thinking --------------------------------------------------------------------


def test_an_answer_cut_off_while_thinking_is_asked_again_with_thinking_off(
    server: FakeVLLM,
) -> None:
    server.add_faults("long_thinking")
    result = review(server, enable_thinking=True, max_output_tokens=OUTPUT_TOKENS)
    assert result.error is None and not result.truncated
    assert reported_lines(result) == RISKY_FINDING_LINES
    cut, again = result.records
    assert cut.outcome == "thinking_cut_off" and not cut.thinking_off
    assert (
        cut.error is not None and "the model's thinking used the whole output budget" in cut.error
    )
    assert again.outcome == "ok" and again.thinking_off
    assert thinking_sent(server) == [True, False]


def test_cut_off_while_thinking_twice_is_not_reviewed_and_names_the_cause(
    server: FakeVLLM,
) -> None:
    """Behind a template that ignores enable_thinking, the model thinks long again."""
    server.add_faults("long_thinking", "long_thinking")
    result = review(server, enable_thinking=True, max_output_tokens=OUTPUT_TOKENS)
    assert thinking_sent(server) == [True, False]
    assert not result.calls and not result.truncated and not result.context_overflow
    assert result.error is not None
    assert result.error.startswith("the model's thinking used the whole output budget")
    assert result.error.endswith("also when asked again with thinking off")
    assert [record.outcome for record in result.records] == ["thinking_cut_off", "error"]


def test_reasoning_tokens_are_read_from_the_usage() -> None:
    body = empty_answer_body("x")
    body["usage"]["completion_tokens_details"] = {"reasoning_tokens": 4}
    assert answer_from_completion(body).reasoning_tokens == 4
    del body["usage"]["completion_tokens_details"]
    assert answer_from_completion(body).reasoning_tokens is None


# -- the thinking sent back ----------------------------------------------------------------------


@pytest.mark.parametrize("thinking", [True, False])
def test_a_repair_turn_sends_the_answers_thinking_back(server: FakeVLLM, thinking: bool) -> None:
    """Qwen3.5's template renders the thinking of the turns after the last user turn: the
    assistant turn repeated in the repair turn carries its ``reasoning``, as it was answered."""
    server.add_faults("missing_line")
    result = review(server, enable_thinking=thinking)
    assert reported_lines(result) == RISKY_FINDING_LINES
    [_, repair] = [request for request in server.requests if "messages" in request]
    [assistant] = [m for m in repair["messages"] if m["role"] == "assistant"]
    if thinking:
        assert assistant["reasoning"].startswith("The diff touches 1 file(s)")
    else:
        assert "reasoning" not in assistant


def test_a_tool_rounds_assistant_turn_carries_its_thinking() -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]
    thought = ModelAnswer(content="", reasoning="I need the caller.\n")
    message = assistant_message(thought, calls)
    assert message == {
        "role": "assistant",
        "content": "",
        "tool_calls": calls,
        "reasoning": "I need the caller.\n",
    }
    assert "reasoning" not in assistant_message(ModelAnswer(content="x", reasoning="\n"))


@pytest.mark.parametrize("thinking", [True, False])
def test_the_tokens_spent_thinking_are_recorded(server: FakeVLLM, thinking: bool) -> None:
    result = review(server, enable_thinking=thinking)
    [record] = result.records
    assert record.reasoning_tokens is not None
    assert (record.reasoning_tokens > 0) == thinking
    assert record.reasoning_tokens < record.completion_tokens


# -- the shapes vLLM 0.32 still returns (the fake answers as the real tier measured) ----------


def shaped_chunk(kind: str) -> ChunkRequest:
    lines = [
        (" ", 10, "def handler(request):"),
        ("+", 11, "    data = eval(request.body)"),
        ("+", 12, f"    # scripted-shape: {kind}"),
    ]
    messages = [
        {"role": "system", "content": "You review code."},
        {"role": "user", "content": diff_message("src/app.py", lines)},
    ]
    return ChunkRequest(0, messages, tool_schemas())


def test_endless_thinking_is_asked_again_with_thinking_off_as_on_the_real_tier(
    server: FakeVLLM,
) -> None:
    with runner_for(settings_for(server, enable_thinking=True, max_output_tokens=256)) as client:
        [result] = client.review_chunks([shaped_chunk("endless_thinking")])
    assert result.error is None and [c["line"] for c in result.calls] == [11]
    cut, again = result.records
    assert cut.outcome == "thinking_cut_off" and cut.reasoning_tokens == 256
    assert again.outcome == "ok" and again.thinking_off and again.reasoning_tokens == 0


@pytest.mark.parametrize("kind", ["hermes_tool_call", "stray_think_end"])
def test_a_shape_with_nothing_in_it_is_never_a_clean_chunk(server: FakeVLLM, kind: str) -> None:
    """0.32 drops a Hermes call without a trace; a text answer left in the open thinking has no
    content either: asked again, then not reviewed."""
    lines = shaped_chunk(kind)
    if kind == "stray_think_end":  # the text shape: a diff the model has nothing to say about
        clean = diff_message("src/ok.py", [("+", 1, "x = 1  # scripted-shape: stray_think_end")])
        lines = dataclasses.replace(lines, messages=[lines.messages[0], user(clean)])
    settings = settings_for(server, enable_thinking=True, max_retries=1)
    with runner_for(settings) as client:
        [result] = client.review_chunks([lines])
    assert result.error == "the model's answer was empty (no finding and no text), 2 times"
    assert not result.calls


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_reviews_show_says_what_thinking_did() -> None:
    calls = [
        {"reasoning_tokens": 300, "recovered_tool_calls": 2, "thinking_off": False},
        {"reasoning_tokens": 0, "recovered_tool_calls": 0, "thinking_off": True},
        {"reasoning_tokens": None, "recovered_tool_calls": 0, "thinking_off": False},
    ]
    assert thinking_line(calls) == (
        "300 tokens, 2 call(s) recovered from the thinking or the text, "
        "1 request(s) with thinking off"
    )
    assert thinking_line([calls[2]]).startswith("tokens not reported by the server, 0 call(s)")
