"""What voting buys, and what it costs: ``eval --compare`` of 1, 3 and 5 passes (issue 37).

Run: ``.venv/bin/python -m tests.bench.bench_effort [RECALL FALSE_POSITIVE_RATE]``

The 26 items of ``tests/fixtures/eval/context`` are reviewed by ``reviewbot eval --compare``
under the configurations of ``tests/fixtures/eval/configs/effort/`` (one pass; three passes kept
at 1 vote, the union; three at 2, the deep default; five at 3), against one fake vLLM with its
needs-evidence rule and the seeded per-pass noise model of ``tests/fakes/pass_noise.py``: each
pass reports each bug it can see with probability RECALL (default ``DEFAULT_RECALL``) and adds a
false positive on each clean added line with probability FALSE_POSITIVE_RATE (default
``DEFAULT_FALSE_POSITIVE_RATE``), drawn per request ``seed``, so each pass draws on its own and
the figures are the same on every run. Bugs whose evidence is in another file (``cross-*``)
stay missed: the configurations have the repository tools off.

Prints ``eval --compare``'s own tables: quality (TP, FP, FN, precision, recall, F1, what the
vote kept off and how much of it was true) and cost per item (model calls, prompt, cached and
output tokens, wall seconds) side by side, the pairs with their intervals. Figures only: these
are the fake's, not a real model's (docs/effort.md says how to measure yours).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner

from reviewbot.commands import main
from tests.fakes.pass_noise import PassNoise
from tests.fakes.vllm_server import FakeVLLM

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "tests/fixtures/eval/context"
CONFIGS = ROOT / "tests/fixtures/eval/configs/effort"
NAMES = ("passes-1", "passes-3-k1", "passes-3-k2", "passes-5-k3")
DEFAULT_RECALL = 0.7
DEFAULT_FALSE_POSITIVE_RATE = 0.3
NOISE_SEED = 37


def compare_efforts(noise: PassNoise, *extra: str) -> tuple[int, str]:
    """``eval --compare`` of the effort configurations against a noisy fake: exit code, output."""
    configs = [str(CONFIGS / f"{name}.toml") for name in NAMES]
    with (
        tempfile.TemporaryDirectory() as folder,
        FakeVLLM(needs_evidence=True, noise=noise) as server,
    ):
        env = {
            "REVIEWBOT_LLM_BASE_URL": server.base_url,
            "REVIEWBOT_DATABASE_URL": f"sqlite:///{Path(folder) / 'db.sqlite'}",
            "REVIEWBOT_CONFIG": "",
            "COLUMNS": "160",
        }
        args = ["eval", str(DATASET), "--compare", *configs, *extra]
        result = CliRunner().invoke(main, args, env=env)
    return result.exit_code, result.stdout


def main_bench(argv: list[str]) -> int:
    recall = float(argv[0]) if argv else DEFAULT_RECALL
    rate = float(argv[1]) if len(argv) > 1 else DEFAULT_FALSE_POSITIVE_RATE
    noise = PassNoise(recall=recall, false_positive_rate=rate, seed=NOISE_SEED)
    print(f"per-pass recall {recall}, false-positive rate {rate} per clean added line")
    code, output = compare_efforts(noise)
    print(output)
    return code


if __name__ == "__main__":
    sys.exit(main_bench(sys.argv[1:]))
