"""The systemd units run real commands with real options; the env example uses real settings."""

from __future__ import annotations

import shlex
from dataclasses import fields
from pathlib import Path

import pytest

from reviewbot.config import Settings
from tests.deploy_files import SYSTEMD, check_reviewbot_args, executable, read_unit

DEPLOY = SYSTEMD
EXEC_KEYS = ("ExecStartPre", "ExecStart", "ExecStartPost", "ExecStopPost")


def reviewbot_invocations(unit: Path) -> list[list[str]]:
    """Every `reviewbot ...` argv a unit runs, directly or as a wrapper script's arguments."""
    service = read_unit(unit)["Service"]
    found = []
    for key in EXEC_KEYS:
        for command in service.get(key, []):
            argv = shlex.split(command)
            at = [i for i, word in enumerate(argv) if word.endswith("/bin/reviewbot")]
            if at:
                found.append(argv[at[0] + 1 :])
    return found


UNITS_RUNNING_REVIEWBOT = [u for u in sorted(DEPLOY.glob("*.service")) if reviewbot_invocations(u)]


def test_units_running_reviewbot_are_found() -> None:
    names = {u.name for u in UNITS_RUNNING_REVIEWBOT}
    assert {
        "reviewbot-serve.service",
        "reviewbot-worker@.service",
        "reviewbot-vllm-health.service",
        "reviewbot-report.service",
    } <= names


def test_report_unit_syncs_feedback_then_writes_the_weekly_report() -> None:
    service = read_unit(DEPLOY / "reviewbot-report.service")["Service"]
    assert [args[:2] for args in reviewbot_invocations(DEPLOY / "reviewbot-report.service")] == [
        ["feedback", "sync"],
        ["report", "--weekly"],
    ]
    assert service["Type"] == ["oneshot"]
    timer = read_unit(DEPLOY / "reviewbot-report.timer")["Timer"]
    assert timer["OnCalendar"] == ["Mon *-*-* 06:00:00 UTC"]
    assert timer["Persistent"] == ["true"]


@pytest.mark.parametrize("unit", UNITS_RUNNING_REVIEWBOT, ids=lambda p: p.name)
def test_unit_commands_exist(unit: Path) -> None:
    service = read_unit(unit)["Service"]
    assert "/etc/reviewbot/reviewbot.env" in service["EnvironmentFile"]
    for key in EXEC_KEYS:
        for command in service.get(key, []):
            program = executable(command)
            assert program.startswith("/opt/reviewbot/"), f"{unit.name}: {program}"
    for args in reviewbot_invocations(unit):
        check_reviewbot_args(args, unit.name)


def test_env_example_names_real_settings() -> None:
    known = {f"REVIEWBOT_{f.name.upper()}" for f in fields(Settings)}
    for line in (DEPLOY / "reviewbot.env.example").read_text().splitlines():
        line = line.lstrip("# ").strip()
        if line.startswith("REVIEWBOT_") and "=" in line:
            assert line.split("=", 1)[0] in known
