"""The fake vLLM's verifier brain (reviewbot.verify's verdict tool) and its faults, over HTTP
with the OpenAI client, like tests/test_fake_vllm.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai import OpenAI

from reviewbot.verify import verdict_schema
from tests.fakes.vllm_server import UNKNOWN_VERDICT_ID, VERDICT_CONFIDENCE, FakeVLLM
from tests.test_fake_vllm import REPORT_FINDING_TOOL, RISKY_LINES, client, review_messages, server

__all__ = ["client", "server"]  # the fixtures, shared with tests/test_fake_vllm.py

# a true finding (line 11: eval) and a wrong one (line 17: nothing there)
CANDIDATES = (
    "Check each candidate finding below.\n\n"
    "1. [critical/security] src/app.py:11: Use of eval() on dynamic input\n   eval is bad\n"
    "2. [major/bug] src/app.py:17: Possible off-by-one\n   reads past the end\n"
)


def verify(client: OpenAI, server: FakeVLLM) -> Any:
    messages = [*review_messages(RISKY_LINES), {"role": "user", "content": CANDIDATES}]
    return client.chat.completions.create(
        model=server.model, messages=messages, tools=[REPORT_FINDING_TOOL, verdict_schema()]
    )


def verdicts(answer: Any) -> list[dict[str, Any]]:
    calls = answer.choices[0].message.tool_calls or []
    assert {call.function.name for call in calls} <= {"verdict"}
    return [json.loads(call.function.arguments) for call in calls]


def test_the_verifier_keeps_an_oracle_line_and_drops_the_other(server: FakeVLLM, client: OpenAI):
    said = verdicts(verify(client, server))
    assert [(v["id"], v["verdict"]) for v in said] == [(1, "keep"), (2, "drop")]
    assert {v["confidence"] for v in said} == {VERDICT_CONFIDENCE}
    assert all(v["reason"] for v in said)


def test_unreadable_verdicts_are_not_json(server: FakeVLLM, client: OpenAI):
    server.add_faults("verdicts_unreadable")
    calls = verify(client, server).choices[0].message.tool_calls
    assert len(calls) == 2
    for call in calls:
        with pytest.raises(json.JSONDecodeError):
            json.loads(call.function.arguments)


def test_missing_verdicts_are_prose(server: FakeVLLM, client: OpenAI):
    server.add_faults("verdicts_missing")
    choice = verify(client, server).choices[0]
    assert not choice.message.tool_calls and choice.finish_reason == "stop"
    assert choice.message.content


def test_an_unknown_id_comes_on_top(server: FakeVLLM, client: OpenAI):
    server.add_faults("verdicts_unknown_id")
    ids = [v["id"] for v in verdicts(verify(client, server))]
    assert ids == [1, 2, UNKNOWN_VERDICT_ID]


def test_a_planted_finding_is_on_a_line_with_no_true_finding(server: FakeVLLM, client: OpenAI):
    server.add_faults("planted_finding")
    answer = client.chat.completions.create(
        model=server.model, messages=review_messages(RISKY_LINES), tools=[REPORT_FINDING_TOOL]
    )
    lines = [json.loads(c.function.arguments)["line"] for c in answer.choices[0].message.tool_calls]
    assert lines[-1] == 16 and lines[:-1] == [11, 12, 13, 14, 15, 18]


# a line that uses a symbol, and the hazard marker a tool answer brought in (needs_evidence)
EVIDENCE_LINES: list[tuple[str, int, str, str | None]] = [
    ("+", 5, "    user = find_user(name)", None),
]
EVIDENCE_CANDIDATE = (
    "Check each candidate finding below.\n\n"
    "1. [major/bug] src/app.py:5: find_user may return None\n   not handled\n"
)
TOOL_ANSWER = "def find_user(name):  # hazard(find_user): may return None when no user has it"


@pytest.mark.parametrize("with_marker", [True, False])
def test_with_needs_evidence_the_verifier_keeps_what_a_tool_answer_shows(with_marker: bool):
    messages: list[dict[str, Any]] = review_messages(EVIDENCE_LINES)
    if with_marker:
        call = {
            "id": "call-1",
            "type": "function",
            "function": {"name": "find_definition", "arguments": '{"symbol": "find_user"}'},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call-1", "content": TOOL_ANSWER},
        ]
    messages.append({"role": "user", "content": EVIDENCE_CANDIDATE})
    with (
        FakeVLLM(needs_evidence=True) as fake,
        OpenAI(base_url=fake.base_url, api_key="x", max_retries=0) as openai,
    ):
        answer = openai.chat.completions.create(
            model=fake.model, messages=messages, tools=[REPORT_FINDING_TOOL, verdict_schema()]
        )
    [said] = verdicts(answer)
    assert said["verdict"] == ("keep" if with_marker else "drop")
