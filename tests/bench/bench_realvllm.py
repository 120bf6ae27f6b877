"""The same review against the fake vLLM and against the real CPU vLLM, side by side.

Run (the real server: one this benchmark starts from the venv of ``tests/realvllm/setup.sh``,
or one already running)::

    REVIEWBOT_TEST_VLLM_PYTHON=~/.cache/reviewbot/vllm-venv/bin/python \\
        .venv/bin/python -m tests.bench.bench_realvllm [--mrs 2]
    REVIEWBOT_TEST_VLLM_URL=http://127.0.0.1:8000 .venv/bin/python -m tests.bench.bench_realvllm

Each run reviews tests/mr_world's MR (``eval(``, ``== None``, a bare ``except:``) ``--mrs`` times
with ``reviewbot run`` on the fake GitLab, thinking off, once per server, and prints per server:
model calls, prompt, cached and completion tokens, findings posted, and the wall time. The
scripted model (tests/realvllm/script.py) follows the fake's rule, so the findings must match;
tokens match where the fake counts as vLLM does (tests/realvllm/test_fake_and_real.py), and the
cached tokens show the one difference left by design: vLLM caches whole 640-token blocks for this
hybrid model on CPU, the fake 16-token blocks.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from reviewbot.app import App
from reviewbot.config import Settings
from reviewbot.mr import RunOptions, run_merge_request
from reviewbot.store import Store
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.vllm_server import FakeVLLM
from tests.mr_world import BOT_TOKEN, PROJECT, make_repo
from tests.realvllm.server import SERVED_MODEL, RealVLLM, build_model
from tests.realvllm.tier import PYTHON_ENV, URL_ENV, model_dir

FAST_NOTES_PER_MINUTE = 60_000


@dataclass
class Figures:
    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    findings: int = 0
    seconds: float = 0.0


@contextlib.contextmanager
def real_server(work: Path) -> Iterator[str]:
    """The real server's /v1 URL: REVIEWBOT_TEST_VLLM_URL, or one started here."""
    url = os.environ.get(URL_ENV)
    if url:
        yield url.rstrip("/").removesuffix("/v1") + "/v1"
        return
    python = os.environ.get(PYTHON_ENV)
    if not python:
        raise SystemExit(f"set {PYTHON_ENV} or {URL_ENV} (tests/realvllm/setup.sh prints it)")
    server = RealVLLM(python, build_model(python, model_dir()), work / "vllm.log").start()
    try:
        yield server.base_url
    finally:
        server.stop()


def review(base_url: str, work: Path, mrs: int) -> Figures:
    figures = Figures()
    database = f"sqlite:///{work / 'reviewbot.db'}"
    started = time.monotonic()
    for number in range(mrs):
        repo = make_repo(work / f"repo-{number}")
        with FakeGitLab() as gitlab:
            gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
            gitlab.add_project(PROJECT, project_id=7)
            gitlab.add_mr_from_git(PROJECT, repo, "main", "feature", iid=number + 1, title="MR")
            settings = Settings(
                gitlab_url=gitlab.url,
                gitlab_token=BOT_TOKEN,
                llm_base_url=base_url,
                database_url=database,
                repo_cache_dir=str(work / "repo-cache"),
                min_severity="info",
                enable_thinking=False,
                gitlab_notes_per_minute=FAST_NOTES_PER_MINUTE,
            )
            with App(settings) as app:
                report = run_merge_request(app, PROJECT, number + 1, RunOptions())
            figures.findings += sum(
                1
                for d in gitlab.discussions(PROJECT, number + 1)
                if d["notes"][0]["type"] == "DiffNote"
            )
        for call in Store.from_url(database).llm_calls(report.review_id):
            figures.calls += 1
            figures.prompt_tokens += call["prompt_tokens"]
            figures.cached_tokens += call["cached_tokens"] or 0
            figures.completion_tokens += call["completion_tokens"]
    figures.seconds = time.monotonic() - started
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mrs", type=int, default=2, help="MRs reviewed per server")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        (work / "fake").mkdir()
        (work / "real").mkdir()
        with FakeVLLM(model=SERVED_MODEL) as fake:
            fake_figures = review(fake.base_url, work / "fake", args.mrs)
        with real_server(work) as url:
            real_figures = review(url, work / "real", args.mrs)
    print(f"{args.mrs} review(s) of tests/mr_world's MR, thinking off")
    print(f"{'':>20} {'fake vLLM':>12} {'real vLLM':>12}")
    for name in ("calls", "prompt_tokens", "cached_tokens", "completion_tokens", "findings"):
        print(f"{name:>20} {getattr(fake_figures, name):>12} {getattr(real_figures, name):>12}")
    print(f"{'seconds':>20} {fake_figures.seconds:>12.1f} {real_figures.seconds:>12.1f}")


if __name__ == "__main__":
    main()
