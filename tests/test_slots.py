"""One limit on requests in flight to the model, shared by every worker (reviewbot.slots).

`PostgresSlots` tests need PostgreSQL (`REVIEWBOT_TEST_POSTGRES_URL`): separate engines stand
for separate worker processes, and a real child process is killed -9 to show that PostgreSQL
frees a dead session's advisory locks
(https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS). `LocalSlots`
and the client's use of slots run everywhere.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field

import pytest
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from reviewbot.app import App
from reviewbot.config import ConfigError, Settings
from reviewbot.llm.factory import runner_for
from reviewbot.model import LLMSettings
from reviewbot.queue import JobQueue
from reviewbot.slots import (
    LocalSlots,
    ModelSlots,
    PostgresSlots,
    SlotWaitCancelledError,
    slots_for,
)
from reviewbot.store import make_engine
from reviewbot.worker import Worker
from tests.fakes.vllm_server import FakeVLLM, LatencyModel
from tests.mr_world import PROJECT, World, world  # noqa: F401
from tests.store_fixtures import store_url  # noqa: F401
from tests.test_llm import chunk

THREADS = 6
ROUNDS_PER_THREAD = 5
HOLD_S = 0.005
SLOTS = 2
# Safety net for waits that should end quickly; never reached when the code works.
WAIT_S = 20.0
MERGE_REQUESTS = 6
WORKER_CONCURRENCY = 4
TOTAL_CONCURRENCY = 3
MODEL_TTFT_S = 0.15
CHILD_HOLDS_A_SLOT = """
import sys, time
from reviewbot.slots import PostgresSlots
from reviewbot.store import make_engine

with PostgresSlots(make_engine(sys.argv[1]), 1).hold():
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def postgres_url(store_url: str) -> str:  # noqa: F811
    if make_url(store_url).get_backend_name() != "postgresql":
        pytest.skip("PostgresSlots needs PostgreSQL")
    return store_url


@pytest.fixture
def engines(postgres_url: str) -> Iterator[Callable[[], Engine]]:
    """A factory of engines on the test database (one per simulated process), disposed after."""
    made: list[Engine] = []

    def new_engine() -> Engine:
        made.append(make_engine(postgres_url))
        return made[-1]

    yield new_engine
    for engine in made:
        engine.dispose()


@dataclass
class InFlight:
    """Counts holders inside their slot; remembers the most at once."""

    now: int = 0
    peak: int = 0
    done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def use(self, slots: ModelSlots) -> None:
        with slots.hold():
            with self.lock:
                self.now += 1
                self.peak = max(self.peak, self.now)
            time.sleep(HOLD_S)
            with self.lock:
                self.now -= 1
                self.done += 1


def hammer(slots_per_thread: list[ModelSlots]) -> InFlight:
    counter = InFlight()

    def work(slots: ModelSlots) -> None:
        for _ in range(ROUNDS_PER_THREAD):
            counter.use(slots)

    threads = [threading.Thread(target=work, args=(slots,)) for slots in slots_per_thread]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert not any(thread.is_alive() for thread in threads)
    return counter


def cancelled_waiter(slots: ModelSlots) -> tuple[threading.Thread, list[BaseException]]:
    """A thread waiting for a slot; what it raised lands in the list."""
    raised: list[BaseException] = []

    def wait() -> None:
        try:
            with slots.hold():
                pass
        except SlotWaitCancelledError as error:
            raised.append(error)

    thread = threading.Thread(target=wait)
    thread.start()
    return thread, raised


def slot_is_taken(engine: Engine, count: int) -> bool:
    """True when no slot is free: a waiter stopped from the start gives up after one look."""
    already_stopped = threading.Event()
    already_stopped.set()
    try:
        with PostgresSlots(engine, count, stop=already_stopped).hold():
            return False
    except SlotWaitCancelledError:
        return True


# -- PostgresSlots ----------------------------------------------------------------------------


def test_processes_never_exceed_the_shared_count(engines: Callable[[], Engine]) -> None:
    counter = hammer([PostgresSlots(engines(), SLOTS) for _ in range(THREADS)])
    assert counter.peak <= SLOTS
    assert counter.done == THREADS * ROUNDS_PER_THREAD


@pytest.mark.slow
def test_a_killed_process_frees_its_slot(engines: Callable[[], Engine], postgres_url: str) -> None:
    engine = engines()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD_HOLDS_A_SLOT, postgres_url],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        assert slot_is_taken(engine, 1)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(WAIT_S)
        if child.stdout is not None:
            child.stdout.close()
    stop = threading.Event()
    give_up = threading.Timer(WAIT_S, stop.set)
    give_up.start()
    try:
        with PostgresSlots(engine, 1, stop=stop).hold():
            pass  # PostgreSQL ended the dead session and its lock with it
    finally:
        give_up.cancel()
    assert not slot_is_taken(engine, 1)


def test_shutdown_stops_a_waiter(engines: Callable[[], Engine]) -> None:
    stop = threading.Event()
    with PostgresSlots(engines(), 1).hold():
        thread, raised = cancelled_waiter(PostgresSlots(engines(), 1, stop=stop))
        stop.set()
        thread.join(WAIT_S)
    assert not thread.is_alive()
    assert len(raised) == 1


def test_a_released_slot_is_free_again_and_connections_go_back(
    engines: Callable[[], Engine],
) -> None:
    engine = engines()
    slots = PostgresSlots(engine, 1)
    for _ in range(3):
        with slots.hold() as waited:
            assert waited >= 0
            assert slot_is_taken(engines(), 1)
    assert not slot_is_taken(engines(), 1)
    assert engine.pool.checkedout() == 0


def test_slots_for_picks_the_database_kind(postgres_url: str, tmp_path) -> None:
    settings = Settings(concurrency=5, database_url=postgres_url)
    postgres = slots_for(settings, make_engine(postgres_url))
    assert isinstance(postgres, PostgresSlots) and postgres.count == 5
    shared = Settings(concurrency=5, llm_total_concurrency=2, database_url=postgres_url)
    assert slots_for(shared, make_engine(postgres_url)).count == 2  # type: ignore[attr-defined]
    sqlite = slots_for(settings, make_engine(f"sqlite:///{tmp_path / 'r.db'}"))
    assert isinstance(sqlite, LocalSlots) and sqlite.count == 5


# -- LocalSlots and the client ----------------------------------------------------------------


def test_local_slots_limit_threads() -> None:
    shared = LocalSlots(SLOTS)
    counter = hammer([shared] * THREADS)
    assert counter.peak <= SLOTS
    assert counter.done == THREADS * ROUNDS_PER_THREAD


def test_local_slots_stop_a_waiter() -> None:
    stop = threading.Event()
    slots = LocalSlots(1, stop=stop)
    with slots.hold():
        thread, raised = cancelled_waiter(slots)
        stop.set()
        thread.join(WAIT_S)
    assert not thread.is_alive()
    assert len(raised) == 1


def test_a_total_below_one_is_refused(tmp_path) -> None:
    with pytest.raises(ConfigError, match="llm_total_concurrency"):
        Settings(llm_total_concurrency=0, database_url=f"sqlite:///{tmp_path / 'r.db'}")


@dataclass
class CountingSlots:
    """Slots that never wait but report `reported_wait_s`, and count how often they are held."""

    reported_wait_s: float
    holds: int = 0
    background_holds: int = 0

    def hold(self, *, background: bool = False) -> AbstractContextManager[float]:
        self.background_holds += background
        return self._hold()

    @contextmanager
    def _hold(self) -> Iterator[float]:
        self.holds += 1
        yield self.reported_wait_s


def test_every_model_request_holds_a_slot_and_its_wait_is_recorded() -> None:
    slots = CountingSlots(reported_wait_s=1.5)
    with FakeVLLM() as server:
        server.add_faults("http_503")  # the first request fails and is retried
        settings = LLMSettings(base_url=server.base_url, backoff_base_s=0.001, backoff_max_s=0.01)
        with runner_for(settings, slots=slots) as client:
            [result] = client.review_chunks([chunk(0)])
        requests = server.stats.requests
    assert result.error is None and result.calls
    assert slots.holds == requests == 2
    [record] = result.records
    assert record.slot_wait_ms >= 2 * slots.reported_wait_s * 1000


# -- workers ----------------------------------------------------------------------------------


def open_more_merge_requests(world: World) -> list[int]:  # noqa: F811
    """MRs !1..!N of the world's project (!1 exists), each queued for review."""
    iids = list(range(1, MERGE_REQUESTS + 1))
    for iid in iids[1:]:
        world.gitlab.add_mr_from_git(
            PROJECT, world.repo, "main", "feature", iid=iid, title=f"Change {iid}"
        )
    return iids


def run_workers(world: World, count: int) -> JobQueue:  # noqa: F811
    """`count` workers (threads, each with its own engine) review every queued MR."""
    settings = world.settings(llm_total_concurrency=TOTAL_CONCURRENCY)
    apps = [App(settings, shared_model_slots=True) for _ in range(count)]  # one per process
    queues = [JobQueue(app.store) for app in apps]
    for iid in open_more_merge_requests(world):
        queues[0].enqueue(project=PROJECT, mr_iid=iid, head_sha=None, trigger="webhook")
    workers = [Worker(app, concurrency=WORKER_CONCURRENCY, poll_s=0.05) for app in apps]
    threads = [
        threading.Thread(target=w.run, kwargs={"burst": True, "handle_signals": False})
        for w in workers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert not any(thread.is_alive() for thread in threads)
    for app in apps[1:]:
        app.close()
    return queues[0]


@pytest.mark.slow
def test_two_workers_share_the_model_limit(world: World, postgres_url: str) -> None:  # noqa: F811
    world.vllm.latency = LatencyModel(ttft_base_s=MODEL_TTFT_S)
    queue = run_workers(world, 2)
    assert [job.status for job in queue.list()] == ["succeeded"] * MERGE_REQUESTS
    assert world.vllm.stats.requests >= MERGE_REQUESTS
    assert world.vllm.stats.peak_in_flight <= TOTAL_CONCURRENCY


@pytest.mark.slow
def test_one_worker_on_sqlite_keeps_the_limit(world: World, store_url: str) -> None:  # noqa: F811
    if make_url(store_url).get_backend_name() != "sqlite":
        pytest.skip("the PostgreSQL case is the two-worker test")
    world.vllm.latency = LatencyModel(ttft_base_s=MODEL_TTFT_S)
    queue = run_workers(world, 1)
    assert [job.status for job in queue.list()] == ["succeeded"] * MERGE_REQUESTS
    assert world.vllm.stats.peak_in_flight <= TOTAL_CONCURRENCY
