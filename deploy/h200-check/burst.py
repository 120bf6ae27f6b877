"""Concurrent reviews against a running vLLM: the model side of a busy hour (issue 38 part 3).

``measure.py burst`` runs, for each burst size (16, then 32), that many ``reviewbot review
--diff`` processes at once, each on a different diff of 2,000 to 6,000 changed lines made of
this repository's own files as new files (real code, no git needed on the device). A file that
holds the scripted model's engine-crash marker (``tests/realvllm/script.py``) is never put in a
diff: the scripted model would kill the engine on it.

Per review: the process's wall time, the time from its start to its first and to its last
chunk answer (from the calls' ``started_at`` and ``latency_ms`` in ``review --json``), prompt
and cached tokens, calls, and whether every line was reviewed. Per burst: p50/p95 of those,
and reviews per hour (the burst's size over its makespan).

Owns: the diffs, running the burst, its figures. Must not: judge them (docs/capacity.md does).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent.parent
ENGINE_CRASH_MARKER = "scripted-engine-crash"
MIN_LINES, MAX_LINES = 2_000, 6_000
SOURCES = ("reviewbot/**/*.py", "tests/**/*.py", "docs/*.md", "deploy/**/*.py")
SEED = 38
REVIEW_TIMEOUT_S = 540
SECONDS_PER_HOUR = 3600
PERCENTILES = (50, 95)
POLL_S = 0.2


def candidate_files() -> list[tuple[str, list[str]]]:
    """(path, lines) of the repository's files that may go into a diff."""
    found = []
    for pattern in SOURCES:
        for path in sorted(REPOSITORY.glob(pattern)):
            text = path.read_text(encoding="utf-8", errors="replace")
            if ENGINE_CRASH_MARKER in text or not text.strip():
                continue
            found.append((path.relative_to(REPOSITORY).as_posix(), text.splitlines()))
    return found


def diffs(count: int, folder: Path) -> list[Path]:
    """``count`` diffs, each of a different run of files, sizes spread over 2,000-6,000 lines."""
    files = candidate_files()
    random.Random(SEED).shuffle(files)
    folder.mkdir(parents=True, exist_ok=True)
    made, position = [], 0
    for number in range(count):
        wanted = MIN_LINES + (MAX_LINES - MIN_LINES) * number // max(count - 1, 1)
        parts, lines = [], 0
        while lines < wanted:
            name, body = files[position % len(files)]
            position += 1
            body = body[: MAX_LINES - lines]
            parts.append(_new_file(f"burst{number}/{name}", body))
            lines += len(body)
        path = folder / f"review-{number:02d}.diff"
        path.write_text("".join(parts), encoding="utf-8")
        made.append(path)
    return made


def _new_file(name: str, lines: list[str]) -> str:
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{name} b/{name}\nnew file mode 100644\n--- /dev/null\n+++ b/{name}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


def run_burst(paths: list[Path], base: str, env: dict[str, str]) -> dict[str, Any]:
    """Every diff reviewed at once; the figures of each review and of the burst."""
    started = time.time()
    processes = [
        (
            path,
            time.time(),
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "reviewbot.commands",
                    "review",
                    "--diff",
                    str(path),
                    "--base-url",
                    base,
                    "--json",
                ],
                stdout=path.with_suffix(".json").open("w"),
                stderr=path.with_suffix(".err").open("w"),
                text=True,
                env=env,
            ),
        )
        for path in paths
    ]
    ended = _ends([process for _, _, process in processes])
    reviews = [
        _figures(path, start, process, ended[index])
        for index, (path, start, process) in enumerate(processes)
    ]
    makespan = time.time() - started
    done = [r for r in reviews if r.get("wall_s") is not None]
    return {
        "size": len(paths),
        "makespan_s": round(makespan, 1),
        "reviews_per_hour": round(len(done) / makespan * SECONDS_PER_HOUR, 1) if done else 0,
        "summary": {
            key: _percentiles([r[key] for r in done if r.get(key) is not None])
            for key in (
                "wall_s",
                "first_answer_s",
                "last_answer_s",
                "prompt_tokens",
                "cached_tokens",
                "changed_lines",
            )
        },
        "complete": sum(1 for r in done if r.get("complete")),
        "reviews": reviews,
    }


def _ends(processes: list[subprocess.Popen[str]]) -> list[float]:
    """When each process ended, polled (its output goes to files: a pipe left unread while
    the others run would fill and stall it)."""
    ended: dict[int, float] = {}
    deadline = time.time() + REVIEW_TIMEOUT_S
    while len(ended) < len(processes) and time.time() < deadline:
        for index, process in enumerate(processes):
            if index not in ended and process.poll() is not None:
                ended[index] = time.time()
        time.sleep(POLL_S)
    return [ended.get(index, time.time()) for index in range(len(processes))]


def _figures(
    path: Path, start: float, process: subprocess.Popen[str], ended: float
) -> dict[str, Any]:
    if process.poll() is None:
        process.kill()
        return {"diff": path.name, "error": f"no answer within {REVIEW_TIMEOUT_S} s"}
    out = path.with_suffix(".json").read_text(encoding="utf-8", errors="replace")
    err = path.with_suffix(".err").read_text(encoding="utf-8", errors="replace")
    wall = ended - start
    try:
        data = json.loads(out)
    except json.JSONDecodeError:
        return {"diff": path.name, "exit": process.returncode, "stderr": err[-2000:]}
    answers = [
        datetime.fromisoformat(call["started_at"]).timestamp() + (call.get("latency_ms") or 0) / 1e3
        for call in data.get("calls", [])
    ]
    coverage = data.get("coverage") or {}
    return {
        "diff": path.name,
        "exit": process.returncode,
        "wall_s": round(wall, 2),
        "first_answer_s": round(min(answers) - start, 2) if answers else None,
        "last_answer_s": round(max(answers) - start, 2) if answers else None,
        "calls": len(data.get("calls", [])),
        "prompt_tokens": sum(c.get("prompt_tokens") or 0 for c in data.get("calls", [])),
        "cached_tokens": sum(c.get("cached_tokens") or 0 for c in data.get("calls", [])),
        "changed_lines": coverage.get("changed_lines_total"),
        "complete": coverage.get("changed_lines_covered") == coverage.get("changed_lines_total"),
    }


def _percentiles(values: list[float]) -> dict[str, float | None]:
    ordered = sorted(values)
    if not ordered:
        return {f"p{p}": None for p in PERCENTILES}
    return {f"p{p}": ordered[max(0, -(-p * len(ordered) // 100) - 1)] for p in PERCENTILES}
