"""Thinking on the real vLLM: `reviewbot eval --compare` of the bundled team fixtures prints
what thinking costs (its tokens, as vLLM 0.32's reasoning parser counts them in
``usage.completion_tokens_details.reasoning_tokens``), side by side with the same review without
it; and the shapes of docs/thinking.md that 0.32 still returns end as reviewbot says: an answer
cut off while thinking is asked again with thinking off, an answer with nothing in it is never a
clean chunk.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import create_engine, text

from reviewbot.commands import main
from reviewbot.llm.factory import runner_for
from reviewbot.model import ChunkRequest, LLMSettings
from reviewbot.prompts import tool_schemas
from tests.realvllm.server import SharedServer
from tests.realvllm.tier import REAL_VLLM

pytestmark = REAL_VLLM

TEAM = Path(__file__).parents[1] / "fixtures" / "eval" / "team"
# Room for the scripted answer without thinking (one call), not for the endless thinking.
CUT_OUTPUT_TOKENS = 256


def test_eval_compare_prints_the_cost_of_thinking_on_against_off(
    real_vllm: SharedServer, tmp_path: Path
) -> None:
    off = tmp_path / "off.toml"
    off.write_text('name = "thinking-off"\nenable_thinking = false\n')
    on = tmp_path / "on.toml"
    on.write_text('name = "thinking-on"\nenable_thinking = true\n')
    database = f"sqlite:///{tmp_path / 'db.sqlite'}"
    env = {
        "REVIEWBOT_LLM_BASE_URL": real_vllm.base_url,
        "REVIEWBOT_DATABASE_URL": database,
        "REVIEWBOT_CONFIG": "",
    }
    args = ["eval", str(TEAM), "--compare", str(off), str(on)]
    result = CliRunner().invoke(main, [*args, "--json"], env=env)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    cost = {entry["name"]: entry["cost"] for entry in document["configurations"]}
    assert cost["thinking-off"]["reasoning_tokens"] == 0
    assert cost["thinking-on"]["reasoning_tokens"] > 0
    assert cost["thinking-on"]["completion_tokens"] > cost["thinking-off"]["completion_tokens"]
    with create_engine(database).connect() as connection:
        query = text("SELECT configuration, reasoning_tokens FROM eval_runs")
        stored = {name: tokens for name, tokens in connection.execute(query)}
    assert stored["thinking-off"] == 0 and stored["thinking-on"] > 0


def shaped_chunk(kind: str) -> ChunkRequest:
    """The risky diff with an added line that makes the scripted model answer in shape ``kind``
    (tests/realvllm/script.py, docs/fake-and-real-vllm.md)."""
    diff = (
        'Review this change.\n<file path="src/app.py" status="modified">\n'
        " 10 | def handler(request):\n"
        "+ 11 |     data = eval(request.body)\n"
        f"+ 12 |     # scripted-shape: {kind}\n"
        "</file>\n"
    )
    messages = [
        {"role": "system", "content": "You review code. Report each problem with the tool."},
        {"role": "user", "content": diff},
    ]
    return ChunkRequest(0, messages, tool_schemas())


def test_an_answer_cut_off_while_thinking_is_asked_again_with_thinking_off(
    real_vllm: SharedServer,
) -> None:
    """The real server's cut inside an unclosed thinking: reviewbot asks once more with thinking
    off (recorded so), and the answer without thinking is read."""
    settings = LLMSettings(
        base_url=real_vllm.base_url, enable_thinking=True, max_output_tokens=CUT_OUTPUT_TOKENS
    )
    with runner_for(settings) as runner:
        [result] = runner.review_chunks([shaped_chunk("endless_thinking")])
    assert result.error is None and not result.truncated
    assert [(call["path"], call["line"]) for call in result.calls] == [("src/app.py", 11)]
    cut, again = result.records
    assert cut.outcome == "thinking_cut_off" and cut.reasoning_tokens == CUT_OUTPUT_TOKENS
    assert again.outcome == "ok" and again.thinking_off and again.reasoning_tokens == 0


def test_a_hermes_call_the_real_parser_drops_is_never_a_clean_chunk(
    real_vllm: SharedServer,
) -> None:
    """vLLM 0.32 drops a Hermes call inside <tool_call> without a trace (no content, no call,
    finish_reason stop): reviewbot asks again, then reports the chunk not reviewed."""
    settings = LLMSettings(base_url=real_vllm.base_url, enable_thinking=True, max_retries=1)
    with runner_for(settings) as runner:
        [result] = runner.review_chunks([shaped_chunk("hermes_tool_call")])
    assert result.error == "the model's answer was empty (no finding and no text), 2 times"
    assert [record.outcome for record in result.records] == ["empty_retry", "error"]
