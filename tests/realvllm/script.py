"""The scripted model's mind: what a reviewer answers to a rendered Qwen3.5 prompt, as raw text.

Pure (text in, text out; imports only the fake vLLM's reviewer, itself standard library plus the
Qwen BPE), so it runs in the vLLM venv inside the server's logits processor
(``tests.realvllm.logits_processor``) and in the ordinary suite alike. The rule is the fake
vLLM's (``tests.fakes.vllm_server.review_diff``: one finding per ADDED line matching a pattern,
``eval(`` and friends) and the answer is written the way the fake writes it before vLLM's parsers
see it:

- the diff under review: the last user turn that shows a ``<file path=...>`` block;
- tools in the system turn: one Qwen3-Coder XML ``<tool_call>`` per finding (the tool named
  ``report_finding``, else the first one offered), or ``No issues found.``;
- no tools: a JSON answer when the request asked for a JSON schema, the XML calls as text when a
  message shows the XML format, else a plain-text list;
- a generation prompt that opens ``<think>`` (thinking on): a short reasoning text first, then
  ``</think>``;
- planted mistakes: an added line that holds ``scripted-mistake: KIND`` (KIND one of the fake's
  ``MISTAKE_KINDS``: ``bad_json``, ``missing_line``, ``wrong_type``, ``bad_enum``) has its finding's
  call written with that mistake, as the fake's ``MalformedCalls`` writes it;
- planted shapes: an added line that holds ``scripted-shape: KIND`` (KIND one of the fake's
  ``SHAPE_KINDS``: calls inside the reasoning, calls without their ``<tool_call>`` wrapper or as
  Hermes JSON, a stray ``</think>``, reasoning that never ends) makes the first answer (tools
  offered) the raw text of that shape, written by the fake's ``shaped_text``;
- a repair turn (assistant turns after the diff): the findings that no earlier answer wrote
  correctly, resent correctly (the fake's ``repair="fix"``), or ``No issues found.``;
- a walkthrough request (reviewbot.walkthrough's system prompt): the fake's walkthrough text;
- a verification request (the ``verdict`` tool offered): one verdict call per candidate of the
  last user turn, ``keep`` on a line the rule finds something on, else ``drop`` (the fake's
  verifier brain);
- a requirements check (the ``requirement_verdict`` tool offered): one call per issue of the
  prompt, as the fake's requirements brain (``requirement_verdicts``) decides;
- a named check's question (the ``check_verdict`` tool offered): one ``check_verdict`` call,
  ``fail`` when an added line holds ``# check-fails`` (the fake's check brain,
  ``check_verdict_arguments``);
- repository tools (issue 34 part 2): an added line that holds ``scripted-lookup: SYMBOL``, in
  a prompt offering ``find_definition``, ``search_code`` and ``read_file``, makes the first
  answer call the three (``find_definition(SYMBOL)``, ``search_code(SYMBOL)``, ``read_file`` of
  the line's file, lines 1 to ``LOOKUP_READ_LINES``) and nothing else; in a prompt offering
  the compact ``repo`` tool, the same three as its commands (``def SYMBOL``,
  ``grep -rn SYMBOL``, ``sed -n '1,Np' FILE``); the answer after their
  tool responses reviews as usual, plus a finding on that line when a tool response shows
  ``hazard(SYMBOL)`` (the evidence the repository gave back).

Owns: choosing the answer text. Must not: know token ids or vLLM (the logits processor does).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.fakes.vllm_server import (
    CANDIDATE_LIST_START,
    CANDIDATE_RE,
    CHECK_VERDICT_TOOL_NAME,
    DEFAULT_TOOL_NAME,
    MISTAKE_KINDS,
    NO_ISSUES_TEXT,
    REQUIREMENT_TOOL_NAME,
    VERDICT_CONFIDENCE,
    VERDICT_TOOL_NAME,
    WALKTHROUGH_PROMPT,
    DiffLine,
    check_verdict_arguments,
    json_findings,
    parse_prompt_diff,
    plain_findings,
    planted_shape,
    qwen_xml_call,
    reasoning_text,
    requirement_verdicts,
    review_diff,
    shaped_text,
    walkthrough_text,
    xml_text,
)

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
THINK_OPEN = "<think>\n"
THINK_CLOSED = "<think>\n\n</think>\n\n"
GENERATION_PROMPT = f"{IM_START}assistant\n"
# A prompt holding this makes the logits processor kill the engine (see logits_processor.py).
ENGINE_CRASH_MARKER = "scripted-engine-crash"
MISTAKE_MARKER = re.compile(r"scripted-mistake:\s*(?P<kind>[a-z_]+)")
LOOKUP_MARKER = re.compile(r"scripted-lookup:\s*(?P<symbol>[A-Za-z_][A-Za-z0-9_]*)")
LOOKUP_TOOLS = ("find_definition", "search_code", "read_file")
COMPACT_TOOL = "repo"  # the compact form's one tool (reviewbot.repo.tools)
LOOKUP_READ_LINES = 3
TOOL_RESPONSE = "<tool_response>"
EVIDENCE_TITLE = "{symbol} may return None (the repository says so)"
_TURN_RE = re.compile(
    rf"{re.escape(IM_START)}(?P<role>[a-z]+)\n(?P<text>.*?){re.escape(IM_END)}\n", re.DOTALL
)
_TOOLS_RE = re.compile(r"<tools>\n(?P<lines>.*?)\n</tools>", re.DOTALL)
_FILE_RE = re.compile(r'<file path="')


@dataclass(frozen=True)
class Turn:
    role: str
    text: str


@dataclass(frozen=True)
class Prompt:
    """What the scripted model reads from a rendered prompt."""

    turns: list[Turn]
    thinking: bool
    tool_names: list[str]

    @property
    def tool_name(self) -> str:
        """The tool the findings go to: ``report_finding`` when offered, else the first."""
        if DEFAULT_TOOL_NAME in self.tool_names or not self.tool_names:
            return DEFAULT_TOOL_NAME
        return self.tool_names[0]

    def diff_index(self) -> int | None:
        users = [i for i, turn in enumerate(self.turns) if turn.role == "user"]
        with_files = [i for i in users if _FILE_RE.search(self.turns[i].text)]
        return (with_files or users or [None])[-1]

    def earlier_answers(self) -> list[str]:
        index = self.diff_index()
        if index is None:
            return []
        return [turn.text for turn in self.turns[index + 1 :] if turn.role == "assistant"]

    def asks_for_xml(self) -> bool:
        return any("<tool_call>" in turn.text or "<function=" in turn.text for turn in self.turns)


def read_prompt(text: str) -> Prompt:
    """The turns, the thinking switch and the offered tools of a rendered prompt."""
    head, _, generation = text.rpartition(GENERATION_PROMPT)
    turns = [Turn(m["role"], m["text"]) for m in _TURN_RE.finditer(head + "\n")]
    thinking = generation.startswith(THINK_OPEN) and not generation.startswith(THINK_CLOSED)
    names: list[str] = []
    system = next((turn.text for turn in turns if turn.role == "system"), "")
    if tools := _TOOLS_RE.search(system):
        for line in tools["lines"].splitlines():
            tool = json.loads(line)
            names.append((tool.get("function") or tool).get("name", ""))
    return Prompt(turns, thinking, names)


def planted_mistakes(lines: Sequence[DiffLine], findings: list[dict[str, Any]]) -> list[str | None]:
    """Per finding, the mistake its added line plants (``scripted-mistake: KIND``), or None."""
    planted = {}
    for line in lines:
        marker = MISTAKE_MARKER.search(line.text) if line.kind == "added" else None
        if marker and marker["kind"] in MISTAKE_KINDS:
            planted[(line.path, line.number)] = marker["kind"]
    return [planted.get((finding["path"], finding["line"])) for finding in findings]


def answer_text(prompt_text: str, json_schema: dict[str, Any] | None = None) -> str:
    """The raw text the scripted model writes after ``prompt_text`` (no end-of-turn token).

    ``json_schema``: the schema of a structured-output request (the JSON output mode)."""
    prompt = read_prompt(prompt_text)
    system = next((turn.text for turn in prompt.turns if turn.role == "system"), "")
    if system.startswith(WALKTHROUGH_PROMPT):  # plain text, asked without thinking
        asked = next((turn.text for turn in reversed(prompt.turns) if turn.role == "user"), "")
        return walkthrough_text(asked)
    index = prompt.diff_index()
    diff = prompt.turns[index].text if index is not None else ""
    lines = parse_prompt_diff(diff)
    findings = review_diff(lines)
    asked = next((turn.text for turn in reversed(prompt.turns) if turn.role == "user"), "")
    if VERDICT_TOOL_NAME in prompt.tool_names and asked.startswith(CANDIDATE_LIST_START):
        body = _verdicts(prompt, findings)
        return f"{reasoning_text(lines)}\n</think>\n\n{body}" if prompt.thinking else body
    if REQUIREMENT_TOOL_NAME in prompt.tool_names:
        calls = requirement_verdicts(asked, lines)
        body = "\n".join(qwen_xml_call(REQUIREMENT_TOOL_NAME, call) for call in calls)
        return f"{reasoning_text(lines)}\n</think>\n\n{body}" if prompt.thinking else body
    if CHECK_VERDICT_TOOL_NAME in prompt.tool_names:
        body = qwen_xml_call(CHECK_VERDICT_TOOL_NAME, check_verdict_arguments(lines))
        return f"{reasoning_text(lines)}\n</think>\n\n{body}" if prompt.thinking else body
    earlier = prompt.earlier_answers()
    lookups = _lookups(prompt, lines)
    if lookups and not earlier:
        body = "\n".join(qwen_xml_call(name, args) for name, args in lookups)
        return f"{reasoning_text(lines)}\n</think>\n\n{body}" if prompt.thinking else body
    findings += _evidence(prompt, lines)
    if earlier:
        name = prompt.tool_name
        findings = [
            finding
            for finding in findings
            if not any(qwen_xml_call(name, finding) in answer for answer in earlier)
        ]
        mistakes: list[str | None] = [None] * len(findings)
    else:
        mistakes = planted_mistakes(lines, findings)
        shape = planted_shape(lines, findings) if prompt.tool_names else None
        if shape is not None:
            return shaped_text(shape, lines, prompt.tool_name, findings, prompt.thinking)
    body = _body(prompt, findings, mistakes, json_schema)
    if prompt.thinking:
        return f"{reasoning_text(lines)}\n</think>\n\n{body}"
    return body


def _lookup_lines(lines: Sequence[DiffLine]) -> list[tuple[DiffLine, str]]:
    """The added lines that ask for a repository lookup, with the symbol asked for."""
    marked = []
    for line in lines:
        found = LOOKUP_MARKER.search(line.text) if line.kind == "added" else None
        if found:
            marked.append((line, found["symbol"]))
    return marked


def _lookups(prompt: Prompt, lines: Sequence[DiffLine]) -> list[tuple[str, dict[str, Any]]]:
    """The repository calls of a first answer (module notes), when the tools are offered: the
    three typed tools, or the same three lookups as commands of the compact ``repo`` tool."""
    compact = COMPACT_TOOL in prompt.tool_names
    if not compact and not set(LOOKUP_TOOLS) <= set(prompt.tool_names):
        return []
    calls: list[tuple[str, dict[str, Any]]] = []
    for line, symbol in _lookup_lines(lines):
        if compact:
            calls.append((COMPACT_TOOL, {"cmd": f"def {symbol}"}))
            calls.append((COMPACT_TOOL, {"cmd": f"grep -rn {symbol}"}))
            read = f"sed -n '1,{LOOKUP_READ_LINES}p' {line.path}"
            calls.append((COMPACT_TOOL, {"cmd": read}))
            continue
        calls.append(("find_definition", {"symbol": symbol}))
        calls.append(("search_code", {"pattern": symbol}))
        read_range = {"path": line.path, "start_line": 1, "end_line": LOOKUP_READ_LINES}
        calls.append(("read_file", read_range))
    return calls


def _evidence(prompt: Prompt, lines: Sequence[DiffLine]) -> list[dict[str, Any]]:
    """A finding on each lookup line whose symbol's hazard a tool response showed."""
    responses = "\n".join(turn.text for turn in prompt.turns if TOOL_RESPONSE in turn.text)
    return [
        {
            "path": line.path,
            "line": line.number,
            "side": "new",
            "severity": "major",
            "category": "bug",
            "title": EVIDENCE_TITLE.format(symbol=symbol),
            "body": f"`{symbol}` is marked as returning None where it is defined.",
        }
        for line, symbol in _lookup_lines(lines)
        if f"hazard({symbol})" in responses
    ]


def _verdicts(prompt: Prompt, findings: list[dict[str, Any]]) -> str:
    """One verdict call per candidate listed in the last user turn (module notes)."""
    oracle = {(finding["path"], finding["line"]) for finding in findings}
    asked = next((turn.text for turn in reversed(prompt.turns) if turn.role == "user"), "")
    calls = []
    for match in CANDIDATE_RE.finditer(asked):
        real = (match["path"], int(match["line"])) in oracle
        verdict = {
            "id": int(match["id"]),
            "verdict": "keep" if real else "drop",
            "reason": "the diff shows it" if real else "nothing of the kind on that line",
            "confidence": VERDICT_CONFIDENCE,
        }
        calls.append(qwen_xml_call(VERDICT_TOOL_NAME, verdict))
    return "\n".join(calls) or NO_ISSUES_TEXT


def _body(
    prompt: Prompt,
    findings: list[dict[str, Any]],
    mistakes: list[str | None],
    json_schema: dict[str, Any] | None,
) -> str:
    if json_schema is not None:
        response_format = {"type": "json_schema", "json_schema": {"schema": json_schema}}
        return json_findings(response_format, findings, mistakes)
    if not findings:
        return NO_ISSUES_TEXT
    if prompt.tool_names or prompt.asks_for_xml():
        name = prompt.tool_name
        return "\n".join(xml_text(name, f, m) for f, m in zip(findings, mistakes, strict=True))
    return plain_findings(findings)
