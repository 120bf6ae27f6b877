"""`reviewbot run` and the chunk runner against the real vLLM serving the scripted model.

The scripted model (tests/realvllm/script.py) reports what the fake vLLM reports; the answer goes
through vLLM's own chat template rendering, reasoning parser and qwen3_coder tool parser, so a
finding landing on the right line proves the whole path.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from reviewbot.commands import main
from reviewbot.llm.factory import runner_for
from reviewbot.model import ChunkRequest, LLMSettings
from reviewbot.prompts import tool_schemas
from reviewbot.store import Store
from tests.mr_world import FEATURE_APP, PROJECT, World
from tests.realvllm.server import SharedServer
from tests.realvllm.tier import REAL_VLLM

pytestmark = REAL_VLLM

RISKY_DIFF = (
    'Review this change.\n<file path="src/app.py" status="modified">\n'
    " 10 | def handler(request):\n"
    "+ 11 |     data = eval(request.body)\n"
    "+ 12 |     if data == None:\n"
    "+ 13 |         return 0\n"
    "</file>\n"
)


def run_env(world: World, **extra: str) -> dict[str, str]:
    return {
        "REVIEWBOT_GITLAB_URL": world.gitlab.url,
        "REVIEWBOT_GITLAB_TOKEN": world.settings().gitlab_token or "",
        "REVIEWBOT_LLM_BASE_URL": world.vllm.base_url,
        "REVIEWBOT_DATABASE_URL": world.database_url,
        "REVIEWBOT_MIN_SEVERITY": "info",
        "REVIEWBOT_GITLAB_NOTES_PER_MINUTE": "60000",
        # the model's findings alone: the built-ins (on the host's cache) would add ruff's
        # E711 and E722 as comments of their own (tests/test_host_analyzers.py has them)
        "REVIEWBOT_ANALYZERS": ",",
        **extra,
    }


def diff_note_lines(world: World) -> set[tuple[str, int]]:
    notes = [d["notes"][0] for d in world.gitlab.discussions(PROJECT, 1)]
    return {
        (n["position"]["new_path"], n["position"]["new_line"])
        for n in notes
        if n["type"] == "DiffNote"
    }


@pytest.mark.parametrize("thinking", ["true", "false"])
def test_run_posts_the_findings_on_their_lines(real_world: World, thinking: str) -> None:
    result = CliRunner().invoke(
        main,
        ["run", "1", "--project", PROJECT, "--json"],
        env=run_env(real_world, REVIEWBOT_ENABLE_THINKING=thinking),
    )
    assert result.exit_code == 0, result.output
    assert diff_note_lines(real_world) == {
        ("app.py", real_world.line_of(FEATURE_APP, "eval(")),
        ("app.py", real_world.line_of(FEATURE_APP, "== None")),
        ("app.py", real_world.line_of(FEATURE_APP, "except:")),
    }
    store = Store.from_url(real_world.database_url)
    [review] = store.reviews(project=PROJECT, mr_iid=1)
    assert review["status"] == "succeeded"
    calls = store.llm_calls(review["id"])
    assert calls and all(call["prompt_tokens"] > 0 for call in calls)


def chunk_request() -> ChunkRequest:
    messages = [
        {"role": "system", "content": "You review code. Report each problem with the tool."},
        {"role": "user", "content": RISKY_DIFF},
    ]
    return ChunkRequest(0, messages, tool_schemas())


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("thinking", [True, False])
def test_the_runner_reads_the_real_parsers_calls(
    real_vllm: SharedServer, stream: bool, thinking: bool
) -> None:
    settings = LLMSettings(base_url=real_vllm.base_url, stream=stream, enable_thinking=thinking)
    with runner_for(settings) as runner:
        [result] = runner.review_chunks([chunk_request()])
    assert result.error is None
    assert sorted((call["path"], call["line"]) for call in result.calls) == [
        ("src/app.py", 11),
        ("src/app.py", 12),
    ]
    [record] = result.records
    assert record.completion_tokens > 0 and record.prompt_tokens > 0


@pytest.mark.parametrize("stream", [True, False])
def test_an_answer_cut_inside_a_tool_call_is_truncated(
    real_vllm: SharedServer, stream: bool
) -> None:
    """The real server says finish_reason "tool_calls" for a whole answer cut inside a call."""
    settings = LLMSettings(
        base_url=real_vllm.base_url, stream=stream, enable_thinking=False, max_output_tokens=60
    )
    with runner_for(settings) as runner:
        [result] = runner.review_chunks([chunk_request()])
    assert result.truncated and [r.outcome for r in result.records] == ["length"]


def test_run_with_verification_keeps_the_real_findings_from_the_cached_prefix(
    real_world: World,
) -> None:
    result = CliRunner().invoke(
        main,
        ["run", "1", "--project", PROJECT, "--json"],
        env=run_env(real_world, REVIEWBOT_ENABLE_THINKING="false", REVIEWBOT_VERIFY="on"),
    )
    assert result.exit_code == 0, result.output
    assert len(diff_note_lines(real_world)) == 3  # every real finding kept and posted
    store = Store.from_url(real_world.database_url)
    [review] = store.reviews(project=PROJECT, mr_iid=1)
    calls = store.llm_calls(review["id"])
    [check] = [call for call in calls if call["purpose"] == "verify"]
    # vLLM's qwen3_coder parser read one verdict per candidate, and the review's prompt (the
    # same tools, the verdict tool among them) came from the cache: 0 cached tokens when the
    # verdict tool was added for the verification only (docs/verification.md)
    [review_call] = [call for call in calls if call["purpose"] == "review"]
    assert check["tool_calls"] == 3
    # whole KV blocks of the review's prompt (640 tokens a block here): at least the first, which
    # holds the tools. With the compact repo tool the review's prompt is 1,630 tokens (two whole
    # blocks); the verification reused one of them on 2026-12-04 (the second differs: not yet
    # explained), where the typed tools' longer prompt had passed "half the prompt".
    assert 0 < check["cached_tokens"] <= review_call["prompt_tokens"]
    posted = [f for f in store.findings(review["id"]) if f["state"] == "posted"]
    assert len(posted) == 3 and {f["verdict"] for f in posted} == {"keep"}
