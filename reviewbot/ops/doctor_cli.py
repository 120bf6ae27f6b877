"""``reviewbot doctor``: load the settings, run the checks, print a table or JSON (wiring only)."""

from __future__ import annotations

import json
import os
import sys

import click
from rich.console import Console
from rich.table import Table

from reviewbot.cli import PIPED_TABLE_WIDTH, fail
from reviewbot.config import ConfigError, load_settings
from reviewbot.errors import EXIT_BAD_INPUT
from reviewbot.ops.doctor import Check, Status, exit_code
from reviewbot.ops.doctor_probes import DoctorOptions, run_doctor

STATUS_STYLES = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "bold red"}
SETTINGS_FIX = "correct the setting named above (README: Configuration)"


def _source(config_file: str | None) -> str:
    chosen = config_file or os.environ.get("REVIEWBOT_CONFIG")
    variables = "REVIEWBOT_* variables"
    return f"{chosen} and {variables}" if chosen else f"defaults, the user config and {variables}"


def print_checks(checks: list[Check], console: Console) -> None:
    table = Table("status", "check", "found", "fix")
    for check in checks:
        style = STATUS_STYLES[check.status]
        table.add_row(
            f"[{style}]{check.status.value}[/{style}]", check.name, check.detail, check.fix
        )
    console.print(table)
    counts = {status: sum(c.status is status for c in checks) for status in Status}
    console.print(
        f"{counts[Status.OK]} ok, {counts[Status.WARN]} warnings, {counts[Status.FAIL]} failed",
        highlight=False,
    )


@click.command("doctor")
@click.option(
    "--project",
    metavar="ID_OR_PATH",
    help="Also check that the token's user is at least Developer on this project.",
)
@click.option(
    "--model-only",
    is_flag=True,
    help="Check only the model server (no GitLab, no database): the health timer's probe.",
)
@click.option("--config", "config_file", metavar="FILE", help="TOML settings file.")
@click.option("--json", "as_json", is_flag=True, help='Print {"checks": [...]} as JSON.')
def doctor_command(
    project: str | None, model_only: bool, config_file: str | None, as_json: bool
) -> None:
    """Check every dependency (settings, GitLab, the model server, the database) and say how
    to fix what fails. Exit 0 when nothing failed (warnings are fine), 1 otherwise."""
    if project and model_only:
        fail("--project needs the GitLab checks: drop --model-only", EXIT_BAD_INPUT)
    try:
        settings = load_settings(config_file=config_file)
    except ConfigError as error:
        checks = [Check("settings", Status.FAIL, str(error), SETTINGS_FIX)]
    else:
        options = DoctorOptions(
            project=project, model_only=model_only, settings_source=_source(config_file)
        )
        checks = run_doctor(settings, options)
    if as_json:
        click.echo(json.dumps({"checks": [check.to_dict() for check in checks]}, indent=2))
    else:
        print_checks(checks, Console(width=None if sys.stdout.isatty() else PIPED_TABLE_WIDTH))
    sys.exit(exit_code(checks))
