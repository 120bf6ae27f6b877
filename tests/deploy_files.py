"""Reading the deploy files the way systemd does: unit sections with repeated keys and
backslash continuations, and EnvironmentFile= files (KEY=VALUE, # comments)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

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


def executable(command: str) -> str:
    """The program of an Exec line, without systemd's prefixes (+, -, !, @, :)."""
    return shlex.split(command)[0].lstrip("+-!@:")
