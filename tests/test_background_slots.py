"""Background work never takes the reserved model slots (reviewbot.slots, issue 37): a deep
review's later passes and an idle second look run at the lowest priority, and vLLM's priority
orders only the requests that wait, so the slots a fresh review needs are kept from them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

import pytest
from sqlalchemy import Engine

from reviewbot.config import ConfigError, Settings
from reviewbot.llm.factory import runner_for
from reviewbot.model import PRIORITY_FIRST_REVIEW, LLMSettings, request_priority
from reviewbot.slots import (
    LocalSlots,
    ModelSlots,
    PostgresSlots,
    SlotWaitCancelledError,
    background_reserve,
    slots_for,
)
from reviewbot.states import Workload
from reviewbot.store import make_engine
from tests.fakes.vllm_server import FakeVLLM
from tests.store_fixtures import store_url  # noqa: F401
from tests.test_llm import chunk
from tests.test_slots import CountingSlots, engines, postgres_url  # noqa: F401

COUNT = 4
RESERVED = 2
WAIT_S = 20.0


def _hold_until(slots: ModelSlots, background: bool, held: threading.Event, go: threading.Event):
    def hold() -> None:
        with slots.hold(background=background):
            held.set()
            go.wait(WAIT_S)

    thread = threading.Thread(target=hold)
    thread.start()
    return thread


def _fills_background(slots_of: Callable[[], ModelSlots]) -> None:
    """Background holders take COUNT - RESERVED slots; one more background waits, while a fresh
    review's request still gets a slot at once; it all lets go."""
    go = threading.Event()
    held = [threading.Event() for _ in range(COUNT - RESERVED)]
    threads = [_hold_until(slots_of(), True, event, go) for event in held]
    try:
        assert all(event.wait(WAIT_S) for event in held)
        stopped = threading.Event()
        stopped.set()  # a waiter that gives up after one look
        with (
            pytest.raises(SlotWaitCancelledError),
            _stopped(slots_of, stopped).hold(background=True),
        ):
            pass
        for _ in range(RESERVED):  # the fresh reviews' slots are free
            with _stopped(slots_of, stopped).hold() as waited:
                assert waited < WAIT_S
    finally:
        go.set()
        for thread in threads:
            thread.join(WAIT_S)
    assert not any(thread.is_alive() for thread in threads)


def _stopped(slots_of: Callable[[], ModelSlots], stop: threading.Event) -> ModelSlots:
    slots = slots_of()
    slots._stop = stop  # type: ignore[attr-defined]  # the waiter gives up at its first look
    return slots


def test_local_background_work_leaves_the_reserved_slots_free() -> None:
    shared = LocalSlots(COUNT, reserved=RESERVED)
    _fills_background(lambda: shared)


def test_postgres_background_work_leaves_the_reserved_slots_free(
    engines: Callable[[], Engine],  # noqa: F811
) -> None:
    _fills_background(lambda: PostgresSlots(engines(), COUNT, reserved=RESERVED))


def test_fresh_work_may_take_every_slot_background_none_of_the_reserved() -> None:
    slots = LocalSlots(COUNT, reserved=RESERVED)
    go, held = threading.Event(), [threading.Event() for _ in range(COUNT)]
    threads = [_hold_until(slots, False, event, go) for event in held]
    assert all(event.wait(WAIT_S) for event in held)  # fresh work: every slot
    go.set()
    for thread in threads:
        thread.join(WAIT_S)
    with slots.hold(background=True) as waited:  # all free again
        assert waited < WAIT_S


@pytest.mark.parametrize(
    ("count", "configured", "reserved"),
    [(8, None, 4), (5, None, 2), (1, None, 0), (2, None, 1), (4, 0, 0), (4, 9, 3)],
)
def test_the_reserve_is_half_by_default_and_background_keeps_one_slot(
    count: int, configured: int | None, reserved: int
) -> None:
    assert background_reserve(count, configured) == reserved


def test_slots_for_reserves_from_the_setting(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    default = slots_for(Settings(concurrency=6, database_url=url), make_engine(url))
    assert default.reserved == 3  # type: ignore[attr-defined]
    named = Settings(concurrency=6, background_reserved_slots=1, database_url=url)
    assert slots_for(named, make_engine(url)).reserved == 1  # type: ignore[attr-defined]


def test_a_negative_reserve_is_refused(tmp_path) -> None:
    with pytest.raises(ConfigError, match="background_reserved_slots"):
        Settings(background_reserved_slots=-1, database_url=f"sqlite:///{tmp_path / 'r.db'}")


def test_the_runner_holds_background_slots_for_background_requests_only() -> None:
    slots = CountingSlots(reported_wait_s=0.0)
    background = request_priority(Workload.BACKGROUND)
    with (
        FakeVLLM() as server,
        runner_for(LLMSettings(base_url=server.base_url), slots=slots) as client,
    ):
        client.review_chunks([replace(chunk(0), priority=PRIORITY_FIRST_REVIEW)])
        assert (slots.holds, slots.background_holds) == (1, 0)
        client.review_chunks([replace(chunk(1), priority=background)])
    assert (slots.holds, slots.background_holds) == (2, 1)
