"""A simulated day, end to end (issue 38 part 2); prints figures.

Run: ``.venv/bin/python -m tests.bench.bench_day [--mrs 2000 --boxes 2 --workers 2
--profile h200 --compress 288 --seed 1 --database-url postgresql://postgres@127.0.0.1:5432/test]``

What runs: a throw-away PostgreSQL database (bench_load's); in a child process the fake GitLab
holding ``--mrs`` MRs (branches of one generated repository, their sizes drawn from a mix shaped
like ``capacity --workload default``: 55% small, 30% medium, 12% large, 3% huge) and ``--boxes``
fake vLLMs whose latency model is the ``--profile``'s (``reviewbot.ops.pool_simulation``
``BOX_PROFILES``: prefill tokens/s, fixed first-token cost, decode tokens/s alone, sequences),
every duration divided by ``--compress``; the real ``vllm-router`` in front of them (the flags
``capacity --replicas`` prints, consistent hashing on the MR); one ``reviewbot serve`` and
``--workers`` ``reviewbot worker`` processes on the database.

The day: ``--mrs`` MR-open webhooks at times drawn from :data:`HOURLY_SHARE` (a morning peak,
the busiest hour 12% of the day, as ``capacity``'s default mix assumes), a push to
``--push-share`` of them (an MR update webhook with a new head) and a ``/reviewbot review``
note on ``--command-share`` of them, a day of 86,400 simulated seconds played in
86,400 / ``--compress`` real seconds. With ``--chaos`` (the default): in the busiest hour a box
is stopped, a worker is killed (SIGKILL: its leases expire and its jobs are claimed again), and a
new worker is started.

Afterwards, from the fake GitLab's own record: every MR has exactly one summary note, no
fingerprint is posted twice on an MR, every job settled; and the GitLab requests the fake saw in
any 60 real seconds against the shared budget's limits. Per simulated hour: arrivals, queue depth
(the most queued jobs seen), time to first comment p50/p95, reviews completed, the bot's own CPU
seconds per review (serve and workers, from /proc), GitLab requests per review, and the model
pool's utilisation (model request seconds over box-sequence seconds). Then the same arrivals and
the same reviews (their calls as the store recorded them) through the simulation ``reviewbot
capacity --workload`` runs (``pool_simulation.simulate``), and the two p95s side by side.

Time. The model's time is compressed; the bot's own time (HTTP, database, git, Python) is not:
on this machine it is what it is, so multiplying it by ``--compress`` would charge a simulated
review for the compression. The simulated time to first comment of a review is therefore
``compress x (waiting for a worker + the union of its model requests) + the rest`` in real
seconds (``first_comment_s``); the raw ``compress x real`` is printed too.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import itertools
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from reviewbot.comments import MarkerKind, parse_marker
from reviewbot.gitlab_budget import (
    DEFAULT_API_REQUESTS_PER_MINUTE,
    DEFAULT_NOTES_CREATED_PER_MINUTE,
    kinds_of,
)
from reviewbot.ops.pool_simulation import BOX_PROFILES, BoxProfile, simulate
from reviewbot.ops.workload import percentile
from reviewbot.queue import JobQueue
from reviewbot.store import Store
from reviewbot.store.models import Job as JobRow
from reviewbot.store.models import LLMCall as LLMCallRow
from reviewbot.store.models import Review as ReviewRow
from reviewbot.store.workload_queries import workload_between
from reviewbot.webhook import WEBHOOK_PATH
from tests.bench.bench_load import (
    BOT_TOKEN,
    BOT_USERNAME,
    POSTGRES_URL_ENV,
    PROJECT,
    PROJECT_ID,
    SECRET,
    STATUS_POLL_S,
    ChildProcess,
    _reviewbot_executable,
    _wait_for_log,
    charged_seconds,
    open_event,
    reviewbot_environment,
    start_serve,
    throwaway_database,
)
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.vllm_server import FakeVLLM, LatencyModel
from tests.mr_world import git, init_repo
from tests.router_pool import ROUTER_BINARY, free_port, router_argv

DEFAULT_SERVER_URL = "postgresql://postgres@127.0.0.1:5432/test"
SECONDS_PER_DAY = 86_400.0
SECONDS_PER_HOUR = 3_600.0
SECONDS_PER_MINUTE = 60.0
HOURS = 24
# A working day: quiet nights, a morning peak (the busiest hour 12% of the day, as capacity's
# default mix assumes), a smaller afternoon one. Sums to 1.
HOURLY_SHARE = (
    0.005, 0.005, 0.005, 0.005, 0.005, 0.005, 0.005, 0.03,
    0.08, 0.12, 0.11, 0.09, 0.06, 0.08, 0.09, 0.08,
    0.07, 0.05, 0.03, 0.02, 0.015, 0.015, 0.0125, 0.0125,
)  # fmt: skip
BUSIEST_HOUR = HOURLY_SHARE.index(max(HOURLY_SHARE))
# MR sizes: (share, changed lines), shaped like capacity's default mix (55/30/12/3%).
SIZE_MIX = ((0.55, 40), (0.30, 300), (0.12, 1_200), (0.03, 3_000))
VARIANTS_PER_SIZE = 3
PUSH_LINES = 20
DEFAULT_MRS = 2_000
DEFAULT_BOXES = 2
DEFAULT_WORKERS = 2
DEFAULT_WORKER_CONCURRENCY = 8
DEFAULT_COMPRESS = 288.0  # a day in 5 minutes
DEFAULT_PUSH_SHARE = 0.1
DEFAULT_COMMAND_SHARE = 0.05
# A push or a command comes this long (simulated seconds) after the MR opened.
FOLLOW_UP_S = (600.0, 5_400.0)
# The chaos, in fractions of the busiest hour (simulated).
BOX_KILLED_AT = 0.25
WORKER_KILLED_AT = 0.5
WORKER_ADDED_AT = 0.75
LEASE_SECONDS = 10
WORKER_POLL_S = 0.05
SETTLE_LIMIT_S = 600.0
DELIVERY_THREADS = 8
HTTP_TIMEOUT_S = 30.0
DEVELOPER = 30  # GitLab's access level
MS_PER_S = 1_000.0
QUARTERS = 4  # of an hour, for the p95 around the chaos
ERROR_CHARS = 500
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PROFILE_NAMES = tuple(BOX_PROFILES)
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
LINE = "    value_{n} = compute({n}, scale={k})  # step {n} of the {name} change\n"


# ---------------------------------------------------------------------------------------------
# The day's plan (pure)


@dataclass(frozen=True)
class Event:
    at_s: float  # simulated seconds since midnight
    kind: str  # "open", "push", "command"
    iid: int


@dataclass(frozen=True)
class DayPlan:
    events: tuple[Event, ...]
    branch_of: dict[int, str]


def plan_day(
    mrs: int, push_share: float, command_share: float, seed: int, hours: range = range(HOURS)
) -> DayPlan:
    """Arrivals by :data:`HOURLY_SHARE`, sizes by :data:`SIZE_MIX`, follow-ups after opens;
    ``mrs`` is the day's count, and only the MRs opened in ``hours`` are kept."""
    rng = random.Random(seed)
    events: list[Event] = []
    branch_of: dict[int, str] = {}
    shares = [share for share, _lines in SIZE_MIX]
    for iid in range(1, mrs + 1):
        hour = rng.choices(range(HOURS), weights=HOURLY_SHARE)[0]
        opened = (hour + rng.random()) * SECONDS_PER_HOUR
        size = rng.choices(range(len(SIZE_MIX)), weights=shares)[0]
        variant = rng.randrange(VARIANTS_PER_SIZE)
        follow_ups = [
            (opened + rng.uniform(*FOLLOW_UP_S), kind, rng.random() < share)
            for kind, share in (("push", push_share), ("command", command_share))
        ]
        if hour not in hours:
            continue
        branch_of[iid] = f"size{size}-v{variant}"
        events.append(Event(opened, "open", iid))
        end = (hours.stop) * SECONDS_PER_HOUR
        events += [Event(at, kind, iid) for at, kind, chosen in follow_ups if chosen and at < end]
    return DayPlan(tuple(sorted(events, key=lambda event: event.at_s)), branch_of)


def scaled_latency(profile: BoxProfile, compress: float) -> LatencyModel:
    """The profile's box with every duration divided by ``compress`` (decode alone: the fake
    does not slow decode down with the number decoding)."""
    return LatencyModel(
        ttft_base_s=profile.fixed_first_token_s / compress,
        prefill_tokens_per_s=profile.prefill_tokens_per_s * compress,
        decode_s_per_token=1.0 / (profile.decode_tokens_per_s * compress),
        max_num_seqs=profile.max_num_seqs,
        prefill_in_turn=True,
    )


def union_s(intervals: Sequence[tuple[float, float]]) -> float:
    """The length of the union of ``intervals``."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def most_in_window(times: Sequence[float], window_s: float) -> int:
    """The most of ``times`` inside any window of ``window_s`` seconds."""
    ordered = sorted(times)
    most = 0
    for index, start in enumerate(ordered):
        most = max(most, bisect.bisect_right(ordered, start + window_s) - index)
    return most


# ---------------------------------------------------------------------------------------------
# The repository and the fakes' child process


def make_day_repo(path: Path) -> dict[str, str]:
    """A repository with one branch per size and variant (and its ``-push`` follow-up)."""
    init_repo(path)
    (path / "README.md").write_text("# service\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    heads = {}
    for size, (_share, lines) in enumerate(SIZE_MIX):
        for variant in range(VARIANTS_PER_SIZE):
            name = f"size{size}-v{variant}"
            git(path, "checkout", "-q", "main")
            git(path, "checkout", "-qb", name)
            body = "".join(LINE.format(n=n, k=variant, name=name) for n in range(lines))
            (path / f"{name.replace('-', '_')}.py").write_text(f"def run():\n{body}")
            git(path, "add", "-A")
            git(path, "commit", "-qm", name)
            heads[name] = git(path, "rev-parse", "HEAD")
            git(path, "checkout", "-qb", f"{name}-push")
            extra = "".join(LINE.format(n=n, k=variant, name="push") for n in range(PUSH_LINES))
            (path / f"{name.replace('-', '_')}_push.py").write_text(f"def more():\n{extra}")
            git(path, "add", "-A")
            git(path, "commit", "-qm", f"{name} push")
            heads[f"{name}-push"] = git(path, "rev-parse", "HEAD")
    git(path, "checkout", "-q", "main")
    return heads


def _serve_fakes(
    repo: str, branch_of: dict[int, str], boxes: int, latency: LatencyModel, pipe: Connection
) -> None:
    """Child process: the fake GitLab and the boxes until "stop"; answers the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with ExitStack() as stack:
        gitlab = stack.enter_context(FakeGitLab())
        fakes = [stack.enter_context(FakeVLLM(latency=latency)) for _ in range(boxes)]
        gitlab.add_user(BOT_USERNAME, token=BOT_TOKEN, bot=True)
        gitlab.add_user("alice", token="glpat-alice")
        gitlab.add_project(PROJECT, project_id=PROJECT_ID)
        gitlab.add_member(PROJECT, "alice", DEVELOPER)
        for iid, branch in branch_of.items():
            gitlab.add_mr_from_git(PROJECT, repo, "main", branch, iid=iid, title=f"Day MR {iid}")
        pipe.send((gitlab.url, [fake.root_url for fake in fakes]))
        while (command := pipe.recv()) != "stop":
            name, *args = command
            if name == "push":
                gitlab.push(PROJECT, args[0], args[1])
                pipe.send(None)
            elif name == "kill_box":
                fakes[args[0]].stop()
                pipe.send(None)
            elif name == "record":
                pipe.send(
                    {
                        "discussions": {iid: gitlab.discussions(PROJECT, iid) for iid in branch_of},
                        "requests": [(at, (method, path)) for at, method, path in gitlab.api_log],
                        "served": [fake.stats.requests for fake in fakes],
                        "charged_s": sum(charged_seconds(fake.stats, latency) for fake in fakes),
                    }
                )


class Fakes:
    def __init__(self, repo: Path, plan: DayPlan, boxes: int, latency: LatencyModel) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipe, child = context.Pipe()
        self._process = context.Process(
            target=_serve_fakes,
            args=(str(repo), plan.branch_of, boxes, latency, child),
            daemon=True,
        )
        self._process.start()
        self._lock = threading.Lock()
        self.gitlab_url, self.box_urls = self._pipe.recv()

    def ask(self, *command: Any) -> Any:
        with self._lock:
            self._pipe.send(command)
            return self._pipe.recv()

    def stop(self) -> None:
        if self._process.is_alive():
            with contextlib.suppress(BrokenPipeError, OSError):
                self._pipe.send("stop")
        self._process.join(HTTP_TIMEOUT_S)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()


def start_router(box_urls: Sequence[str], log_dir: Path, stack: ExitStack) -> str:
    if ROUTER_BINARY is None:
        raise RuntimeError("the vllm-router binary is not installed (pip install -e '.[dev]')")
    port = free_port()
    log = (log_dir / "router.log").open("wb")
    stack.callback(log.close)
    process = subprocess.Popen(
        router_argv(ROUTER_BINARY, box_urls, port, "consistent_hash"),
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def stop() -> None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    stack.callback(stop)
    root = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + HTTP_TIMEOUT_S * 2
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            ready = httpx.get(f"{root}/readiness", timeout=2).json()
            if ready.get("healthy_workers") == len(box_urls):
                return f"{root}/v1"
        time.sleep(STATUS_POLL_S)  # polling the router's own answer
    raise RuntimeError("vllm-router did not become ready")


# ---------------------------------------------------------------------------------------------
# The run


@dataclass(frozen=True)
class DayConfig:
    database_url: str
    mrs: int = DEFAULT_MRS
    boxes: int = DEFAULT_BOXES
    workers: int = DEFAULT_WORKERS
    worker_concurrency: int = DEFAULT_WORKER_CONCURRENCY
    profile: str = "h200"
    compress: float = DEFAULT_COMPRESS
    seed: int = 1
    hours: range = range(HOURS)  # the hours of the day played (the MRs opened in them)
    chaos: bool = True
    push_share: float = DEFAULT_PUSH_SHARE
    command_share: float = DEFAULT_COMMAND_SHARE
    notes_per_minute: int = DEFAULT_NOTES_CREATED_PER_MINUTE
    requests_per_minute: int = DEFAULT_API_REQUESTS_PER_MINUTE
    settle_limit_s: float = SETTLE_LIMIT_S


@dataclass
class CpuMeter:
    """CPU seconds of processes (and their reaped children), the last reading kept when one
    is gone (a killed worker's CPU still counts up to its last reading)."""

    last: dict[int, float] = field(default_factory=dict)

    def read(self, pids: Sequence[int]) -> float:
        for pid in pids:
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                ticks = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
                self.last[pid] = ticks / CLOCK_TICKS
        return sum(self.last.values())


@dataclass
class DayRecord:
    """What the run saw, in real seconds since the day started."""

    started_wall: float
    delivered: dict[tuple[str, int], float] = field(default_factory=dict)
    queued_samples: list[tuple[float, int, int]] = field(default_factory=list)  # t, queued, running
    cpu_samples: list[tuple[float, float]] = field(default_factory=list)
    chaos: list[tuple[float, str]] = field(default_factory=list)
    answers: Counter[int] = field(default_factory=Counter)


def _deliver(client: httpx.Client, url: str, event: str, payload: dict[str, Any]) -> int:
    headers = {
        "X-Gitlab-Token": SECRET,
        "X-Gitlab-Event": event,
        "X-Gitlab-Event-UUID": str(uuid.uuid4()),
        "Content-Type": "application/json",
    }
    body = json.dumps(payload).encode()
    return client.post(f"{url}{WEBHOOK_PATH}", content=body, headers=headers).status_code


FIXTURES = Path(__file__).parents[1] / "fixtures" / "webhooks"


def push_event(iid: int, old_sha: str, new_sha: str) -> dict[str, Any]:
    payload = open_event(iid, new_sha)
    payload["object_attributes"]["action"] = "update"
    payload["object_attributes"]["oldrev"] = old_sha
    return payload


def command_event(iid: int, head_sha: str, note_id: int) -> dict[str, Any]:
    payload = json.loads((FIXTURES / "note_merge_request_review.json").read_text())
    payload["project_id"] = PROJECT_ID
    payload["project"]["id"] = PROJECT_ID
    payload["project"]["path_with_namespace"] = PROJECT
    payload["user"]["username"] = "alice"
    payload["object_attributes"].update(id=note_id, project_id=PROJECT_ID)
    payload["merge_request"].update(
        iid=iid, target_project_id=PROJECT_ID, source_project_id=PROJECT_ID, target_branch="main"
    )
    payload["merge_request"]["last_commit"]["id"] = head_sha
    return payload


def run_day(config: DayConfig, log: Any = print) -> dict[str, Any]:
    """Play the day; every process is stopped and the database dropped afterwards."""
    profile = BOX_PROFILES[config.profile]
    plan = plan_day(config.mrs, config.push_share, config.command_share, config.seed, config.hours)
    day_start = config.hours.start * SECONDS_PER_HOUR
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="reviewbot-day-")))
        heads = make_day_repo(tmp / "repo")
        database_url = stack.enter_context(throwaway_database(config.database_url))
        log(f"starting the fakes: {len(plan.branch_of)} MRs, {config.boxes} {profile.name} boxes")
        fakes = Fakes(tmp / "repo", plan, config.boxes, scaled_latency(profile, config.compress))
        stack.callback(fakes.stop)
        llm_url = start_router(fakes.box_urls, tmp, stack)
        env = reviewbot_environment(database_url, fakes.gitlab_url, llm_url) | {
            "REVIEWBOT_LLM_TOTAL_CONCURRENCY": str(config.boxes * profile.max_num_seqs),
            "REVIEWBOT_CONCURRENCY": str(profile.max_num_seqs),
            "REVIEWBOT_GITLAB_BUDGET_NOTES_PER_MINUTE": str(config.notes_per_minute),
            "REVIEWBOT_GITLAB_BUDGET_REQUESTS_PER_MINUTE": str(config.requests_per_minute),
            # The built-in analyzers off: the day's generated files would give each MR up to
            # max_inline lint comments, and the day measures the model pool, not ruff.
            "REVIEWBOT_ANALYZERS": ",",
        }
        serve, serve_url = start_serve(env, tmp, stack)
        workers: list[ChildProcess] = []

        def add_worker() -> ChildProcess:
            args = [
                _reviewbot_executable(), "worker",
                "--concurrency", str(config.worker_concurrency),
                "--poll-seconds", str(WORKER_POLL_S),
                "--lease-seconds", str(LEASE_SECONDS),
            ]  # fmt: skip
            worker = ChildProcess(f"worker-{len(workers) + 1}", args, env, tmp)
            stack.callback(worker.stop)
            workers.append(worker)
            return worker

        for _ in range(config.workers):
            add_worker()
        for worker in workers:
            _wait_for_log(worker, ": started (concurrency")
        store = Store.from_url(database_url)
        stack.callback(store.close)
        queue = JobQueue(store)
        record = DayRecord(started_wall=time.time())
        cpu = CpuMeter()
        real = lambda sim_s: (sim_s - day_start) / config.compress  # noqa: E731
        chaos = []
        if config.chaos and BUSIEST_HOUR in config.hours:
            peak = BUSIEST_HOUR * SECONDS_PER_HOUR
            chaos = [
                (peak + WORKER_KILLED_AT * SECONDS_PER_HOUR, "kill a worker"),
                (peak + WORKER_ADDED_AT * SECONDS_PER_HOUR, "add a worker"),
            ]
            if config.boxes > 1:  # the only box is not killed
                chaos.insert(0, (peak + BOX_KILLED_AT * SECONDS_PER_HOUR, "kill a box"))
        stop_sampling = threading.Event()

        def sample() -> None:
            while not stop_sampling.wait(STATUS_POLL_S):
                now = time.time() - record.started_wall
                counts = queue.counts()
                record.queued_samples.append(
                    (now, counts.get("queued", 0), counts.get("running", 0))
                )
                pids = [serve.process.pid] + [worker.process.pid for worker in workers]
                record.cpu_samples.append((now, cpu.read(pids)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        played = real(config.hours.stop * SECONDS_PER_HOUR)
        log(f"playing hours {config.hours.start}-{config.hours.stop} in {played:.0f} s ...")
        with (
            httpx.Client(timeout=HTTP_TIMEOUT_S) as client,
            ThreadPoolExecutor(DELIVERY_THREADS, thread_name_prefix="deliver") as pool,
        ):
            pending = []
            for index, event in enumerate(plan.events):
                while chaos and chaos[0][0] <= event.at_s:
                    when, what = chaos.pop(0)
                    _sleep_until(record.started_wall + real(when))
                    _chaos(what, fakes, workers, add_worker, log)
                    record.chaos.append((time.time() - record.started_wall, what))
                _sleep_until(record.started_wall + real(event.at_s))
                branch = plan.branch_of[event.iid]
                if event.kind == "open":
                    payload, hook = open_event(event.iid, heads[branch]), "Merge Request Hook"
                    payload["object_attributes"]["source_branch"] = branch
                elif event.kind == "push":
                    fakes.ask("push", event.iid, f"{branch}-push")
                    payload = push_event(event.iid, heads[branch], heads[f"{branch}-push"])
                    payload["object_attributes"]["source_branch"] = branch
                    hook = "Merge Request Hook"
                else:
                    payload = command_event(event.iid, heads[branch], 10_000_000 + index)
                    hook = "Note Hook"
                record.delivered[(event.kind, event.iid)] = time.time() - record.started_wall
                pending.append(pool.submit(_deliver, client, serve_url, hook, payload))
            record.answers.update(result.result() for result in pending)
        log("day over; waiting for the queue to settle ...")
        counts = _settle(queue, config.settle_limit_s, log)
        stop_sampling.set()
        sampler.join()
        seen = fakes.ask("record")
        return _figures(config, profile, plan, record, counts, seen, store)
    raise AssertionError("unreachable")


def _sleep_until(wall: float) -> None:
    delay = wall - time.time()
    if delay > 0:
        time.sleep(delay)  # the day's clock: the next event's time


def _chaos(what: str, fakes: Fakes, workers: list[ChildProcess], add_worker: Any, log: Any) -> None:
    log(f"  chaos: {what}")
    if what == "kill a box":
        fakes.ask("kill_box", 0)
    elif what == "kill a worker":
        living = [worker for worker in workers if worker.alive()]
        if len(living) > 1:
            os.kill(living[0].process.pid, signal.SIGKILL)
    else:
        add_worker()


def _settle(queue: JobQueue, limit_s: float, log: Any) -> dict[str, int]:
    started = time.monotonic()
    while True:
        counts = queue.counts()
        if not counts.get("queued", 0) and not counts.get("running", 0):
            return counts
        if time.monotonic() - started > limit_s:
            log(f"gave up waiting after {limit_s:.0f} s: {counts}")
            return counts
        time.sleep(STATUS_POLL_S)


# ---------------------------------------------------------------------------------------------
# The figures


def _wall(moment: datetime) -> float:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _waiting_for_a_worker(record: DayRecord, low: float, high: float, slots: int) -> float:
    """Seconds of [low, high] in which every worker slot was busy (sampled): the part of a
    job's wait that is the pool's, not the bot's own (polling, fetching the MR)."""
    busy = 0.0
    samples = record.queued_samples
    for (at, _queued, running), (after, _q, _r) in itertools.pairwise(samples):
        if running >= slots and at < high and after > low:
            busy += min(after, high) - max(at, low)
    return busy


def count_exactly_once(discussions: dict[int, list[dict[str, Any]]]) -> dict[str, int]:
    """MRs without a summary, with more than one, and fingerprints posted twice on an MR."""
    missing = extra = repeated = 0
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
        missing += summaries == 0
        extra += max(0, summaries - 1)
        repeated += sum(count - 1 for count in fingerprints.values())
    return {"without_summary": missing, "extra_summaries": extra, "repeated_findings": repeated}


def _figures(
    config: DayConfig,
    profile: BoxProfile,
    plan: DayPlan,
    record: DayRecord,
    counts: dict[str, int],
    seen: dict[str, Any],
    store: Store,
) -> dict[str, Any]:
    start = record.started_wall
    compress = config.compress
    with store.engine.connect() as connection:
        reviews = connection.execute(
            select(
                ReviewRow.id,
                ReviewRow.mr_iid,
                ReviewRow.started_at,
                ReviewRow.finished_at,
                ReviewRow.status,
            ).where(ReviewRow.status == "succeeded")
        ).all()
        calls = connection.execute(
            select(LLMCallRow.review_id, LLMCallRow.started_at, LLMCallRow.latency_ms)
        ).all()
        jobs = connection.execute(
            select(JobRow.kind, JobRow.status, JobRow.mr_iid, JobRow.attempts, JobRow.error)
        ).all()
    first_review: dict[int, Any] = {}
    for review in sorted(reviews, key=lambda row: row.started_at):
        first_review.setdefault(review.mr_iid, review)
    intervals: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for call in calls:
        begun = _wall(call.started_at)
        intervals[call.review_id].append((begun, begun + (call.latency_ms or 0.0) / MS_PER_S))
    per_mr: dict[int, dict[str, float]] = {}
    slots = config.workers * config.worker_concurrency
    for iid in plan.branch_of:
        delivered = record.delivered.get(("open", iid))
        review = first_review.get(iid)
        if delivered is None or review is None or review.finished_at is None:
            continue
        first = _wall(review.finished_at) - start
        began = _wall(review.started_at) - start
        waiting = _waiting_for_a_worker(record, delivered, began, slots)
        model = union_s(
            [
                (a - start, min(b - start, first))
                for a, b in intervals[review.id]
                if a - start < first
            ]
        )
        own = (first - delivered) - waiting - model
        per_mr[iid] = {
            "delivered": delivered,
            "first": first,
            "sim_s": compress * (waiting + model) + own,
            "model_side_s": compress * (waiting + model),
            "raw_sim_s": compress * (first - delivered),
            "own_s": own,
        }
    hours = _hourly(config, record, seen, per_mr, intervals, profile)
    arrivals = {iid: at for (kind, iid), at in record.delivered.items() if kind == "open"}
    predicted = _predicted(config, profile, store, first_review, arrivals)
    simulated = [mr["sim_s"] for mr in per_mr.values()]
    model_side = [mr["model_side_s"] for mr in per_mr.values()]
    api_times = [at for at, _request in seen["requests"]]
    note_times = [at for at, (method, path) in seen["requests"] if len(kinds_of(method, path)) > 1]
    return {
        "config": config.__dict__,
        "profile": profile.describe(),
        "events": Counter(event.kind for event in plan.events),
        "answers": dict(record.answers),
        "jobs": dict(Counter(f"{job.kind} {job.status}" for job in jobs)),
        "queue": counts,
        "unsettled_jobs": [
            (job.mr_iid, job.kind, job.status, job.attempts, (job.error or "")[:ERROR_CHARS])
            for job in jobs
            if job.status not in ("succeeded", "superseded")
        ],
        "exactly_once": count_exactly_once(seen["discussions"]),
        "mrs_opened": len(plan.branch_of),
        "mrs_commented": len(per_mr),
        "chaos": record.chaos,
        "hours": hours,
        "simulated_p50_s": percentile(simulated, 50) if simulated else None,
        "simulated_p95_s": percentile(simulated, 95) if simulated else None,
        "raw_p95_s": percentile([m["raw_sim_s"] for m in per_mr.values()], 95) if per_mr else None,
        "own_p50_s": percentile([m["own_s"] for m in per_mr.values()], 50) if per_mr else None,
        "model_side_p50_s": percentile(model_side, 50) if model_side else None,
        "model_side_p95_s": percentile(model_side, 95) if model_side else None,
        "p95_by_quarter_hour": _by_quarter(config, per_mr),
        "per_mr": per_mr,
        "predicted_p50_s": predicted[0],
        "predicted_p95_s": predicted[1],
        "gitlab_peak_requests_per_minute": most_in_window(api_times, SECONDS_PER_MINUTE),
        "gitlab_peak_notes_per_minute": most_in_window(note_times, SECONDS_PER_MINUTE),
        "gitlab_requests": len(api_times),
        "served_per_box": seen["served"],
        "model_requests_recorded_s": sum(b - a for ivs in intervals.values() for a, b in ivs),
        "model_requests_charged_s": seen["charged_s"],
    }


def _by_quarter(config: DayConfig, per_mr: dict[int, dict[str, float]]) -> list[Any]:
    """(simulated hour, p95 of the MRs opened in each quarter of it) while MRs arrive."""
    quarter_real = SECONDS_PER_HOUR / QUARTERS / config.compress
    rows = []
    for index in range(len(config.hours) * QUARTERS):
        low, high = index * quarter_real, (index + 1) * quarter_real
        sims = [m["sim_s"] for m in per_mr.values() if low <= m["delivered"] < high]
        if sims:
            rows.append((config.hours.start + index / QUARTERS, len(sims), percentile(sims, 95)))
    return rows


def _hourly(
    config: DayConfig,
    record: DayRecord,
    seen: dict[str, Any],
    per_mr: dict[int, dict[str, float]],
    intervals: dict[int, list[tuple[float, float]]],
    profile: BoxProfile,
) -> list[dict[str, Any]]:
    hour_real = SECONDS_PER_HOUR / config.compress
    rows = []
    requests = [at - record.started_wall for at, _request in seen["requests"]]
    busy = [(a - record.started_wall, b - record.started_wall) for ivs in intervals.values()
            for a, b in ivs]  # fmt: skip
    for hour in config.hours:
        low = (hour - config.hours.start) * hour_real
        high = low + hour_real
        arrived = [m for m in per_mr.values() if low <= m["delivered"] < high]
        done = sum(1 for m in per_mr.values() if low <= m["first"] < high)
        queued = [n for at, n, _running in record.queued_samples if low <= at < high]
        cpu = [c for at, c in record.cpu_samples if low <= at < high]
        slot_s = config.boxes * profile.max_num_seqs * hour_real
        used = sum(max(0.0, min(b, high) - max(a, low)) for a, b in busy)
        gitlab = sum(1 for at in requests if low <= at < high)
        sims = [m["sim_s"] for m in arrived]
        rows.append(
            {
                "hour": hour,
                "arrived": len(arrived),
                "queue_max": max(queued, default=0),
                "p50_s": percentile(sims, 50) if sims else None,
                "p95_s": percentile(sims, 95) if sims else None,
                "completed": done,
                "cpu_s_per_review": (cpu[-1] - cpu[0]) / done if done and len(cpu) > 1 else None,
                "gitlab_per_review": gitlab / done if done else None,
                "utilisation": used / slot_s,
            }
        )
    return rows


def _predicted(
    config: DayConfig,
    profile: BoxProfile,
    store: Store,
    first_review: dict[int, Any],
    arrivals: dict[int, float],
) -> tuple[float | None, float | None]:
    """The same MRs at the same (simulated) times through ``capacity --workload``'s simulation,
    each with the calls the store recorded for it."""
    workload = workload_between(store.engine, datetime(2000, 1, 1, tzinfo=UTC),
                                datetime.now(UTC), "this run")  # fmt: skip
    shape_at = {_wall(shape.started_at): shape for shape in workload.reviews}
    timeline = []
    for iid, review in first_review.items():
        shape = shape_at.get(_wall(review.started_at))
        if shape is not None and iid in arrivals:
            timeline.append((arrivals[iid] * config.compress, shape))
    if not timeline:
        return None, None
    workers = config.workers * config.worker_concurrency
    result = simulate(sorted(timeline, key=lambda item: item[0]), profile, config.boxes, workers)
    return result.p(50), result.p(95)


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def print_day(figures: dict[str, Any]) -> bool:
    """The hourly table, the comparison, and the checks; True when nothing was lost or
    doubled and the GitLab budget held."""
    config = figures["config"]
    print(f"profile  {figures['profile']}")
    print(
        f"MRs {figures['mrs_opened']} of {config['mrs']} a day (hours {config['hours']}), "
        f"boxes {config['boxes']}, workers {config['workers']} x "
        f"{config['worker_concurrency']}, compress {config['compress']:g}, seed {config['seed']}"
    )
    print(f"events   {dict(figures['events'])}; webhook answers {figures['answers']}")
    print(f"jobs     {figures['jobs']}")
    for unsettled in figures["unsettled_jobs"]:
        print(f"  not succeeded: {unsettled}")
    print(f"chaos    {[(round(at, 1), what) for at, what in figures['chaos']]}")
    print(
        "hour | MRs | queue max | first comment p50 / p95 (sim s) | completed | bot CPU s/review"
        " | GitLab req/review | pool utilisation"
    )
    for row in figures["hours"]:
        print(
            f"{row['hour']:4d} | {row['arrived']:3d} | {row['queue_max']:9d} | "
            f"{_fmt(row['p50_s']):>6} / {_fmt(row['p95_s']):>6} | {row['completed']:9d} | "
            f"{_fmt(row['cpu_s_per_review'], '.2f'):>6} | {_fmt(row['gitlab_per_review']):>6} | "
            f"{row['utilisation']:.0%}"
        )
    print(
        f"time to first comment, simulated: p50 {_fmt(figures['simulated_p50_s'])} s, "
        f"p95 {_fmt(figures['simulated_p95_s'])} s (compress x real: p95 "
        f"{_fmt(figures['raw_p95_s'])} s; the bot's own time p50 "
        f"{_fmt(figures['own_p50_s'], '.2f')} s, not compressed)"
    )
    print(
        f"  of which the pool's (waiting for a worker, model requests; compressed): p50 "
        f"{_fmt(figures['model_side_p50_s'])} s, p95 {_fmt(figures['model_side_p95_s'])} s"
    )
    quarters = figures["p95_by_quarter_hour"]
    print("p95 by quarter hour (hour, MRs, p95 s): " + ", ".join(
        f"{hour:g} {count} {p95:.1f}" for hour, count, p95 in quarters))  # fmt: skip
    print(
        f"capacity --workload's simulation, same arrivals and reviews: p50 "
        f"{_fmt(figures['predicted_p50_s'])} s, p95 {_fmt(figures['predicted_p95_s'])} s"
    )
    simulated, predicted = figures["simulated_p95_s"], figures["predicted_p95_s"]
    if simulated and predicted:
        print(f"prediction vs simulated p95: {(predicted - simulated) / simulated:+.0%}")
    print(
        f"GitLab: {figures['gitlab_requests']} requests; peak in any 60 s: "
        f"{figures['gitlab_peak_requests_per_minute']} requests (limit "
        f"{config['requests_per_minute']}), {figures['gitlab_peak_notes_per_minute']} notes "
        f"(limit {config['notes_per_minute']})"
    )
    print(f"requests served per box: {figures['served_per_box']}")
    served = max(1, sum(figures["served_per_box"]))
    recorded, charged = figures["model_requests_recorded_s"], figures["model_requests_charged_s"]
    print(
        f"model requests: {recorded:.1f} s real as the bot recorded them, {charged:.1f} s by the "
        f"boxes' latency model: {(recorded - charged) / served * MS_PER_S:.0f} ms a request "
        f"of HTTP, router and CPU, x {config['compress']:g} in simulated time"
    )
    once = figures["exactly_once"]
    print(f"exactly once: {once} (all must be 0)")
    ok = (
        not any(once.values())
        and figures["mrs_commented"] == figures["mrs_opened"]
        and figures["gitlab_peak_requests_per_minute"] <= config["requests_per_minute"]
        and figures["gitlab_peak_notes_per_minute"] <= config["notes_per_minute"]
    )
    print("nothing lost, nothing doubled, the budget held" if ok else "CHECK FAILED")
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mrs", type=int, default=DEFAULT_MRS)
    parser.add_argument("--boxes", type=int, default=DEFAULT_BOXES)
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    parser.add_argument("--concurrency", type=int, default=DEFAULT_WORKER_CONCURRENCY)
    parser.add_argument("--profile", choices=PROFILE_NAMES, default="h200")
    parser.add_argument("--compress", type=float, default=DEFAULT_COMPRESS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-chaos", action="store_true")
    parser.add_argument(
        "--hours", default=f"0-{HOURS}", help="the hours played, FROM-TO (e.g. 9-10: the peak)"
    )
    parser.add_argument("--notes-per-minute", type=int, default=DEFAULT_NOTES_CREATED_PER_MINUTE)
    parser.add_argument("--requests-per-minute", type=int, default=DEFAULT_API_REQUESTS_PER_MINUTE)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--database-url", default=os.environ.get(POSTGRES_URL_ENV, DEFAULT_SERVER_URL)
    )
    args = parser.parse_args(argv)
    config = DayConfig(
        database_url=args.database_url,
        mrs=args.mrs,
        boxes=args.boxes,
        workers=args.workers,
        worker_concurrency=args.concurrency,
        profile=args.profile,
        compress=args.compress,
        seed=args.seed,
        hours=range(*(int(hour) for hour in args.hours.split("-", 1))),
        chaos=not args.no_chaos,
        notes_per_minute=args.notes_per_minute,
        requests_per_minute=args.requests_per_minute,
    )
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        figures = run_day(config)
    except KeyboardInterrupt:
        print("interrupted; every process was stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str))
    return 0 if print_day(figures) else EXIT_FAILED


if __name__ == "__main__":
    raise SystemExit(main())
