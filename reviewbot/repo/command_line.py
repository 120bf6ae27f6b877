"""The compact repository tool's command line: what ``repo(cmd)`` asks, as one typed tool call.

The compact form (``tools = "on"``, docs/tools.md) offers one tool, ``repo``, whose single
string argument reads like a read-only shell command, because a model knows ``cat``, ``grep``
and ``ls`` without a schema: its whole schema costs about 60 prompt tokens where the four typed
schemas cost about 340, which is what a one-chunk review paid for tools it did not call
(issue 34). Nothing here runs a shell: :func:`parse_command` turns the words into the typed
call the four tools answer (:mod:`reviewbot.repo.tools`), or says why it cannot, with the forms
it reads:

- ``cat [-n] FILE`` (also ``FILE:A-B``), ``sed -n 'A,Bp' FILE``, ``head [-n N] FILE``:
  ``read_file``;
- ``grep [-r] [-n] [-E | -F] [-e] TEXT [PATH | GLOB]``: ``search_code`` (``-E``: the safe
  regular-expression subset; otherwise a fixed string);
- ``ls [-l] [-a] [DIR]``: ``list_directory``;
- ``def NAME``: ``find_definition``.

Pipes, redirections and command lists are refused: one command a call.

Owns: splitting and reading the command line. Must not: read the repository (the tools do) or
raise for anything the model sends.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

__all__ = ["COMMAND_FORMS", "CommandProblem", "TypedCall", "parse_command"]

COMMAND_FORMS = (
    "cat FILE[:A-B] | sed -n 'A,Bp' FILE | head -n N FILE | grep [-E] TEXT [PATH|GLOB] | "
    "ls [DIR] | def NAME"
)
MAX_COMMAND_CHARS = 1000
DEFAULT_HEAD_LINES = 10
OPERATOR_CHARACTERS = "|;&<>"
SED_RANGE = re.compile(r"(\d+)(?:,(\d+))?p")
FILE_RANGE = re.compile(r"(.+?):(\d+)(?:-(\d+))?")
READ_FILE, SEARCH_CODE = "read_file", "search_code"
FIND_DEFINITION, LIST_DIRECTORY = "find_definition", "list_directory"
CAT_FLAGS = frozenset({"-n", "-b"})
LS_FLAGS = frozenset({"-l", "-a", "-la", "-al", "-1", "-F", "-R"})
GREP_KEPT = frozenset("rRnIsHE")  # letters of grep flags that change nothing here but -E


@dataclass(frozen=True)
class TypedCall:
    """The typed tool a command stands for, with that tool's arguments."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class CommandProblem:
    """Why a command is not read; the model is answered with it and the forms."""

    reason: str

    def explain(self) -> str:
        return f"{self.reason}; this tool reads: {COMMAND_FORMS}"


def parse_command(command: object) -> TypedCall | CommandProblem:
    """The typed call ``command`` asks for, or why it cannot be read."""
    if not isinstance(command, str) or not command.strip():
        return CommandProblem("cmd must be a non-empty command")
    if len(command) > MAX_COMMAND_CHARS or "\x00" in command:
        return CommandProblem(f"cmd must be at most {MAX_COMMAND_CHARS} characters, without NUL")
    try:
        words = _split(command)
    except ValueError as error:
        return CommandProblem(f"cannot split the command: {error}")
    if not words:
        return CommandProblem("cmd must be a non-empty command")
    if any(set(word) <= set(OPERATOR_CHARACTERS) for word in words):
        return CommandProblem("one command a call: no pipes, redirections or command lists")
    verb, rest = words[0], words[1:]
    reader = VERBS.get(verb.rsplit("/", 1)[-1])
    if reader is None:
        return CommandProblem(f"unknown command {verb!r}")
    return reader(rest)


def _split(command: str) -> list[str]:
    """The words, with an unquoted operator (``;``, ``|``, ``&``, ``<``, ``>``) a word of its
    own even when written against another (``a;``), so that it is seen and refused."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=OPERATOR_CHARACTERS)
    lexer.whitespace_split = True
    return list(lexer)


def _cat(words: list[str]) -> TypedCall | CommandProblem:
    files = [word for word in words if word not in CAT_FLAGS]
    if len(files) != 1:
        return CommandProblem("cat reads one FILE")
    return _read(files[0])


def _read(target: str, start: int | None = None, end: int | None = None) -> TypedCall:
    ranged = FILE_RANGE.fullmatch(target) if start is None else None
    if ranged is not None:
        target, start = ranged[1], int(ranged[2])
        end = int(ranged[3]) if ranged[3] else start
    arguments: dict[str, Any] = {"path": target}
    if start is not None:
        arguments["start_line"] = start
    if end is not None:
        arguments["end_line"] = end
    return TypedCall(READ_FILE, arguments)


def _sed(words: list[str]) -> TypedCall | CommandProblem:
    if len(words) != 3 or words[0] != "-n":
        return CommandProblem("sed reads as: sed -n 'A,Bp' FILE")
    matched = SED_RANGE.fullmatch(words[1])
    if matched is None:
        return CommandProblem(f"sed range {words[1]!r} is not A,Bp")
    start = int(matched[1])
    return _read(words[2], start, int(matched[2]) if matched[2] else start)


def _head(words: list[str]) -> TypedCall | CommandProblem:
    count, rest = DEFAULT_HEAD_LINES, list(words)
    if rest and rest[0] == "-n" and len(rest) > 1:
        if not rest[1].isdigit():
            return CommandProblem(f"head -n needs a number of lines, not {rest[1]!r}")
        count, rest = int(rest[1]), rest[2:]
    elif rest and re.fullmatch(r"-n?\d+", rest[0]):
        count, rest = int(rest[0].lstrip("-n")), rest[1:]
    if len(rest) != 1:
        return CommandProblem("head reads one FILE")
    return _read(rest[0], 1, max(count, 1))


def _grep(words: list[str]) -> TypedCall | CommandProblem:
    regex, operands, rest = False, [], list(words)
    while rest:
        word = rest.pop(0)
        if word == "-e" and rest:
            operands.append(rest.pop(0))
        elif word == "--":
            operands += rest
            rest = []
        elif word.startswith("-") and len(word) > 1 and not operands:
            letters = set(word[1:])
            if not letters <= GREP_KEPT | {"F"}:
                return CommandProblem(f"grep option {word!r} is not read (only -r -n -E -F -e)")
            regex = regex or "E" in letters
        else:
            operands.append(word)
    if not operands or len(operands) > 2:
        return CommandProblem("grep reads one TEXT and at most one PATH or GLOB")
    arguments: dict[str, Any] = {"pattern": operands[0], "regex": regex}
    if len(operands) == 2 and _as_glob(operands[1]):
        arguments["path_glob"] = _as_glob(operands[1])
    return TypedCall(SEARCH_CODE, arguments)


def _as_glob(path: str) -> str:
    """A directory operand searches below it; ``.`` the whole repository."""
    path = path.removeprefix("./")
    if path in ("", "."):
        return ""
    return path.rstrip("/") + "/*" if path.endswith("/") else path


def _ls(words: list[str]) -> TypedCall | CommandProblem:
    paths = [word for word in words if word not in LS_FLAGS]
    if len(paths) > 1:
        return CommandProblem("ls lists one DIR")
    path = paths[0].removeprefix("./").rstrip("/") if paths else ""
    return TypedCall(LIST_DIRECTORY, {"path": "" if path == "." else path})


def _def(words: list[str]) -> TypedCall | CommandProblem:
    if len(words) != 1:
        return CommandProblem("def takes one NAME (a name or Class.method)")
    return TypedCall(FIND_DEFINITION, {"symbol": words[0]})


VERBS = {"cat": _cat, "sed": _sed, "head": _head, "grep": _grep, "ls": _ls, "def": _def}
