"""The real vllm-router binary in front of fake vLLMs on 127.0.0.1, for tests and benchmarks.

Usage::

    with router_pool(3) as pool:           # three FakeVLLM boxes, --policy consistent_hash
        settings = Settings(llm_base_url=pool.base_url, ...)
        pool.boxes[0].add_faults("die")

The router is started with the flags ``reviewbot capacity --replicas`` prints
(:func:`reviewbot.ops.router.router_plan`), so the test also shows the binary accepts them,
with a free port and a one-second health check. :data:`ROUTER_BINARY` is None where the
``vllm-router`` wheel is not installed (the dev extra installs it on Linux x86-64).
"""

from __future__ import annotations

import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from reviewbot.ops.router import router_plan
from tests.fakes.vllm_server import FakeVLLM

ROUTER_NAME = "vllm-router"
_NEXT_TO_PYTHON = Path(sys.executable).parent / ROUTER_NAME
ROUTER_BINARY: str | None = (
    str(_NEXT_TO_PYTHON) if _NEXT_TO_PYTHON.is_file() else shutil.which(ROUTER_NAME)
)
NO_ROUTER_REASON = (
    "the vllm-router binary is not installed (pip install -e '.[dev]' on Linux x86-64)"
)
READY_WITHIN_S = 60.0  # the router checks its workers before it listens
POLL_S = 0.05
HEALTH_INTERVAL_S = 1  # the router's health check in tests (its unit says 5)
MAX_NUM_SEQS = 8


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class RouterPool:
    boxes: list[FakeVLLM]
    urls: list[str]  # each box's root URL (kept: a stopped fake no longer knows it)
    root_url: str
    process: subprocess.Popen[bytes]

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def box_of(self, fake: FakeVLLM) -> str:
        return self.urls[self.boxes.index(fake)]

    def chat_counts(self) -> list[int]:
        return [len(box.requests) for box in self.boxes]

    def workers(self) -> list[dict[str, Any]]:
        return httpx.get(f"{self.root_url}/workers", timeout=5).json()["workers"]

    def wait_until(self, healthy: int) -> None:
        """Until the router counts ``healthy`` healthy workers (its health check's verdict)."""
        deadline = time.monotonic() + READY_WITHIN_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"vllm-router exited with {self.process.returncode}")
            try:
                ready = httpx.get(f"{self.root_url}/readiness", timeout=2).json()
                if ready.get("healthy_workers") == healthy:
                    return
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(POLL_S)  # polling the router's own answer, not a guess at its timing
        raise TimeoutError(f"vllm-router did not report {healthy} healthy workers in time")


def router_argv(
    binary: str, urls: Sequence[str], port: int, policy: str, extra: Sequence[str] = ()
) -> list[str]:
    """The capacity planner's flags, then the test's own (argparse keeps the last value)."""
    plan = router_plan(len(urls), MAX_NUM_SEQS, urls)
    argv = [binary, *shlex.split(" ".join(plan.flags))]
    return [
        *argv,
        "--port",
        str(port),
        "--policy",
        policy,
        "--prometheus-port",
        str(free_port()),
        "--health-check-interval-secs",
        str(HEALTH_INTERVAL_S),
        "--worker-startup-check-interval",
        "1",
        "--log-level",
        "warning",
        *extra,
    ]


@contextmanager
def router_pool(
    replicas: int = 3,
    *,
    policy: str = "consistent_hash",
    log: IO[bytes] | None = None,
    extra: Sequence[str] = (),
    **fake_options: Any,
) -> Iterator[RouterPool]:
    """``replicas`` fake vLLMs behind a started, ready router; all stopped afterwards."""
    if ROUTER_BINARY is None:
        raise RuntimeError(NO_ROUTER_REASON)
    with ExitStack() as stack:
        boxes = [stack.enter_context(FakeVLLM(**fake_options)) for _ in range(replicas)]
        urls = [box.root_url for box in boxes]
        port = free_port()
        process = subprocess.Popen(
            router_argv(ROUTER_BINARY, urls, port, policy, extra),
            stdout=log or subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        try:
            pool = RouterPool(boxes, urls, f"http://127.0.0.1:{port}", process)
            pool.wait_until(healthy=replicas)
            yield pool
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
