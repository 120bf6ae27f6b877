"""The token budget against the real vLLM: counts, the context limit, and what lies past it.

The prompts are padded to an exact size with ``/tokenize`` (the server's own count, tools
included), then sent: at the limit, one token over, and with prompt + max_tokens over.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from click.testing import CliRunner

from reviewbot.commands import main
from reviewbot.llm.factory import runner_for
from reviewbot.model import ChunkRequest, LLMSettings
from reviewbot.prompts import tool_schemas
from tests.fakes.vllm_server import context_length_error
from tests.mr_world import git, init_repo
from tests.realvllm.server import MAX_MODEL_LEN, SERVED_MODEL, SharedServer
from tests.realvllm.tier import REAL_VLLM

pytestmark = REAL_VLLM

DIFF = '<file path="src/app.py" status="modified">\n+ 11 |     data = eval(request.body)\n</file>\n'
FILLER = "word "
SMALL_OUTPUT = 256
PAD_ROUNDS = 4
SHORT_ROOM = 20


def messages(padding: int) -> list[dict]:
    background = f"Background notes: {FILLER * padding}\n" if padding else ""
    return [
        {"role": "system", "content": "You review code. Report each problem with the tool."},
        {"role": "user", "content": f"{background}Review this change.\n{DIFF}"},
    ]


def padded(runner, target: int) -> ChunkRequest:  # type: ignore[no-untyped-def]
    """A chunk whose rendered prompt (tools included) is exactly ``target`` tokens."""
    tools = tool_schemas()
    padding = max(0, target - runner.count_prompt_tokens(messages(0), tools))
    for _ in range(PAD_ROUNDS):
        count = runner.count_prompt_tokens(messages(padding), tools)
        if count == target:
            return ChunkRequest(0, messages(padding), tools, count)
        padding += target - count
    raise AssertionError(f"could not pad the prompt to {target} tokens (last {count})")


def settings(server: SharedServer, **overrides: object) -> LLMSettings:
    return LLMSettings(base_url=server.base_url, enable_thinking=False, **overrides)  # type: ignore[arg-type]


def test_tokenize_with_tools_counts_what_the_chat_request_is_billed(
    real_vllm: SharedServer,
) -> None:
    with runner_for(settings(real_vllm)) as runner:
        counted = runner.count_prompt_tokens(messages(0), tool_schemas())
        [result] = runner.review_chunks([ChunkRequest(0, messages(0), tool_schemas())])
    assert counted is not None and result.records[0].prompt_tokens == counted


def test_a_prompt_at_the_limit_is_answered_and_one_token_over_is_refused(
    real_vllm: SharedServer,
) -> None:
    with runner_for(settings(real_vllm, max_output_tokens=SMALL_OUTPUT)) as runner:
        at_limit = padded(runner, MAX_MODEL_LEN - SMALL_OUTPUT)
        [answered] = runner.review_chunks([at_limit])
        over = padded(runner, MAX_MODEL_LEN + 1)
        [refused] = runner.review_chunks([over])
    assert answered.error is None and [c["line"] for c in answered.calls] == [11]
    assert answered.records[0].prompt_tokens == MAX_MODEL_LEN - SMALL_OUTPUT
    assert refused.context_overflow and refused.error is None and not refused.calls
    assert [r.outcome for r in refused.records] == ["context_overflow"]  # sent once, not retried
    # the fake's 400 is the real one, word for word
    body = {
        "model": SERVED_MODEL,
        "messages": over.messages,
        "tools": over.tools,
        "max_tokens": 1,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    real = httpx.post(f"{real_vllm.base_url}/chat/completions", json=body, timeout=60)
    assert real.status_code == 400
    assert real.json() == context_length_error(MAX_MODEL_LEN).body()


def test_prompt_and_max_tokens_over_the_limit_is_a_truncated_answer(
    real_vllm: SharedServer,
) -> None:
    """vLLM 0.32 does not refuse it: it shortens the answer to the room left."""
    with runner_for(settings(real_vllm, max_output_tokens=4096)) as runner:
        request = padded(runner, MAX_MODEL_LEN - SHORT_ROOM)
        [result] = runner.review_chunks([request])
    assert result.truncated and not result.context_overflow and not result.calls
    [record] = result.records
    assert record.outcome == "length" and record.completion_tokens == SHORT_ROOM
    assert result.error and f"cut off at {SHORT_ROOM} tokens" in result.error


def test_review_resplits_a_chunk_the_real_server_refuses(
    tmp_path: Path, real_vllm: SharedServer
) -> None:
    """reviewbot told the context is twice the served one: the real 400 splits the chunk, and
    every finding is still found."""
    repo = init_repo(tmp_path / "repo")
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    # about 75K tokens as rendered: one chunk for the claimed 131K context, two for the real one
    lines = [f"x{i} = {i}\n" for i in range(3800)]
    lines[100] = "first = eval(source)\n"
    lines[3000] = "second = eval(source)\n"
    (repo / "big.py").write_text("".join(lines))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "big")
    result = CliRunner().invoke(
        main,
        [
            "review",
            "--git",
            "HEAD~1..HEAD",
            "--repo",
            str(repo),
            "--base-url",
            real_vllm.base_url,
            "--json",
            "--context-tokens",
            str(2 * MAX_MODEL_LEN),
            "--max-output-tokens",
            "1024",
            "--min-severity",
            "info",
        ],
        env={"REVIEWBOT_ENABLE_THINKING": "false"},
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    outcomes = [call["outcome"] for call in data["calls"]]
    assert outcomes[0] == "context_overflow" and outcomes.count("ok") >= 2
    assert {(f["path"], f["line"]) for f in data["findings"]} == {("big.py", 101), ("big.py", 3001)}
