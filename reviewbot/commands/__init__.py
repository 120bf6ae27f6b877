"""The command line: `reviewbot` and every command, one module per group.

Owns: the ``reviewbot`` group. Its commands load when used (``LAZY_COMMANDS``), so
`reviewbot plan` starts fast and loads neither the model client nor any adapter; a usage error
is one line (exit 2).

Each command parses its options (types and shared options: `reviewbot.commands.common`),
builds the App, calls one library function and renders the result (`render`, `render_ops`),
printing through `terminal` (data is shown as written, never read as markup).
Only this package imports click or rich (tests/test_layers.py): the library takes callbacks
for progress and returns data.

Must not: hold library logic (planning, reviewing, SQL, HTTP), or decide an exit code other
than through `reviewbot.errors` and the codes documented there.

Exit codes: 0 success (findings or not), 1 the work failed (model or GitLab unreachable, a chunk
could not be reviewed), 2 bad input (not a diff, bad range, bad setting, budget too small);
`reviewbot ci`, `reviewbot loadtest` and `reviewbot capacity` add 3.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

import click

from reviewbot import __version__
from reviewbot.commands.common import fail
from reviewbot.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK

__all__ = ["LAZY_COMMANDS", "LazyGroup", "main"]

# command name -> (module, attribute): each module loads only when its command is used.
LAZY_COMMANDS = {
    "plan": ("reviewbot.commands.review", "plan_command"),
    "review": ("reviewbot.commands.review", "review_command"),
    "run": ("reviewbot.commands.review", "run_command"),
    "ci": ("reviewbot.commands.ci", "ci_command"),
    "serve": ("reviewbot.commands.serve", "serve_command"),
    "worker": ("reviewbot.commands.worker", "worker_command"),
    "jobs": ("reviewbot.commands.jobs", "jobs_group"),
    "reviews": ("reviewbot.commands.reviews", "reviews_group"),
    "db": ("reviewbot.commands.db", "db_group"),
    "feedback": ("reviewbot.commands.accuracy", "feedback_group"),
    "learnings": ("reviewbot.commands.learnings", "learnings_group"),
    "report": ("reviewbot.commands.accuracy", "report_command"),
    "eval": ("reviewbot.commands.accuracy", "eval_command"),
    "capacity": ("reviewbot.commands.ops", "capacity_command"),
    "doctor": ("reviewbot.commands.ops", "doctor_command"),
    "loadtest": ("reviewbot.commands.ops", "loadtest_command"),
    "weights": ("reviewbot.commands.weights", "weights_group"),
}


class LazyGroup(click.Group):
    """The ``reviewbot`` group: commands load when used; a usage error is one line (exit 2)."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            result = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as error:
            where = f" (see {error.ctx.command_path} --help)" if error.ctx else ""
            fail(f"{error.format_message()}{where}", EXIT_BAD_INPUT)
        except click.ClickException as error:
            fail(error.format_message(), error.exit_code)
        except click.Abort:
            fail("aborted", EXIT_FAILURE)
        sys.exit(result if isinstance(result, int) else EXIT_OK)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS:
            module, attribute = LAZY_COMMANDS[cmd_name]
            command: click.Command = getattr(importlib.import_module(module), attribute)
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="reviewbot")
def main() -> None:
    """reviewbot: reviews GitLab merge requests with a model on your own GPUs (vLLM)."""
