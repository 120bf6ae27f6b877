"""reviewbot.store.mr_lock: one run per MR; a dead holder frees the MR at once, not after a TTL.

Runs on SQLite and, when REVIEWBOT_TEST_POSTGRES_URL is set, on PostgreSQL (session advisory
lock: https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from reviewbot.store import MergeRequestKey, Store
from reviewbot.store.mr_lock import hold_mr_lock
from tests.store_fixtures import migrated_store, store_url  # noqa: F401

KEY = str(MergeRequestKey("https://gitlab.example.com", 7, 1))
OTHER = str(MergeRequestKey("https://other.example.com", 7, 1))
LONG_TTL_S = 600.0  # far longer than any wait below: freeing the MR never waits for it
WAIT_S = 20.0
POLL_S = 0.05
CHILD_HOLDS_THE_MR = """
import sys, time
from reviewbot.store import Store
from reviewbot.store.mr_lock import hold_mr_lock

with hold_mr_lock(Store.from_url(sys.argv[1]), sys.argv[2], float(sys.argv[3])) as held:
    print("held" if held else "busy", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def child_holding(store_url: str, migrated_store: Store) -> Iterator[subprocess.Popen[str]]:  # noqa: F811
    """Another process holding the MR's lock, until the test kills it."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD_HOLDS_THE_MR, store_url, KEY, str(LONG_TTL_S)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "held"
    yield child
    if child.poll() is None:
        child.kill()
    child.wait(WAIT_S)
    child.stdout.close()


def test_one_holder_at_a_time_and_other_mrs_are_free(migrated_store: Store) -> None:  # noqa: F811
    with hold_mr_lock(migrated_store, KEY, LONG_TTL_S) as first:
        assert first
        with hold_mr_lock(migrated_store, KEY, LONG_TTL_S) as second:
            assert not second
        with hold_mr_lock(migrated_store, OTHER, LONG_TTL_S) as elsewhere:
            assert elsewhere  # same path and iid on another GitLab: another MR
    with hold_mr_lock(migrated_store, KEY, LONG_TTL_S) as after:
        assert after  # released at the end of the block


@pytest.mark.slow
def test_a_killed_holder_frees_the_mr_at_once(
    migrated_store: Store,  # noqa: F811
    child_holding: subprocess.Popen[str],
) -> None:
    with hold_mr_lock(migrated_store, KEY, LONG_TTL_S) as held:
        assert not held
    child_holding.send_signal(signal.SIGKILL)
    child_holding.wait(WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while True:  # PostgreSQL ends the dead session within moments; SQLite sees the pid gone
        with hold_mr_lock(migrated_store, KEY, LONG_TTL_S) as held:
            if held:
                break
        assert time.monotonic() < deadline, "the dead holder's lock was not freed"
        time.sleep(POLL_S)


def test_concurrent_runs_have_one_winner(store_url: str, migrated_store: Store) -> None:  # noqa: F811
    stores = [Store.from_url(store_url) for _ in range(4)]
    barrier = threading.Barrier(len(stores))
    release = threading.Event()
    winners: list[int] = []

    def contend(index: int) -> None:
        barrier.wait()
        with hold_mr_lock(stores[index], KEY, LONG_TTL_S) as held:
            if held:
                winners.append(index)
                release.wait(WAIT_S)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + WAIT_S
    while sum(t.is_alive() for t in threads) > 1 and time.monotonic() < deadline:
        time.sleep(POLL_S)
    release.set()
    for thread in threads:
        thread.join(WAIT_S)
    for store in stores:
        store.close()
    assert len(winners) == 1
