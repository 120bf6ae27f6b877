"""Measure a running vLLM with reviewbot's own commands (issue 23).

    python3 deploy/h200-check/measure.py OUT_FILE STEP [STEP ...] [--base URL] [--log FILE]
        [--sizes 4096,16384,61000] [--concurrency 1,8,32] [--model-name NAME]

Steps, each run with the product's code (``python3 -m reviewbot.commands ...``) and written to
one JSON document ``OUT_FILE`` (the device returns at most 8 files):

- ``warmup``: deploy/vllm/warmup.sh, as the unit's ExecStartPost runs it;
- ``doctor``: ``reviewbot doctor --model-only --json`` (must pass every check);
- ``capacity``: ``reviewbot capacity --json`` for the H200 with the profile's settings, for the
  served model's name and its bf16 twin, next to what vLLM's log says it did (weights, KV cache
  memory and tokens, sequences of max-model-len), read from ``--log``;
- ``load``: ``reviewbot loadtest --synthetic N --concurrency C --json`` for every size and
  concurrency (closed loop; one request per slot, at least 4: a burst, as capacity estimates
  it), with /metrics before and after;
- ``review``: ``reviewbot review --diff`` of a large diff (the repository's own modules as new
  files, about 40K tokens), timed;
- ``burst``: 16, then 32 ``reviewbot review --diff`` processes at once, each on a different diff
  of 2,000-6,000 changed lines (burst.py), with each review's wall time, first and last chunk
  answer, prompt and cached tokens (issue 38 part 3).

Each step's exit status, wall time and output are kept, and a failing step does not stop the
next one. Also runs on this CPU machine against the real-vLLM tier's server (small sizes), which
is how the kit was tested before the GPU run.

Owns: running those commands and collecting their figures. Must not: judge them (docs do).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent.parent
PROFILE = REPOSITORY / "deploy" / "vllm" / "h200-qwen3.5-35b-a3b-fp8.env"
WARMUP = REPOSITORY / "deploy" / "vllm" / "warmup.sh"
STEPS = ("warmup", "doctor", "capacity", "load", "review", "burst")
BURST_SIZES = (16, 32)
HEALTH_WAIT_S = 900
HEALTH_POLL_S = 5
REQUESTS_PER_SLOT = 1  # one burst per concurrency: the queue positions capacity estimates
MIN_REQUESTS = 4
REVIEW_DIFF_CHARS = 160_000  # about 40K tokens of Python
OUTPUT_TAIL_CHARS = 4000
# What vLLM's log says about memory (the lines of vLLM 0.26's gpu worker and kv cache utils).
LOG_FACTS = {
    "weights_gib": r"Model loading took ([\d.]+) GiB",
    "kv_cache_gib": r"Available KV cache memory: ([\d.]+) GiB",
    "kv_cache_tokens": r"GPU KV cache size: ([\d,]+) tokens",
    "max_concurrency": r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x",
    "ready_s": r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s",
}


def profile() -> dict[str, str]:
    values = {}
    for line in PROFILE.read_text().splitlines():
        if line.strip() and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def reviewbot(*args: str, env: dict[str, str] | None = None, timeout: float = 900) -> dict:
    """One reviewbot command: exit status, seconds, stdout (JSON when it is), stderr's tail."""
    started = time.monotonic()
    argv = [sys.executable, "-m", "reviewbot.commands", *args]
    environment = {**os.environ, **(env or {})}
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [environment.get("PYTHONPATH"), str(REPOSITORY)])
    )
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, env=environment, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as expired:
        return {"argv": args, "exit": None, "seconds": timeout, "error": f"timed out: {expired}"}
    result: dict[str, Any] = {
        "argv": args,
        "exit": done.returncode,
        "seconds": round(time.monotonic() - started, 2),
        "stderr": done.stderr[-OUTPUT_TAIL_CHARS:],
    }
    try:
        result["json"] = json.loads(done.stdout)
    except json.JSONDecodeError:
        result["stdout"] = done.stdout[-OUTPUT_TAIL_CHARS:]
    return result


def wait_healthy(root: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < HEALTH_WAIT_S:
        try:
            with urllib.request.urlopen(f"{root}/health", timeout=10) as answer:
                if answer.status == 200:
                    return time.monotonic() - started
        except OSError:
            pass
        time.sleep(HEALTH_POLL_S)
    raise SystemExit(f"{root} not healthy after {HEALTH_WAIT_S} s")


def metrics(root: str) -> dict[str, float]:
    wanted = (
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:request_success_total",
        "vllm:num_gpu_blocks",
        "vllm:cache_config_info",
    )
    with urllib.request.urlopen(f"{root}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    totals: dict[str, float] = {}
    for line in text.splitlines():
        name = line.split("{")[0].split(" ")[0]
        if name in wanted and not line.startswith("#"):
            totals[name] = totals.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        if name == "vllm:cache_config_info":
            blocks = re.search(r'num_gpu_blocks="(\d+)"', line)
            size = re.search(r'block_size="(\d+)"', line)
            if blocks and size:
                totals["gpu_blocks"] = float(blocks.group(1))
                totals["block_size"] = float(size.group(1))
    return totals


def log_facts(log: Path | None) -> dict[str, float]:
    if log is None or not log.exists():
        return {}
    text = log.read_text(errors="replace")
    facts = {}
    for name, pattern in LOG_FACTS.items():
        found = re.findall(pattern, text)
        if found:
            facts[name] = float(found[-1].replace(",", ""))
    return facts


def step_warmup(args: argparse.Namespace) -> dict:
    env = {**os.environ, "WARMUP_BASE_URL": args.root, "PROFILE_MODEL": args.model_name}
    started = time.monotonic()
    done = subprocess.run(["sh", str(WARMUP)], capture_output=True, text=True, env=env, check=False)
    return {"exit": done.returncode, "seconds": round(time.monotonic() - started, 2),
            "output": (done.stdout + done.stderr)[-OUTPUT_TAIL_CHARS:]}  # fmt: skip


def step_doctor(args: argparse.Namespace) -> dict:
    return reviewbot("doctor", "--model-only", "--json", env=args.env)


def step_capacity(args: argparse.Namespace) -> dict:
    p = profile()
    settings = [
        "--gpu", p["PROFILE_GPU"],
        "--gpus", p["PROFILE_GPUS"],
        "--max-model-len", p["PROFILE_MAX_MODEL_LEN"],
        "--max-num-seqs", p["PROFILE_MAX_NUM_SEQS"],
        "--max-num-batched-tokens", p["PROFILE_MAX_NUM_BATCHED_TOKENS"],
        "--gpu-memory-utilization", p["PROFILE_GPU_MEMORY_UTILIZATION"],
        "--kv-cache-dtype", p["PROFILE_KV_CACHE_DTYPE"],
        "--json",
    ]  # fmt: skip
    twin = args.model_name.removesuffix("-FP8")
    return {
        "vllm_log": log_facts(args.log),
        "metrics": metrics(args.root),
        "plans": {
            name: reviewbot("capacity", "--model", name, *settings)
            for name in dict.fromkeys([args.model_name, twin])
        },
    }


def step_load(args: argparse.Namespace) -> dict:
    runs = []
    for size in args.sizes:
        for concurrency in args.concurrency:
            requests = max(MIN_REQUESTS, REQUESTS_PER_SLOT * concurrency)
            before = metrics(args.root)
            run = reviewbot(
                "loadtest", "--synthetic", str(size), "--concurrency", str(concurrency),
                "--requests", str(requests), "--base-url", args.base, "--json", env=args.env,
            )  # fmt: skip
            run["metrics_before"], run["metrics_after"] = before, metrics(args.root)
            run.update(size=size, concurrency=concurrency, requests=requests)
            runs.append(run)
            args.keep("load", {"runs": runs})  # a run cut short keeps the runs before it
            print(f"load {size} x{concurrency}: exit {run['exit']} in {run['seconds']} s",
                  file=sys.stderr, flush=True)  # fmt: skip
    return {"runs": runs}


def large_diff(path: Path) -> Path:
    """The repository's modules as new files, up to REVIEW_DIFF_CHARS."""
    parts, size = [], 0
    for module in sorted((REPOSITORY / "reviewbot").rglob("*.py")):
        lines = module.read_text().splitlines()
        if not lines:
            continue
        name = module.relative_to(REPOSITORY).as_posix()
        body = "".join(f"+{line}\n" for line in lines)
        parts.append(
            f"diff --git a/{name} b/{name}\nnew file mode 100644\n--- /dev/null\n+++ b/{name}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n{body}"
        )
        size += len(body)
        if size >= REVIEW_DIFF_CHARS:
            break
    path.write_text("".join(parts))
    return path


def step_review(args: argparse.Namespace) -> dict:
    diff = large_diff(Path("/tmp/h200-check-review.diff"))
    run = reviewbot("review", "--diff", str(diff), "--base-url", args.base, "--json", env=args.env)
    run["diff_bytes"] = diff.stat().st_size
    return run


def step_burst(args: argparse.Namespace) -> dict:
    import burst  # this script's folder is first on sys.path

    results = {}
    for size in args.bursts:
        paths = burst.diffs(size, Path(f"/tmp/h200-burst-{size}"))
        results[str(size)] = burst.run_burst(paths, args.base, {**os.environ, **args.env})
        print(f"burst {size}: {results[str(size)]['makespan_s']} s", file=sys.stderr, flush=True)
    return results


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("steps", nargs="+", choices=STEPS)
    parser.add_argument("--base", default="http://127.0.0.1:8000/v1")
    parser.add_argument("--log", type=Path)
    parser.add_argument("--model-name", default=profile()["PROFILE_MODEL"])
    parser.add_argument("--sizes", default="4096,16384,61000")
    parser.add_argument("--concurrency", default=f"1,8,{profile()['PROFILE_MAX_NUM_SEQS']}")
    parser.add_argument("--bursts", default=",".join(map(str, BURST_SIZES)))
    args = parser.parse_args(argv)
    args.sizes = [int(v) for v in args.sizes.split(",")]
    args.concurrency = [int(v) for v in args.concurrency.split(",")]
    args.bursts = [int(v) for v in args.bursts.split(",")]
    args.root = args.base.removesuffix("/v1")
    args.env = {"REVIEWBOT_LLM_BASE_URL": args.base, "REVIEWBOT_DATABASE_URL": "sqlite:///"
                + "/tmp/h200-check.db"}  # fmt: skip
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    results: dict[str, Any] = {"healthy_after_s": round(wait_healthy(args.root), 1)}

    def keep(step: str, value: Any) -> None:
        results[step] = value
        args.out.write_text(json.dumps(results, indent=1))

    args.keep = keep
    for step in args.steps:
        started = time.monotonic()
        print(f"step {step}", file=sys.stderr, flush=True)
        results[step] = globals()[f"step_{step}"](args)
        results[f"{step}_seconds"] = round(time.monotonic() - started, 1)
        args.out.write_text(json.dumps(results, indent=1))  # kept even if a later step hangs
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
