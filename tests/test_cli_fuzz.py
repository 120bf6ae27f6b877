"""Every option and argument of every command, fed hostile values (issue 17 item 3).

The test walks the whole ``reviewbot`` command tree, so a new command or option is covered
without anyone adding a case. For each value-taking parameter and each value of ``HOSTILE``
(the other required parameters filled with benign placeholders) the command must:

- exit 2 with exactly one line on stderr that names the option (``--lease-seconds``, or the
  setting it sets, ``lease_seconds``; an argument by its name, ``JOB_ID``, or the value),
- or, where ``ACCEPTED`` says the value is a legitimate one, end with the exit code listed there;
- never show a traceback, and never write to the database (every row of every table of a
  migrated SQLite file, read as any reader sees them, the ``-wal`` file included, must stay the
  same; the user data folder stays empty). Each runs in a new empty folder.

Nothing can hang: GitLab is the fake (no token is known to it: every request is a 401), the
model server is 127.0.0.1:1 (refused), there is no webhook secret (``serve`` stops before it
listens) and ``worker`` runs with ``--burst``.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reviewbot.commands import main
from reviewbot.commands.common import Integer, Number
from reviewbot.store import upgrade
from tests.fakes.gitlab_server import FakeGitLab
from tests.stderr_lines import error_lines
from tests.store_fixtures import migrated_sqlite_url

EVAL_DATASET = Path(__file__).parent / "fixtures" / "eval" / "team"
TINY_MODEL = Path(__file__).parent / "fixtures" / "weights" / "tiny-model"
SMALL_DIFF = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-x = 1\n+x = eval(text)\n"
NAME_TOO_LONG = 300  # over NAME_MAX (255 on Linux): the system refuses to look it up
MISSING_DIR = "<missing folder>"  # replaced by a path under a folder that does not exist

HOSTILE = {
    "nan": "nan",
    "inf": "inf",
    "-1": "-1",
    "0": "0",
    "1e400": "1e400",
    "2**70": str(2**70),
    "empty": "",
    "nul": "a\x00b",
    "surrogate": "\ud800",
    "dev_zero": "/dev/zero",
    "missing_dir": MISSING_DIR,
    "open_ipv6_url": "http://[::1",
    "name_too_long": "n" * NAME_TOO_LONG,
}
NUMBERS_AS_TEXT = frozenset({"nan", "inf", "-1", "0", "1e400", "2**70"})
PATHS_AS_TEXT = frozenset({"dev_zero", "missing_dir", "open_ipv6_url", "name_too_long"})
ANY_TEXT = NUMBERS_AS_TEXT | PATHS_AS_TEXT

# Required parameters get these (and `worker` runs in burst mode); everything else is left out.
PLACEHOLDERS: dict[str, dict[str, str]] = {
    "plan": {"--diff": "-"},
    "review": {"--diff": "-"},
    "run": {"MR_IID": "1", "--project": "group/app"},
    "worker": {"--burst": ""},
    "jobs show": {"JOB_ID": "1"},
    "jobs retry": {"JOB_ID": "1"},
    "jobs cancel": {"JOB_ID": "1"},
    "reviews show": {"REVIEW_ID": "1"},
    "eval": {"DATASET_DIR": str(EVAL_DATASET)},
    "capacity": {"--model": "Qwen/Qwen3.5-9B", "--gpu": "L4"},
    "weights verify": {"MODEL_DIR": str(TINY_MODEL)},
    "weights manifest": {"MODEL_DIR": str(TINY_MODEL)},
    "learnings add": {"TEXT": "hi", "--project": "group/app"},
    "learnings accept": {"LEARNING_ID": "1"},
    "learnings reject": {"LEARNING_ID": "1"},
    "learnings remove": {"LEARNING_ID": "1"},
}

UNREACHABLE = 1  # GitLab answers 401, the model server refuses the connection


@dataclass(frozen=True)
class Accepted:
    values: frozenset[str]
    exit_codes: frozenset[int]
    reason: str


def _accepted(commands: tuple[str, ...], option: str, accepted: Accepted) -> dict:
    return {(command, option): accepted for command in commands}


GLOB = Accepted(ANY_TEXT, frozenset({0, UNREACHABLE}), "any text is a glob (it skips no file)")
MODEL_NAME = Accepted(
    ANY_TEXT,
    frozenset({UNREACHABLE}),
    "any text may be a served model name (vLLM serves paths too); the services are unreachable",
)
ZERO_IS_OFF = Accepted(frozenset({"0"}), frozenset({0, UNREACHABLE}), "0 turns it off")
FILE_NAME = Accepted(
    NUMBERS_AS_TEXT, frozenset({0}), "a file or folder name in the working directory"
)

# (command, option or argument) -> the hostile values it takes as legitimate, and the exit
# codes they end with. Everything not listed here must be refused: exit 2, one line.
ACCEPTED: dict[tuple[str, str], Accepted] = {
    **_accepted(("plan", "review"), "--exclude", GLOB),
    **_accepted(("review", "run", "eval", "loadtest"), "--model", MODEL_NAME),
    **_accepted(("plan", "review"), "--context-lines", ZERO_IS_OFF),
    **_accepted(("plan", "review"), "--scope-context-tokens", ZERO_IS_OFF),
    ("serve", "--host"): Accepted(
        frozenset({"nan", "inf", "0", "1e400", "2**70"}),
        frozenset({2}),
        "a host name (0 is 0.0.0.0); without a webhook secret serve stops before it listens",
    ),
    ("worker", "--grace-seconds"): Accepted(
        frozenset({"0"}), frozenset({0}), "0: release running jobs at once on SIGTERM"
    ),
    ("eval", "--tolerance"): Accepted(
        frozenset({"0"}), frozenset({UNREACHABLE}), "0: only the labelled line itself matches"
    ),
    ("loadtest", "--slo-decode-tps"): Accepted(
        frozenset({"0"}), frozenset({UNREACHABLE}), "0: no decode speed target"
    ),
    ("loadtest", "--slo-error-rate"): Accepted(
        frozenset({"0"}), frozenset({UNREACHABLE}), "0: no request may fail"
    ),
    ("loadtest", "--seed"): Accepted(frozenset({"0"}), frozenset({UNREACHABLE}), "the default"),
    ("report", "--output"): FILE_NAME,
    ("learnings add", "TEXT"): Accepted(
        ANY_TEXT, frozenset({UNREACHABLE, 2}), "any text may be taught (over 500 characters: 2)"
    ),
    ("learnings add", "--path"): GLOB,
    ("learnings add", "--group"): Accepted(
        ANY_TEXT, frozenset({2}), "a group path, refused beside the placeholder --project"
    ),
    ("learnings list", "--group"): Accepted(
        ANY_TEXT, frozenset({0, 2}), "a group path: an unknown group has no learnings"
    ),
    ("ci", "--codequality"): FILE_NAME,
    ("ci", "--analyzer-report"): Accepted(
        ANY_TEXT,
        frozenset({0}),
        "a report's path: ci stops outside a merge request pipeline before it reads one; in one, "
        "a missing or unreadable report is named in the summary (docs/analyzers.md)",
    ),
    ("ci", "--summary"): FILE_NAME,
    ("weights verify", "--state-file"): FILE_NAME,
}


def leaf_commands() -> dict[str, click.Command]:
    found: dict[str, click.Command] = {}

    def walk(group: click.Group, path: tuple[str, ...]) -> None:
        context = click.Context(group)
        for name in group.list_commands(context):
            command = group.get_command(context, name)
            assert command is not None
            if isinstance(command, click.Group):
                walk(command, (*path, name))
            else:
                found[" ".join((*path, name))] = command

    walk(main, ())
    return found


COMMANDS = leaf_commands()


def param_name(param: click.Parameter) -> str:
    if isinstance(param, click.Option):
        return next((o for o in param.opts if o.startswith("--")), param.opts[0])
    return param.human_readable_name


def takes_a_value(param: click.Parameter) -> bool:
    if isinstance(param, click.Option):
        return not (param.is_flag or param.count or param.hidden)
    return True


def arguments(command_name: str, fuzzed: click.Parameter, value: str) -> list[str]:
    """The command line: placeholders for the other required parameters, then ``value``."""
    command = COMMANDS[command_name]
    placeholders = PLACEHOLDERS.get(command_name, {})
    options: list[str] = []
    positional: list[str] = []
    for param in command.params:
        name = param_name(param)
        chosen = value if param is fuzzed else placeholders.get(name)
        if chosen is None:
            assert not param.required, f"{command_name}: give {name} a placeholder"
            continue
        if isinstance(param, click.Argument):
            positional.append(chosen)
        elif isinstance(param, click.Option) and param.is_flag:
            options.append(name)
        else:
            options.append(f"{name}={chosen}")
    return [*command_name.split(), *options, "--", *positional]


def names_the_option(param: click.Parameter, value: str, stderr: str) -> bool:
    """An option by name (or the setting it sets); an argument by name or by the value given
    (``eval``'s ``/dev/zero: not a directory``: a command has one argument of a kind)."""
    if isinstance(param, click.Option):
        setting_names = {o.lstrip("-").replace("-", "_") for o in param.opts}
        return any(o in stderr for o in param.opts) or any(n in stderr for n in setting_names)
    shown = {value, str(Path(value))} if value and "\0" not in value else set()
    return param.human_readable_name in stderr or any(form in stderr for form in shown)


@dataclass
class World:
    env: dict[str, str | None]
    database: Path
    data_dir: Path
    workdir: Path
    missing_dir: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("fuzz")
    database = root / "reviewbot.db"
    migrated_sqlite_url(tmp_path_factory, database)
    (root / "data").mkdir()
    (root / "work").mkdir()
    with FakeGitLab() as gitlab:
        unset = {n: None for n in os.environ if n.startswith(("REVIEWBOT_", "CI_", "GITLAB_"))}
        env: dict[str, str | None] = {
            **unset,
            "REVIEWBOT_CONFIG": "",
            "XDG_CONFIG_HOME": str(root / "config"),
            "XDG_DATA_HOME": str(root / "data"),
            "REVIEWBOT_DATABASE_URL": f"sqlite:///{database}",
            "REVIEWBOT_GITLAB_URL": gitlab.url,
            "REVIEWBOT_GITLAB_TOKEN": "unknown-token",
            "REVIEWBOT_LLM_BASE_URL": "http://127.0.0.1:1/v1",
            "REVIEWBOT_REQUEST_TIMEOUT_S": "5",
            "REVIEWBOT_GITLAB_TIMEOUT_S": "5",
        }
        yield World(env, database, root / "data", root / "work", str(root / "missing" / "x"))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def database_contents(path: Path) -> str:
    """A digest of the schema and every row of every table, as a reader sees them. In WAL mode
    a committed write sits in the ``-wal`` file until a checkpoint (which waits while another
    connection is open), so the main file's bytes alone would not show it."""
    found = hashlib.sha256()
    connection = sqlite3.connect(path)
    try:
        schema = connection.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name")
        tables = []
        for kind, name, sql in schema.fetchall():
            found.update(f"{kind} {name} {sql}\n".encode())
            tables += [name] if kind == "table" else []
        for table in tables:
            rows = sorted(map(repr, connection.execute(f'SELECT * FROM "{table}"')))
            found.update(f"{table} {len(rows)} {rows}\n".encode())
    finally:
        connection.close()
    return found.hexdigest()


def check(world: World, command_name: str, param: click.Parameter, label: str) -> str | None:
    """What is wrong with the command's answer to one hostile value (None: nothing)."""
    value = HOSTILE[label].replace(MISSING_DIR, world.missing_dir)
    args = arguments(command_name, param, value)
    before = database_contents(world.database)
    with tempfile.TemporaryDirectory(dir=world.workdir) as fresh:  # files made here: theirs
        os.chdir(fresh)
        result = CliRunner().invoke(main, args, env=world.env, input=SMALL_DIFF)
        os.chdir(world.workdir)
    name = param_name(param)
    where = f"{command_name} {name}={value!a}"
    errors = error_lines(result.stderr)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return f"{where}: {type(result.exception).__name__}: {result.exception}"
    if "Traceback" in result.output:
        return f"{where}: a traceback"
    if database_contents(world.database) != before or any(world.data_dir.iterdir()):
        return f"{where}: the database was written"
    accepted = ACCEPTED.get((command_name, name))
    if accepted is not None and label in accepted.values:
        if result.exit_code not in accepted.exit_codes:
            return f"{where}: exit {result.exit_code} (expected {set(accepted.exit_codes)})"
        if result.exit_code != 0 and len(errors) != 1:
            return f"{where}: exit {result.exit_code} with {len(errors)} lines: {errors}"
        return None
    if result.exit_code != 2:
        return f"{where}: exit {result.exit_code}, not 2: {errors[-1:] or result.output[-200:]}"
    if len(errors) != 1:
        return f"{where}: {len(errors)} lines on stderr: {errors}"
    if not names_the_option(param, value, errors[0]):
        return f"{where}: the message does not name {name}: {errors[0]}"
    return None


@pytest.mark.slow
@pytest.mark.parametrize("command_name", sorted(COMMANDS))
def test_every_option_refuses_hostile_values_in_one_line(
    world: World, command_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(world.workdir)
    problems = []
    for param in COMMANDS[command_name].params:
        if not takes_a_value(param):
            continue
        for label in HOSTILE:
            problem = check(world, command_name, param, label)
            if problem is not None:
                problems.append(problem)
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


def test_every_accepted_case_is_a_real_parameter_and_has_a_reason() -> None:
    for (command_name, name), accepted in ACCEPTED.items():
        params = {param_name(p) for p in COMMANDS[command_name].params}
        assert name in params, f"{command_name} has no {name}"
        assert accepted.values <= HOSTILE.keys() and accepted.reason
    for command_name, placeholders in PLACEHOLDERS.items():
        params = {param_name(p) for p in COMMANDS[command_name].params}
        assert placeholders.keys() <= params, f"{command_name}: {placeholders.keys() - params}"


def bounds_of(param: click.Parameter) -> list[str]:
    """The extreme values a numeric option's type allows (an open bound is not a value)."""
    kind = param.type
    if isinstance(kind, Integer):
        return [str(x) for x in (kind.low, kind.high) if x is not None]
    if isinstance(kind, Number):
        low = None if kind.low_open else kind.low
        high = None if kind.high_open else kind.high
        return [repr(x) for x in (low, high) if x is not None]
    return []


@pytest.mark.slow
@pytest.mark.parametrize("command_name", sorted(COMMANDS))
def test_the_bounds_of_every_numeric_option_are_usable(
    world: World, command_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The largest and smallest values a type lets through reach the library without a
    traceback (an overflow or a division by zero at the edge of the range)."""
    monkeypatch.chdir(world.workdir)
    problems = []
    for param in COMMANDS[command_name].params:
        for value in bounds_of(param):
            args = arguments(command_name, param, value)
            before = database_contents(world.database)
            result = CliRunner().invoke(main, args, env=world.env, input=SMALL_DIFF)
            where = f"{command_name} {param_name(param)}={value}"
            if result.exception is not None and not isinstance(result.exception, SystemExit):
                problems.append(f"{where}: {type(result.exception).__name__}: {result.exception}")
            elif database_contents(world.database) != before:
                problems.append(f"{where}: the database was written")
            elif result.exit_code == 2 and len(result.stderr.strip().splitlines()) != 1:
                problems.append(f"{where}: exit 2 without one line: {result.stderr[-300:]}")
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_a_write_still_in_the_wal_file_counts_as_a_write(tmp_path: Path) -> None:
    """While another connection is open SQLite does not checkpoint, so a command's write stays
    in ``-wal`` and the main file's bytes do not change: the check reads what a reader sees."""
    from reviewbot.queue import JobQueue
    from reviewbot.store import Store

    database = tmp_path / "reviewbot.db"
    url = f"sqlite:///{database}"
    upgrade(url)
    before, main_file = database_contents(database), digest(database)
    reader = sqlite3.connect(database)  # a worker or a listener with the file open
    try:
        reader.execute("SELECT count(*) FROM alembic_version").fetchall()
        store = Store.from_url(url)
        JobQueue(store).enqueue(project="group/app", mr_iid=1, head_sha=None, trigger="cli")
        store.close()
        assert digest(database) == main_file  # the bytes of the main file alone miss it
        assert database_contents(database) != before
    finally:
        reader.close()
