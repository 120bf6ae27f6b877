"""Tool calls written as text: parse what the model left in ``content`` when the server did not.

vLLM turns the model's tool-call text into ``tool_calls`` only when it runs with a tool parser
(``--enable-auto-tool-choice --tool-call-parser qwen3_coder``). Without one, the text arrives in
``message.content`` and this module reads it:

1. Qwen3-coder XML (the format of vLLM's ``qwen3coder_tool_parser.py``)::

       <tool_call>
       <function=report_finding>
       <parameter=line>
       12
       </parameter>
       </function>
       </tool_call>

   One leading and one trailing newline of a value are dropped, ``null`` means None, and values
   are converted by the tool's JSON-schema type. A value that does not convert stays the text
   it was, as vLLM's parser keeps it (vLLM reads a bad boolean as ``false``; not here): the
   schema check (:func:`check_arguments`) then refuses it, with the same reason whatever the
   output mode (``"`line`: must be an integer; got \"twelve\""``). Nothing is guessed.
2. Hermes-style JSON: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.
3. The ``response_format`` fallback: a bare JSON object ``{"findings": [...]}``, one call per
   element. Content that is JSON of any other shape (``"ok"``, ``42``, ``null``, ``[1, 2]``, an
   object without the list) is an error, never "no findings"; content that is not JSON at all
   (``No issues found.``) is prose and holds no call.

Model output is untrusted: a call that is malformed or unterminated becomes an error with a
reason. Nothing is dropped silently and nothing is repaired. Every JSON text of a model answer
is read by :func:`decode_json`, which refuses arrays and objects nested deeper than
``MAX_JSON_DEPTH`` (``json.loads`` recurses once per level: ``"[" * 100000`` is a RecursionError,
not a JSONDecodeError), so such an answer is an unreadable call like any bad JSON. Pure
functions, no I/O.

:func:`check_arguments` is the one check of decoded arguments against the tool's JSON schema
(required fields, types, enums, minimum, pattern), with one precise reason per broken field,
such as ``"`line`: required integer, missing"``. The model runner uses it to tell the model
what to resend, :func:`reviewbot.findings.validate_call` to refuse a call: one rule set.

Owns: reading tool calls written as text, and the one check of decoded arguments against a tool's
schema. Must not: repair or guess a value, do I/O, or know what a finding is (`reviewbot.findings`
does).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_FINDINGS_TOOL",
    "ArgumentsError",
    "JSONTooDeepError",
    "ParsedCalls",
    "ToolCall",
    "check_arguments",
    "decode_json",
    "json_type_word",
    "parse_arguments",
    "parse_tool_calls_from_content",
    "schema_properties",
    "strip_reasoning",
    "tool_parameters",
]

DEFAULT_FINDINGS_TOOL = "report_finding"
FINDINGS_KEY = "findings"
# Arrays and objects nested in one JSON text of a model answer: a finding is one flat object
# (three levels in ``{"findings": [{...}]}``), and far below the ~1,000 levels at which
# json.loads (recursive) raises RecursionError, so every value read is safe to handle.
MAX_JSON_DEPTH = 32
# Content starting with one of these is meant as JSON: when it does not decode, it is an error.
JSON_OPENERS = ("{", "[")
# What an error says a decoded JSON value is.
JSON_TYPE_WORDS = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    type(None): "null",
}

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
FUNCTION_OPEN = "<function="
FUNCTION_CLOSE = "</function>"
PARAMETER_OPEN = "<parameter="
PARAMETER_CLOSE = "</parameter>"
CALL_START = re.compile(re.escape(TOOL_CALL_OPEN) + "|" + re.escape(FUNCTION_OPEN))
FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
PARAMETER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")

INTEGER_LITERAL = re.compile(r"[+-]?\d+")
# JSON number grammar (RFC 8259 section 6)
NUMBER_LITERAL = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
NULL_LITERAL = "null"
BOOLEAN_LITERALS = {"true": True, "false": False}
SNIPPET_CHARS = 60
# What check_arguments says a JSON-schema type is, in "must be <...>" and "required <...>".
TYPE_WORDS = {
    "string": ("a string", "string"),
    "integer": ("an integer", "integer"),
    "number": ("a number", "number"),
    "boolean": ("a boolean", "boolean"),
    "object": ("an object", "object"),
    "array": ("an array", "array"),
    "null": ("null", "null"),
}
# A "pattern" a tool schema uses, said in words (\S: a character that is not a space).
NON_BLANK_PATTERN = r"\S"
PATTERN_WORDS = {NON_BLANK_PATTERN: "must not be blank"}
SHOWN_VALUE_CHARS = 40


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ParsedCalls:
    calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ArgumentsError:
    """Why a tool call's arguments could not be read."""

    reason: str


class JSONTooDeepError(ValueError):
    """A JSON text nests arrays and objects deeper than ``MAX_JSON_DEPTH``."""


class _CallError(ValueError):
    """One tool call in the text is malformed; the message says why."""


# ---------------------------------------------------------------------------------------------
# Reasoning


def strip_reasoning(text: str) -> str:
    """Remove ``<think>…</think>`` blocks from model output.

    vLLM with a reasoning parser sometimes leaves only the closing tag (the opening one was part
    of the prompt), so text up to a ``</think>`` that has no opening tag is reasoning too. An
    opening tag that is never closed means the answer was cut off while thinking: everything
    from it on is reasoning, not an answer.
    """
    first_close = text.find(THINK_CLOSE)
    first_open = text.find(THINK_OPEN)
    if first_close >= 0 and (first_open < 0 or first_close < first_open):
        text = text[first_close + len(THINK_CLOSE) :]
    text = THINK_BLOCK.sub("", text)
    unclosed = text.find(THINK_OPEN)
    if unclosed >= 0:
        text = text[:unclosed]
    return text


# ---------------------------------------------------------------------------------------------
# JSON of a model answer


def decode_json(text: str) -> Any:
    """``text`` as JSON; ValueError when it is not JSON or writes ``NaN``/``Infinity``, and
    JSONTooDeepError (a ValueError) when its arrays and objects nest deeper than
    ``MAX_JSON_DEPTH``, however deep: never a RecursionError."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise JSONTooDeepError(_too_deep()) from None
    if _nesting_exceeds(value, MAX_JSON_DEPTH):
        raise JSONTooDeepError(_too_deep())
    return value


def _too_deep() -> str:
    return f"JSON nested deeper than {MAX_JSON_DEPTH} levels"


def _nesting_exceeds(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than ``limit`` deep in ``value`` (no recursion)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        )
        if children is None:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


def json_type_word(value: Any) -> str:
    """What a decoded JSON value is, in words: "an object", "a number", "null"..."""
    return JSON_TYPE_WORDS.get(type(value), type(value).__name__)


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


# ---------------------------------------------------------------------------------------------
# OpenAI ``tool_calls[].function.arguments``


def parse_arguments(raw: str) -> dict[str, Any] | ArgumentsError:
    """Read a JSON arguments string; anything but one JSON object is an error."""
    if not isinstance(raw, str):
        return ArgumentsError(f"arguments must be a JSON string, got {type(raw).__name__}")
    if not raw.strip():
        return ArgumentsError("arguments are empty")
    try:
        value = decode_json(raw)
    except JSONTooDeepError as error:
        return ArgumentsError(f"arguments are {error}")
    except ValueError as error:
        return ArgumentsError(f"arguments are not valid JSON: {error}")
    if not isinstance(value, dict):
        return ArgumentsError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


# ---------------------------------------------------------------------------------------------
# Arguments against the tool's JSON schema


def tool_parameters(tools: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Map tool name -> its JSON-schema ``parameters``, from OpenAI-style ``tools`` entries."""
    found: dict[str, Mapping[str, Any]] = {}
    for tool in tools:
        function = tool.get("function", tool)
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        parameters = function.get("parameters")
        found[function["name"]] = parameters if isinstance(parameters, Mapping) else {}
    return found


def check_arguments(arguments: Mapping[str, Any], parameters: Mapping[str, Any]) -> list[str]:
    """Why ``arguments`` do not fit a tool's ``parameters`` schema, one reason per field in the
    schema's order; ``[]`` when they fit.

    The keywords a tool schema here uses: ``required``, ``type`` (one or a list; an integer is
    a JSON integer, never ``true`` nor ``2.0`` nor ``"2"``), ``enum``, ``minimum`` and
    ``pattern`` (searched, as JSON Schema does). A key the schema does not know is ignored; an
    optional field given as ``null`` counts as absent (vLLM's XML parser reads ``null`` so).
    """
    properties = parameters.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = [name for name in parameters.get("required") or () if isinstance(name, str)]
    reasons: list[str] = []
    for name in [*properties, *(name for name in required if name not in properties)]:
        schema = properties.get(name)
        schema = schema if isinstance(schema, Mapping) else {}
        value = arguments.get(name)
        if value is None:
            if name in required:
                got = "missing" if name not in arguments else "got null"
                reasons.append(f"`{name}`: required {_type_word(schema, 1)}, {got}")
            continue
        reason = _value_problem(value, schema)
        if reason:
            reasons.append(f"`{name}`: {reason}")
    return reasons


def _type_names(schema: Mapping[str, Any]) -> list[str]:
    declared = schema.get("type")
    names = declared if isinstance(declared, list) else [declared] if declared else []
    return [str(name) for name in names]


def _type_word(schema: Mapping[str, Any], form: int) -> str:
    """The schema's type in words: form 0 "an integer", form 1 "integer" ("value" if none)."""
    names = _type_names(schema)
    if not names:
        return "value"
    return " or ".join(TYPE_WORDS.get(name, (name, name))[form] for name in names)


def _value_problem(value: Any, schema: Mapping[str, Any]) -> str:
    names = _type_names(schema)
    if names and not any(_is_of_type(value, name) for name in names):
        return f"must be {_type_word(schema, 0)}; got {_shown(value)}"
    allowed = schema.get("enum")
    if isinstance(allowed, list) and value not in allowed:
        return f"must be one of {', '.join(str(choice) for choice in allowed)}; got {_shown(value)}"
    minimum = schema.get("minimum")
    if isinstance(minimum, int | float) and isinstance(value, int | float) and value < minimum:
        return f"must be at least {minimum}; got {_shown(value)}"
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and isinstance(value, str) and re.search(pattern, value) is None:
        words = PATTERN_WORDS.get(pattern, f"must match the pattern {pattern!r}")
        return f"{words}; got {_shown(value)}"
    return ""


def _is_of_type(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    expected = {
        "string": str,
        "boolean": bool,
        "object": dict,
        "array": list,
        "null": type(None),
    }.get(name)
    return expected is not None and isinstance(value, expected)


def _shown(value: Any) -> str:
    """A value as JSON, cut to a few dozen characters."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= SHOWN_VALUE_CHARS else text[:SHOWN_VALUE_CHARS] + "…"


# ---------------------------------------------------------------------------------------------
# Tool calls left in ``content``


def schema_properties(tools: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Map tool name -> its JSON-schema ``properties``, from OpenAI-style ``tools`` entries."""
    properties: dict[str, Mapping[str, Any]] = {}
    for tool in tools:
        function = tool.get("function", tool)
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        parameters = function.get("parameters") or {}
        props = parameters.get("properties", {}) if isinstance(parameters, Mapping) else {}
        properties[function["name"]] = props if isinstance(props, Mapping) else {}
    return properties


def parse_tool_calls_from_content(
    text: str,
    tools: Sequence[Mapping[str, Any]],
    *,
    findings_tool: str = DEFAULT_FINDINGS_TOOL,
) -> ParsedCalls:
    """Parse every tool call written in ``text`` (reasoning is stripped first).

    ``tools`` are the OpenAI-style tool definitions sent with the request: XML parameter values
    are converted by their schema types, and a call to a tool not declared there is an error.
    A bare ``{"findings": [...]}`` object becomes one ``findings_tool`` call per element.
    """
    schemas = schema_properties(tools)
    body = strip_reasoning(text)
    result = ParsedCalls()
    if CALL_START.search(body) is None:
        _parse_bare_json(body, findings_tool, result)
        return result
    position = 0
    while (start := CALL_START.search(body, position)) is not None:
        position = _parse_one_call(body, start, schemas, result)
        if position < 0:
            break
    return result


def _parse_one_call(
    body: str, start: re.Match[str], schemas: Mapping[str, Mapping[str, Any]], result: ParsedCalls
) -> int:
    """Parse the call starting at ``start``; return where to continue, or -1 to stop."""
    offset = start.start()
    if start.group() == TOOL_CALL_OPEN:
        end = body.find(TOOL_CALL_CLOSE, start.end())
        if end < 0:
            result.errors.append(
                f"unterminated {TOOL_CALL_OPEN} at offset {offset}: {_snippet(body, offset)}"
            )
            return -1
        inner, resume = body[start.end() : end], end + len(TOOL_CALL_CLOSE)
    else:
        # vLLM also accepts a <function=...> block without the <tool_call> wrapper.
        end = body.find(FUNCTION_CLOSE, start.end())
        if end < 0:
            result.errors.append(
                f"unterminated {FUNCTION_OPEN}...> at offset {offset}: {_snippet(body, offset)}"
            )
            return -1
        inner, resume = body[offset : end + len(FUNCTION_CLOSE)], end + len(FUNCTION_CLOSE)
    try:
        result.calls.append(_parse_call_body(inner, schemas))
    except _CallError as error:
        result.errors.append(f"tool call at offset {offset}: {error}")
    return resume


def _parse_call_body(inner: str, schemas: Mapping[str, Mapping[str, Any]]) -> ToolCall:
    stripped = inner.strip()
    if stripped.startswith(FUNCTION_OPEN):
        return _parse_xml_function(stripped, schemas)
    if stripped.startswith("{"):
        return _parse_hermes_json(stripped, schemas)
    raise _CallError(f"neither <function=...> nor JSON inside <tool_call>: {_snippet(inner, 0)}")


def _parse_xml_function(text: str, schemas: Mapping[str, Mapping[str, Any]]) -> ToolCall:
    """``<function=NAME>`` parameters ``</function>``: the text is already stripped."""
    header_end = text.find(">")
    name = text[len(FUNCTION_OPEN) : header_end] if header_end >= 0 else ""
    if not FUNCTION_NAME.fullmatch(name):
        raise _CallError(f"bad function name in {_snippet(text, 0)}")
    if not text.endswith(FUNCTION_CLOSE):
        raise _CallError(f"{FUNCTION_OPEN}{name}> is not closed by {FUNCTION_CLOSE}")
    if name not in schemas:
        raise _CallError(f"tool {name!r} is not one of the declared tools")
    raw = _read_xml_parameters(text[header_end + 1 : -len(FUNCTION_CLOSE)])
    properties = schemas[name]
    arguments = {key: _convert_value(value, properties.get(key)) for key, value in raw}
    return ToolCall(name, arguments)


def _read_xml_parameters(text: str) -> list[tuple[str, str]]:
    """The ``<parameter=KEY>VALUE</parameter>`` pairs; only whitespace may sit between them."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    position = 0
    while True:
        gap_end = text.find(PARAMETER_OPEN, position)
        gap = text[position:] if gap_end < 0 else text[position:gap_end]
        if gap.strip():
            raise _CallError(f"unexpected text between parameters: {_snippet(gap, 0)}")
        if gap_end < 0:
            return pairs
        name_end = text.find(">", gap_end)
        key = text[gap_end + len(PARAMETER_OPEN) : name_end] if name_end >= 0 else ""
        if not PARAMETER_NAME.fullmatch(key):
            raise _CallError(f"bad parameter name in {_snippet(text, gap_end)}")
        value_end = text.find(PARAMETER_CLOSE, name_end)
        if value_end < 0:
            raise _CallError(f"{PARAMETER_OPEN}{key}> is not closed by {PARAMETER_CLOSE}")
        if key in seen:
            raise _CallError(f"parameter {key!r} given twice")
        seen.add(key)
        pairs.append((key, _trim_one_newline(text[name_end + 1 : value_end])))
        position = value_end + len(PARAMETER_CLOSE)


def _trim_one_newline(value: str) -> str:
    # vLLM qwen3coder_tool_parser._parse_xml_function_call: "Remove prefix and trailing \n"
    # (one each); the value is otherwise kept byte for byte, so code keeps its indentation.
    value = value.removeprefix("\n")
    return value.removesuffix("\n")


def _schema_types(schema: Mapping[str, Any] | None) -> list[str]:
    if not isinstance(schema, Mapping):
        return ["string"]
    declared = schema.get("type")
    if declared is None:
        return ["string"]  # e.g. a bare {"enum": [...]} of strings
    names = declared if isinstance(declared, list) else [declared]
    return [str(name).strip().lower() for name in names]


def _convert_value(value: str, schema: Mapping[str, Any] | None) -> Any:
    """Convert one XML parameter by its schema type; what does not convert stays text."""
    types = _schema_types(schema)
    # vLLM reads "null" as None whatever the declared type.
    if value.strip().lower() == NULL_LITERAL:
        return None
    if "string" in types:
        return value
    text = value.strip()
    for kind in types:
        converted = _convert_as(kind, text)
        if converted is not _NOT_CONVERTED:
            return converted
    return value


_NOT_CONVERTED = object()


def _convert_as(kind: str, text: str) -> Any:
    if kind == "integer":
        return int(text) if INTEGER_LITERAL.fullmatch(text) else _NOT_CONVERTED
    if kind == "number":
        if not NUMBER_LITERAL.fullmatch(text):
            return _NOT_CONVERTED
        if INTEGER_LITERAL.fullmatch(text):
            return int(text)
        number = float(text)
        return number if math.isfinite(number) else _NOT_CONVERTED
    if kind == "boolean":
        return BOOLEAN_LITERALS.get(text.lower(), _NOT_CONVERTED)
    if kind in ("object", "array"):
        try:
            parsed = decode_json(text)
        except ValueError:
            return _NOT_CONVERTED
        expected = dict if kind == "object" else list
        return parsed if isinstance(parsed, expected) else _NOT_CONVERTED
    return _NOT_CONVERTED


def _parse_hermes_json(text: str, schemas: Mapping[str, Mapping[str, Any]]) -> ToolCall:
    try:
        value = decode_json(text)
    except JSONTooDeepError as error:
        raise _CallError(f"{error} in <tool_call>") from None
    except ValueError as error:
        raise _CallError(f"invalid JSON in <tool_call>: {error}") from None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise _CallError('JSON tool call must be an object with a string "name"')
    name = value["name"]
    if name not in schemas:
        raise _CallError(f"tool {name!r} is not one of the declared tools")
    arguments = value.get("arguments", {})
    if isinstance(arguments, str):
        arguments = parse_arguments(arguments)
        if isinstance(arguments, ArgumentsError):
            raise _CallError(arguments.reason)
    if not isinstance(arguments, dict):
        raise _CallError('"arguments" must be a JSON object')
    return ToolCall(name, arguments)


def _parse_bare_json(body: str, findings_tool: str, result: ParsedCalls) -> None:
    """The ``response_format`` fallback: ``{"findings": [...]}``. Content that is JSON of any
    other shape is an error; content that is not JSON (prose) yields no call."""
    stripped = body.strip()
    try:
        value = decode_json(stripped)
    except JSONTooDeepError as error:
        result.errors.append(f"content is {error}")
        return
    except ValueError as error:
        if stripped.startswith(JSON_OPENERS):
            result.errors.append(f"content looks like JSON but is not valid: {error}")
        return
    findings = value.get(FINDINGS_KEY) if isinstance(value, dict) else None
    if not isinstance(findings, list):
        got = f'an object without a "{FINDINGS_KEY}" list' if isinstance(value, dict) else None
        result.errors.append(
            f'JSON content must be an object with a "{FINDINGS_KEY}" list, got '
            f"{got or json_type_word(value)}: {_snippet(stripped, 0)}"
        )
        return
    for index, element in enumerate(findings):
        if isinstance(element, dict):
            result.calls.append(ToolCall(findings_tool, element))
        else:
            result.errors.append(
                f"{FINDINGS_KEY}[{index}] must be an object, got {type(element).__name__}"
            )


def _snippet(text: str, offset: int) -> str:
    piece = text[offset : offset + SNIPPET_CHARS]
    return repr(piece + ("…" if len(text) - offset > SNIPPET_CHARS else ""))
