"""Files named by the user (a settings file, a model's config.json, an eval dataset's files),
read only when they are what they claim to be: a regular file of a bounded size.

A device (``/dev/zero`` never ends), a FIFO (blocks until a writer comes), a directory or a
file over the caller's cap is refused before anything is read. The file is opened without
blocking and checked on the open descriptor, so what is checked is what is read. The null
device (``/dev/null``, ``os.devnull``) is the one device allowed: "no file" by a common idiom
(``REVIEWBOT_CONFIG=/dev/null``), it reads as empty.

Owns: the one check that a file named by the user is a regular file of bounded size, and reading it.
Must not: parse what it reads, or name the file in its own errors (each caller names it its own
way).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["InputFileRefused", "file_kind", "read_input_file"]


class InputFileRefused(ValueError):
    """Not a regular file, or larger than allowed; the message says which (no path: the
    caller names the file its own way)."""


def read_input_file(path: Path | str, max_bytes: int) -> bytes:
    """The bytes of ``path``, at most ``max_bytes`` of them, else InputFileRefused; OSError
    when it cannot be opened."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(descriptor, "rb") as handle:
        opened = os.fstat(descriptor)
        if _is_null_device(opened):
            return b""
        mode = opened.st_mode
        if not stat.S_ISREG(mode):
            raise InputFileRefused(f"is not a regular file ({file_kind(mode)})")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputFileRefused(f"is larger than {max_bytes:,} bytes")
    return data


def _is_null_device(opened: os.stat_result) -> bool:
    if not stat.S_ISCHR(opened.st_mode):
        return False
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return os.path.samestat(opened, null)


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words ("a FIFO", "a device")."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a plain file"
