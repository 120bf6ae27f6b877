"""Tool calls written as text in ``content``.

The Qwen3-coder XML format and its value rules follow vLLM's
``vllm/tool_parsers/qwen3coder_tool_parser.py`` (one leading/trailing newline trimmed from each
value, ``null`` -> None, conversion by the schema type), except that a value that does not fit
its type is an error here instead of being kept as a string.
"""

from __future__ import annotations

import json

import pytest

from reviewbot.toolcalls import (
    MAX_JSON_DEPTH,
    NON_BLANK_PATTERN,
    ArgumentsError,
    JSONTooDeepError,
    ToolCall,
    check_arguments,
    decode_json,
    parse_arguments,
    parse_tool_calls_from_content,
    strip_reasoning,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "report_finding",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "line": {"type": "integer"},
                    "end_line": {"type": ["integer", "null"]},
                    "side": {"type": "string", "enum": ["new", "old"]},
                    "severity": {"enum": ["blocker", "major"]},
                    "title": {"type": "string"},
                    "body": {"type": "string"},
                    "suggestion": {"type": "string"},
                    "confidence": {"type": "number"},
                    "tags": {"type": "array"},
                    "blocking": {"type": "boolean"},
                },
                "required": ["path", "line"],
            },
        },
    }
]
PARAMETERS = TOOLS[0]["function"]["parameters"]


def xml_call(**params: str) -> str:
    body = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in params.items())
    return f"<tool_call>\n<function=report_finding>\n{body}</function>\n</tool_call>"


def test_qwen_xml_values_are_converted_by_schema_type() -> None:
    text = xml_call(
        path="src/app.py",
        line="12",
        severity="major",
        confidence="0.5",
        blocking="true",
        tags='["a", "b"]',
    )
    parsed = parse_tool_calls_from_content(text, TOOLS)
    assert parsed.errors == []
    assert parsed.calls == [
        ToolCall(
            "report_finding",
            {
                "path": "src/app.py",
                "line": 12,
                "severity": "major",
                "confidence": 0.5,
                "blocking": True,
                "tags": ["a", "b"],
            },
        )
    ]


def test_qwen_xml_multiline_value_keeps_code_indentation() -> None:
    code = "def f(x):\n    if x < 0:\n        return None\n\n    return x\n"
    text = xml_call(path="a.py", line="3", suggestion=code)
    parsed = parse_tool_calls_from_content(text, TOOLS)
    assert parsed.errors == []
    # one leading and one trailing newline belong to the format; the code's own newline stays
    assert parsed.calls[0].arguments["suggestion"] == code


def test_null_means_none_and_union_types_accept_either() -> None:
    parsed = parse_tool_calls_from_content(xml_call(path="a.py", line="3", end_line="null"), TOOLS)
    assert parsed.calls[0].arguments["end_line"] is None
    parsed = parse_tool_calls_from_content(xml_call(path="a.py", line="3", end_line="5"), TOOLS)
    assert parsed.calls[0].arguments["end_line"] == 5


@pytest.mark.parametrize("bad", ["12.0", "twelve", "1_000", "12 lines", "", "0x10"])
def test_an_integer_parameter_that_is_no_integer_stays_text_and_is_refused(bad: str) -> None:
    parsed = parse_tool_calls_from_content(xml_call(path="a.py", line=bad), TOOLS)
    assert parsed.errors == [] and parsed.calls[0].arguments["line"] == bad  # as vLLM keeps it
    reasons = check_arguments(parsed.calls[0].arguments, PARAMETERS)
    assert reasons == [f"`line`: must be an integer; got {json.dumps(bad)}"]


@pytest.mark.parametrize(
    ("key", "bad", "rule"),
    [
        ("blocking", "yes", "must be a boolean"),
        ("tags", "['a']", "must be an array"),
        ("confidence", "NaN", "must be a number"),
    ],
)
def test_other_types_are_not_guessed(key: str, bad: str, rule: str) -> None:
    parsed = parse_tool_calls_from_content(xml_call(path="a.py", line="1", **{key: bad}), TOOLS)
    assert parsed.calls[0].arguments[key] == bad
    assert check_arguments(parsed.calls[0].arguments, PARAMETERS) == [
        f"`{key}`: {rule}; got {json.dumps(bad)}"
    ]


@pytest.mark.parametrize(
    ("arguments", "reasons"),
    [
        ({"path": "a.py", "line": 3}, []),
        ({"path": "a.py"}, ["`line`: required integer, missing"]),
        ({"path": "a.py", "line": None}, ["`line`: required integer, got null"]),
        (
            {"line": True},
            ["`path`: required string, missing", "`line`: must be an integer; got true"],
        ),
        ({"path": "a.py", "line": 2.0}, ["`line`: must be an integer; got 2.0"]),
        (
            {"path": "a.py", "line": 3, "end_line": "4"},
            ['`end_line`: must be an integer or null; got "4"'],
        ),
        ({"path": "a.py", "line": 3, "end_line": None, "suggestion": None}, []),
        (
            {"path": "a.py", "line": 3, "severity": "huge"},
            ['`severity`: must be one of blocker, major; got "huge"'],
        ),
        (
            {"path": "a.py", "line": 3, "side": "left"},
            ['`side`: must be one of new, old; got "left"'],
        ),
        ({"path": "a.py", "line": 3, "unknown": object()}, []),
    ],
)
def test_check_arguments_names_each_broken_field_and_its_rule(
    arguments: dict, reasons: list[str]
) -> None:
    assert check_arguments(arguments, PARAMETERS) == reasons


def test_check_arguments_minimum_and_pattern() -> None:
    schema = {
        "properties": {
            "line": {"type": "integer", "minimum": 1},
            "title": {"type": "string", "pattern": NON_BLANK_PATTERN},
            "code": {"type": "string", "pattern": "^[A-Z]+$"},
        }
    }
    arguments = {"line": 0, "title": "  ", "code": "abc"}
    assert check_arguments(arguments, schema) == [
        "`line`: must be at least 1; got 0",
        '`title`: must not be blank; got "  "',
        "`code`: must match the pattern '^[A-Z]+$'; got \"abc\"",
    ]
    long_value = {"line": "x" * 100}
    assert check_arguments(long_value, schema)[0].endswith('"' + "x" * 39 + "…")


def test_several_calls_in_one_content_with_prose_around_them() -> None:
    text = (
        "I found two problems.\n"
        + xml_call(path="a.py", line="1")
        + "\nand\n"
        + xml_call(path="b.py", line="2")
        + "\nDone."
    )
    parsed = parse_tool_calls_from_content(text, TOOLS)
    assert parsed.errors == []
    assert [call.arguments["path"] for call in parsed.calls] == ["a.py", "b.py"]


def test_unterminated_tool_call_is_an_error_and_earlier_calls_survive() -> None:
    text = xml_call(path="a.py", line="1") + "\n<tool_call>\n<function=report_finding>\n"
    parsed = parse_tool_calls_from_content(text, TOOLS)
    assert [call.arguments["path"] for call in parsed.calls] == ["a.py"]
    assert len(parsed.errors) == 1
    assert "unterminated" in parsed.errors[0]


@pytest.mark.parametrize(
    "broken",
    [
        # parameter never closed (vLLM would end it at </function>; we do not repair)
        "<tool_call>\n<function=report_finding>\n<parameter=path>\na.py\n</function>\n</tool_call>",
        # function never closed
        "<tool_call>\n<function=report_finding>\n<parameter=path>\na.py\n</parameter>\n"
        "</tool_call>",
        # stray text between parameters
        "<tool_call>\n<function=report_finding>\nhello\n</function>\n</tool_call>",
        # undeclared tool
        "<tool_call>\n<function=merge_now>\n</function>\n</tool_call>",
        # neither XML nor JSON
        "<tool_call>report_finding(path='a.py')</tool_call>",
    ],
)
def test_malformed_calls_are_errors_with_reasons(broken: str) -> None:
    parsed = parse_tool_calls_from_content(broken, TOOLS)
    assert parsed.calls == []
    assert len(parsed.errors) == 1
    assert parsed.errors[0]


def test_duplicate_parameter_is_an_error() -> None:
    text = (
        "<tool_call>\n<function=report_finding>\n<parameter=line>\n1\n</parameter>\n"
        "<parameter=line>\n2\n</parameter>\n</function>\n</tool_call>"
    )
    parsed = parse_tool_calls_from_content(text, TOOLS)
    assert parsed.calls == []
    assert "twice" in parsed.errors[0]


def test_function_block_without_tool_call_wrapper_is_read_like_vllm_does() -> None:
    text = "<function=report_finding>\n<parameter=line>\n7\n</parameter>\n</function>"
    parsed = parse_tool_calls_from_content(text, TOOLS)
    assert parsed.calls == [ToolCall("report_finding", {"line": 7})]


def test_hermes_json_call() -> None:
    arguments = {"path": "a.py", "line": 4, "title": "x"}
    encoded = json.dumps({"name": "report_finding", "arguments": arguments})
    text = f"<tool_call>\n{encoded}\n</tool_call>"
    parsed = parse_tool_calls_from_content(text, TOOLS)
    assert parsed.calls == [ToolCall("report_finding", arguments)]


def test_hermes_json_with_string_arguments_and_bad_json() -> None:
    encoded = json.dumps({"name": "report_finding", "arguments": json.dumps({"line": 4})})
    good = parse_tool_calls_from_content(f"<tool_call>{encoded}</tool_call>", TOOLS)
    assert good.calls == [ToolCall("report_finding", {"line": 4})]
    bad = parse_tool_calls_from_content('<tool_call>{"name": "report_finding", </tool_call>', TOOLS)
    assert bad.calls == [] and "invalid JSON" in bad.errors[0]


def test_bare_findings_json_becomes_one_call_per_element() -> None:
    findings = [{"path": "a.py", "line": 1}, {"path": "b.py", "line": 2}, "oops"]
    parsed = parse_tool_calls_from_content(json.dumps({"findings": findings}), TOOLS)
    assert [call.arguments for call in parsed.calls] == findings[:2]
    assert all(call.name == "report_finding" for call in parsed.calls)
    assert len(parsed.errors) == 1 and "findings[2]" in parsed.errors[0]


def test_truncated_bare_json_is_an_error_and_prose_is_no_call() -> None:
    truncated = parse_tool_calls_from_content('{"findings": [{"path": "a.py"', TOOLS)
    assert truncated.calls == [] and len(truncated.errors) == 1
    prose = parse_tool_calls_from_content("The change looks fine, no findings.", TOOLS)
    assert prose.calls == [] and prose.errors == []


@pytest.mark.parametrize(
    ("content", "got"),
    [
        ('"ok"', "a string"),
        ("42", "a number"),
        ("null", "null"),
        ("true", "a boolean"),
        ("[1, 2]", "an array"),
        ('[{"path": "a.py", "line": 1}]', "an array"),
        ('{"issues": []}', 'an object without a "findings" list'),
    ],
)
def test_json_content_that_is_no_findings_object_is_an_error_not_no_findings(
    content: str, got: str
) -> None:
    """D9 (issue 17): valid JSON of another shape meant "no findings"; it is unreadable."""
    parsed = parse_tool_calls_from_content(f"  {content}\n", TOOLS)
    assert parsed.calls == []
    assert parsed.errors == [
        f'JSON content must be an object with a "findings" list, got {got}: {content!r}'
    ]


def test_content_that_opens_json_but_is_none_is_an_error() -> None:
    parsed = parse_tool_calls_from_content("[1, 2", TOOLS)
    assert parsed.calls == [] and parsed.errors[0].startswith("content looks like JSON but is not")


@pytest.mark.parametrize(
    "content",
    [
        '{"findings": ' + "[" * 100_000,  # json.loads: RecursionError, not a ValueError
        '{"findings": [' + "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH + "]}",  # decodes
        '<tool_call>{"name": "report_finding", "arguments": ' + "[" * 100_000 + "</tool_call>",
    ],
    ids=["bare", "bare-decodable", "hermes"],
)
def test_content_nested_too_deep_is_an_error_not_a_crash(content: str) -> None:
    """D2 (issue 17): every JSON of an answer is read with a depth bound."""
    parsed = parse_tool_calls_from_content(content, TOOLS)
    assert parsed.calls == [] and len(parsed.errors) == 1
    assert f"nested deeper than {MAX_JSON_DEPTH} levels" in parsed.errors[0]


def test_an_xml_array_parameter_nested_too_deep_stays_text_and_is_refused() -> None:
    (call,) = parse_tool_calls_from_content(
        xml_call(path="a", line="1", tags="[" * 10**5), TOOLS
    ).calls
    assert call.arguments["tags"] == "[" * 100_000
    assert check_arguments(call.arguments, PARAMETERS) == [
        '`tags`: must be an array; got "' + "[" * 39 + "…"
    ]


def test_decode_json_bounds_the_depth_of_what_it_returns() -> None:
    at_limit = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert decode_json(at_limit) is not None
    for too_deep in ["[" + at_limit + "]", "[" * 100_000, '{"a": ' * 5000]:
        with pytest.raises(JSONTooDeepError, match=f"nested deeper than {MAX_JSON_DEPTH}"):
            decode_json(too_deep)


def test_think_blocks_are_stripped_before_parsing() -> None:
    reasoning = "<think>maybe " + xml_call(path="thought.py", line="1") + "</think>\n"
    parsed = parse_tool_calls_from_content(reasoning + xml_call(path="a.py", line="2"), TOOLS)
    assert [call.arguments["path"] for call in parsed.calls] == ["a.py"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>a</think>answer", "answer"),
        ("only the closing tag survived</think>answer", "answer"),
        ("x<think>a</think>y<think>b</think>z", "xyz"),
        ("answer<think>cut off while thinking", "answer"),
        ("no reasoning at all", "no reasoning at all"),
    ],
)
def test_strip_reasoning(text: str, expected: str) -> None:
    assert strip_reasoning(text) == expected


def test_parse_arguments() -> None:
    assert parse_arguments('{"line": 3}') == {"line": 3}
    for bad in ["", "[1]", "{line: 3}", '{"x": NaN}', '{"a": 1']:
        result = parse_arguments(bad)
        assert isinstance(result, ArgumentsError) and result.reason
    deep = parse_arguments("[" * 100_000)
    assert deep == ArgumentsError(f"arguments are JSON nested deeper than {MAX_JSON_DEPTH} levels")
