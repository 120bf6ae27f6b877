"""The model backends and the chunk runner, against the fake server over real HTTP.

The OpenAI-compatible backend is checked against the fake dressed as the servers it is for:
Ollama (no ``/tokenize`` route, ``tool_choice`` ignored, model cards without a context length,
no cached-token figures: ``ChatCompletionRequest``/``Model``/``Usage`` in ollama's
openai/openai.go) and llama-server without ``--jinja`` (500 "tool_choice param requires --jinja
flag" for any ``tool_choice`` but "auto").
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from reviewbot.config import ConfigError, Settings
from reviewbot.llm.factory import model_from_settings, runner_for
from reviewbot.llm.openai_compatible import OpenAICompatibleBackend
from reviewbot.llm.runner import ChunkRunner
from reviewbot.llm.vllm import VLLMBackend
from reviewbot.model import (
    MODE_TOOL_CALLS,
    ChunkResult,
    LLMSettings,
    ModelRequest,
    ToolsUnsupportedError,
)
from tests.fakes.vllm_server import FakeVLLM, LatencyModel
from tests.test_llm import FAST_RETRIES, RISKY_FINDING_LINES, chunk, reported_lines

OPENAI_COMPATIBLE = "openai-compatible"
# What an Ollama (or llama-server) in front of the model looks like to a client.
OTHER_SERVER = {
    "tokenize_endpoint": False,
    "tool_choice_refused": True,
    "advertise_max_model_len": False,
    "report_cached_tokens": False,
}
THREADS = 2
CHUNKS_PER_REVIEW = 6
CONCURRENCY = 2


def settings_for(server: FakeVLLM, **overrides: Any) -> LLMSettings:
    return replace(LLMSettings(base_url=server.base_url, **FAST_RETRIES), **overrides)


@pytest.fixture
def other_server() -> Iterator[FakeVLLM]:
    with FakeVLLM(**OTHER_SERVER) as fake:
        yield fake


def test_openai_compatible_reviews_without_tokenize_tool_choice_or_context_length(
    other_server: FakeVLLM,
) -> None:
    request = chunk(0)
    with runner_for(settings_for(other_server), backend=OPENAI_COMPATIBLE) as runner:
        info = runner.server_info()
        counted = runner.count_prompt_tokens(request.messages, request.tools)
        (result,) = runner.review_chunks([request])
    assert info.model == other_server.model and info.max_model_len is None
    assert counted is None
    assert result.error is None and reported_lines(result) == RISKY_FINDING_LINES
    (record,) = result.records
    assert record.mode == "tool_calls" and record.cached_tokens is None
    assert record.prompt_tokens > 0
    assert "POST /tokenize" not in other_server.paths
    assert other_server.requests and all("tool_choice" not in r for r in other_server.requests)


def test_openai_compatible_falls_back_to_a_json_schema_without_tool_choice() -> None:
    fake = FakeVLLM(accept_tools=False, **OTHER_SERVER)
    with fake, runner_for(settings_for(fake), backend=OPENAI_COMPATIBLE) as runner:
        (result,) = runner.review_chunks([chunk(0)])
        assert runner.mode == "json_schema"
    assert reported_lines(result) == RISKY_FINDING_LINES
    assert [r.outcome for r in result.records] == ["mode_unsupported", "ok"]
    assert all("tool_choice" not in body for body in fake.requests)


def test_openai_compatible_without_tools_or_schema_is_one_clear_error() -> None:
    with (
        FakeVLLM(accept_tools=False, honour_response_format=False, **OTHER_SERVER) as fake,
        runner_for(settings_for(fake), backend=OPENAI_COMPATIBLE) as runner,
        pytest.raises(ToolsUnsupportedError) as caught,
    ):
        base_url = fake.base_url
        runner.review_chunks([chunk(0)])
    message = str(caught.value)
    assert "neither tool calls, nor a JSON schema" in message and "\n" not in message
    assert base_url in message and "11434/v1" in message  # says where Ollama listens
    assert all("tool_choice" not in body for body in fake.requests)


def test_a_refused_tool_choice_is_a_mode_refusal_not_a_retried_server_error() -> None:
    # llama-server without --jinja refuses tool_choice "none" with status 500: the vLLM backend
    # must not retry it as a 5xx, and ends with the one clear error.
    with (
        FakeVLLM(tool_parser=False, honour_response_format=False, tool_choice_refused=True) as fake,
        runner_for(settings_for(fake, max_retries=3)) as runner,
        pytest.raises(ToolsUnsupportedError, match="tool_choice param requires --jinja"),
    ):
        runner.review_chunks([chunk(0)])
    assert [body.get("tool_choice") for body in fake.requests] == ["auto", None, "none"]


@pytest.mark.slow
def test_one_runner_serves_two_reviews_at_once_within_its_limit() -> None:
    results: dict[int, list[ChunkResult]] = {}
    with FakeVLLM(latency=LatencyModel(ttft_base_s=0.02)) as fake:
        runner = runner_for(settings_for(fake, concurrency=CONCURRENCY))
        both_started = threading.Barrier(THREADS)

        def review(thread: int) -> None:
            requests = [chunk(i, f"src/t{thread}_{i}.py") for i in range(CHUNKS_PER_REVIEW)]
            both_started.wait()
            results[thread] = runner.review_chunks(requests)

        with runner:
            threads = [threading.Thread(target=review, args=(n,)) for n in range(THREADS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert runner.peak_in_flight <= CONCURRENCY
        assert fake.stats.peak_in_flight <= CONCURRENCY
    assert sorted(results) == list(range(THREADS))
    for thread, reviewed in results.items():
        assert [r.chunk_index for r in reviewed] == list(range(CHUNKS_PER_REVIEW))
        assert all(reported_lines(r) == RISKY_FINDING_LINES for r in reviewed)
        paths = {call["path"] for r in reviewed for call in r.calls}
        assert paths == {f"src/t{thread}_{i}.py" for i in range(CHUNKS_PER_REVIEW)}


@pytest.mark.slow
def test_a_review_can_ask_for_less_concurrency_than_the_runner() -> None:
    share = 1  # a worker's per-job share
    fake = FakeVLLM(latency=LatencyModel(ttft_base_s=0.02))
    with fake, runner_for(settings_for(fake, concurrency=4)) as runner:
        runner.review_chunks([chunk(i) for i in range(4)], concurrency=share)
        assert runner.peak_in_flight == share


def test_model_from_settings_picks_the_backend(tmp_path) -> None:
    database = f"sqlite:///{tmp_path / 'r.db'}"
    for name, backend_class in (
        ("vllm", VLLMBackend),
        (OPENAI_COMPATIBLE, OpenAICompatibleBackend),
    ):
        settings = Settings(llm_backend=name, database_url=database)
        with model_from_settings(settings) as runner:
            assert isinstance(runner, ChunkRunner) and type(runner.backend) is backend_class
    with pytest.raises(ConfigError, match="llm_backend"):
        Settings(llm_backend="ollama", database_url=database)


@pytest.mark.slow
def test_the_pipeline_does_not_import_the_model_transport() -> None:
    code = (
        "import sys, reviewbot.review, reviewbot.chunking\n"
        "loaded = {'openai', 'httpx'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_settings_own_their_defaults_and_import_no_model_code() -> None:
    # config.py imported two defaults from reviewbot.model (issue 18): the settings
    # depended on the adapter they configure.
    code = (
        "import sys, reviewbot.config\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('reviewbot.llm'))\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_the_model_package_loads_no_transport_nor_runner() -> None:
    code = (
        "import sys, reviewbot.llm\n"
        "watched = {'openai', 'httpx', 'reviewbot.llm.runner', 'reviewbot.llm.factory'}\n"
        "loaded = watched & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("stream", [True, False])
def test_the_answer_keeps_the_reasoning_apart(stream: bool) -> None:
    """Qwen3.5 thinks by default; vLLM's reasoning parser sends the thinking in ``reasoning``
    (and ``reasoning_content``), never in ``content``."""
    request = chunk(0)
    first_output: list[bool] = []
    with FakeVLLM() as fake:
        backend = VLLMBackend(settings_for(fake))
        try:
            answer = backend.execute(
                ModelRequest(request.messages, request.tools, MODE_TOOL_CALLS, stream, 512, 0.0),
                on_first_token=lambda: first_output.append(True),
            )
        finally:
            backend.close()
    assert answer.reasoning.startswith("The diff touches")
    assert "touches" not in answer.content and answer.tool_calls
    assert first_output == ([True] if stream else [])
    assert (answer.ttft_s is not None) == stream
