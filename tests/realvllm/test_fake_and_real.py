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
from tests.fakes.vllm_server import FakeVLLM
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
