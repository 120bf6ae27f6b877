"""The systemd units run real commands with real options; the env example uses real settings."""

from __future__ import annotations

import configparser
import shlex
from dataclasses import fields
from pathlib import Path

import pytest
from click.testing import CliRunner

from reviewbot.cli import main
from reviewbot.config import Settings

DEPLOY = Path(__file__).parent.parent / "deploy" / "systemd"


@pytest.mark.parametrize("unit", sorted(DEPLOY.glob("*.service")), ids=lambda p: p.name)
def test_unit_commands_exist(unit: Path) -> None:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(unit)
    assert parser["Service"]["EnvironmentFile"] == "/etc/reviewbot/reviewbot.env"
    for key in ("ExecStart", "ExecStartPre"):
        if key not in parser["Service"]:
            continue
        argv = shlex.split(parser["Service"][key])
        assert argv[0].endswith("/bin/reviewbot")
        options = [a for a in argv[1:] if a.startswith("--")]
        words = [a for a in argv[1:] if not a.startswith("-")]
        command = words[:2] if words[:2] == ["db", "upgrade"] else words[:1]
        help_text = CliRunner().invoke(main, [*command, "--help"]).output
        for option in options:
            assert option in help_text, f"{unit.name}: {option} is not an option of {command}"


def test_env_example_names_real_settings() -> None:
    known = {f"REVIEWBOT_{f.name.upper()}" for f in fields(Settings)}
    for line in (DEPLOY / "reviewbot.env.example").read_text().splitlines():
        line = line.lstrip("# ").strip()
        if line.startswith("REVIEWBOT_") and "=" in line:
            assert line.split("=", 1)[0] in known
