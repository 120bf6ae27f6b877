"""Benchmark of ``reviewbot run``: the bot's own time outside the model; prints figures.

Run: ``.venv/bin/python -m tests.bench.bench_run [--files 40 --lines 2000]``

An MR of ~2,000 changed lines in ~40 files (a real git repository made here), served by the fake
GitLab and the fake vLLM (latency model: TTFT 0.3 s + 20,000 prompt tokens/s, 10 ms per output
token, 8 slots), both in a child process so their CPU is not the bot's. The whole
``run_merge_request`` is timed, and so is the time spent inside the model client's calls; the
rest is the bot's own time (fetching, planning, posting, recording). Targets: under 5% of the
total and under 2 s.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from reviewbot.app import App
from reviewbot.config import Settings
from reviewbot.model import ChunkRequest, ChunkResult, LLMClient, ServerInfo
from reviewbot.mr import RunOptions, RunReport, run_merge_request
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.vllm_server import FakeVLLM, LatencyModel

LATENCY = LatencyModel(
    ttft_base_s=0.3, prefill_tokens_per_s=20000, decode_s_per_token=0.01, max_num_seqs=8
)
TOKEN = "glpat-bench-token"
PROJECT = "bench/app"
TARGET_SHARE = 0.05
TARGET_SECONDS = 2.0
RISKY_EVERY = 150  # one eval( in this many added lines
SEED = 11


class TimedLLM:
    """Delegates to a real client and adds up the wall time spent waiting for the model."""

    def __init__(self, inner: LLMClient) -> None:
        self.inner = inner
        self.seconds = 0.0

    def _timed(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - started

    def server_info(self) -> ServerInfo:
        return self._timed(self.inner.server_info)

    def count_prompt_tokens(self, messages: list[dict], tools: list[dict]) -> int | None:
        return self._timed(self.inner.count_prompt_tokens, messages, tools)

    def review_chunks(
        self,
        requests: Sequence[ChunkRequest],
        on_done: Callable[[ChunkResult], None] | None = None,
        *,
        concurrency: int | None = None,
    ) -> list[ChunkResult]:
        return self._timed(
            self.inner.review_chunks, requests, on_done=on_done, concurrency=concurrency
        )


class TimedApp(App):
    """The process's App, with its one model client timed (wall time inside model calls)."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.timed: TimedLLM | None = None

    def model(self) -> Any:
        if self.timed is None:
            self.timed = TimedLLM(super().model())
        return self.timed


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def make_repo(path: Path, files: int, lines: int) -> None:
    rng = random.Random(SEED)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "bench@example.com")
    git(path, "config", "user.name", "Bench")
    per_file = lines // files
    for index in range(files):
        (path / f"pkg{index % 5}").mkdir(exist_ok=True)
        body = "".join(f"def base_{index}_{i}(x):\n    return x + {i}\n\n" for i in range(60))
        (path / f"pkg{index % 5}" / f"mod{index}.py").write_text(body)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    git(path, "checkout", "-qb", "feature")
    added = 0
    for index in range(files):
        target = path / f"pkg{index % 5}" / f"mod{index}.py"
        text = target.read_text().splitlines(keepends=True)
        new_lines = []
        for i in range(per_file):
            added += 1
            if added % RISKY_EVERY == 0:
                new_lines.append(f"    value_{i} = eval(config_{rng.randint(0, 99)})\n")
            else:
                new_lines.append(f"    value_{i} = compute(item_{rng.randint(0, 999)}, {i})\n")
        insert_at = len(text) // 2
        text[insert_at:insert_at] = ["def added_block(item):\n", *new_lines, "\n"]
        target.write_text("".join(text))
    git(path, "add", "-A")
    git(path, "commit", "-qm", "feature")


def _serve(repo: str, pipe: Connection) -> None:
    """Child process: both fakes, until the parent says stop."""
    with FakeGitLab() as gitlab, FakeVLLM(latency=LATENCY) as vllm:
        gitlab.add_user("reviewbot", token=TOKEN, bot=True)
        gitlab.add_project(PROJECT, project_id=1)
        for iid in (1, 2):  # a cold run in a fresh process, then a warm one (as a worker runs)
            gitlab.add_mr_from_git(PROJECT, repo, "main", "feature", iid=iid, title="Bench MR")
        pipe.send((gitlab.url, vllm.base_url))
        pipe.recv()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--lines", type=int, default=2000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        make_repo(repo, args.files, args.lines)
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        process = context.Process(target=_serve, args=(str(repo), child))
        process.start()
        gitlab_url, llm_url = parent.recv()
        try:
            settings = Settings(
                gitlab_url=gitlab_url,
                gitlab_token=TOKEN,
                llm_base_url=llm_url,
                database_url=f"sqlite:///{tmp}/bench.db",
                min_severity="info",
                repo_cache_dir=f"{tmp}/repo-cache",
            )
            with TimedApp(settings) as app:  # one App per process, as a worker has
                cold = measure(app, 1)
                warm = measure(app, 2)
        finally:
            parent.send("stop")
            process.join()
    report(cold, "cold: first review in a fresh process (imports, tokenizer load, schema)")
    met = report(warm, "warm: next review in the same process (a worker's steady state)")
    return 0 if met else 1


@dataclass
class Measured:
    report: RunReport
    total: float
    model: float
    cpu: float
    phases: list[tuple[str, float]]
    started: float


def measure(app: TimedApp, iid: int) -> Measured:
    llm = app.model()
    model_before = llm.seconds
    phases: list[tuple[str, float]] = []
    cpu_started = time.process_time()
    started = time.perf_counter()
    result = run_merge_request(
        app,
        PROJECT,
        iid,
        RunOptions(),
        progress=lambda message: phases.append((message, time.perf_counter())),
    )
    total = time.perf_counter() - started
    phases.append(("done", time.perf_counter()))
    model = llm.seconds - model_before
    return Measured(result, total, model, time.process_time() - cpu_started, phases, started)


def report(measured: Measured, label: str) -> bool:
    run = measured.report
    coverage = run.review.plan.coverage
    print(f"== {label}")
    print(
        f"MR !{run.iid}: {coverage.files_total} files, {coverage.changed_lines_total} changed "
        f"lines, {len(run.review.plan.chunks)} chunks, {len(run.posted)} comments posted"
    )
    previous = measured.started
    for message, at in measured.phases:
        print(f"  {at - previous:6.2f} s until '{message}'")
        previous = at
    own = measured.total - measured.model
    print(f"total wall time      {measured.total:7.2f} s")
    print(f"inside the model     {measured.model:7.2f} s")
    print(
        f"bot's own time       {own:7.2f} s  = {own / measured.total:6.1%} of the total "
        f"(targets: < {TARGET_SHARE:.0%} and < {TARGET_SECONDS:.0f} s)"
    )
    print(f"bot process CPU time {measured.cpu:7.2f} s (includes client-side streaming)")
    met = own / measured.total < TARGET_SHARE and own < TARGET_SECONDS
    print("targets met" if met else "TARGET MISSED")
    return met


if __name__ == "__main__":
    raise SystemExit(main())
