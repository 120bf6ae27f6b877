"""Run one analyzer's command: in its own process group, stopped whole at the timeout, its
output bounded.

Owns: :func:`run_tool` and :class:`ToolFailure`. Must not: know what a tool's output means.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MAX_TOOL_OUTPUT_BYTES", "ToolFailure", "ToolOutput", "run_tool", "stderr_summary"]

MAX_TOOL_OUTPUT_BYTES = 32 * 1024 * 1024
MAX_STDERR_CHARS = 300  # of a failed tool's error output, in its problem's reason
BYTES_PER_MIB = 1024 * 1024


class ToolFailure(Exception):
    """The tool could not be run, was stopped, or said too much: ``reason`` is the sentence."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True)
class ToolOutput:
    returncode: int
    stdout: bytes
    stderr: str


def run_tool(
    argv: Sequence[str], cwd: Path, timeout_s: float, max_output: int = MAX_TOOL_OUTPUT_BYTES
) -> ToolOutput:
    """Run ``argv`` in ``cwd``; ToolFailure when it cannot start, runs past ``timeout_s``
    (its whole process group is killed) or writes more than ``max_output`` bytes."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            process = subprocess.Popen(  # argv is ours, never a shell line
                list(argv),
                cwd=cwd,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as error:
            raise ToolFailure(f"could not start {argv[0]}: {error.strerror or error}") from None
        try:
            returncode = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            raise ToolFailure(f"timed out after {timeout_s:g} s") from None
        out.seek(0)
        stdout = out.read(max_output + 1)
        if len(stdout) > max_output:
            raise ToolFailure(f"output larger than {max_output // BYTES_PER_MIB} MiB")
        err.seek(0)
        stderr = err.read(MAX_STDERR_CHARS * 4).decode("utf-8", "replace")
    return ToolOutput(returncode, stdout, stderr)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended between the timeout and now
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def stderr_summary(text: str) -> str:
    """A tool's error output as one short line for a problem's reason."""
    line = " ".join(text.split())
    return line[:MAX_STDERR_CHARS] or "no error output"
