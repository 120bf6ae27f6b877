"""Every command has --help text and is documented in the README."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reviewbot.commands import main

README = (Path(__file__).parent.parent / "README.md").read_text()


def all_commands() -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []

    def walk(group: click.Group, path: tuple[str, ...]) -> None:
        context = click.Context(group)
        for name in group.list_commands(context):
            found.append((*path, name))
            command = group.get_command(context, name)
            if isinstance(command, click.Group):
                walk(command, (*path, name))

    walk(main, ())
    return found


def resolve(path: tuple[str, ...]) -> click.Command:
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None
        command = found
    return command


@pytest.mark.parametrize("path", all_commands(), ids=" ".join)
def test_command_has_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--help"], prog_name="reviewbot")
    assert result.exit_code == 0
    assert "Usage: reviewbot " + " ".join(path) in result.output
    command = resolve(path)
    assert command.help and len(command.help.strip()) > 10


@pytest.mark.parametrize("path", all_commands(), ids=" ".join)
def test_command_is_in_the_readme(path: tuple[str, ...]) -> None:
    top = f"`reviewbot {path[0]}"
    assert top in README
    if len(path) > 1:
        lines = [line for line in README.splitlines() if top in line]
        assert any(path[-1] in line for line in lines), f"{' '.join(path)} is not documented"
