"""How long work shows that it is moving: rich's live display on a terminal, plain lines on a
pipe or in a CI log (where a live display prints nothing until the work is over).

Owns: `progress_bar` (counted work: chunks, items, requests) and `progress_steps` (work in
named steps: a merge request's review, the doctor's checks), each either rich's (a terminal)
or plain lines on stderr (anything else). A plain counted task says its total when it is
known and then one line each time a tenth more is done, so a thousand requests are ten lines,
not a thousand. Must not: decide what the work is or when it is done (the library calls back).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from reviewbot.commands.terminal import data

__all__ = [
    "PLAIN_PREFIX",
    "PLAIN_STEPS_PER_TASK",
    "CountedProgress",
    "PlainProgress",
    "progress_bar",
    "progress_steps",
]

# A plain counted task prints a line each time this share more of it is done (a tenth).
PLAIN_STEPS_PER_TASK = 10
# Every plain line starts so (as `reviewbot ci`'s do): in a CI log it says whose line it is;
# the one error line is ``reviewbot: error: ...``.
PLAIN_PREFIX = "reviewbot: "


class CountedProgress(Protocol):
    """What the commands call on a progress bar: rich's ``Progress`` has it, and so does
    `PlainProgress`."""

    def add_task(self, description: str, total: float | None = None) -> Any: ...

    def update(self, task_id: Any, *, total: float | None = None) -> None: ...

    def advance(self, task_id: Any, advance: float = 1) -> None: ...


@dataclass
class _Task:
    description: str
    total: float | None
    done: float = 0
    steps_said: int = -1  # the last tenth a line was printed for


@dataclass
class PlainProgress:
    """Counted progress as plain lines on ``console`` (stderr, not a terminal): the total once
    it is known, then a line for each tenth done; callbacks from worker threads are fine."""

    console: Console
    quiet: bool = False
    started: float = field(default_factory=time.monotonic)
    _tasks: list[_Task] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def add_task(self, description: str, total: float | None = None) -> int:
        with self._lock:
            self._tasks.append(_Task(description, total))
            task_id = len(self._tasks) - 1
            self._say(self._tasks[task_id])
            return task_id

    def update(self, task_id: int, *, total: float | None = None) -> None:
        with self._lock:
            task = self._tasks[task_id]
            if total is not None and total != task.total:
                task.total = total
                self._say(task)

    def advance(self, task_id: int, advance: float = 1) -> None:
        with self._lock:
            task = self._tasks[task_id]
            task.done += advance
            self._say(task)

    def _say(self, task: _Task) -> None:
        """A line when the task has a new total, or a tenth more of it is done (or, without a
        total, at every step)."""
        if task.total:
            steps = math.floor(min(task.done, task.total) * PLAIN_STEPS_PER_TASK / task.total)
            if steps == task.steps_said:
                return
            task.steps_said = steps
            count = f"{task.done:g}/{task.total:g}"
        elif task.done:
            count = f"{task.done:g}"
        else:
            return  # nothing to say yet: no total, nothing done
        if not self.quiet:
            elapsed = time.monotonic() - self.started
            line = f"{PLAIN_PREFIX}{task.description}: {count} ({elapsed:.0f} s)"
            self.console.print(data(line), soft_wrap=True)


def progress_bar(console: Console, *, quiet: bool = False) -> Progress | PlainProgress:
    """The one progress bar of every long command: what, a bar, done/total, time so far on a
    terminal (gone when the work ends); `PlainProgress` lines anywhere else; nothing when
    ``quiet``."""
    if not console.is_terminal:
        return PlainProgress(console, quiet=quiet)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
        transient=True,
    )


@contextmanager
def progress_steps(
    console: Console, first: str, *, quiet: bool = False
) -> Iterator[Callable[[str], None]]:
    """A function to call with each step of the work: a spinner with the latest step on a
    terminal (``first`` until the first step), one plain line per step anywhere else."""
    if quiet:
        yield lambda _: None
    elif console.is_terminal:
        with console.status(data(first), spinner="dots") as status:
            yield lambda step: status.update(data(step))
    else:

        def say(step: str) -> None:
            console.print(data(f"{PLAIN_PREFIX}{step}"), soft_wrap=True)

        yield say
