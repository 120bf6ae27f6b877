"""What every command shares: the option types, the shared options (declared once), `fail`
and the one error -> exit code decorator.

Owns: the one place where a command-line value is checked. Every option and argument that
takes a value has a type from here, so a value is finite, bounded and usable where it is parsed
(before any App, database or network is touched) and a bad one is one line that names the
option, exit 2. The bounds are named constants here for now; the settings file and the
environment are checked by `reviewbot.config`.

Must not: import an adapter or the pipeline at load time (`reviewbot plan` starts fast), know
what any one command does, or keep its own list of error classes (`reviewbot.errors` is the one
table of exit codes).
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import re
import stat
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import wraps
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from reviewbot.commands.terminal import terminal_text
from reviewbot.config import (
    MAX_CONFIG_FILE_BYTES,
    MAX_TOKENS,
    database_url_problem,
    http_url_problem,
    setting_bounds,
)
from reviewbot.effort import Effort, EffortChoice
from reviewbot.errors import disposition
from reviewbot.namespaces import project_path_problem
from reviewbot.window import AGE, AGE_UNITS, WindowError, parse_instant

__all__ = [
    "CONFIG_FILE",
    "INT32_MAX",
    "INT64_MAX",
    "MAX_CONTEXT_TOKENS",
    "AgeOrDate",
    "Checked",
    "DatabaseUrl",
    "GitRange",
    "Host",
    "HttpUrl",
    "InputDir",
    "InputFile",
    "Instant",
    "Integer",
    "Number",
    "OptionValueError",
    "OutputPath",
    "PathName",
    "ProjectRef",
    "Text",
    "base_url_option",
    "config_option",
    "database_url_option",
    "effort_choice",
    "effort_option",
    "emit_json",
    "fail",
    "gitlab_url_option",
    "json_option",
    "model_option",
    "one_line_errors",
    "options",
    "project_option",
]

F = TypeVar("F", bound=Callable[..., Any])

# --- bounds ----------------------------------------------------------------------------------

# Review, job and merge request ids are INTEGER columns (PostgreSQL's reach 2^31 - 1); project
# ids are BIGINT (2^63 - 1).
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# A context length, an output reserve or a prompt size: the settings' own bound (one source).
MAX_CONTEXT_TOKENS = MAX_TOKENS
# Rows a listing shows at once.
MAX_LIST_LIMIT = 10_000
# Leases, polls and grace periods: a day is longer than any of them sensibly is; a lease of
# `inf` would leave a killed worker's job untaken for ever.
MAX_WAIT_S = 86_400.0
# How far back `--since AGE` may reach (ten years): further is an overflow, not a window.
MAX_AGE = timedelta(days=3_653)
# Settings files (TOML) and model config.json files are a few kilobytes; /dev/zero is endless.
MAX_SETTINGS_FILE_BYTES = MAX_CONFIG_FILE_BYTES
# Free text (names, globs): a line, not a file.
MAX_TEXT_CHARS = 4_096
# An integer given on the command line has at most this many digits (2^63 has 19).
MAX_INTEGER_DIGITS = 30


# --- errors and exit codes -------------------------------------------------------------------


def fail(message: str, code: int) -> NoReturn:
    """One line on stderr, ``reviewbot: error: ...``, and exit ``code``; a message quoting
    data (a GitLab or database error) has nothing a terminal acts on (`terminal.terminal_text`)."""
    click.echo(f"reviewbot: error: {terminal_text(message)}", err=True)
    sys.exit(code)


def one_line_errors(command: F) -> F:
    """Turn known errors into one line on stderr and their exit code (`reviewbot.errors`);
    an unknown error is a bug and keeps its traceback."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except Exception as error:
            known = disposition(error)
            if known is None:
                raise
            fail(known.message(error), known.exit_code)

    return wrapper  # type: ignore[return-value]


def emit_json(data: Any) -> None:
    """``--json`` output: never NaN or Infinity (which JSON does not have)."""
    click.echo(json.dumps(data, indent=2, default=str, allow_nan=False))


# --- option types ----------------------------------------------------------------------------


class OptionValueError(click.BadParameter):
    """A value an option cannot take; the message names the option and is the whole line."""

    def format_message(self) -> str:
        return self.message


def option_name(param: click.Parameter | None) -> str:
    """``--lease-seconds`` for an option, ``JOB_ID`` for an argument."""
    if isinstance(param, click.Option):
        return next((o for o in param.opts if o.startswith("--")), param.opts[0])
    return param.human_readable_name if param is not None else "the value"


class _Checked(click.ParamType):
    """A type whose refusals are one line naming the option."""

    def refuse(
        self, message: str, param: click.Parameter | None, ctx: click.Context | None
    ) -> NoReturn:
        raise OptionValueError(f"{option_name(param)} {message}", ctx=ctx, param=param)

    def text(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """``value`` as one line of valid text (not empty, no NUL or other control character,
        no lone surrogate, at most MAX_TEXT_CHARS)."""
        text = str(value)
        if not text:
            self.refuse("must not be empty", param, ctx)
        if len(text) > MAX_TEXT_CHARS:
            self.refuse(f"is longer than {MAX_TEXT_CHARS} characters", param, ctx)
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
            self.refuse(f"must not hold control characters, got {text!a}", param, ctx)
        if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
            self.refuse(f"is not valid UTF-8 text, got {text!a}", param, ctx)
        return text


def _shown(number: float) -> str:
    """``1,024``, ``0.5``: as the settings' own messages show numbers."""
    return f"{number:g}" if isinstance(number, float) else f"{number:,}"


def _bounds(
    low: float | None, high: float | None, low_open: bool = False, high_open: bool = False
) -> str:
    """``between 1 and 100``, ``at least 1``, ``above 0 and at most 1``."""
    if low is not None and high is not None and not (low_open or high_open):
        return f"between {_shown(low)} and {_shown(high)}"
    lower = None if low is None else f"{'above' if low_open else 'at least'} {_shown(low)}"
    upper = None if high is None else f"{'below' if high_open else 'at most'} {_shown(high)}"
    return " and ".join(part for part in (lower, upper) if part) or "a number"


class Integer(_Checked):
    """A whole number in ``[low, high]``; the message reads like the library's own checks
    (``--concurrency must be between 1 and 100, got 0``)."""

    name = "integer"

    def __init__(
        self, low: int | None = None, high: int = INT64_MAX, *, condition: str | None = None
    ) -> None:
        self.low, self.high = low, high
        self.condition = condition or _bounds(low, high)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            text = self.text(value, param, ctx).strip()
            if not re.fullmatch(rf"[+-]?[0-9]{{1,{MAX_INTEGER_DIGITS}}}", text):
                self.refuse(f"must be a whole number, got {text!a}", param, ctx)
            number = int(text)
        if (self.low is not None and number < self.low) or number > self.high:
            self.refuse(f"must be {self.condition}, got {_shown(number)}", param, ctx)
        return number


def setting_integer(name: str) -> Integer:
    """The type of an option that sets setting ``name``: the values the setting takes, so a
    value refused in REVIEWBOT_* or the TOML file is refused on the command line too."""
    bounds = setting_bounds(name)
    if bounds is None:
        raise KeyError(f"setting {name} declares no bounds")
    low = math.floor(bounds.low) + 1 if bounds.above_low else math.ceil(bounds.low)
    return Integer(low, math.floor(bounds.high))


class Number(_Checked):
    """A finite number within bounds (nan, inf and 1e400 are refused); ``condition`` words the
    bounds when the library has its own words for them."""

    name = "number"

    def __init__(
        self,
        low: float | None = None,
        high: float | None = None,
        *,
        low_open: bool = False,
        high_open: bool = False,
        condition: str | None = None,
    ) -> None:
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open
        self.condition = condition or _bounds(low, high, low_open, high_open)

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        else:
            text = self.text(value, param, ctx).strip()
            try:
                number = float(text)
            except ValueError:
                self.refuse(f"must be a number, got {text!a}", param, ctx)
        if not math.isfinite(number):
            self.refuse(f"must be a finite number, got {str(value)!a}", param, ctx)
        below = self.low is not None and (
            number <= self.low if self.low_open else number < self.low
        )
        above = self.high is not None and (
            number >= self.high if self.high_open else number > self.high
        )
        if below or above:
            self.refuse(f"must be {self.condition}, got {number:g}", param, ctx)
        return number


class Checked(_Checked):
    """Text that ``check`` accepts: it raises ValueError with its own one-line reason (a GPU
    name the table does not know, say). The text itself is passed on."""

    name = "text"

    def __init__(self, check: Callable[[str], object]) -> None:
        self.check = check

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = self.text(value, param, ctx)
        try:
            self.check(text)
        except ValueError as error:
            raise OptionValueError(f"{option_name(param)}: {error}", ctx=ctx, param=param) from None
        return text


class Text(_Checked):
    """One line of text: a model name, a glob, a list of formats."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        return self.text(value, param, ctx)


class ProjectRef(_Checked):
    """A GitLab project: its numeric id or its path ``group/name``."""

    name = "project"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = self.text(value, param, ctx)
        if text.isascii() and text.isdigit():
            Integer(1).convert(text, param, ctx)
            return text
        problem = project_path_problem(text)  # the webhook's rule (reviewbot.namespaces)
        if problem is not None:
            self.refuse(
                f"must be a project id (a positive number) or a path: {text!a} {problem}",
                param,
                ctx,
            )
        return text


HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
MAX_HOST_CHARS = 253


class Host(_Checked):
    """An address to listen on: an IP address or a host name."""

    name = "host"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = self.text(value, param, ctx)
        try:
            ipaddress.ip_address(text)
            return text
        except ValueError:
            pass
        labels = text.removesuffix(".").split(".")
        if len(text) > MAX_HOST_CHARS or not all(HOST_LABEL.fullmatch(x) for x in labels):
            self.refuse(f"must be an IP address or a host name, got {text!a}", param, ctx)
        return text


class HttpUrl(_Checked):
    """An http:// or https:// URL with a host that parses; a password in it is never shown."""

    name = "url"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = self.text(value, param, ctx)
        problem = http_url_problem(text)
        if problem:
            self.refuse(problem, param, ctx)
        return text


class DatabaseUrl(_Checked):
    """A SQLAlchemy URL of a supported database; a password in it is never shown."""

    name = "url"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = self.text(value, param, ctx)
        problem = database_url_problem(text)
        if problem:
            self.refuse(problem, param, ctx)
        return text


class GitRange(_Checked):
    """``BASE..HEAD`` or ``BASE...HEAD`` (whether they are commits, git says)."""

    name = "range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = self.text(value, param, ctx)
        if ".." not in text:
            self.refuse(f"bad range {text!a}: expected BASE..HEAD or BASE...HEAD", param, ctx)
        return text


class PathName(_Checked):
    """A name the file system can take (not empty, no NUL, encodable); whether anything is
    there is the command's to say."""

    name = "path"

    def path(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        text = self.text(value, param, ctx)
        try:
            os.fsencode(text)
        except UnicodeError:
            self.refuse(f"is not a usable file name, got {text!a}", param, ctx)
        return Path(text)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        return self.path(value, param, ctx)

    def found(
        self, path: Path, param: click.Parameter | None, ctx: click.Context | None
    ) -> os.stat_result | None:
        """What is at ``path`` (None: nothing); a name the system refuses to look up (too
        long, a loop of links, no permission) is refused here, not a traceback."""
        try:
            return path.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as error:
            self.refuse(f"cannot use {path}: {error.strerror}", param, ctx)


class InputFile(PathName):
    """A regular file to read, at most ``max_bytes`` (``-``: stdin, where ``allow_stdin``)."""

    name = "file"

    def __init__(self, max_bytes: int = MAX_SETTINGS_FILE_BYTES, allow_stdin: bool = False):
        self.max_bytes, self.allow_stdin = max_bytes, allow_stdin

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if self.allow_stdin and value == "-":
            return "-"
        path = self.path(value, param, ctx)
        try:
            found = path.stat()
        except OSError as error:
            self.refuse(f"cannot read {path}: {error.strerror}", param, ctx)
        if not stat.S_ISREG(found.st_mode):
            self.refuse(f"{path} is not a regular file", param, ctx)
        if found.st_size > self.max_bytes:
            self.refuse(f"{path} is larger than {self.max_bytes:,} bytes", param, ctx)
        return str(path)

    def check(self, value: str, option: str) -> str:
        """The same checks, made by the command itself once an option this one depends on
        is known; a refusal names ``option``."""
        return self.convert(value, click.Option([option]), click.get_current_context(silent=True))


class InputDir(PathName):
    """A directory that exists."""

    name = "directory"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        path = self.path(value, param, ctx)
        found = self.found(path, param, ctx)
        if found is None or not stat.S_ISDIR(found.st_mode):
            self.refuse(f"{path}: not a directory", param, ctx)
        return path


class OutputPath(PathName):
    """A file (or with ``directory``, a folder) to write: it is one already or can be made
    in a folder that exists."""

    name = "path"

    def __init__(self, directory: bool = False) -> None:
        self.directory = directory

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        path = self.path(value, param, ctx)
        found = self.found(path, param, ctx)
        if found is not None:
            if self.directory and not stat.S_ISDIR(found.st_mode):
                self.refuse(f"{path} is not a directory", param, ctx)
            if not self.directory and not stat.S_ISREG(found.st_mode):
                self.refuse(f"{path} is not a regular file", param, ctx)
            return path
        parent = path.absolute().parent
        in_folder = self.found(parent, param, ctx)
        if in_folder is None or not stat.S_ISDIR(in_folder.st_mode):
            self.refuse(f"{path}: the folder {parent} does not exist", param, ctx)
        return path


class Instant(_Checked):
    """A date (midnight UTC) or an ISO 8601 time."""

    name = "date"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime:
        if isinstance(value, datetime):
            return value
        text = self.text(value, param, ctx)
        try:
            return parse_instant(text, option_name(param))
        except (WindowError, OverflowError) as error:
            raise OptionValueError(str(error), ctx=ctx, param=param) from None


class AgeOrDate(_Checked):
    """An age before now (``14d``, ``12h``, ``2w``, ``30m``; at most MAX_AGE) or a date."""

    name = "age_or_date"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> timedelta | datetime:
        if isinstance(value, timedelta | datetime):
            return value
        text = self.text(value, param, ctx)
        match = AGE.match(text)
        if match is None:
            return Instant().convert(text, param, ctx)
        amount, unit = int(match.group(1)), AGE_UNITS[match.group(2)]
        if amount > MAX_AGE // unit:  # compared as counts: the timedelta itself may overflow
            self.refuse(f"{text!a} reaches back more than {MAX_AGE.days} days", param, ctx)
        return amount * unit


CONFIG_FILE = InputFile()


# --- shared options --------------------------------------------------------------------------


def options(*declared: Callable[[F], F]) -> Callable[[F], F]:
    """Apply several option decorators in the order written."""

    def apply(command: F) -> F:
        for option in reversed(declared):
            command = option(command)
        return command

    return apply


def config_option(command: F) -> F:
    """``--config FILE``: the TOML settings file."""
    return click.option(
        "--config", "config_file", type=CONFIG_FILE, metavar="FILE", help="TOML settings file."
    )(command)


def json_option(help: str = "Machine-readable output.") -> Callable[[F], F]:
    """``--json``."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def database_url_option(command: F) -> F:
    """``--database-url URL``."""
    return click.option(
        "--database-url",
        type=DatabaseUrl(),
        metavar="URL",
        help="Database (default: REVIEWBOT_DATABASE_URL or the SQLite file in the user data "
        "directory).",
    )(command)


def project_option(
    help: str = "Only this project (default: all).", *, required: bool = False
) -> Callable[[F], F]:
    """``--project ID_OR_PATH``: a GitLab project, by its id or its path group/name."""
    return click.option(
        "--project", type=ProjectRef(), required=required, metavar="ID_OR_PATH", help=help
    )


def gitlab_url_option(command: F) -> F:
    """``--gitlab-url URL``."""
    return click.option(
        "--gitlab-url",
        type=HttpUrl(),
        metavar="URL",
        help="GitLab URL (default $REVIEWBOT_GITLAB_URL).",
    )(command)


def base_url_option(
    help: str = "vLLM URL (default $REVIEWBOT_LLM_BASE_URL).",
) -> Callable[[F], F]:
    """``--base-url URL``: the model server."""
    return click.option("--base-url", type=HttpUrl(), metavar="URL", help=help)


def effort_option(command: F) -> F:
    """``--effort quick|standard|deep``: this run's review effort (docs/effort.md)."""
    return click.option(
        "--effort",
        type=click.Choice([effort.value for effort in Effort]),
        help="This run's review effort, before the project's, the trigger's and the "
        "review_effort setting (docs/effort.md).",
    )(command)


def effort_choice(effort: str | None) -> EffortChoice | None:
    """The run's effort from ``--effort`` (None: not given, the settings choose)."""
    return EffortChoice(Effort(effort), "--effort") if effort else None


def model_option(command: F) -> F:
    """``--model NAME``: the served model."""
    return click.option(
        "--model",
        type=Text(),
        metavar="NAME",
        help="Served model name (default: the server's first).",
    )(command)


def git_range_option(
    help: str = "Range in a local git repository (BASE...HEAD: from the merge base).",
) -> Callable[[F], F]:
    """``--git BASE..HEAD``."""
    return click.option("--git", "git_range", type=GitRange(), metavar="BASE..HEAD", help=help)


def repo_option(command: F) -> F:
    """``--repo DIR``: the repository of ``--git``."""
    return click.option(
        "--repo",
        type=InputDir(),
        default=".",
        show_default=True,
        metavar="DIR",
        help="Repository for --git.",
    )(command)
