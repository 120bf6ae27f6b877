"""`reviewbot eval` on tests/fixtures/eval/suggestions: planted suggestions reviewed by the fake
vLLM; every broken one is dropped with its reason, every valid one kept (docs/suggestions.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from reviewbot.commands import main
from tests.store_fixtures import store_url  # noqa: F401

DATASET = Path(__file__).parent / "fixtures" / "eval" / "suggestions"


def test_eval_counts_planted_suggestions_none_broken_kept(vllm: Any, store_url: str) -> None:  # noqa: F811
    env = {"REVIEWBOT_LLM_BASE_URL": vllm.base_url, "REVIEWBOT_DATABASE_URL": store_url}
    result = CliRunner().invoke(main, ["eval", str(DATASET), "--json"], env=env)
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["suggestions"] == {
        "offered": 9,
        "kept": 3,  # the three ok-* items
        "dropped": {
            "does not parse": 4,  # indentation, brackets (Python, JavaScript), wrong lines
            "identical to the lines it replaces": 1,
            "repeats the line next to its range": 1,
        },
    }
    assert document["total"]["fn"] == 0  # every planted finding is reported, dropped or not
