"""One lock for the xdist workers of a test run: a file lock (``flock``) around what the first
worker builds or starts and the others then use (the real-vLLM tier's server, the installed
tier's wheel and image)."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def locked(lock_file: Path) -> Iterator[None]:
    """Hold ``lock_file`` exclusively (created when missing) for the ``with`` block."""
    with lock_file.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
