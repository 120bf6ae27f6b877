"""Interactive work first (issue 34 part 3): each model request carries a vLLM ``priority`` by
what it is for, the fake vLLM schedules by it as ``--scheduling-policy priority`` does, and a
server that refuses the field never fails a review.

vLLM's ``priority`` field: https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html
(lower runs sooner; vLLM 0.32 takes it under any policy and honours it only with
``--scheduling-policy priority``; the V0 engine refused a non-zero one without it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import httpx
import pytest

from reviewbot.llm.factory import runner_for
from reviewbot.llm.vllm import PRIORITY_FIELD
from reviewbot.model import (
    PRIORITY_EVAL,
    PRIORITY_FIRST_REVIEW,
    PRIORITY_INCREMENTAL_REVIEW,
    PRIORITY_THREAD_ANSWER,
    ChunkRequest,
    LLMSettings,
    request_priority,
)
from reviewbot.slots import LocalSlots
from reviewbot.states import Workload
from tests.fakes.vllm_server import PRIORITY_REFUSED_ERROR, FakeVLLM, LatencyModel
from tests.mr_world import PROJECT, World, commit_on_feature, world  # noqa: F401

BACKGROUND = 40
WAIT_LIMIT_S = 10.0  # how long a test waits for the fake to reach a state before it fails
POLL_S = 0.01
HELLO = [{"role": "user", "content": "Say hello."}]
REPORT_TOOL = {
    "type": "function",
    "function": {
        "name": "report_finding",
        "parameters": {"type": "object", "properties": {"line": {"type": "integer"}}},
    },
}


# --- the mapping -----------------------------------------------------------------------------


def test_interactive_work_runs_first() -> None:
    order = [
        Workload.THREAD_ANSWER,
        Workload.FIRST_REVIEW,
        Workload.INCREMENTAL_REVIEW,
        Workload.EVAL,
        Workload.LOAD_TEST,
    ]
    priorities = [request_priority(workload) for workload in order]
    assert priorities == sorted(set(priorities)), "each later workload runs strictly later"
    assert request_priority(Workload.BACKGROUND) >= request_priority(Workload.LOAD_TEST)
    assert request_priority(Workload.THREAD_ANSWER) == 0  # what any other client sends
    assert all(isinstance(request_priority(w), int) for w in Workload)


# --- the fake schedules as vLLM does ---------------------------------------------------------


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_LIMIT_S
    while not condition():
        assert time.monotonic() < deadline, "the fake never reached the state waited for"
        time.sleep(POLL_S)


def send(server: FakeVLLM, priority: object | None) -> threading.Thread:
    """One chat request in a thread of its own (answered or refused: read from the fake)."""
    body: dict[str, object] = {"model": server.model, "messages": HELLO, "max_tokens": 8}
    if priority is not None:
        body[PRIORITY_FIELD] = priority

    def post() -> None:
        httpx.post(server.base_url + "/chat/completions", json=body, timeout=WAIT_LIMIT_S)

    thread = threading.Thread(target=post)
    thread.start()
    return thread


def served_order(server: FakeVLLM, later: list[object]) -> list[int]:
    """One request fills the only slot; ``later`` queue behind it, in this order; then the
    scheduler picks: the chat requests' indexes in the order they got the slot."""
    with server.holding():
        threads = [send(server, BACKGROUND)]
        wait_for(lambda: server.started == [0])
        for count, priority in enumerate(later, 1):
            threads.append(send(server, priority))
            wait_for(lambda count=count: server.queued == count)
    for thread in threads:
        thread.join()
    return server.started


def test_the_priority_policy_serves_the_lowest_priority_first_ties_in_order() -> None:
    one_slot = LatencyModel(max_num_seqs=1)
    with FakeVLLM(latency=one_slot, scheduling_policy="priority") as server:
        order = served_order(server, [BACKGROUND, BACKGROUND, 0, BACKGROUND, PRIORITY_EVAL])
    assert order == [0, 3, 5, 1, 2, 4]


def test_first_come_first_served_takes_the_field_and_ignores_it() -> None:
    """vLLM 0.32 started without --scheduling-policy priority: accepted, not honoured."""
    with FakeVLLM(latency=LatencyModel(max_num_seqs=1)) as server:
        order = served_order(server, [BACKGROUND, 0, None])
    assert order == [0, 1, 2, 3]


def test_an_old_vllm_refuses_a_priority_without_the_policy() -> None:
    with FakeVLLM(refuse_priority=True) as server:
        url = server.base_url + "/chat/completions"
        body = {"model": server.model, "messages": HELLO, "max_tokens": 8}
        refused = httpx.post(url, json={**body, PRIORITY_FIELD: 10})
        plain = httpx.post(url, json={**body, PRIORITY_FIELD: 0})
    assert refused.status_code == httpx.codes.BAD_REQUEST
    assert refused.json()["error"]["message"] == PRIORITY_REFUSED_ERROR.format(priority=10)
    assert plain.status_code == httpx.codes.OK


@pytest.mark.parametrize("priority", ["high", 1.5, None])
def test_a_priority_that_is_no_integer_is_refused(priority: object) -> None:
    with FakeVLLM() as server:
        body = {"model": server.model, "messages": HELLO, "max_tokens": 8}
        answer = httpx.post(
            server.base_url + "/chat/completions", json={**body, PRIORITY_FIELD: priority}
        )
    assert answer.status_code == httpx.codes.BAD_REQUEST


# --- the client sends it, and never fails for it ---------------------------------------------


def test_the_vllm_backend_sends_the_priority_only_while_the_setting_is_on() -> None:
    with FakeVLLM() as server:
        for on in (True, False):
            settings = LLMSettings(base_url=server.base_url, priority_scheduling=on)
            with runner_for(settings) as runner:
                runner.chat(HELLO, 16, priority=PRIORITY_FIRST_REVIEW)
                runner.chat(HELLO, 16)  # no priority: the server's default
        sent = [body.get(PRIORITY_FIELD) for body in server.requests]
    assert sent == [PRIORITY_FIRST_REVIEW, None, None, None]


def test_other_servers_never_get_the_field() -> None:
    with FakeVLLM() as server:
        settings = LLMSettings(base_url=server.base_url)
        with runner_for(settings, backend="openai-compatible") as runner:
            runner.chat(HELLO, 16, priority=PRIORITY_FIRST_REVIEW)
        assert PRIORITY_FIELD not in server.requests[0]


def test_a_server_that_refuses_priorities_gets_requests_without_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first refusal is said once in the log; that request and every later one go
    without the field, streamed chunks and plain answers alike."""
    with FakeVLLM(refuse_priority=True) as server, caplog.at_level(logging.WARNING):
        with runner_for(LLMSettings(base_url=server.base_url)) as runner:
            answer = runner.chat(HELLO, 16, priority=PRIORITY_INCREMENTAL_REVIEW)
            chunk = ChunkRequest(0, HELLO, [REPORT_TOOL], priority=PRIORITY_INCREMENTAL_REVIEW)
            results = runner.review_chunks([chunk])
            assert not runner.backend.sends_priority  # type: ignore[attr-defined]
        sent = [body.get(PRIORITY_FIELD) for body in server.requests]
    assert answer.finish_reason and results[0].error is None
    assert sent == [PRIORITY_INCREMENTAL_REVIEW, None, None]
    told = [r for r in caplog.records if "--scheduling-policy priority" in r.getMessage()]
    assert len(told) == 1


# --- every request of a review carries the review's priority --------------------------------

SMALL_CONTEXT = (
    2285  # with SMALL_OUTPUT and the verdict tool: a few chunks of the MR (compact tool)
)
SMALL_OUTPUT = 512


@pytest.mark.slow
def test_a_first_review_then_an_incremental_one(world: World) -> None:  # noqa: F811
    """Chunks, tool rounds and verification of the first review: its priority; after a push,
    every request of the incremental review: the later one."""
    small = {"max_model_len": SMALL_CONTEXT, "max_output_tokens": SMALL_OUTPUT}
    first = world.run(tools="on", verify="on", **small)
    assert first.findings and len(first.review.plan.chunks) >= 2
    first_requests = len(world.vllm.requests)
    verdicts = [b for b in world.vllm.requests if "verdict" in str(b.get("tools"))]
    assert verdicts, "the verification calls are among the requests"
    assert {b[PRIORITY_FIELD] for b in world.vllm.requests} == {PRIORITY_FIRST_REVIEW}
    world.gitlab.push(PROJECT, 1, commit_on_feature(world.repo, {"extra.py": "x = 1\n"}, "more"))
    world.run(tools="on", verify="on", **small)
    later = world.vllm.requests[first_requests:]
    assert later and {b[PRIORITY_FIELD] for b in later} == {PRIORITY_INCREMENTAL_REVIEW}


def test_the_setting_off_sends_no_priority(world: World) -> None:  # noqa: F811
    world.run(priority_scheduling=False)
    assert world.vllm.requests
    assert not any(PRIORITY_FIELD in body for body in world.vllm.requests)


def test_the_thread_answer_level_is_below_every_review() -> None:
    assert PRIORITY_THREAD_ANSWER < PRIORITY_FIRST_REVIEW < PRIORITY_INCREMENTAL_REVIEW


def test_a_thread_answer_queues_in_the_server_not_behind_the_reviews_slots() -> None:
    """Every shared model slot is held (a long review): a thread answer sent with priorities
    still goes out, to queue in the server ahead of the reviews."""
    slots = LocalSlots(1)
    with (
        FakeVLLM() as server,
        runner_for(LLMSettings(base_url=server.base_url), slots=slots) as runner,
        slots.hold(),
    ):
        answer = runner.chat(HELLO, 16, priority=PRIORITY_THREAD_ANSWER)
    assert answer.finish_reason
    assert server.requests[-1][PRIORITY_FIELD] == PRIORITY_THREAD_ANSWER
