"""How fast the offline commands start: ``reviewbot plan --git A...B`` on a small diff.

Run: ``.venv/bin/python -m tests.bench.bench_startup [--runs 5]``

Each run is a fresh process (imports, the tokenizer's vocabulary, git), timed from the outside;
it also prints which heavy libraries the command loaded (none of the model client's, GitLab's
or the database's should be). Target: under 1 s on the 2-core machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tests.mr_world import make_repo

TARGET_S = 1.0
HEAVY = ("httpx", "openai", "gitlab", "sqlalchemy", "starlette", "matplotlib", "tree_sitter")
PROBE = (
    "import sys, runpy; sys.argv = ['reviewbot', 'plan', '--git', 'main...feature', '--repo', "
    "sys.argv[1]]\ntry:\n    runpy.run_module('reviewbot.commands', run_name='__main__')\n"
    "except SystemExit:\n    pass\nprint(','.join(m for m in {heavy} if m in sys.modules), "
    "file=sys.stderr)"
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp) / "repo")
        command = [
            str(Path(sys.executable).parent / "reviewbot"),
            "plan",
            "--git",
            "main...feature",
            "--repo",
            str(repo),
        ]
        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            times.append(time.perf_counter() - started)
        probe = subprocess.run(
            [sys.executable, "-c", PROBE.format(heavy=HEAVY), str(repo)],
            check=True,
            capture_output=True,
            text=True,
        )
    loaded = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else ""
    median = statistics.median(times)
    print(f"reviewbot plan --git main...feature (2 files, 16 changed lines), {args.runs} runs")
    print(f"  median {median:.2f} s, min {min(times):.2f} s, max {max(times):.2f} s")
    print(f"  heavy libraries loaded: {loaded or 'none'}")
    met = median < TARGET_S
    print("target met (< 1 s)" if met else "TARGET MISSED (< 1 s)")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
