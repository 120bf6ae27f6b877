"""Every command and option has --help text, and every command is listed in the README's
command table."""

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
def test_every_option_says_what_it_is_for(path: tuple[str, ...]) -> None:
    """The generated CLI reference (docs/cli.md) shows each option's help: none is blank."""
    silent = [
        param.opts[0]
        for param in resolve(path).params
        if isinstance(param, click.Option) and not (param.help or "").strip()
    ]
    assert not silent, f"reviewbot {' '.join(path)}: options without help: {silent}"


@pytest.mark.parametrize("path", all_commands(), ids=" ".join)
def test_command_is_in_the_readme(path: tuple[str, ...]) -> None:
    top = f"`reviewbot {path[0]}"
    assert top in README
    if len(path) > 1:
        lines = [line for line in README.splitlines() if top in line]
        assert any(path[-1] in line for line in lines), f"{' '.join(path)} is not documented"


def test_every_command_with_a_database_takes_a_settings_file_too() -> None:
    """Issue 18: `reviews list|show` and `db upgrade` had --database-url but no --config."""
    for path in all_commands():
        command = resolve(path)
        options = {opt for param in command.params for opt in param.opts}
        if "--database-url" in options:
            assert "--config" in options, " ".join(path)


@pytest.mark.slow
def test_db_upgrade_reads_the_database_from_the_settings_file(tmp_path: Path) -> None:
    database = tmp_path / "from-config.db"
    config = tmp_path / "reviewbot.toml"
    config.write_text(f'database_url = "sqlite:///{database}"\n')
    result = CliRunner().invoke(
        main, ["db", "upgrade", "--config", str(config)], env={"REVIEWBOT_DATABASE_URL": None}
    )
    assert result.exit_code == 0, result.output
    assert str(database) in result.output and database.exists()


COMMANDS_PACKAGE = Path(__file__).parent.parent / "reviewbot" / "commands"
SHARED_OPTIONS_MODULE = "common.py"


def test_the_project_option_is_declared_once_and_means_the_same_everywhere() -> None:
    """Issue 18: ``--project`` was declared in five places with three metavars; it is
    ``common.project_option``, so every command takes the same values and shows them alike."""
    from reviewbot.commands.common import ProjectRef

    declaring = sorted(
        path.name
        for path in COMMANDS_PACKAGE.glob("*.py")
        if '"--project"' in path.read_text(encoding="utf-8")
    )
    assert declaring == [SHARED_OPTIONS_MODULE]
    taking = {}
    for path in all_commands():
        for param in resolve(path).params:
            if "--project" in getattr(param, "opts", ()):
                taking[" ".join(path)] = (type(param.type), param.metavar)
    assert set(taking) == {
        "run",
        "doctor",
        "reviews list",
        "feedback sync",
        "report",
        "learnings add",
        "learnings list",
        "plan",  # the project whose groups' rules apply (docs/rules.md)
    }
    assert set(taking.values()) == {(ProjectRef, "ID_OR_PATH")}
