"""What a command wrote to stderr, less its plain progress lines.

On a pipe (click's runner, a CI log) long commands say how their work goes in lines that start
``reviewbot: `` (`reviewbot.commands.progress`); a failure is still one line, ``reviewbot:
error: ...`` (or click's usage error). Tests that hold a failure to one line count these.
"""

from __future__ import annotations

from reviewbot.commands.progress import PLAIN_PREFIX

ERROR_PREFIX = f"{PLAIN_PREFIX}error: "


def error_lines(stderr: str) -> list[str]:
    """The lines of ``stderr`` that are not progress: the error line(s) and anything else."""
    return [
        line
        for line in stderr.strip().splitlines()
        if line.startswith(ERROR_PREFIX) or not line.startswith(PLAIN_PREFIX)
    ]


def progress_lines(stderr: str) -> list[str]:
    """The plain progress lines of ``stderr``, without their prefix."""
    return [
        line.removeprefix(PLAIN_PREFIX)
        for line in stderr.strip().splitlines()
        if line.startswith(PLAIN_PREFIX) and not line.startswith(ERROR_PREFIX)
    ]
