"""The prefill share (reviewbot.llm.prefill): a review of large chunks does not starve other MRs.

vLLM prefills concurrent long prompts one after another; the fake does the same with
``LatencyModel(prefill_in_turn=True)`` and records every prefill in order (``FakeVLLM.prefills``),
so these tests see, over real HTTP, which request the server prefilled when.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from reviewbot.config import DEFAULT_PREFILL_TOKENS_PER_REVIEW, ConfigError, load_settings
from reviewbot.llm.factory import llm_settings_from, runner_for
from reviewbot.llm.prefill import PrefillGate
from reviewbot.llm.runner import ChunkRunner
from reviewbot.model import ChunkRequest, ChunkResult, LLMSettings
from reviewbot.prompts import tool_schemas
from tests.fakes.vllm_server import FakeVLLM, LatencyModel
from tests.test_review import SMALL_MODEL_LEN, review_scoped_merge_request

SYSTEM_PROMPT = "You review code. Report each real problem with the report_finding tool."
WAIT_S = 10.0  # upper bound of any wait below; the tests never come near it when they pass
POLL_S = 0.005
LARGE_LINES = 400
SMALL_LINES = 3
# Tenths of a second per large prompt, so one review's prompts clearly queue behind each other.
SLOW_PREFILL = LatencyModel(prefill_tokens_per_s=14_000, prefill_in_turn=True)


def diff_request(index: int, lines: int, name: str) -> ChunkRequest:
    body = "\n".join(f"+ {n:>4} | {name}_{n} = compute({n})" for n in range(1, lines))
    body += f"\n+ {lines:>4} | {name} = eval(text)"  # the fake reports eval() on added lines
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {
            "role": "user",
            "content": f'<file path="src/{name}.py" status="added">\n{body}\n</file>\n',
        },
    ]
    return ChunkRequest(index, messages, tool_schemas())


def sized(runner: ChunkRunner, request: ChunkRequest) -> ChunkRequest:
    """The request with its exact prompt size, as the pipeline estimates it."""
    tokens = runner.count_prompt_tokens(request.messages, request.tools)
    assert tokens is not None
    return ChunkRequest(request.chunk_index, request.messages, request.tools, tokens)


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "the condition never came true"
        time.sleep(POLL_S)


@contextmanager
def in_background(work: Callable[[], Any]) -> Iterator[list[Any]]:
    """Run ``work`` in a thread; the list holds its result once the block has ended."""
    outcome: list[Any] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            outcome.append(work())
        except BaseException as error:  # noqa: BLE001 - re-raised in the test's thread below
            errors.append(error)

    thread = threading.Thread(target=target)
    thread.start()
    try:
        yield outcome
    finally:
        thread.join(WAIT_S * 3)
    assert not thread.is_alive(), "the background review never ended"
    if errors:
        raise errors[0]


def settings(server: FakeVLLM, **overrides: Any) -> LLMSettings:
    return LLMSettings(base_url=server.base_url, concurrency=8, **overrides)


def prefill_order(server: FakeVLLM, small_tokens: int) -> list[str]:
    return ["small" if p.prompt_tokens == small_tokens else "large" for p in server.prefills]


def large_review_then_a_small_one(
    large_chunks_allowed: float, arrived_before_small: int
) -> list[str]:
    """Review A (4 large chunks) starts; once the server has received ``arrived_before_small``
    of them, review B (1 small chunk) starts on the same runner. The order of prefills.

    ``large_chunks_allowed``: the limit, in large chunks (0: no limit)."""
    with FakeVLLM(latency=SLOW_PREFILL) as server:
        with runner_for(settings(server)) as sizing:
            large = [sized(sizing, diff_request(i, LARGE_LINES, f"big{i}")) for i in range(4)]
            small = sized(sizing, diff_request(0, SMALL_LINES, "small"))
        limit = int(large_chunks_allowed * (large[0].prompt_tokens or 0))
        limited = settings(server, prefill_tokens_per_review=limit)
        with (
            runner_for(limited) as runner,
            in_background(lambda: runner.review_chunks(large)) as large_results,
        ):
            # In the server's queue (read and tokenized), not only received.
            wait_until(lambda: server.stats.peak_awaiting_first_token >= arrived_before_small)
            (small_result,) = runner.review_chunks([small])
        assert small_result.error is None
        assert all(result.error is None for result in large_results[0])
        return prefill_order(server, small.prompt_tokens or 0)


@pytest.mark.slow
def test_a_small_review_is_prefilled_after_at_most_one_large_chunk_of_another() -> None:
    order = large_review_then_a_small_one(1.5, arrived_before_small=1)
    assert order.index("small") == 1, order  # one large prefill ahead of it, not four
    assert order.count("large") == 4


@pytest.mark.slow
def test_without_the_limit_the_small_review_waits_for_every_large_chunk() -> None:
    # The behaviour the limit exists for: vLLM serves prefills first come first served.
    order = large_review_then_a_small_one(0, arrived_before_small=4)
    assert order == ["large", "large", "large", "large", "small"]


@pytest.mark.slow
def test_small_chunks_still_decode_together() -> None:
    """The limit holds back prefills only: a chunk that has its first token no longer counts,
    so chunks much smaller than the limit all run at once."""
    latency = LatencyModel(decode_s_per_token=0.01, prefill_in_turn=True)
    with FakeVLLM(latency=latency) as server:
        with runner_for(settings(server)) as runner:
            requests = [sized(runner, diff_request(i, SMALL_LINES, f"m{i}")) for i in range(8)]
            two_chunks = 2 * max(request.prompt_tokens or 0 for request in requests)
        with runner_for(settings(server, prefill_tokens_per_review=two_chunks)) as runner:
            results = runner.review_chunks(requests)
    assert all(result.error is None and result.calls for result in results)
    assert server.stats.peak_in_flight == 8
    assert server.stats.peak_awaiting_first_token <= 2


@pytest.mark.slow
def test_without_a_stream_a_chunk_holds_its_share_until_its_answer() -> None:
    # Only a stream shows the first token; a whole answer is the first sign the prefill ended.
    with (
        FakeVLLM(latency=LatencyModel(decode_s_per_token=0.002)) as server,
        runner_for(settings(server, stream=False, prefill_tokens_per_review=1)) as runner,
    ):
        requests = [sized(runner, diff_request(i, SMALL_LINES, f"m{i}")) for i in range(3)]
        results = runner.review_chunks(requests)
    assert all(result.error is None for result in results)
    assert server.stats.peak_in_flight == 1


@pytest.mark.slow
def test_a_request_of_unknown_size_is_not_held_back() -> None:
    latency = LatencyModel(prefill_tokens_per_s=2_000, prefill_in_turn=True)
    with (
        FakeVLLM(latency=latency) as server,
        runner_for(settings(server, prefill_tokens_per_review=1)) as runner,
    ):
        results = runner.review_chunks([diff_request(i, SMALL_LINES, f"m{i}") for i in range(4)])
    assert all(result.error is None for result in results)
    assert server.stats.peak_awaiting_first_token >= 2  # sent together, not one at a time


@pytest.mark.slow
def test_the_review_pipeline_gives_each_chunk_its_prompt_size() -> None:
    """``review_files`` sizes every request (overhead + the chunk's tokens) close to what the
    server counted, and with a limit of one token the server prefills one chunk at a time."""
    latency = LatencyModel(prefill_tokens_per_s=40_000, prefill_in_turn=True)
    with (
        FakeVLLM(max_model_len=SMALL_MODEL_LEN, latency=latency) as server,
        runner_for(LLMSettings(base_url=server.base_url, prefill_tokens_per_review=1)) as llm,
    ):
        _, result = review_scoped_merge_request(llm)
    chunks = {chunk.index: chunk for chunk in result.plan.chunks}
    assert len(chunks) >= 2 and not result.chunk_errors
    assert server.stats.peak_awaiting_first_token == 1
    for record in result.calls:
        estimate = result.plan.budget.overhead + chunks[record.chunk_index].tokens
        # The estimate leaves out only the "part i of n" line and the chunk's own markers.
        assert abs(estimate - record.prompt_tokens) <= 0.05 * record.prompt_tokens


# --------------------------------------------------------------------------- the gate alone


def entered_in_thread(gate: PrefillGate, tokens: int) -> tuple[threading.Thread, list]:
    tickets: list = []
    thread = threading.Thread(target=lambda: tickets.append(gate.enter(tokens)))
    thread.start()
    return thread, tickets


def test_requests_within_the_limit_enter_together_and_the_next_waits() -> None:
    gate = PrefillGate(100)
    first, second = gate.enter(60), gate.enter(40)
    thread, tickets = entered_in_thread(gate, 10)
    time.sleep(0.05)
    assert not tickets and gate.waiting_tokens == 100
    first.release()
    thread.join(WAIT_S)
    assert tickets and gate.waiting_tokens == 50
    second.release()
    tickets[0].release()
    assert gate.waiting_tokens == 0


def test_a_request_larger_than_the_limit_goes_alone() -> None:
    gate = PrefillGate(100)
    huge = gate.enter(1_000)  # would wait forever if it needed room under the limit
    thread, tickets = entered_in_thread(gate, 1)
    time.sleep(0.05)
    assert not tickets
    huge.release()
    huge.release()  # a second release changes nothing
    thread.join(WAIT_S)
    assert tickets and gate.waiting_tokens == 1


def test_a_large_request_waiting_is_not_overtaken_by_later_small_ones() -> None:
    gate = PrefillGate(100)
    small = gate.enter(50)
    large_thread, large = entered_in_thread(gate, 90)
    wait_until(lambda: gate.queued_requests == 1)
    later_thread, later = entered_in_thread(gate, 10)  # would fit beside the first
    time.sleep(0.05)
    assert not large and not later
    small.release()
    large_thread.join(WAIT_S)
    assert large
    large[0].release()
    later_thread.join(WAIT_S)
    assert later


def test_no_limit_lets_everything_in() -> None:
    gate = PrefillGate(0)
    tickets = [gate.enter(1_000_000) for _ in range(5)]
    assert gate.waiting_tokens == 5_000_000 and gate.peak_tokens == 5_000_000
    for ticket in tickets:
        ticket.release()


def test_a_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="0 \\(off\\) or more"):
        PrefillGate(-1)
    with pytest.raises(ValueError, match="prefill_tokens_per_review"):
        runner_for(LLMSettings(prefill_tokens_per_review=-1))


@pytest.mark.slow
def test_results_are_unchanged_by_the_limit() -> None:
    with FakeVLLM() as server:
        outcomes: list[list[ChunkResult]] = []
        for limit in (0, 1):
            with runner_for(settings(server, prefill_tokens_per_review=limit)) as runner:
                requests = [sized(runner, diff_request(i, SMALL_LINES, f"m{i}")) for i in range(3)]
                outcomes.append(runner.review_chunks(requests))
    calls = [[sorted(c["line"] for c in result.calls) for result in run] for run in outcomes]
    assert calls[0] == calls[1] and all(calls[0])


def test_the_setting_reaches_the_model_client_and_a_bad_value_is_one_clear_error() -> None:
    env = {"REVIEWBOT_LLM_PREFILL_TOKENS_PER_REVIEW": "12000"}
    assert llm_settings_from(load_settings(env=env)).prefill_tokens_per_review == 12_000
    default = llm_settings_from(load_settings(env={}, config_file=None))
    assert default.prefill_tokens_per_review == DEFAULT_PREFILL_TOKENS_PER_REVIEW
    with pytest.raises(ConfigError, match="llm_prefill_tokens_per_review must be 0 or more"):
        load_settings(env={"REVIEWBOT_LLM_PREFILL_TOKENS_PER_REVIEW": "-5"})
    with pytest.raises(ConfigError, match="REVIEWBOT_LLM_PREFILL_TOKENS_PER_REVIEW"):
        load_settings(env={"REVIEWBOT_LLM_PREFILL_TOKENS_PER_REVIEW": "64k"})


@pytest.mark.slow
def test_the_fake_prefills_in_turn_only_when_asked() -> None:
    for in_turn in (False, True):
        latency = LatencyModel(prefill_tokens_per_s=2_000, prefill_in_turn=in_turn)
        with (
            FakeVLLM(latency=latency) as server,
            runner_for(settings(server, prefill_tokens_per_review=0)) as runner,
        ):
            runner.review_chunks([diff_request(i, SMALL_LINES, f"m{i}") for i in range(3)])
        prefills = server.prefills
        overlapping = any(
            later.started < earlier.ended for earlier, later in itertools.pairwise(prefills)
        )
        assert overlapping is not in_turn
