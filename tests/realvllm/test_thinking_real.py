"""Thinking on against off, on the real vLLM: `reviewbot eval --compare` of the bundled team
fixtures prints what thinking costs (its tokens, as vLLM 0.32's reasoning parser counts them in
``usage.completion_tokens_details.reasoning_tokens``), side by side with the same review without
it, and stores it per configuration.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import create_engine, text

from reviewbot.commands import main
from tests.realvllm.server import SharedServer
from tests.realvllm.tier import REAL_VLLM

pytestmark = REAL_VLLM

TEAM = Path(__file__).parents[1] / "fixtures" / "eval" / "team"


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
