"""Reading the deploy files the way systemd does: unit sections with repeated keys and
backslash continuations, and EnvironmentFile= files (KEY=VALUE, # comments); and the nginx
config the way nginx does: nested blocks of ``name args;`` directives."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import click
from click.testing import CliRunner

from reviewbot.commands import main

ROOT = Path(__file__).parent.parent
SYSTEMD = ROOT / "deploy" / "systemd"
VLLM = ROOT / "deploy" / "vllm"
NGINX = ROOT / "deploy" / "nginx"
UNIT_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def read_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """Sections -> key -> every value given (systemd allows repeating Environment= etc.)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    logical: list[str] = []
    for raw in path.read_text().splitlines():
        if raw.endswith("\\"):
            logical.append(raw[:-1])
            continue
        line = " ".join(part.strip() for part in [*logical, raw]).strip()
        logical = []
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"{path.name}: key outside a section: {line}"
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def read_env_file(path: Path) -> dict[str, str]:
    values = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: not KEY=VALUE: {line}"
        values[key.strip()] = value.strip()
    return values


def expand_command(command: str, env: dict[str, str]) -> list[str]:
    """argv of an Exec line: ${VAR} is one word, $VAR splits into words (systemd's rules)."""
    argv: list[str] = []
    for word in shlex.split(command):
        whole = UNIT_VARIABLE.fullmatch(word)
        if whole and whole.group(2):
            argv.extend(env[whole.group(2)].split())
            continue
        argv.append(UNIT_VARIABLE.sub(lambda m: env[m.group(1) or m.group(2)], word))
    return argv


def _command_path(words: list[str]) -> list[str]:
    """The leading words that name a command, through groups (``db upgrade``, ``feedback
    sync``); the first word alone for a command not built yet."""
    path: list[str] = []
    command: click.Command = main
    for word in words:
        if not isinstance(command, click.Group):
            break
        found = command.get_command(click.Context(command), word)
        if found is None:
            break
        path.append(word)
        command = found
    return path or words[:1]


def check_reviewbot_args(args: list[str], where: str) -> None:
    """``reviewbot ARGS`` names a real command, and every option it gives is one of its own."""
    options = [a for a in args if a.startswith("--")]
    words = [a for a in args if not a.startswith("-")]
    command = _command_path(words)
    help_text = CliRunner().invoke(main, [*command, "--help"]).output
    assert "Usage:" in help_text, f"{where}: no command {command}"
    for option in options:
        assert option in help_text, f"{where}: {option} is not an option of {command}"


def executable(command: str) -> str:
    """The program of an Exec line, without systemd's prefixes (+, -, !, @, :)."""
    return shlex.split(command)[0].lstrip("+-!@:")


# --- nginx -----------------------------------------------------------------------------------

# A quoted string, a brace or semicolon, a comment (a # where a token starts), or a bare word:
# the tokens of nginx's config lexer.
_NGINX_TOKEN = re.compile(r""""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[{};]|#[^\n]*|[^\s{};"']+""")
NGINX_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
NGINX_TIME_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass
class NginxBlock:
    """One ``name args { ... }`` block: its own directives in order, and its inner blocks."""

    name: str
    args: list[str]
    directives: list[tuple[str, list[str]]] = field(default_factory=list)
    blocks: list[NginxBlock] = field(default_factory=list)
    parent: NginxBlock | None = field(default=None, repr=False, compare=False)

    def children(self, name: str) -> Iterator[NginxBlock]:
        return (block for block in self.blocks if block.name == name)

    def own(self, name: str) -> list[list[str]]:
        """The arguments of every ``name`` directive of this block itself."""
        return [args for directive, args in self.directives if directive == name]

    def effective(self, name: str) -> list[list[str]]:
        """``name`` as nginx applies it here: a block's own directives replace its parents'
        (true of every inherited directive nginx has, limit_req and allow/deny included)."""
        block: NginxBlock | None = self
        while block is not None:
            found = block.own(name)
            if found:
                return found
            block = block.parent
        return []


def read_nginx(path: Path) -> NginxBlock:
    """The config as a tree under a root block (the http {} context it is included in)."""
    root = NginxBlock("http", [])
    stack = [root]
    words: list[str] = []
    for token in _NGINX_TOKEN.findall(path.read_text()):
        if token.startswith("#"):
            continue
        if token == "{":
            block = NginxBlock(words[0], words[1:], parent=stack[-1])
            stack[-1].blocks.append(block)
            stack.append(block)
            words = []
        elif token == "}":
            assert not words and len(stack) > 1, f"{path.name}: unbalanced braces"
            stack.pop()
        elif token == ";":
            stack[-1].directives.append((words[0], words[1:]))
            words = []
        else:
            words.append(token.strip("\"'"))
    assert len(stack) == 1 and not words, f"{path.name}: unclosed block or directive"
    return root


def nginx_size(value: str) -> int:
    """Bytes of an nginx size (``1000000``, ``8m``)."""
    number, unit = re.fullmatch(r"(\d+)([kmg]?)", value.lower()).groups()  # type: ignore[union-attr]
    return int(number) * NGINX_SIZE_UNITS[unit]


def nginx_seconds(value: str) -> float:
    """Seconds of an nginx time (``3600s``, ``1h``, ``60``: seconds when no unit)."""
    number, unit = re.fullmatch(r"(\d+)(ms|s|m|h|d)?", value).groups()  # type: ignore[union-attr]
    return int(number) * NGINX_TIME_UNITS[unit or "s"]
