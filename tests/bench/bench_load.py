"""Load benchmark of the webhook listener and the job queue; prints figures.

Run: ``.venv/bin/python -m tests.bench.bench_load [--events 200 --workers 2
--database-url postgresql://postgres@127.0.0.1:5432/test]``

What runs (issue 6, "Load"):

* a throw-away database: on PostgreSQL a ``CREATE DATABASE`` with a random name on the given
  server (dropped at the end, always); with ``sqlite:///PATH`` a new file (one worker only,
  removed at the end);
* in a child process, the fake GitLab holding ``--events`` MRs (the same branch pair of one
  small real git repository under different iids) and the fake vLLM with a latency model of
  a few seconds per review (TTFT 2 s + 5 ms per output token, 8 generation slots);
* ONE ``reviewbot serve`` (uvicorn) and ``--workers`` ``reviewbot worker --concurrency 4``
  processes, as subprocesses configured through ``REVIEWBOT_*`` variables.

Then ``--events`` Merge Request Hook ``open`` deliveries are posted in a burst from 16 client
threads, each answer timed; the benchmark waits (at most 10 minutes, progress every 5 s)
until no job is queued or running, and prints: webhook answer latency p50/p99 (target p99 <
50 ms), jobs by status, duplicates (discussions carrying the same fingerprint marker on one
MR, extra summary notes, MRs with more than one succeeded review: all must be 0), the total
time, the ideal time and their ratio.

Ideal time. The model is the bottleneck by design: the fake vLLM generates at most
``max_num_seqs`` sequences at once, and the workers cannot keep more than ``workers x
concurrency`` reviews in flight (each MR here is one chunk, so one model request per review
at a time). The per-review model time is what the bot itself recorded for its model requests
(``llm_calls.latency_ms``, request sent to last byte; the fake never queues a request here,
since requests in flight <= slots, so this is pure service time: TTFT plus paced decoding).
With ``slots = min(max_num_seqs, workers x concurrency)`` requests running side by side,
nothing can finish the work sooner than::

    ideal = reviews x per-review model time / slots

The ratio ``total / ideal`` is the price of everything else: webhook and queue round trips,
GitLab calls, database writes, worker polling, and the tail when fewer jobs than slots remain.
The latency model's own formula (``ttft_base_s + decode_s_per_token x completion tokens`` per
request) is printed too; it is a little higher than the measured time because the fake paces
streamed answers by the tokens of the pieces it sends, which are fewer than
``completion_tokens`` (the end-of-turn token, the tool-call markup).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import multiprocessing
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.pool import NullPool

from reviewbot.comments import MarkerKind, parse_marker
from reviewbot.queue import JobQueue
from reviewbot.states import ReviewStatus
from reviewbot.store import Store, normalize_database_url, upgrade
from reviewbot.store.models import LLMCall as LLMCallRow
from reviewbot.store.models import Review as ReviewRow
from reviewbot.webhook import WEBHOOK_PATH
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.vllm_server import FakeStats, FakeVLLM, LatencyModel
from tests.mr_world import git, make_repo

POSTGRES_URL_ENV = "REVIEWBOT_TEST_POSTGRES_URL"
DEFAULT_SERVER_URL = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_EVENTS = 200
DEFAULT_WORKERS = 2
DEFAULT_WORKER_CONCURRENCY = 4
DEFAULT_CLIENT_THREADS = 16
LOAD_LATENCY = LatencyModel(ttft_base_s=2.0, decode_s_per_token=0.005, max_num_seqs=8)

SECRET = "load-bench-webhook-secret"
BOT_USERNAME = "reviewbot"
BOT_TOKEN = "glpat-load-bench-bot-token"
PROJECT = "group/app"
PROJECT_ID = 7
BASE_BRANCH = "main"
FEATURE_BRANCH = "feature"
OPEN_EVENT_FIXTURE = Path(__file__).parents[1] / "fixtures" / "webhooks" / "merge_request_open.json"
DATABASE_NAME_PREFIX = "reviewbot_load_"
DATABASE_NAME_RANDOM_BYTES = 6

P99_TARGET_MS = 50.0
MS_PER_S = 1000.0
PERCENTILE_CUTS = 100  # statistics.quantiles(n=100) gives the 1st..99th percentiles
WAIT_LIMIT_S = 600.0
PROGRESS_EVERY_S = 5.0
STATUS_POLL_S = 0.25
STARTUP_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
WORKER_POLL_S = 0.2
HTTP_TIMEOUT_S = 30.0
HTTP_ACCEPTED = 202
LOG_TAIL_CHARS = 3000
UNFINISHED_STATUSES = ("queued", "running")
# Logged by reviewbot.worker.Worker.run once it starts polling the queue.
WORKER_STARTED_TEXT = ": started (concurrency"
EXIT_TARGET_MISSED = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


# ---------------------------------------------------------------------------------------------
# Configuration and results


@dataclass(frozen=True)
class LoadConfig:
    """One benchmark run. `database_url`: a PostgreSQL server URL or a new SQLite file."""

    database_url: str
    events: int = DEFAULT_EVENTS
    workers: int = DEFAULT_WORKERS
    worker_concurrency: int = DEFAULT_WORKER_CONCURRENCY
    client_threads: int = DEFAULT_CLIENT_THREADS
    latency: LatencyModel = field(default_factory=lambda: copy.copy(LOAD_LATENCY))
    wait_limit_s: float = WAIT_LIMIT_S
    progress_every_s: float = PROGRESS_EVERY_S

    @property
    def is_sqlite(self) -> bool:
        return normalize_database_url(self.database_url).get_backend_name() == "sqlite"

    def check(self) -> None:
        if self.events < 1 or self.workers < 1 or self.worker_concurrency < 1:
            raise ValueError("events, workers and worker concurrency must be at least 1")
        if self.is_sqlite and self.workers != 1:
            raise ValueError("SQLite serves one worker process; use --workers 1 or PostgreSQL")


@dataclass
class LoadFigures:
    """What one run measured."""

    answer_ms: list[float]
    answer_statuses: Counter[int]
    jobs: dict[str, int]
    duplicate_discussions: int
    extra_summaries: int
    mrs_reviewed_twice: int
    total_s: float
    model_s: float
    charged_s: float
    slots: int
    model_stats: FakeStats

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.answer_ms)

    @property
    def p99_ms(self) -> float:
        if len(self.answer_ms) < 2:
            return max(self.answer_ms)
        return statistics.quantiles(self.answer_ms, n=PERCENTILE_CUTS, method="inclusive")[-1]

    @property
    def ideal_s(self) -> float:
        return self.model_s / self.slots

    @property
    def duplicates(self) -> int:
        return self.duplicate_discussions + self.extra_summaries + self.mrs_reviewed_twice


Log = Callable[[str], None]


# ---------------------------------------------------------------------------------------------
# Throw-away database


def _autocommit(server_url: str, statement: str) -> None:
    engine = create_engine(
        normalize_database_url(server_url), isolation_level="AUTOCOMMIT", poolclass=NullPool
    )
    try:
        with engine.connect() as connection:
            connection.execute(text(statement))
    finally:
        engine.dispose()


@contextmanager
def throwaway_database(url: str) -> Iterator[str]:
    """A blank, migrated database for one run; dropped (or the SQLite file removed) after."""
    parsed = normalize_database_url(url)
    if parsed.get_backend_name() == "sqlite":
        path = Path(parsed.database or "")
        if not parsed.database or path.exists():
            raise ValueError(f"give a NEW SQLite file path (not in memory, not existing): {url}")
        try:
            upgrade(url)
            yield url
        finally:
            path.unlink(missing_ok=True)
        return
    name = DATABASE_NAME_PREFIX + secrets.token_hex(DATABASE_NAME_RANDOM_BYTES)
    _autocommit(url, f'CREATE DATABASE "{name}"')
    database_url = parsed.set(database=name).render_as_string(hide_password=False)
    try:
        upgrade(database_url)
        yield database_url
    finally:
        # WITH (FORCE) (PostgreSQL >= 13) closes the sessions a killed process may have left.
        _autocommit(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# ---------------------------------------------------------------------------------------------
# The fakes, in a child process (their CPU is not the listener's or the workers')


def _serve_fakes(repo: str, mr_count: int, latency: LatencyModel, pipe: Connection) -> None:
    """Child process: both fakes until the parent sends "stop"; answers inspection requests."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us, in order
    with FakeGitLab() as gitlab, FakeVLLM(latency=latency) as vllm:
        gitlab.add_user(BOT_USERNAME, token=BOT_TOKEN, bot=True)
        gitlab.add_user("alice", token="glpat-alice")
        gitlab.add_project(PROJECT, project_id=PROJECT_ID)
        for iid in range(1, mr_count + 1):
            gitlab.add_mr_from_git(
                PROJECT, repo, BASE_BRANCH, FEATURE_BRANCH, iid=iid, title=f"Load MR {iid}"
            )
        pipe.send((gitlab.url, vllm.base_url))
        while (command := pipe.recv()) != "stop":
            if command == "discussions":
                pipe.send({iid: gitlab.discussions(PROJECT, iid) for iid in range(1, mr_count + 1)})
            elif command == "stats":
                pipe.send(vllm.stats)


class FakesProcess:
    """The fakes' child process seen from the parent."""

    def __init__(self, repo: Path, mr_count: int, latency: LatencyModel) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipe, child = context.Pipe()
        self._process = context.Process(
            target=_serve_fakes, args=(str(repo), mr_count, latency, child), daemon=True
        )
        self._process.start()
        self.gitlab_url, self.llm_base_url = self._pipe.recv()

    def ask(self, command: str) -> Any:
        self._pipe.send(command)
        return self._pipe.recv()

    def stop(self) -> None:
        if self._process.is_alive():
            # The child may already be gone; join/kill below still reap it.
            with contextlib.suppress(BrokenPipeError, OSError):
                self._pipe.send("stop")
        self._process.join(STOP_TIMEOUT_S)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()


# ---------------------------------------------------------------------------------------------
# reviewbot processes


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _reviewbot_executable() -> str:
    script = Path(sys.executable).with_name("reviewbot")
    if not script.exists():
        raise RuntimeError(f"{script} not found: pip install -e . into this interpreter's venv")
    return str(script)


def reviewbot_environment(database_url: str, gitlab_url: str, llm_base_url: str) -> dict[str, str]:
    """The environment `reviewbot serve` and `reviewbot worker` get (no config file)."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("REVIEWBOT_")}
    return inherited | {
        "REVIEWBOT_DATABASE_URL": database_url,
        "REVIEWBOT_GITLAB_URL": gitlab_url,
        "REVIEWBOT_GITLAB_TOKEN": BOT_TOKEN,
        "REVIEWBOT_LLM_BASE_URL": llm_base_url,
        "REVIEWBOT_WEBHOOK_SECRET": SECRET,
        "REVIEWBOT_BOT_USERNAME": BOT_USERNAME,
        "REVIEWBOT_MIN_SEVERITY": "info",
        "REVIEWBOT_CONFIG": os.devnull,
    }


class ChildProcess:
    """A subprocess in its own session (Ctrl-C reaches only us), its output in a log file."""

    def __init__(self, name: str, args: Sequence[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        with self.log_path.open("wb") as log_file:
            self.process = subprocess.Popen(
                list(args),
                env=env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.process.poll() is None

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_tail(self) -> str:
        return self.output()[-LOG_TAIL_CHARS:]

    def stop(self) -> None:
        """SIGTERM (workers release their jobs, uvicorn drains), then SIGKILL after a while."""
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process.wait()


def start_serve(env: dict[str, str], log_dir: Path, stack: ExitStack) -> tuple[ChildProcess, str]:
    port = _free_port()
    serve = ChildProcess(
        "serve", [_reviewbot_executable(), "serve", "--port", str(port)], env, log_dir
    )
    stack.callback(serve.stop)
    url = f"http://127.0.0.1:{port}"
    _wait_until_healthy(serve, url)
    return serve, url


def _wait_until_healthy(serve: ChildProcess, url: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if not serve.alive():
            raise RuntimeError(f"reviewbot serve exited:\n{serve.log_tail()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=HTTP_TIMEOUT_S).status_code == httpx.codes.OK:
                return
        except httpx.TransportError:
            pass  # not listening yet
        time.sleep(STATUS_POLL_S)
    raise RuntimeError(f"reviewbot serve not healthy after {STARTUP_TIMEOUT_S:.0f} s")


def start_workers(
    config: LoadConfig, env: dict[str, str], log_dir: Path, stack: ExitStack
) -> list[ChildProcess]:
    """Start the workers and wait until each one polls the queue (a warm service)."""
    workers = []
    for index in range(config.workers):
        args = [
            _reviewbot_executable(),
            "worker",
            "--concurrency",
            str(config.worker_concurrency),
            "--poll-seconds",
            str(WORKER_POLL_S),
        ]
        worker = ChildProcess(f"worker-{index + 1}", args, env, log_dir)
        stack.callback(worker.stop)
        workers.append(worker)
    for worker in workers:
        _wait_for_log(worker, WORKER_STARTED_TEXT)
    return workers


def _wait_for_log(child: ChildProcess, needle: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while needle not in child.output():
        if not child.alive():
            raise RuntimeError(f"{child.name} exited:\n{child.log_tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{child.name} did not log {needle!r} in {STARTUP_TIMEOUT_S:.0f} s")
        time.sleep(STATUS_POLL_S)


# ---------------------------------------------------------------------------------------------
# The burst


def open_event(iid: int, head_sha: str) -> dict[str, Any]:
    """GitLab's Merge Request Hook for opening MR !iid (the sample payload, retargeted)."""
    payload = json.loads(OPEN_EVENT_FIXTURE.read_text())
    payload["project"]["path_with_namespace"] = PROJECT
    payload["project"]["id"] = PROJECT_ID
    attributes = payload["object_attributes"]
    attributes.update(
        iid=iid,
        target_project_id=PROJECT_ID,
        source_project_id=PROJECT_ID,
        source_branch=FEATURE_BRANCH,
        target_branch=BASE_BRANCH,
    )
    attributes["last_commit"]["id"] = head_sha
    return payload


def _deliver(client: httpx.Client, url: str, body: bytes) -> tuple[int, float]:
    headers = {
        "X-Gitlab-Token": SECRET,
        "X-Gitlab-Event": "Merge Request Hook",
        "X-Gitlab-Event-UUID": str(uuid.uuid4()),
        "Content-Type": "application/json",
    }
    started = time.perf_counter()
    status = client.post(f"{url}{WEBHOOK_PATH}", content=body, headers=headers).status_code
    return status, (time.perf_counter() - started) * MS_PER_S


def send_burst(url: str, bodies: Sequence[bytes], threads: int) -> list[tuple[int, float]]:
    """Post every body concurrently from `threads` threads; (status, answer ms) per delivery."""
    limits = httpx.Limits(max_connections=threads, max_keepalive_connections=threads)
    with (
        httpx.Client(timeout=HTTP_TIMEOUT_S, limits=limits) as client,
        ThreadPoolExecutor(max_workers=threads, thread_name_prefix="burst") as pool,
    ):
        return list(pool.map(lambda body: _deliver(client, url, body), bodies))


# ---------------------------------------------------------------------------------------------
# Waiting and counting


def _describe_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{status} {count}" for status, count in sorted(counts.items()))


def _unfinished(counts: dict[str, int]) -> int:
    return sum(counts.get(status, 0) for status in UNFINISHED_STATUSES)


def wait_for_jobs(
    queue: JobQueue, workers: Sequence[ChildProcess], config: LoadConfig, log: Log
) -> dict[str, int]:
    """Poll the queue until nothing is queued or running (bounded); print progress."""
    started = time.monotonic()
    next_report = started
    while True:
        counts = queue.counts()
        now = time.monotonic()
        if now >= next_report:
            log(f"  {now - started:6.1f} s  {_describe_counts(counts)}")
            next_report = now + config.progress_every_s
        if not _unfinished(counts):
            return counts
        if not any(worker.alive() for worker in workers):
            log("every worker exited; last output:\n" + workers[0].log_tail())
            return counts
        if now - started > config.wait_limit_s:
            log(f"gave up waiting after {config.wait_limit_s:.0f} s")
            return counts
        time.sleep(STATUS_POLL_S)


def count_duplicates(discussions: dict[int, list[dict[str, Any]]]) -> tuple[int, int]:
    """(discussions repeating a fingerprint on their MR, summary notes beyond one per MR)."""
    repeated = 0
    extra_summaries = 0
    for threads in discussions.values():
        fingerprints: Counter[str] = Counter()
        summaries = 0
        for thread in threads:
            marker = parse_marker(thread["notes"][0]["body"])
            if marker is None:
                continue
            if marker.kind == MarkerKind.SUMMARY:
                summaries += 1
            else:
                fingerprints[marker.fingerprint] += 1
        repeated += sum(count - 1 for count in fingerprints.values())
        extra_summaries += max(0, summaries - 1)
    return repeated, extra_summaries


def mrs_reviewed_more_than_once(store: Store) -> int:
    """MRs with more than one succeeded review row (each MR was asked for once)."""
    per_mr = (
        select(ReviewRow.project, ReviewRow.mr_iid)
        .where(ReviewRow.status == ReviewStatus.SUCCEEDED.value)
        .group_by(ReviewRow.project, ReviewRow.mr_iid)
        .having(func.count() > 1)
        .subquery()
    )
    with store.engine.connect() as connection:
        return connection.scalar(select(func.count()).select_from(per_mr)) or 0


def model_seconds(store: Store) -> float:
    """Seconds the reviews spent in model requests, as the bot recorded them (`llm_calls`)."""
    with store.engine.connect() as connection:
        total_ms = connection.scalar(select(func.sum(LLMCallRow.latency_ms)))
    return (total_ms or 0.0) / MS_PER_S


def charged_seconds(stats: FakeStats, latency: LatencyModel) -> float:
    """What the latency model's formula gives for every chat request the fake served."""
    uncached = stats.prompt_tokens - stats.cached_tokens
    prefill = uncached / latency.prefill_tokens_per_s if latency.prefill_tokens_per_s else 0.0
    return (
        stats.requests * latency.ttft_base_s
        + prefill
        + stats.completion_tokens * latency.decode_s_per_token
    )


# ---------------------------------------------------------------------------------------------
# The run


def run_load(config: LoadConfig, log: Log = print) -> LoadFigures:
    """Set everything up, send the burst, wait, count, and stop every process (always)."""
    config.check()
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="reviewbot-load-")))
        repo = make_repo(tmp / "repo")
        head_sha = git(repo, "rev-parse", FEATURE_BRANCH)
        database_url = stack.enter_context(throwaway_database(config.database_url))
        log(f"starting the fakes with {config.events} MRs ...")
        fakes = FakesProcess(repo, config.events, config.latency)
        stack.callback(fakes.stop)
        env = reviewbot_environment(database_url, fakes.gitlab_url, fakes.llm_base_url)
        _serve, serve_url = start_serve(env, tmp, stack)
        workers = start_workers(config, env, tmp, stack)
        store = Store.from_url(database_url)
        stack.callback(store.close)
        bodies = [
            json.dumps(open_event(iid, head_sha)).encode() for iid in range(1, config.events + 1)
        ]
        log(f"sending {config.events} events from {config.client_threads} threads ...")
        started = time.perf_counter()
        answers = send_burst(serve_url, bodies, config.client_threads)
        log(f"burst sent in {time.perf_counter() - started:.2f} s; waiting for the jobs ...")
        jobs = wait_for_jobs(JobQueue(store), workers, config, log)
        total_s = time.perf_counter() - started
        repeated, extra_summaries = count_duplicates(fakes.ask("discussions"))
        stats: FakeStats = fakes.ask("stats")
        return LoadFigures(
            answer_ms=[ms for _status, ms in answers],
            answer_statuses=Counter(status for status, _ms in answers),
            jobs=jobs,
            duplicate_discussions=repeated,
            extra_summaries=extra_summaries,
            mrs_reviewed_twice=mrs_reviewed_more_than_once(store),
            total_s=total_s,
            model_s=model_seconds(store),
            charged_s=charged_seconds(stats, config.latency),
            slots=min(config.latency.max_num_seqs, config.workers * config.worker_concurrency),
            model_stats=stats,
        )
    raise AssertionError("unreachable")  # ExitStack does not swallow exceptions


def print_figures(config: LoadConfig, figures: LoadFigures) -> bool:
    """Print the report; True when every target is met."""
    statuses = ", ".join(f"{code}: {n}" for code, n in sorted(figures.answer_statuses.items()))
    stats = figures.model_stats
    completed = figures.jobs.get("succeeded", 0)
    print(
        f"events {config.events}, serve 1, workers {config.workers} x concurrency "
        f"{config.worker_concurrency}, model slots {config.latency.max_num_seqs}"
    )
    print(f"webhook answers      {statuses}")
    print(
        f"answer latency       p50 {figures.p50_ms:7.1f} ms   p99 {figures.p99_ms:7.1f} ms   "
        f"max {max(figures.answer_ms):7.1f} ms  (target p99 < {P99_TARGET_MS:.0f} ms)"
    )
    print(f"jobs                 {_describe_counts(figures.jobs)}")
    print(
        f"duplicates           {figures.duplicate_discussions} repeated fingerprints, "
        f"{figures.extra_summaries} extra summaries, {figures.mrs_reviewed_twice} MRs "
        f"reviewed twice (must all be 0)"
    )
    print(
        f"model                {stats.requests} chat requests, {stats.completion_tokens} output "
        f"tokens, peak {stats.peak_in_flight} in flight"
    )
    print(
        f"model time           {figures.model_s:7.1f} s measured by the bot "
        f"({figures.model_s / max(1, completed):.2f} s per review); the latency model's "
        f"formula gives {figures.charged_s:.1f} s"
    )
    print(f"total time           {figures.total_s:7.1f} s (burst start to last job settled)")
    print(f"ideal time           {figures.ideal_s:7.1f} s (model time / {figures.slots} slots)")
    print(
        f"ratio total / ideal  {figures.total_s / figures.ideal_s:7.2f}"
        if figures.ideal_s
        else "ratio total / ideal  n/a (no model time)"
    )
    met = (
        figures.p99_ms < P99_TARGET_MS
        and figures.duplicates == 0
        and completed == config.events
        and figures.answer_statuses.get(HTTP_ACCEPTED, 0) == config.events
    )
    print("targets met" if met else "TARGET MISSED")
    return met


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=DEFAULT_EVENTS)
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    parser.add_argument(
        "--concurrency", type=int, default=DEFAULT_WORKER_CONCURRENCY, help="jobs per worker"
    )
    parser.add_argument("--client-threads", type=int, default=DEFAULT_CLIENT_THREADS)
    parser.add_argument(
        "--database-url",
        default=os.environ.get(POSTGRES_URL_ENV, DEFAULT_SERVER_URL),
        help="PostgreSQL server (a throw-away database is created on it) or sqlite:///NEW_FILE",
    )
    args = parser.parse_args(argv)
    config = LoadConfig(
        database_url=args.database_url,
        events=args.events,
        workers=args.workers,
        worker_concurrency=args.concurrency,
        client_threads=args.client_threads,
    )
    # SIGTERM unwinds like Ctrl-C, so the processes and the database are cleaned up.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        figures = run_load(config)
    except KeyboardInterrupt:
        print("interrupted; every process was stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0 if print_figures(config, figures) else EXIT_TARGET_MISSED


if __name__ == "__main__":
    raise SystemExit(main())
