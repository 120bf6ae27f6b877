"""The fake vLLM and the real one, asked the same thing, answer the same.

Each test sends one request to both servers and compares what reviewbot reads from it: the
prompt's token count (our chat template against the fake's rendering), the parsed tool calls,
the reasoning and content texts, the finish reason and the error texts. Where they differed, the
fake was fixed (docs/fake-and-real-vllm.md lists each difference).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from reviewbot.prompts import tool_schemas
from reviewbot.repo.tools import ToolForm, repository_tool_schemas
from tests.fakes.vllm_server import (
    CALL_SHAPES,
    ENDLESS_THINKING,
    SHAPE_KINDS,
    FakeVLLM,
)
from tests.realvllm.server import SERVED_MODEL, SharedServer
from tests.realvllm.tier import REAL_VLLM

pytestmark = REAL_VLLM

RISKY = (
    'Review this change.\n<file path="src/app.py" status="modified">\n'
    " 10 | def handler(request):\n"
    "+ 11 |     data = eval(request.body)\n"
    "+ 12 |     if data == None:\n"
    "</file>\n"
)
CLEAN = 'Review this change.\n<file path="src/ok.py" status="added">\n+ 1 | x = 1\n</file>\n'
TIMEOUT_S = 120.0
# One short finding (the call shapes), or none (a text answer: the other shapes).
SHAPED_CALL = (
    'Review this change.\n<file path="a.py" status="added">\n'
    "+ 1 | eval(x)  # scripted-shape: {kind}\n</file>\n"
)
SHAPED_TEXT = (
    'Review this change.\n<file path="a.py" status="added">\n'
    "+ 1 | x = 1  # scripted-shape: {kind}\n</file>\n"
)
ENDLESS_MAX_TOKENS = 64  # where endless thinking is cut (it would go on for 1,200 tokens)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeVLLM]:
    with FakeVLLM(model=SERVED_MODEL) as server:
        yield server


def request(diff: str, thinking: bool, tools: bool = True, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": SERVED_MODEL,
        "messages": [
            {"role": "system", "content": "You review code. Report each problem with the tool."},
            {"role": "user", "content": diff},
        ],
        "max_tokens": 1024,
        "chat_template_kwargs": {"enable_thinking": thinking},
        **extra,
    }
    if tools:
        body["tools"] = tool_schemas()
    return body


def answer(base_url: str, body: dict[str, Any]) -> dict[str, Any]:
    """What reviewbot reads of a non-streamed answer."""
    response = httpx.post(f"{base_url}/chat/completions", json=body, timeout=TIMEOUT_S)
    response.raise_for_status()
    data = response.json()
    [choice] = data["choices"]
    message = choice["message"]
    return {
        "prompt_tokens": data["usage"]["prompt_tokens"],
        "completion_tokens": data["usage"]["completion_tokens"],
        "reasoning_tokens": (data["usage"].get("completion_tokens_details") or {}).get(
            "reasoning_tokens"
        ),
        "finish_reason": choice["finish_reason"],
        "content": message.get("content"),
        "reasoning": message.get("reasoning"),
        "reasoning_content": message.get("reasoning_content"),
        "calls": [
            (call["function"]["name"], json.loads(call["function"]["arguments"]))
            for call in message.get("tool_calls") or ()
        ],
    }


@pytest.mark.parametrize("thinking", [True, False])
@pytest.mark.parametrize("diff", [RISKY, CLEAN], ids=["findings", "clean"])
def test_the_same_review_answer(
    real_vllm: SharedServer, fake: FakeVLLM, thinking: bool, diff: str
) -> None:
    body = request(diff, thinking)
    assert answer(fake.base_url, body) == answer(real_vllm.base_url, body)


@pytest.mark.parametrize("thinking", [True, False])
def test_the_same_text_answer_without_tools(
    real_vllm: SharedServer, fake: FakeVLLM, thinking: bool
) -> None:
    body = request(RISKY, thinking, tools=False)
    assert answer(fake.base_url, body) == answer(real_vllm.base_url, body)


@pytest.mark.parametrize("max_tokens", [20, 60, 100])
def test_the_same_cut_answer(real_vllm: SharedServer, fake: FakeVLLM, max_tokens: int) -> None:
    """Cut inside the thinking (20) or inside a tool call (60, 100): vLLM 0.32 parses the calls
    begun, the last one cut short, and a NOT streamed answer says finish_reason "tool_calls"."""
    body = request(RISKY, thinking=True, max_tokens=max_tokens)
    cut = answer(real_vllm.base_url, body)
    assert cut["completion_tokens"] == max_tokens
    assert cut["finish_reason"] == ("length" if max_tokens == 20 else "tool_calls")
    assert answer(fake.base_url, body) == cut


def streamed(base_url: str, body: dict[str, Any]) -> dict[str, Any]:
    """What reviewbot reads of a streamed answer (deltas merged)."""
    calls: dict[int, list[str]] = {}
    content, reasoning, finish = "", "", None
    stream_body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream(
        "POST", f"{base_url}/chat/completions", json=stream_body, timeout=TIMEOUT_S
    ) as response:
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line.removeprefix("data: "))
            for choice in event.get("choices") or ():
                delta = choice.get("delta") or {}
                content += delta.get("content") or ""
                reasoning += delta.get("reasoning") or ""
                for call in delta.get("tool_calls") or ():
                    slot = calls.setdefault(call["index"], ["", ""])
                    slot[0] += (call.get("function") or {}).get("name") or ""
                    slot[1] += (call.get("function") or {}).get("arguments") or ""
                finish = choice.get("finish_reason") or finish
    return {
        "content": content,
        "reasoning": reasoning,
        "finish_reason": finish,
        "calls": [tuple(call) for call in calls.values()],  # a cut call's arguments: not JSON
    }


@pytest.mark.parametrize("max_tokens", [None, 60])
@pytest.mark.parametrize("thinking", [True, False])
def test_the_same_streamed_answer(
    real_vllm: SharedServer, fake: FakeVLLM, max_tokens: int | None, thinking: bool
) -> None:
    body = request(RISKY, thinking, max_tokens=max_tokens or 1024)
    real, imitated = streamed(real_vllm.base_url, body), streamed(fake.base_url, body)
    assert real["finish_reason"] == ("length" if max_tokens else "tool_calls")
    if max_tokens:
        # A cut call's streamed arguments: vLLM's partial JSON up to the open parameter
        # (not JSON), the fake's the parameters closed so far; both end "length", so reviewbot
        # re-splits either way (docs/fake-and-real-vllm.md).
        real["calls"] = [name for name, _ in real["calls"]]
        imitated["calls"] = [name for name, _ in imitated["calls"]]
    assert imitated == real


def test_the_same_token_count(real_vllm: SharedServer, fake: FakeVLLM) -> None:
    body = request(RISKY, thinking=False)
    del body["max_tokens"]
    counts = [
        httpx.post(f"{server.root_url}/tokenize", json=body, timeout=TIMEOUT_S).json()
        for server in (fake, real_vllm)
    ]
    assert counts[0]["count"] == counts[1]["count"]
    assert counts[0]["tokens"] == counts[1]["tokens"]
    assert counts[0]["max_model_len"] == counts[1]["max_model_len"]


def tool_rounds(with_reasoning: bool) -> list[dict[str, Any]]:
    """A review that took two rounds of repository tool calls, each assistant turn with its
    reasoning (sent back in the ``reasoning`` field, as reviewbot does) or without."""

    def turn(round_: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"chatcmpl-tool-{round_:016x}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            ],
        }
        if with_reasoning:
            message["reasoning"] = f"Round {round_}: I need {name} before I judge line 11.\n"
        return message

    return [
        *request(RISKY, thinking=True)["messages"],
        turn(1, "find_definition", {"symbol": "handler"}),
        {"role": "tool", "tool_call_id": f"chatcmpl-tool-{1:016x}", "content": "src/app.py:10-12"},
        turn(2, "read_file", {"path": "src/app.py", "start_line": 10, "end_line": 12}),
        {"role": "tool", "tool_call_id": f"chatcmpl-tool-{2:016x}", "content": "10 | def handler"},
    ]


def test_interleaved_thinking_across_tool_rounds(real_vllm: SharedServer, fake: FakeVLLM) -> None:
    """Both assistant turns come after the last user query: Qwen3.5's template renders their
    reasoning back, and the real server counts the prompt the fake renders, token for token.
    The deprecated field ``reasoning_content`` is renamed ``reasoning`` by the chat endpoint
    only: ``/tokenize`` does not read it."""
    tools = [*tool_schemas(), *repository_tool_schemas(ToolForm.TYPED)]
    deprecated = [
        {("reasoning_content" if key == "reasoning" else key): value for key, value in m.items()}
        for m in tool_rounds(with_reasoning=True)
    ]
    counts = {}
    for case, messages in {
        "reasoning": tool_rounds(with_reasoning=True),
        "none": tool_rounds(with_reasoning=False),
        "reasoning_content": deprecated,
    }.items():
        body = {"model": SERVED_MODEL, "messages": messages, "tools": tools}
        tokenized = [
            httpx.post(f"{server.root_url}/tokenize", json=body, timeout=TIMEOUT_S).json()
            for server in (fake, real_vllm)
        ]
        assert tokenized[0]["tokens"] == tokenized[1]["tokens"]
        counts[case] = tokenized[1]["count"]
    assert counts["reasoning"] > counts["none"] == counts["reasoning_content"]
    for messages in (tool_rounds(with_reasoning=True), deprecated):
        chat = {**request(RISKY, thinking=True, max_tokens=1), "tools": tools, "messages": messages}
        assert answer(real_vllm.base_url, chat)["prompt_tokens"] == counts["reasoning"]
        assert answer(fake.base_url, chat)["prompt_tokens"] == counts["reasoning"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("thinking", [True, False], ids=["thinking", "not-thinking"])
@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_the_same_answer_to_each_raw_shape(
    real_vllm: SharedServer, fake: FakeVLLM, kind: str, thinking: bool, stream: bool
) -> None:
    """The scripted model writes a raw shape (docs/fake-and-real-vllm.md has what vLLM 0.32
    makes of each); the fake returns what the real server returns for it."""
    diff = (SHAPED_CALL if kind in CALL_SHAPES else SHAPED_TEXT).format(kind=kind)
    endless = kind == ENDLESS_THINKING and thinking
    body = request(diff, thinking, max_tokens=ENDLESS_MAX_TOKENS if endless else 1024)
    if stream:
        real, imitated = streamed(real_vllm.base_url, body), streamed(fake.base_url, body)
    else:
        real, imitated = answer(real_vllm.base_url, body), answer(fake.base_url, body)
    assert imitated == real
    assert real["finish_reason"] == (
        "length" if endless else "tool_calls" if real["calls"] else "stop"
    )


@pytest.mark.parametrize("priority", [0, 40, -5, "high", None])
def test_the_same_answer_to_a_priority(
    real_vllm: SharedServer, fake: FakeVLLM, priority: object
) -> None:
    """An integer priority is taken (the tier's server runs --scheduling-policy priority, the
    fake takes it under any policy, as vLLM 0.32 does); anything else is a 400 from both."""
    body = request(CLEAN, thinking=False, max_tokens=1, priority=priority)
    statuses = [
        httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=TIMEOUT_S).status_code
        for server in (fake, real_vllm)
    ]
    assert statuses[0] == statuses[1]
    assert statuses[0] == (200 if isinstance(priority, int) else 400)
