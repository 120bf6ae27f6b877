"""Tool rounds at the HTTP boundary: the pipeline and the chunk runner against the fake vLLM.

A change that calls a function defined in another file is found only when the model may read
the repository (the fake's needs-evidence rule); a model that loops on tool calls is stopped by
``tool_rounds`` and by ``tool_tokens`` and the chunk still gets reviewed; hostile calls from the
model are refused in their answers; a round that does not fit the context keeps its findings
and re-splits; repair turns, output modes and both backends work with rounds; ``tools`` off
sends exactly the request without tools.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator

import pytest

from reviewbot.diff import parse_git_diff
from reviewbot.llm.answers import ParsedAnswer
from reviewbot.llm.factory import runner_for
from reviewbot.llm.rounds import BUDGET_SPENT, MIN_SHARE_TOKENS, NO_ROOM, ToolBudget, ToolRounds
from reviewbot.model import ChunkRequest, LLMSettings, ModelAnswer, ToolCallText
from reviewbot.prompts import ReviewContext, file_summaries, render_messages, tool_schemas
from reviewbot.repo.tools import RepositoryTools, ToolForm
from reviewbot.repo.view import MemoryView
from reviewbot.review import ReviewOptions, ReviewResult, review_files
from reviewbot.tokens import local_counter
from reviewbot.verify import VerifyOptions
from tests.fakes.vllm_server import CANDIDATE_LIST_START, FakeVLLM, MalformedCalls

SHA = "ab" * 20
OLD_APP = "from db import find_user\n\n\ndef greet(name):\n    return 'hi'\n"
NEW_APP = (
    "from db import find_user\n\n\ndef greet(name):\n    user = find_user(name)\n"
    "    return 'hi ' + user.name\n"
)
DB = (
    "import sqlite3\n\n\n"
    "def find_user(name):  # hazard(find_user): may return None when no user has that name\n"
    "    return None\n"
)
CALL_LINE = 5  # `user = find_user(name)` in NEW_APP
EVIDENCE_TITLE = "find_user: may return None when no user has that name"
LONG_FILE = "".join(
    f"value_{n} = {n}  # padding to make the file long enough\n" for n in range(600)
)
FINDINGS_ONLY = ["report_finding"]
RISKY = "def parse(text):\n    return eval(text)\n"


def diff_of(old: str, new: str, path: str = "app.py") -> str:
    lines = difflib.unified_diff(
        old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


def review(
    fake: FakeVLLM,
    *,
    tools: bool = True,
    stream: bool = True,
    backend: str = "vllm",
    head: dict[str, str] | None = None,
    new: str = NEW_APP,
    **options: object,
) -> ReviewResult:
    head = head or {"app.py": new, "db.py": DB}
    files = parse_git_diff(diff_of(OLD_APP, new))
    settings = LLMSettings(base_url=fake.base_url, stream=stream, max_retries=1, backoff_base_s=0)
    with runner_for(settings, backend=backend) as llm:
        return review_files(
            files,
            context=ReviewContext(title="Greet users", files=file_summaries(files)),
            llm=llm,
            counter=local_counter(),
            options=ReviewOptions(tools=tools, **{"tool_form": ToolForm.TYPED, **options}),  # type: ignore[arg-type]
            contents=head,
            repository=MemoryView(SHA, head),
        )


def titles(result: ReviewResult) -> set[tuple[str, int, str]]:
    return {(f.path, f.line, f.title) for f in result.findings.findings}


def offered(body: dict) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or ()]


@pytest.fixture
def evidence_fake() -> Iterator[FakeVLLM]:
    with FakeVLLM(needs_evidence=True) as fake:
        yield fake


@pytest.mark.slow
def test_verification_sees_the_evidence_the_tool_rounds_read_and_keeps_their_bug(
    evidence_fake: FakeVLLM,
) -> None:
    result = review(evidence_fake, verify=VerifyOptions(enabled=True))
    assert ("app.py", CALL_LINE, EVIDENCE_TITLE) in titles(result)
    assert result.verification.verified == 1 and not result.verification.dropped
    [asked] = [
        body
        for body in evidence_fake.requests
        if str(body["messages"][-1].get("content")).startswith(CANDIDATE_LIST_START)
    ]
    assert "verdict" in offered(asked)
    # the review's conversation with the tool answer (the hazard marker), then the candidates
    assert any(
        message["role"] == "tool" and "hazard(find_user)" in message["content"]
        for message in asked["messages"]
    )
    assert "app.py:5" in asked["messages"][-1]["content"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "stream"), [("vllm", True), ("vllm", False), ("openai-compatible", True)]
)
def test_a_bug_whose_evidence_is_in_another_file_is_found_with_tools_and_missed_without(
    evidence_fake: FakeVLLM, backend: str, stream: bool
) -> None:
    without = review(evidence_fake, tools=False, backend=backend, stream=stream)
    assert ("app.py", CALL_LINE, EVIDENCE_TITLE) not in titles(without)
    assert len(without.calls) == 1 and without.complete
    with_tools = review(evidence_fake, backend=backend, stream=stream)
    assert ("app.py", CALL_LINE, EVIDENCE_TITLE) in titles(with_tools)
    assert with_tools.complete
    rounds = [(c.tool_round, c.outcome, c.repo_tool_calls) for c in with_tools.calls]
    assert rounds == [(0, "tool_round", 1), (1, "ok", 0)]
    assert with_tools.calls[0].tool_answer_tokens > 0
    assert with_tools.tools.startswith("1 tool round(s), 1 repository call(s)")
    asked, answered = evidence_fake.requests[-2:]
    assert (
        "tool_choice" not in asked
        if backend == "openai-compatible"
        else asked["tool_choice"] == "auto"
    )
    assert offered(asked) == [
        "report_finding",
        "read_file",
        "search_code",
        "find_definition",
        "list_directory",
    ]
    # the continuation: the assistant repeats its call, one tool message answers its id
    assistant, tool = answered["messages"][-2:]
    [call] = assistant["tool_calls"]
    assert call["function"] == {"name": "find_definition", "arguments": '{"symbol": "find_user"}'}
    assert tool == {"role": "tool", "tool_call_id": call["id"], "content": tool["content"]}
    assert '<tool_result tool="find_definition">' in tool["content"]
    assert "db.py:4-5 (function_definition)" in tool["content"]
    assert "[Tool budget left for this part: 2 round(s) and" in tool["content"]


def test_the_prompt_keeps_tools_system_and_mr_context_first_and_rounds_after_the_diff(
    evidence_fake: FakeVLLM,
) -> None:
    review(evidence_fake)
    first, second = evidence_fake.requests[-2:]
    assert first["tools"] == second["tools"]  # the cached prefix starts with the tools
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]


def test_tools_off_sends_exactly_the_request_without_tools(evidence_fake: FakeVLLM) -> None:
    review(evidence_fake, tools=False)
    [body] = evidence_fake.requests
    assert body["tools"] == tool_schemas()
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_no_repository_means_no_tools_and_no_reserve(evidence_fake: FakeVLLM) -> None:
    files = parse_git_diff(diff_of(OLD_APP, NEW_APP))
    with runner_for(LLMSettings(base_url=evidence_fake.base_url)) as llm:
        result = review_files(
            files,
            context=ReviewContext(title="t"),
            llm=llm,
            counter=local_counter(),
            options=ReviewOptions(tools=True),
        )
    assert offered(evidence_fake.requests[-1]) == FINDINGS_ONLY and result.tools == ""


@pytest.mark.slow
def test_a_model_looping_on_tool_calls_stops_at_tool_rounds_and_is_still_reviewed() -> None:
    risky = NEW_APP + "\n\ndef parse(text):\n    return eval(text)\n"
    with FakeVLLM(tool_loop=True) as fake:
        result = review(fake, new=risky, head={"app.py": risky + LONG_FILE}, tool_rounds=3)
        bodies = list(fake.requests)
    assert result.complete
    assert [c.tool_round for c in result.calls] == [0, 1, 2, 3]
    assert [c.repo_tool_calls for c in result.calls] == [1, 1, 1, 0]
    # the same tools on every request, the last one included (one cached prefix, issue 34)
    assert all(body["tools"] == bodies[0]["tools"] for body in bodies)
    assert "read_file" in offered(bodies[-1])
    last_tool = bodies[-1]["messages"][-1]["content"]
    assert "[Tool budget spent: no more repository answers for this part." in last_tool
    assert "Report your findings with report_finding now" in last_tool
    assert any(f.title == "Use of eval() on dynamic input" for f in result.findings.findings)


def test_a_model_looping_on_tool_calls_stops_at_tool_tokens() -> None:
    budget = 600
    with FakeVLLM(tool_loop=True) as fake:
        result = review(
            fake, head={"app.py": NEW_APP + LONG_FILE}, tool_rounds=10, tool_tokens=budget
        )
        bodies = list(fake.requests)
    assert result.complete
    spent = sum(c.tool_answer_tokens for c in result.calls)
    assert spent <= budget
    assert budget - spent < MIN_SHARE_TOKENS or len(result.calls) < 11
    assert len(result.calls) < 11
    assert all(body["tools"] == bodies[0]["tools"] for body in bodies)  # one cached prefix
    cut = [m["content"] for b in bodies for m in b["messages"] if m["role"] == "tool"]
    assert any("cut here: the answer reached its token budget" in text for text in cut)


HOSTILE_CALLS = [
    ("read_file", {"path": "../../../etc/passwd"}),
    ("read_file", {"path": "/etc/passwd"}),
    ("read_file", {"path": "db.py\u0000.txt"}),
    ("search_code", {"pattern": "(a+)+$", "regex": True}),
    ("find_definition", {"symbol": "os.system('id')"}),
    ("list_directory", {"path": "..\\.."}),
    ("read_file", {"path": 7}),
]


@pytest.mark.slow
def test_hostile_calls_from_the_model_are_refused_in_their_answers_and_the_chunk_reviewed(
    evidence_fake: FakeVLLM,
) -> None:
    evidence_fake.needs_evidence = False
    evidence_fake.script_tool_calls(*HOSTILE_CALLS[:5])
    evidence_fake.script_tool_calls(*HOSTILE_CALLS[5:])
    result = review(evidence_fake)
    assert result.complete and [c.repo_tool_calls for c in result.calls] == [5, 2, 0]
    answers = [m["content"] for m in evidence_fake.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(answers) == len(HOSTILE_CALLS)
    assert all("refused: " in text for text in answers)
    assert "root:" not in "".join(answers)


@pytest.mark.slow
def test_findings_of_every_round_are_kept(evidence_fake: FakeVLLM) -> None:
    risky = NEW_APP + "\n\ndef parse(text):\n    return eval(text)\n"
    evidence_fake.script_tool_calls(("list_directory", {"path": ""}), with_findings=True)
    result = review(evidence_fake, new=risky)
    found = titles(result)
    assert ("app.py", 10, "Use of eval() on dynamic input") in found  # in round 0's answer
    assert ("app.py", CALL_LINE, EVIDENCE_TITLE) in found  # after find_definition
    assert sum(f.title == "Use of eval() on dynamic input" for f in result.findings.findings) == 1


def test_an_empty_answer_after_a_tool_round_is_asked_again_then_not_reviewed(
    evidence_fake: FakeVLLM,
) -> None:
    """A model that looked things up and then said nothing has not reviewed the chunk: the
    continuation is asked again (with the tools' answers), then the chunk is not reviewed."""
    evidence_fake.add_faults("none", "blank", "blank")
    result = review(evidence_fake)
    assert not result.complete and not result.findings.findings
    outcomes = [call.outcome for call in result.calls]
    assert outcomes == ["tool_round", "empty_retry", "error"]
    retried = evidence_fake.requests[-1]
    assert any(m["role"] == "tool" for m in retried["messages"])  # the round's answers resent


def test_an_empty_answer_after_a_tool_round_then_an_answer_is_reviewed(
    evidence_fake: FakeVLLM,
) -> None:
    evidence_fake.add_faults("none", "blank")
    result = review(evidence_fake)
    assert result.complete and ("app.py", CALL_LINE, EVIDENCE_TITLE) in titles(result)
    assert [call.outcome for call in result.calls] == ["tool_round", "empty_retry", "ok"]


def test_repository_calls_after_the_rounds_are_over_are_no_review(
    evidence_fake: FakeVLLM,
) -> None:
    """Told to report now, the model only asks for more reads: those calls are dropped
    unanswered, which leaves nothing; asked again, the same: the chunk is not reviewed."""
    evidence_fake.needs_evidence = False
    for _ in range(3):
        evidence_fake.script_tool_calls(("list_directory", {"path": ""}))
    result = review(evidence_fake, tool_rounds=1)
    assert not result.complete and not result.findings.findings
    assert [call.outcome for call in result.calls] == ["tool_round", "empty_retry", "error"]


def test_an_empty_answer_after_a_round_that_reported_findings_ends_the_chunk_with_them(
    evidence_fake: FakeVLLM,
) -> None:
    """The round's answer reported a finding beside its repository call: the model has
    reviewed, and an empty answer after the round says it has nothing more."""
    risky = NEW_APP + "\n\ndef parse(text):\n    return eval(text)\n"
    evidence_fake.needs_evidence = False
    evidence_fake.script_tool_calls(("list_directory", {"path": ""}), with_findings=True)
    evidence_fake.add_faults("none", "blank")
    result = review(evidence_fake, new=risky)
    assert result.complete and [call.outcome for call in result.calls] == ["tool_round", "ok"]
    assert ("app.py", 10, "Use of eval() on dynamic input") in titles(result)


@pytest.mark.slow
def test_a_tool_round_that_cannot_fit_the_context_keeps_its_findings_and_is_a_context_overflow(
    evidence_fake: FakeVLLM,
) -> None:
    risky = NEW_APP + "\n\ndef parse(text):\n    return eval(text)\n"
    files = parse_git_diff(diff_of(OLD_APP, risky))
    evidence_fake.needs_evidence = False
    evidence_fake.script_tool_calls(("read_file", {"path": "app.py"}), with_findings=True)
    settings = LLMSettings(base_url=evidence_fake.base_url, max_output_tokens=256)
    repository = RepositoryTools(MemoryView(SHA, {"app.py": risky}), form=ToolForm.TYPED)
    from reviewbot.chunking import Budget, plan

    chunk = plan(files, Budget(), local_counter()).chunks[0]
    messages = render_messages(ReviewContext(title="t"), chunk)
    tools = [*tool_schemas(), *repository.schemas()]
    with runner_for(settings) as llm:
        prompt = llm.count_prompt_tokens(messages, tools)
        assert prompt is not None
        tight = ChunkRequest(0, messages, tools, prompt, prompt + 256 + 40, repository=repository)
        [result] = llm.review_chunks([tight])
    assert result.context_overflow and result.error is None
    assert [c["title"] for c in result.calls] == ["Use of eval() on dynamic input"]
    assert [c.outcome for c in result.records] == ["context_overflow"]
    assert "the tool round would not fit the model's context" in (result.records[0].error or "")
    assert len(evidence_fake.requests) == 1  # the round was not sent


@pytest.mark.slow
def test_a_tool_answer_is_cut_to_the_room_the_context_leaves(evidence_fake: FakeVLLM) -> None:
    evidence_fake.needs_evidence = False
    head = {"app.py": NEW_APP + LONG_FILE}
    evidence_fake.script_tool_calls(("read_file", {"path": "app.py"}))
    files = parse_git_diff(diff_of(OLD_APP, NEW_APP))
    repository = RepositoryTools(MemoryView(SHA, head), form=ToolForm.TYPED)
    from reviewbot.chunking import Budget, plan

    chunk = plan(files, Budget(), local_counter()).chunks[0]
    messages = render_messages(ReviewContext(title="t"), chunk)
    tools = [*tool_schemas(), *repository.schemas()]
    settings = LLMSettings(base_url=evidence_fake.base_url, max_output_tokens=256)
    with runner_for(settings) as llm:
        prompt = llm.count_prompt_tokens(messages, tools) or 0
        limit = prompt + 256 + 400
        request = ChunkRequest(0, messages, tools, prompt, limit, repository=repository)
        [result] = llm.review_chunks([request])
    assert not result.context_overflow and result.error is None
    assert result.records[1].prompt_tokens + 256 <= limit
    tool_message = evidence_fake.requests[-1]["messages"][-1]["content"]
    assert "cut here: the answer reached its token budget" in tool_message


@pytest.mark.slow
def test_a_tool_round_the_server_answers_400_keeps_its_findings_and_is_re_split() -> None:
    files = parse_git_diff(diff_of(OLD_APP, NEW_APP) + diff_of("", RISKY, "risky.py"))
    head = {"app.py": NEW_APP, "db.py": DB, "risky.py": RISKY}
    with FakeVLLM(needs_evidence=True) as fake:
        fake.script_tool_calls(("list_directory", {"path": ""}), with_findings=True)
        fake.add_faults("none", "context_overflow")  # the tool round: 400 maximum context
        with runner_for(LLMSettings(base_url=fake.base_url, max_retries=1)) as llm:
            result = review_files(
                files,
                context=ReviewContext(title="t", files=file_summaries(files)),
                llm=llm,
                counter=local_counter(),
                options=ReviewOptions(tools=True),
                contents=head,
                repository=MemoryView(SHA, head),
            )
    assert [c.outcome for c in result.calls[:2]] == ["tool_round", "context_overflow"]
    assert result.complete  # re-split in two, each reviewed with its own tool rounds
    assert len({c.chunk_index for c in result.calls}) >= 3
    found = titles(result)
    assert ("risky.py", 2, "Use of eval() on dynamic input") in found
    assert ("app.py", CALL_LINE, EVIDENCE_TITLE) in found


@pytest.mark.slow
def test_unreadable_calls_after_a_tool_round_get_a_repair_turn_with_the_same_tools() -> None:
    broken = MalformedCalls(rate=1.0, seed=1, kinds=("missing_line",))
    with FakeVLLM(needs_evidence=True, malformed=broken) as fake:
        result = review(fake)
        bodies = list(fake.requests)
    assert [c.outcome for c in result.calls] == ["tool_round", "invalid_calls", "repair"]
    assert [c.tool_round for c in result.calls] == [0, 1, 1]
    assert result.repaired_calls == 1 and result.complete
    assert ("app.py", CALL_LINE, EVIDENCE_TITLE) in titles(result)
    # the repair turn offers the chunk's tools (one cached prefix) and asks for findings
    assert bodies[-1]["tools"] == bodies[0]["tools"]


def test_without_tool_calls_the_json_schema_mode_offers_no_repository_tools() -> None:
    with FakeVLLM(needs_evidence=True, tool_parser=False) as fake:
        result = review(fake)
        bodies = list(fake.requests)
    assert result.complete
    assert all("tools" not in body for body in bodies[1:])
    assert all("find_definition" not in json.dumps(body.get("response_format")) for body in bodies)
    assert result.tools == (
        "not offered: the model server answers in the json_schema mode, which cannot call tools"
    )


@pytest.mark.slow
def test_a_repository_call_after_the_budget_is_spent_is_dropped_and_its_findings_kept(
    evidence_fake: FakeVLLM,
) -> None:
    """Issue 34 part 2: the request after the last round offers the same tools (one cached
    prefix) and says the findings are wanted now; a model that calls a repository tool anyway
    is not answered: its findings are the chunk's, with no further request."""
    evidence_fake.needs_evidence = False
    evidence_fake.script_tool_calls(("list_directory", {"path": ""}))
    evidence_fake.script_tool_calls(("read_file", {"path": "db.py"}), with_findings=True)
    risky = NEW_APP + "\n\ndef parse(text):\n    return eval(text)\n"
    result = review(evidence_fake, new=risky, tool_rounds=1)
    assert [c.outcome for c in result.calls] == ["tool_round", "ok"]
    assert result.complete and len(evidence_fake.requests) == 2
    first, last = evidence_fake.requests
    assert last["tools"] == first["tools"]
    assert "Report your findings with report_finding now" in last["messages"][-1]["content"]
    assert ("app.py", 10, "Use of eval() on dynamic input") in titles(result)


@pytest.mark.slow
def test_a_tool_round_that_fails_retryably_is_sent_again_with_the_same_conversation(
    evidence_fake: FakeVLLM,
) -> None:
    evidence_fake.add_faults("none", "http_503")  # the first tool round's request: 503 once
    result = review(evidence_fake)
    assert result.complete and ("app.py", CALL_LINE, EVIDENCE_TITLE) in titles(result)
    assert [(c.tool_round, c.retries) for c in result.calls] == [(0, 0), (1, 1)]
    failed, resent = evidence_fake.requests[1:3]
    assert failed["messages"] == resent["messages"] and failed["tools"] == resent["tools"]


def test_a_round_with_no_room_left_refuses_its_calls_says_report_now_and_ends_the_rounds() -> None:
    """Issue 34 part 2 (pure): nothing is reserved for tool answers when chunks are planned, so
    a round may find the context full. Its calls are refused with NO_ROOM (the model is told
    to report now), the rounds end, and a later answer's repository calls are dropped, its
    findings kept."""
    rounds = ToolRounds(
        RepositoryTools(MemoryView(SHA, {"db.py": DB}), form=ToolForm.TYPED), ToolBudget(3, 8000)
    )
    call = ToolCallText("read_file", json.dumps({"path": "db.py"}), "call-1")
    answer = ModelAnswer(tool_calls=[call], finish_reason="tool_calls")
    parsed = ParsedAnswer(repository=[call])
    continuation = rounds.continuation(answer, parsed, MIN_SHARE_TOKENS - 1)
    assistant, reply = continuation.messages
    assert assistant["tool_calls"][0]["id"] == reply["tool_call_id"] == "call-1"
    assert reply["content"].startswith(NO_ROOM) and BUDGET_SPENT in reply["content"]
    assert continuation.refused == 1 and continuation.answer_tokens < MIN_SHARE_TOKENS
    assert not continuation.open_after
    rounds.commit(continuation)
    assert not rounds.open
    finding = ToolCallText("report_finding", "{}", "call-2")
    last = rounds.final(ModelAnswer(tool_calls=[call, finding], finish_reason="tool_calls"))
    assert last.tool_calls == [finding] and last.finish_reason == "tool_calls"
    only_reads = rounds.final(ModelAnswer(tool_calls=[call], finish_reason="tool_calls"))
    assert only_reads.tool_calls == [] and only_reads.finish_reason == "stop"
    cut = rounds.final(ModelAnswer(tool_calls=[call], finish_reason="length"))
    assert cut.tool_calls == [] and cut.finish_reason == "length"  # still re-split
