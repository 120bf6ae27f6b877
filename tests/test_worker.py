"""Tests for reviewbot.worker: running jobs exactly once, retries, shutdown, crashed workers.

Handlers are fakes of the MR run that record each call in a file (one line per event, appended
atomically), so runs are counted across threads and processes. Every test runs on SQLite and,
when REVIEWBOT_TEST_POSTGRES_URL is set, on PostgreSQL (tests/store_fixtures.py). Process tests
start real worker processes (`python -c` calling `worker_process_main` below), kill -9 them or
send SIGTERM. Waits poll the database with a bound; nothing asserts on wall-clock time.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from reviewbot.app import App
from reviewbot.commands.jobs import jobs_group
from reviewbot.commands.worker import worker_command
from reviewbot.config import ConfigError, Settings
from reviewbot.gitlab import GitLabAuthError, GitLabNotFoundError, GitLabUnavailableError
from reviewbot.model import LLMUnavailableError, ModelNotFoundError
from reviewbot.mr import MergeRequestBusyError
from reviewbot.queue import DEFAULT_MAX_ATTEMPTS, Job, JobQueue
from reviewbot.store import Store
from reviewbot.store.engine import SQLITE_BUSY_TIMEOUT_MS
from reviewbot.worker import Worker, is_retryable, job_concurrency
from tests.store_fixtures import migrated_sqlite_url, migrated_store, store_url  # noqa: F401

PROJECT = "group/app"
HEAD = "a" * 40
MR_COUNT = 20
FAST_POLL_S = 0.02
SHORT_LEASE_S = 1.0
LONG_LEASE_S = 60.0
HANDLER_DELAY_S = 0.01
BLOCK_LIMIT_S = 30.0
# How long a test waits for a worker process to get somewhere before it fails. An upper bound,
# never a pace: a passing test goes on as soon as the condition holds. A worker process starts a
# Python and imports reviewbot first, which took over 20 s on the 2-core CI machine at a load
# average of 12 (four worker-process tests failed so in one of three PostgreSQL runs).
WAIT_LIMIT_S = 120.0
REPO_ROOT = Path(__file__).resolve().parents[1]
PROCESS_SCRIPT = (
    "import sys; from tests.test_worker import worker_process_main; "
    "worker_process_main(sys.argv[1:])"
)


class RecordingHandler:
    """A fake MR run: appends `start`/`done` lines to a file; may block or raise."""

    def __init__(
        self,
        record: Path,
        *,
        block: bool = False,
        error: Exception | None = None,
        delay_s: float = 0.0,
    ) -> None:
        self.record = record
        self.block = block
        self.error = error
        self.delay_s = delay_s
        self.unblock = threading.Event()

    def __call__(self, job: Job) -> None:
        self._write("start", job)
        if self.block:
            self.unblock.wait(BLOCK_LIMIT_S)
        elif self.delay_s:
            time.sleep(self.delay_s)
        if self.error is not None:
            raise self.error
        self._write("done", job)

    def _write(self, event: str, job: Job) -> None:
        with self.record.open("a", encoding="utf-8") as record:
            record.write(f"{event} {job.id} {os.getpid()}\n")


def worker_process_main(argv: list[str]) -> None:
    """Entry point of a worker process: URL, record file, mode (`burst`|`block`), lease."""
    url, record, mode, lease_s, grace_s = argv
    store = Store.from_url(url)
    handler = RecordingHandler(Path(record), block=mode == "block", delay_s=HANDLER_DELAY_S)
    worker = Worker(
        App(Settings(database_url=url)),
        JobQueue(store),
        handler=handler,
        lease_s=float(lease_s),
        poll_s=FAST_POLL_S,
        grace_s=float(grace_s),
    )
    worker.run(burst=mode == "burst")
    store.close()


def _events(record: Path, event: str) -> Counter[int]:
    """How many times each job id logged `event`."""
    if not record.exists():
        return Counter()
    lines = record.read_text(encoding="utf-8").splitlines()
    return Counter(int(line.split()[1]) for line in lines if line.split()[0] == event)


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_LIMIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(FAST_POLL_S)


@pytest.fixture
def queue(migrated_store: Store) -> JobQueue:  # noqa: F811
    return JobQueue(migrated_store)


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "runs.log"


@pytest.fixture
def processes() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start worker processes; any still running at the end is killed."""
    started: list[subprocess.Popen[bytes]] = []

    def start(
        url: str, record: Path, mode: str, lease_s: float = SHORT_LEASE_S, grace_s: float = 0.0
    ) -> subprocess.Popen[bytes]:
        args = [url, str(record), mode, str(lease_s), str(grace_s)]
        process = subprocess.Popen([sys.executable, "-c", PROCESS_SCRIPT, *args], cwd=REPO_ROOT)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


def _enqueue_mrs(queue: JobQueue, count: int) -> list[int]:
    return [
        queue.enqueue(project=PROJECT, mr_iid=iid, head_sha=HEAD, trigger="webhook").job_id
        for iid in range(1, count + 1)
    ]


def _worker(queue: JobQueue, handler: Callable[[Job], object], **options: float) -> Worker:
    app = App(Settings(database_url="sqlite://"))
    return Worker(app, queue, handler=handler, poll_s=FAST_POLL_S, **options)  # type: ignore[arg-type]


# -- classification -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (GitLabUnavailableError("GitLab answered 502"), True),
        (LLMUnavailableError("connection refused"), True),
        (MergeRequestBusyError("another run holds !1"), True),
        (ConnectionResetError("reset by peer"), True),
        (TimeoutError("read timed out"), True),
        (GitLabNotFoundError("404 Project Not Found"), False),
        (GitLabAuthError("401 Unauthorized"), False),
        (ConfigError("gitlab_url is missing"), False),
        (ModelNotFoundError("no such model"), False),
        (KeyError("a bug"), False),
    ],
)
def test_failures_are_classified(error: Exception, retryable: bool) -> None:
    assert is_retryable(error) is retryable


def test_jobs_share_the_model_request_budget() -> None:
    settings = Settings(concurrency=8)
    assert job_concurrency(settings, 1) == settings.concurrency
    assert job_concurrency(settings, 4) * 4 <= settings.concurrency
    assert job_concurrency(settings, 100) == 1


# -- one worker, in threads ----------------------------------------------------------------


@pytest.mark.slow
def test_burst_runs_every_job_once_then_exits(queue: JobQueue, record: Path) -> None:
    job_ids = _enqueue_mrs(queue, 3)
    stats = _worker(queue, RecordingHandler(record), concurrency=2).run(burst=True)
    assert _events(record, "done") == Counter(job_ids)
    assert (stats.claimed, stats.succeeded) == (len(job_ids), len(job_ids))
    assert all(queue.get(job_id).status == "succeeded" for job_id in job_ids)


@pytest.mark.slow
def test_two_workers_in_threads_run_each_job_exactly_once(
    queue: JobQueue,
    record: Path,
    store_url: str,  # noqa: F811
) -> None:
    job_ids = _enqueue_mrs(queue, MR_COUNT)
    stores = [Store.from_url(store_url) for _ in range(2)]
    workers = [
        _worker(JobQueue(store), RecordingHandler(record, delay_s=HANDLER_DELAY_S), concurrency=2)
        for store in stores
    ]
    threads = [threading.Thread(target=w.run, kwargs={"burst": True}) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    assert _events(record, "done") == Counter(job_ids)
    assert queue.counts()["succeeded"] == MR_COUNT


def test_transient_failure_is_retried_later(queue: JobQueue, record: Path) -> None:
    [job_id] = _enqueue_mrs(queue, 1)
    handler = RecordingHandler(record, error=GitLabUnavailableError("GitLab answered 503"))
    stats = _worker(queue, handler).run(burst=True)
    job = queue.get(job_id)
    assert (job.status, job.attempts) == ("queued", 1)
    assert job.run_after > datetime.now(UTC)
    assert "GitLabUnavailableError" in (job.error or "")
    assert (stats.retried, stats.failed) == (1, 0)


@pytest.mark.slow
def test_a_busy_mr_is_a_reason_to_wait_not_a_failed_attempt(
    migrated_store: Store,  # noqa: F811
    record: Path,
) -> None:
    now = [datetime.now(UTC)]
    queue = JobQueue(migrated_store, clock=lambda: now[0])
    [job_id] = _enqueue_mrs(queue, 1)
    handler = RecordingHandler(record, error=MergeRequestBusyError("another run holds !1"))
    for _ in range(DEFAULT_MAX_ATTEMPTS + 1):  # more rounds than the job has attempts
        stats = _worker(queue, handler).run(burst=True)
        job = queue.get(job_id)
        assert (job.status, job.attempts) == ("queued", 0)
        assert (stats.postponed, stats.retried, stats.failed) == (1, 0, 0)
        assert job.run_after > now[0] and "another run holds" in (job.error or "")
        now[0] = job.run_after  # the wait is over


def test_permanent_failure_fails_the_job(queue: JobQueue, record: Path) -> None:
    [job_id] = _enqueue_mrs(queue, 1)
    handler = RecordingHandler(record, error=GitLabNotFoundError("404 Project Not Found"))
    stats = _worker(queue, handler).run(burst=True)
    job = queue.get(job_id)
    assert job.status == "failed"
    assert "404 Project Not Found" in (job.error or "")
    assert (stats.retried, stats.failed) == (0, 1)


def test_stop_lets_a_job_finish_within_the_grace_period(queue: JobQueue, record: Path) -> None:
    [job_id] = _enqueue_mrs(queue, 1)
    handler = RecordingHandler(record, block=True)
    worker = _worker(queue, handler, grace_s=WAIT_LIMIT_S)
    runner = threading.Thread(target=worker.run)
    runner.start()
    _wait_for(lambda: _events(record, "start")[job_id] == 1, "the job to start")
    worker.stop()
    handler.unblock.set()
    runner.join()
    assert queue.get(job_id).status == "succeeded"
    assert worker.stats.released == 0


def test_stop_releases_a_job_still_running_after_the_grace_period(
    queue: JobQueue, record: Path
) -> None:
    [job_id] = _enqueue_mrs(queue, 1)
    handler = RecordingHandler(record, block=True)
    worker = _worker(queue, handler, grace_s=0)
    runner = threading.Thread(target=worker.run)
    runner.start()
    _wait_for(lambda: _events(record, "start")[job_id] == 1, "the job to start")
    worker.stop()
    runner.join()
    handler.unblock.set()  # the abandoned run ends; its result must not be recorded
    job = queue.get(job_id)
    assert (job.status, job.attempts, job.lease_owner) == ("queued", 0, None)
    assert worker.stats.released == 1


# -- worker processes ----------------------------------------------------------------------


@pytest.mark.slow
def test_two_worker_processes_run_each_job_exactly_once(
    queue: JobQueue,
    record: Path,
    store_url: str,  # noqa: F811
    processes: Callable[..., subprocess.Popen[bytes]],
) -> None:
    job_ids = _enqueue_mrs(queue, MR_COUNT)
    # A long lease: on a loaded machine a 1 s lease expires between heartbeats and another
    # worker rightly takes the job again (at least once, "lease lost" logged); that path is
    # the killed-worker test's. Here the claim itself must never hand one job to both.
    workers = [processes(store_url, record, "burst", LONG_LEASE_S) for _ in range(2)]
    for process in workers:
        assert process.wait(timeout=WAIT_LIMIT_S) == 0
    assert _events(record, "done") == Counter(job_ids)
    assert queue.counts()["succeeded"] == MR_COUNT


@pytest.mark.slow
def test_killed_workers_job_is_completed_by_another_after_lease_expiry(
    queue: JobQueue,
    record: Path,
    store_url: str,  # noqa: F811
    processes: Callable[..., subprocess.Popen[bytes]],
) -> None:
    [job_id] = _enqueue_mrs(queue, 1)
    doomed = processes(store_url, record, "block", SHORT_LEASE_S)
    _wait_for(lambda: _events(record, "start")[job_id] == 1, "the job to start")
    doomed.send_signal(signal.SIGKILL)
    doomed.wait()
    assert queue.get(job_id).status == "running"

    def lease_expired() -> bool:
        expires_at = queue.get(job_id).lease_expires_at
        return expires_at is not None and expires_at <= datetime.now(UTC)

    _wait_for(lease_expired, "the dead worker's lease to expire")
    stats = _worker(queue, RecordingHandler(record)).run(burst=True)
    job = queue.get(job_id)
    assert (job.status, job.attempts) == ("succeeded", 2)
    assert stats.succeeded == 1
    assert _events(record, "done") == Counter([job_id])


@pytest.mark.slow
def test_sigterm_releases_the_running_job(
    queue: JobQueue,
    record: Path,
    store_url: str,  # noqa: F811
    processes: Callable[..., subprocess.Popen[bytes]],
) -> None:
    [job_id] = _enqueue_mrs(queue, 1)
    worker = processes(store_url, record, "block", LONG_LEASE_S, 0.0)
    _wait_for(lambda: _events(record, "start")[job_id] == 1, "the job to start")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=WAIT_LIMIT_S) == 0
    job = queue.get(job_id)
    assert (job.status, job.attempts, job.lease_owner) == ("queued", 0, None)
    assert _events(record, "done") == Counter()


# -- commands ------------------------------------------------------------------------------


@pytest.mark.slow
def test_jobs_commands(queue: JobQueue, store_url: str) -> None:  # noqa: F811
    [job_id] = _enqueue_mrs(queue, 1)
    runner = CliRunner()
    db = ["--database-url", store_url]

    listed = runner.invoke(jobs_group, ["list", *db])
    assert listed.exit_code == 0, listed.output
    assert PROJECT in listed.output
    assert "queued 1" in listed.output

    cancelled = runner.invoke(jobs_group, ["cancel", str(job_id), *db])
    assert cancelled.exit_code == 0, cancelled.output
    assert queue.get(job_id).status == "cancelled"

    retried = runner.invoke(jobs_group, ["retry", str(job_id), *db])
    assert retried.exit_code == 0, retried.output
    assert queue.get(job_id).status == "queued"

    shown = runner.invoke(jobs_group, ["show", str(job_id), *db])
    assert shown.exit_code == 0
    assert HEAD in shown.output

    missing = runner.invoke(jobs_group, ["show", str(job_id + 1), *db])
    assert missing.exit_code != 0
    assert "not found" in missing.output

    again = runner.invoke(jobs_group, ["retry", str(job_id), *db])
    assert again.exit_code != 0
    assert "queued" in again.output


def test_worker_command_in_burst_mode_exits_on_empty_queue(
    queue: JobQueue,
    store_url: str,  # noqa: F811
) -> None:
    result = CliRunner().invoke(worker_command, ["--burst", "--database-url", store_url])
    assert result.exit_code == 0, result.output
    assert "claimed 0" in result.output


@pytest.mark.slow
def test_recording_a_result_survives_the_database_being_unavailable(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, record: Path
) -> None:
    """The database refuses writes for longer than a statement waits (SQLite's busy timeout,
    like a PostgreSQL restart): the job thread keeps its result and records it afterwards."""
    url = migrated_sqlite_url(tmp_path_factory, tmp_path / "queue.db")
    store = Store.from_url(url)
    queue = JobQueue(store)
    [job_id] = _enqueue_mrs(queue, 1)
    outage_s = SQLITE_BUSY_TIMEOUT_MS / 1000 + 1
    blocker = sqlite3.connect(tmp_path / "queue.db", isolation_level=None, check_same_thread=False)

    def handler(job: Job) -> None:
        blocker.execute("BEGIN EXCLUSIVE")  # every other writer now waits, then fails
        threading.Timer(outage_s, lambda: blocker.execute("COMMIT")).start()

    stats = _worker(queue, handler).run(burst=True)
    blocker.close()
    assert stats.succeeded == 1
    assert queue.get(job_id).status == "succeeded"
    store.close()
