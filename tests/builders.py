"""Builders and readers that several test modules share, written once.

Plain functions and classes are imported where they are used; the fixtures (``clock``,
``clocked``, ``vllm``) reach every test module because ``tests/conftest.py`` loads this module
as a plugin (``pytest_plugins``), as it loads ``tests/store_fixtures.py``. Only what means the
same in each module lives here: a builder whose defaults carry a module's own meaning (a
finding anchored in that module's diff, a row with the fields one round-trip test checks)
stays in its module.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reviewbot.store import Store
from tests.fakes.vllm_server import FakeVLLM
from tests.mr_world import PROJECT, World

# The clock of the store and queue tests starts here (a Monday morning).
CLOCK_START = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
# The report tests' week: ISO week 2026-W11 starts on this Monday.
MONDAY = datetime(2026, 3, 9, tzinfo=UTC)
SUMMARY_MARKER = "<!-- reviewbot:summary -->"
MR_IID = 1  # the world's merge request (tests.mr_world)


class FakeClock:
    """A clock the test sets (``clock.now = …``) or moves (``clock.advance(s)``) by hand, so
    nothing waits; safe to read from the threads of a concurrency test."""

    def __init__(self, start: datetime) -> None:
        self.now = start
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock at :data:`CLOCK_START`."""
    return FakeClock(CLOCK_START)


@pytest.fixture
def clocked(migrated_store: Store) -> tuple[Store, FakeClock]:
    """The migrated store on a fake clock at :data:`MONDAY`, which the test moves to when
    each review starts."""
    clock = FakeClock(MONDAY)
    return Store(migrated_store.engine, clock=clock), clock


def finding_row(**overrides: Any) -> dict[str, Any]:
    """One finding as ``Store.record_findings`` takes it: a posted major bug on app.py:3."""
    finding = {
        "fingerprint": "fp",
        "path": "app.py",
        "side": "new",
        "line": 3,
        "severity": "major",
        "category": "bug",
        "title": "t",
        "body": "b",
        "anchor": "exact",
        "state": "posted",
    }
    return {**finding, **overrides}


@pytest.fixture
def vllm() -> Iterator[FakeVLLM]:
    """A fake vLLM server of this test alone."""
    with FakeVLLM() as server:
        yield server


def diff_notes(world: World) -> list[dict]:
    """The first note of each inline (diff) thread on the world's MR."""
    return [
        discussion["notes"][0]
        for discussion in world.gitlab.discussions(PROJECT, MR_IID)
        if discussion["notes"][0]["type"] == "DiffNote"
    ]


def summary_notes(world: World) -> list[dict]:
    """The bot's summary notes on the world's MR (one, unless something went wrong)."""
    return [n for n in world.gitlab.notes(PROJECT, MR_IID) if SUMMARY_MARKER in n["body"]]
