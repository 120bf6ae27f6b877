"""What the xdist workers of one test run share: a directory, a file lock (``flock``) around
what the first worker builds or starts and the others then use (the real-vLLM tier's server,
the installed tier's wheel and image, the migrated template databases of
``tests/store_templates.py``), and the state that build leaves for the others."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

XDIST_WORKER_ENV = "PYTEST_XDIST_WORKER"


@contextlib.contextmanager
def locked(lock_file: Path) -> Iterator[None]:
    """Hold ``lock_file`` exclusively (created when missing) for the ``with`` block."""
    with lock_file.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_dir(factory: pytest.TempPathFactory, name: str) -> Path:
    """The directory ``name`` that every process of this run shares, and no other run: under
    the base temp's parent in an xdist worker (the xdist controller's base temp), under the
    base temp itself in a run of one process (and in the controller)."""
    base = factory.getbasetemp()
    return base.parent / name if os.environ.get(XDIST_WORKER_ENV) else base / name


def built_once(run_dir: Path, name: str, build: Callable[[], dict[str, str]]) -> dict[str, str]:
    """What ``build`` returns, built by the first worker of the run to ask and read by the
    others (a build that failed fails them all, with its error, without building again)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    state_file = run_dir / f"{name}.json"
    with locked(run_dir / f"{name}.lock"):
        if state_file.exists():
            state = json.loads(state_file.read_text())
            if "error" in state:
                raise RuntimeError(state["error"])
            return state
        try:
            state = build()
        except (RuntimeError, subprocess.SubprocessError, OSError) as error:
            state_file.write_text(json.dumps({"error": f"{name}: {error}"}))
            raise
        state_file.write_text(json.dumps(state))
        return state
