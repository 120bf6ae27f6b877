"""Benchmark of where the repository comes from: time outside the model and requests to GitLab
for a first review and a no-op re-run of a large MR, files read through the API (before) and
through the host's repository cache (after); prints figures.

Run: ``.venv/bin/python -m tests.bench.bench_repo [--files 356 --lines 3]``

A real git repository of ``--files`` Python files, each changed by ``--lines`` lines, is one MR
on the fake GitLab (which also serves git over HTTP through ``git http-backend``), reviewed
with the fake vLLM without latency; both fakes run in a child process so their CPU is not the
bot's. Each configuration has its own MR, database and cache folder:

* ``api``: ``repo_cache_max_bytes = 0``, every head file one raw-file request (plus the listing
  of each folder a read touches, to tell a symlink or a submodule from a file);
* ``cache``: one ``git fetch`` per commit the run reads (the head, and the target for the
  policy file), then ``git cat-file``; the re-run at the same head fetches nothing.

The re-run reviews the same head again: no model call (incremental reviews reuse the result).
"""

from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from reviewbot.config import Settings
from reviewbot.mr import RunOptions, run_merge_request
from tests.bench.bench_run import TimedApp
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.vllm_server import FakeVLLM

TOKEN = "glpat-bench-repo-token"
PROJECT = "bench/repo"
FOLDERS = 12
CONFIGURATIONS = {"api": 1, "cache": 2}  # configuration -> its MR's iid
WARM_UP_IID = 3  # reviewed first, not reported: imports and the tokenizer load once
DEFAULT_FILES = 356
DEFAULT_LINES = 3


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def make_repo(path: Path, files: int, lines: int) -> None:
    """``files`` Python files in a few folders, each with ``lines`` lines changed on
    ``feature`` inside a function (so every hunk has an enclosing scope to show)."""
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "bench@example.com")
    git(path, "config", "user.name", "Bench")
    targets = []
    for index in range(files):
        folder = path / f"pkg{index % FOLDERS}"
        folder.mkdir(exist_ok=True)
        target = folder / f"mod{index}.py"
        body = "".join(
            f"def f_{index}_{i}(x):\n    y = x + {i}\n    return y\n\n" for i in range(8)
        )
        target.write_text(body)
        targets.append(target)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    git(path, "checkout", "-qb", "feature")
    for index, target in enumerate(targets):
        text = target.read_text().splitlines(keepends=True)
        added = [f"    z_{index}_{i} = compute(y, {i})\n" for i in range(lines)]
        text[6:6] = added  # inside f_{index}_1
        target.write_text("".join(text))
    git(path, "add", "-A")
    git(path, "commit", "-qm", "feature")


def _serve(repo: str, pipe: Connection) -> None:
    """Child process: both fakes; answers "counts" with the fake GitLab's figures."""
    with FakeGitLab() as gitlab, FakeVLLM() as vllm:
        gitlab.add_user("reviewbot", token=TOKEN, bot=True)
        gitlab.add_project(PROJECT, project_id=1)
        for iid in (*CONFIGURATIONS.values(), WARM_UP_IID):
            gitlab.add_mr_from_git(PROJECT, repo, "main", "feature", iid=iid, title="Bench MR")
        pipe.send((gitlab.url, vllm.base_url))
        while (asked := pipe.recv()) != "stop":
            assert asked == "counts"
            paths = [path for _, path in gitlab.requests]
            pipe.send(
                {
                    "requests": len(paths),
                    "raw": sum("/repository/files/" in path for path in paths),
                    "tree": sum(path.endswith("/repository/tree") for path in paths),
                    "git": len(gitlab.git_requests),
                    "fetches": gitlab.git_fetches(),
                }
            )


@dataclass
class Figures:
    configuration: str
    run: str  # "first review" or "no-op re-run"
    total_s: float
    model_s: float
    counts: dict[str, int]
    model_calls: int
    warnings: list[str]

    @property
    def outside_s(self) -> float:
        return self.total_s - self.model_s


def _counts(pipe: Connection) -> dict[str, int]:
    pipe.send("counts")
    return dict(pipe.recv())


def _measure(
    settings: Settings, iid: int, configuration: str, run: str, pipe: Connection
) -> Figures:
    before = _counts(pipe)
    with TimedApp(settings) as app:
        started = time.perf_counter()
        report = run_merge_request(app, PROJECT, iid, RunOptions())
        total = time.perf_counter() - started
        model = app.timed.seconds if app.timed is not None else 0.0
    after = _counts(pipe)
    counts = {key: after[key] - before[key] for key in after}
    calls = len(report.review.calls)
    return Figures(configuration, run, total, model, counts, calls, list(report.warnings))


def _settings(tmp: str, gitlab_url: str, llm_url: str, configuration: str) -> Settings:
    cache_on = configuration == "cache"
    return Settings(
        gitlab_url=gitlab_url,
        gitlab_token=TOKEN,
        llm_base_url=llm_url,
        database_url=f"sqlite:///{tmp}/{configuration}.db",
        min_severity="info",
        repo_cache_dir=f"{tmp}/cache-{configuration}",
        repo_cache_max_bytes=Settings().repo_cache_max_bytes if cache_on else 0,
    )


def measure_all(files: int, lines: int) -> list[Figures]:
    """Both configurations, each a first review and a no-op re-run."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        make_repo(repo, files, lines)
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        process = context.Process(target=_serve, args=(str(repo), child))
        process.start()
        gitlab_url, llm_url = parent.recv()
        figures = []
        try:
            _measure(_settings(tmp, gitlab_url, llm_url, "warm-up"), WARM_UP_IID, "", "", parent)
            for configuration, iid in CONFIGURATIONS.items():
                settings = _settings(tmp, gitlab_url, llm_url, configuration)
                for run in ("first review", "no-op re-run"):
                    figures.append(_measure(settings, iid, configuration, run, parent))
        finally:
            parent.send("stop")
            process.join()
        return figures


def report(figures: Sequence[Figures], files: int) -> None:
    print(f"== an MR of {files} changed files; fake vLLM without latency; both fakes in a child")
    header = (
        f"{'source':<6} {'run':<13} {'outside model':>13} {'total':>7} {'model calls':>11} "
        f"{'GitLab requests':>15} {'raw files':>9} {'tree':>5} {'git http':>8} {'fetches':>7}"
    )
    print(header)
    for row in figures:
        c = row.counts
        print(
            f"{row.configuration:<6} {row.run:<13} {row.outside_s:>11.2f} s {row.total_s:>5.2f} s "
            f"{row.model_calls:>11} {c['requests']:>15} {c['raw']:>9} {c['tree']:>5} "
            f"{c['git']:>8} {c['fetches']:>7}"
        )
        for warning in row.warnings:
            print(f"       warning: {warning}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=DEFAULT_FILES)
    parser.add_argument("--lines", type=int, default=DEFAULT_LINES)
    args = parser.parse_args(argv)
    figures = measure_all(args.files, args.lines)
    report(figures, args.files)
    return 0


def by_run(figures: Sequence[Figures]) -> dict[tuple[str, str], Any]:
    return {(row.configuration, row.run): row for row in figures}


if __name__ == "__main__":
    raise SystemExit(main())
