"""The scripted model's parts that need no vLLM (these run in the default suite).

- our chat template renders exactly the fake vLLM's prompt text, so the fake and the real server
  count the same tokens (tests/realvllm/test_fake_and_real.py checks it on the real server);
- the script answers what the fake answers: the same findings, in the same XML.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from reviewbot.prompts import tool_schemas
from tests.fakes.vllm_server import (
    NO_ISSUES_TEXT,
    parse_prompt_diff,
    qwen_xml_call,
    render_chat_prompt,
    review_diff,
)
from tests.realvllm.model_dir import CHAT_TEMPLATE
from tests.realvllm.script import answer_text, read_prompt

DIFF = (
    'Review this change.\n<file path="src/app.py" status="modified">\n'
    " 10 | def handler(request):\n"
    "+ 11 |     data = eval(request.body)\n"
    "+ 12 |     if data == None:\n"
    "</file>\n"
)
CALL = {"path": "src/app.py", "line": 11, "severity": "critical", "body": "é — `eval`"}


def render(messages: list[dict[str, Any]], tools: Any, thinking: bool | None) -> str:
    """Our template rendered as transformers renders chat templates (its tojson filter)."""
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.filters["tojson"] = lambda value: json.dumps(value, ensure_ascii=False)
    kwargs = {} if thinking is None else {"enable_thinking": thinking}
    template = environment.from_string(CHAT_TEMPLATE)
    return template.render(messages=messages, tools=tools, add_generation_prompt=True, **kwargs)


def conversation() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You review code."},
        {"role": "user", "content": DIFF},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "report_finding", "arguments": CALL},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "line 99 is not in the diff"},
        {"role": "user", "content": [{"type": "text", "text": "Resend it."}]},
    ]


@pytest.mark.parametrize("thinking", [None, True, False])
@pytest.mark.parametrize("with_tools", [True, False])
def test_our_template_renders_the_fakes_prompt(thinking: bool | None, with_tools: bool) -> None:
    messages = conversation()
    tools = tool_schemas() if with_tools else None
    # vLLM hands the template the calls' arguments decoded; the fake reads the JSON text
    as_sent = [
        {
            **m,
            "tool_calls": [
                {**c, "function": {**c["function"], "arguments": json.dumps(CALL)}}
                for c in m["tool_calls"]
            ],
        }
        if m.get("tool_calls")
        else m
        for m in messages
    ]
    expected = render_chat_prompt(as_sent, tools, enable_thinking=thinking is not False)
    assert render(messages, tools, thinking) == expected


@pytest.mark.parametrize("thinking", [True, False])
def test_the_script_answers_the_fakes_findings_as_qwen3_coder_xml(thinking: bool) -> None:
    prompt = render(conversation()[:2], tool_schemas(), thinking)
    findings = review_diff(parse_prompt_diff(DIFF))
    text = answer_text(prompt)
    body = "\n".join(qwen_xml_call("report_finding", finding) for finding in findings)
    assert len(findings) == 2 and text.endswith(body)
    assert text.startswith("The diff touches 1 file(s)") == thinking
    assert ("\n</think>\n\n" in text) == thinking


def test_a_repair_turn_resends_only_what_was_not_written_correctly() -> None:
    findings = review_diff(parse_prompt_diff(DIFF))
    right, wrong = findings[0], {**findings[1], "line": "L12"}
    messages = [
        *conversation()[:2],
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": "report_finding", "arguments": call},
                }
                for i, call in enumerate((right, wrong))
            ],
        },
        {"role": "user", "content": "The second call's line is not an integer. Resend it."},
    ]
    text = answer_text(render(messages, tool_schemas(), False))
    assert text == qwen_xml_call("report_finding", findings[1])


def test_planted_mistakes_and_no_findings() -> None:
    planted = DIFF.replace(
        "eval(request.body)", "eval(request.body)  # scripted-mistake: wrong_type"
    )
    text = answer_text(render([{"role": "user", "content": planted}], tool_schemas(), False))
    assert "<parameter=line>\nL11\n</parameter>" in text
    clean = render([{"role": "user", "content": "Hello"}], tool_schemas(), False)
    assert answer_text(clean) == NO_ISSUES_TEXT
    assert read_prompt(clean).tool_names == ["report_finding"]


def test_a_verification_request_gets_one_verdict_per_candidate() -> None:
    from reviewbot.verify import verdict_schema

    candidates = (
        "Check each candidate finding below.\n\n"
        "1. [critical/security] src/app.py:11: Use of eval()\n   eval is bad\n"
        "2. [major/bug] src/app.py:10: Possible off-by-one\n   reads past the end\n"
    )
    messages = [*conversation()[:2], {"role": "user", "content": candidates}]
    text = answer_text(render(messages, [*tool_schemas(), verdict_schema()], False))
    keep = {"id": 1, "verdict": "keep", "reason": "the diff shows it", "confidence": 0.9}
    drop = {
        "id": 2,
        "verdict": "drop",
        "reason": "nothing of the kind on that line",
        "confidence": 0.9,
    }
    assert text.endswith(qwen_xml_call("verdict", keep) + "\n" + qwen_xml_call("verdict", drop))
    assert "report_finding" not in text


def test_a_lookup_line_calls_three_repository_tools_then_reports_the_evidence() -> None:
    """Issue 34 part 2: ``scripted-lookup: SYMBOL`` makes the first answer call
    find_definition, search_code and read_file (in the Qwen3-Coder XML the real parser reads);
    the answer after their tool responses reports the hazard they showed."""
    from reviewbot.repo.tools import repository_tool_schemas

    tools = [*tool_schemas(), *repository_tool_schemas()]
    diff = DIFF.replace("eval(request.body)", "lookup(request.body)  # scripted-lookup: lookup")
    first = [{"role": "user", "content": diff}]
    calls = [
        ("find_definition", {"symbol": "lookup"}),
        ("search_code", {"pattern": "lookup"}),
        ("read_file", {"path": "src/app.py", "start_line": 1, "end_line": 3}),
    ]
    assert answer_text(render(first, tools, False)) == "\n".join(
        qwen_xml_call(name, args) for name, args in calls
    )
    assert "find_definition" not in answer_text(render(first, tool_schemas(), False))
    answered = [
        *first,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": f"t{i}", "type": "function", "function": {"name": n, "arguments": a}}
                for i, (n, a) in enumerate(calls)
            ],
        },
        *(
            {"role": "tool", "tool_call_id": f"t{i}", "content": text}
            for i, text in enumerate(
                ["lib.py:1-2\n def lookup(key):  # hazard(lookup): None", "no hit", "..."]
            )
        ),
    ]
    text = answer_text(render(answered, tools, False))
    assert "lookup may return None (the repository says so)" in text
    assert "<parameter=line>\n11\n</parameter>" in text and "find_definition" not in text
