"""Long work shows that it moves: rich's live display on a terminal, plain lines elsewhere
(issue 32 item 15); a plain counted task is a line per tenth, from any thread."""

from __future__ import annotations

import io
import threading

from rich.console import Console
from rich.progress import Progress

from reviewbot.commands.progress import (
    PLAIN_PREFIX,
    PLAIN_STEPS_PER_TASK,
    PlainProgress,
    progress_bar,
    progress_steps,
)

REQUESTS = 1000
THREADS = 8


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=80), out


def test_a_thousand_steps_from_many_threads_are_a_line_per_tenth() -> None:
    console, out = _console(terminal=False)
    with progress_bar(console) as bar:
        task = bar.add_task("requests", total=REQUESTS)

        def send(count: int) -> None:
            for _ in range(count):
                bar.advance(task)

        workers = [
            threading.Thread(target=send, args=(REQUESTS // THREADS,)) for _ in range(THREADS)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    lines = out.getvalue().splitlines()
    assert len(lines) == PLAIN_STEPS_PER_TASK + 1
    assert all(line.startswith(f"{PLAIN_PREFIX}requests: ") for line in lines)
    counts = [line.split(": ")[2].split(" ")[0] for line in lines]
    assert counts == [f"{REQUESTS * k // PLAIN_STEPS_PER_TASK}/{REQUESTS}" for k in range(11)]


def test_a_total_learnt_later_is_said_and_no_total_says_each_step() -> None:
    console, out = _console(terminal=False)
    with progress_bar(console) as bar:
        later = bar.add_task("reviewing chunks", total=None)
        bar.update(later, total=2)
        bar.advance(later)
        counting = bar.add_task("syncing", total=None)
        bar.advance(counting)
        bar.advance(counting)
    said = [
        line.removeprefix(PLAIN_PREFIX).rsplit(" (", 1)[0] for line in out.getvalue().splitlines()
    ]
    assert said == ["reviewing chunks: 0/2", "reviewing chunks: 1/2", "syncing: 1", "syncing: 2"]


def test_quiet_says_nothing() -> None:
    console, out = _console(terminal=False)
    with progress_bar(console, quiet=True) as bar:
        bar.advance(bar.add_task("requests", total=3))
    with progress_steps(console, "starting", quiet=True) as say:
        say("publishing")
    assert out.getvalue() == ""


def test_on_a_terminal_it_is_rich_and_on_a_pipe_plain_lines() -> None:
    terminal, terminal_out = _console(terminal=True)
    assert isinstance(progress_bar(terminal), Progress)
    with progress_steps(terminal, "starting") as say:
        say("publishing")
    assert f"{PLAIN_PREFIX}publishing\n" not in terminal_out.getvalue()
    pipe, pipe_out = _console(terminal=False)
    assert isinstance(progress_bar(pipe), PlainProgress)
    with progress_steps(pipe, "starting") as say:
        say("reading merge request !1")
        say("publishing")
    assert pipe_out.getvalue() == (
        f"{PLAIN_PREFIX}reading merge request !1\n{PLAIN_PREFIX}publishing\n"
    )
