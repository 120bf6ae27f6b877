"""The scripted model's parts that need no vLLM (these run in the default suite).

- our chat template renders exactly the fake vLLM's prompt text, so the fake and the real server
  count the same tokens (tests/realvllm/test_fake_and_real.py checks it on the real server);
- the script answers what the fake answers: the same findings, in the same XML.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from reviewbot.prompts import tool_schemas
from tests.fakes.vllm_server import (
    NO_ISSUES_TEXT,
    SHAPE_KINDS,
    THINK_END,
    FakeVLLM,
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
ENDLESS_CUT = 64  # max_tokens that cut the endless thinking
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


def as_sent(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as a client sends them: vLLM hands the template the calls' arguments
    decoded, the fake reads the JSON text."""
    return [
        {
            **m,
            "tool_calls": [
                {
                    **c,
                    "function": {
                        **c["function"],
                        "arguments": json.dumps(c["function"]["arguments"]),
                    },
                }
                for c in m["tool_calls"]
            ],
        }
        if m.get("tool_calls")
        else m
        for m in messages
    ]


@pytest.mark.parametrize("thinking", [None, True, False])
@pytest.mark.parametrize("with_tools", [True, False])
def test_our_template_renders_the_fakes_prompt(thinking: bool | None, with_tools: bool) -> None:
    messages = conversation()
    tools = tool_schemas() if with_tools else None
    expected = render_chat_prompt(as_sent(messages), tools, enable_thinking=thinking is not False)
    assert render(messages, tools, thinking) == expected


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


CALL_1 = call("c1", "read_file", {"path": "src/app.py", "start_line": 1})


def interleaved() -> list[dict[str, Any]]:
    """Assistant turns with reasoning before the last user query (rendered without it) and
    after it, across tool rounds (rendered with it); the deprecated field name on one turn."""
    return [
        *conversation()[:2],
        {"role": "assistant", "content": "", "reasoning": "EARLY\n", "tool_calls": [CALL_1]},
        {"role": "tool", "tool_call_id": "c1", "content": "def handler(request): ..."},
        {"role": "user", "content": "Resend it."},
        {
            "role": "assistant",
            "content": "\n\nReading on.",
            "reasoning": "\nSECOND\n",
            "tool_calls": [call("c2", "read_file", {"path": "src/app.py"})],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "1 | import os"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "THIRD",
            "tool_calls": [call("c3", "find_definition", {"symbol": "handler"})],
        },
        {"role": "tool", "tool_call_id": "c3", "content": "src/app.py:10-12"},
    ]


@pytest.mark.parametrize("thinking", [True, False])
@pytest.mark.parametrize("with_tools", [True, False])
def test_reasoning_after_the_last_user_query_is_rendered_back(
    thinking: bool, with_tools: bool
) -> None:
    messages = interleaved()
    tools = tool_schemas() if with_tools else None
    text = render_chat_prompt(as_sent(messages), tools, enable_thinking=thinking)
    assert render(messages, tools, thinking) == text
    assert "EARLY" not in text
    assert "<|im_start|>assistant\n<think>\nSECOND\n</think>\n\nReading on.\n\n<tool_call>" in text
    assert "<|im_start|>assistant\n<think>\nTHIRD\n</think>\n\n<tool_call>" in text


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


@pytest.mark.parametrize("thinking", [True, False])
def test_a_check_question_gets_one_check_verdict(thinking: bool) -> None:
    from reviewbot.rules.check_questions import check_verdict_schema

    failing = DIFF.replace("eval(request.body)", "eval(request.body)  # check-fails")
    for diff, verdict in ((DIFF, "pass"), (failing, "fail")):
        messages = [{"role": "system", "content": "Judge."}, {"role": "user", "content": diff}]
        text = answer_text(render(messages, [check_verdict_schema()], thinking))
        assert text.count("<function=check_verdict>") == 1
        assert f"<parameter=verdict>\n{verdict}\n</parameter>" in text
        assert "report_finding" not in text


MARKED = DIFF.replace("eval(request.body)", "eval(request.body)  MARK")


def shaped(kind: str, thinking: bool, diff: str = MARKED) -> str:
    planted = diff.replace("MARK", f"# scripted-shape: {kind}")
    return answer_text(render([{"role": "user", "content": planted}], tool_schemas(), thinking))


@pytest.mark.parametrize("thinking", [True, False])
def test_planted_shapes_are_written_raw(thinking: bool) -> None:
    reasoning = "The diff touches 1 file(s) with 2 added line(s)."
    inside = shaped("calls_in_think", thinking)
    assert inside.startswith(reasoning) and inside.endswith(f"</tool_call>\n{THINK_END}")
    assert inside.count("<tool_call>") == 2
    bare = shaped("bare_function", thinking)
    assert "<tool_call>" not in bare and bare.count("<function=report_finding>") == 2
    assert (f"{THINK_END}\n\n<function=" in bare) == thinking
    hermes = shaped("hermes_tool_call", thinking)
    assert '<tool_call>\n{"name": "report_finding", "arguments": {"path": "src/app.py"' in hermes
    stray = shaped("stray_think_end", thinking)
    assert stray.startswith("<tool_call>") and stray.endswith(f"</tool_call>\n{THINK_END}")
    endless = shaped("endless_thinking", thinking)
    assert (THINK_END not in endless and endless.count(reasoning) > 1) == thinking


def test_shapes_need_calls_a_known_kind_and_a_first_answer() -> None:
    clean = '<file path="src/ok.py" status="added">\n+ 1 | x = 1  MARK\n</file>\n'
    assert shaped("calls_in_think", True, clean).endswith(f"{THINK_END}\n\n{NO_ISSUES_TEXT}")
    assert shaped("stray_think_end", False, clean) == f"{NO_ISSUES_TEXT}\n{THINK_END}"
    assert shaped("hermes", False).startswith("<tool_call>\n<function=report_finding>")  # unknown
    planted = MARKED.replace("MARK", "# scripted-shape: hermes_tool_call")
    repair = [
        {"role": "user", "content": planted},
        {"role": "assistant", "content": "No issues found."},
        {"role": "user", "content": "Report them with the tool."},
    ]
    assert answer_text(render(repair, tool_schemas(), False)).startswith("<tool_call>\n<function=")


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_the_fake_reads_the_same_markers(kind: str) -> None:
    """What the fake returns for each shape (the real tier holds it to vLLM 0.32's answers)."""
    planted = DIFF.replace("eval(request.body)", f"eval(request.body)  # scripted-shape: {kind}")
    body = {
        "messages": [{"role": "user", "content": planted}],
        "tools": tool_schemas(),
        "max_tokens": ENDLESS_CUT if kind == "endless_thinking" else None,
    }
    with FakeVLLM() as fake:
        message = httpx.post(f"{fake.base_url}/chat/completions", json=body).json()
    [choice] = message["choices"]
    calls = choice["message"]["tool_calls"]
    expected_calls = {"hermes_tool_call": 0, "endless_thinking": 0}.get(kind, 2)
    assert len(calls) == expected_calls
    assert choice["finish_reason"] == {
        "hermes_tool_call": "stop",
        "endless_thinking": "length",
    }.get(kind, "tool_calls")


def test_a_lookup_line_calls_three_repository_tools_then_reports_the_evidence() -> None:
    """Issue 34 part 2: ``scripted-lookup: SYMBOL`` makes the first answer call
    find_definition, search_code and read_file (in the Qwen3-Coder XML the real parser reads);
    the answer after their tool responses reports the hazard they showed."""
    from reviewbot.repo.tools import ToolForm, repository_tool_schemas

    tools = [*tool_schemas(), *repository_tool_schemas(ToolForm.TYPED)]
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


def test_with_the_compact_tool_a_lookup_line_calls_it_with_three_commands() -> None:
    from reviewbot.repo.tools import repository_tool_schemas

    tools = [*tool_schemas(), *repository_tool_schemas()]
    diff = DIFF.replace("eval(request.body)", "lookup(request.body)  # scripted-lookup: lookup")
    commands = ["def lookup", "grep -rn lookup", "sed -n '1,3p' src/app.py"]
    assert answer_text(render([{"role": "user", "content": diff}], tools, False)) == "\n".join(
        qwen_xml_call("repo", {"cmd": command}) for command in commands
    )
