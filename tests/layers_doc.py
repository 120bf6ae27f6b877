"""``python -m tests.layers_doc``: the Layers section of docs/architecture.md, from the one
table of layers (``tests/layers_table.py``).

It works like ``python -m reviewbot.commands.docs`` (the configuration and command-line
references): it rewrites only the text between its two markers, and ``--check`` names the page
when it is stale and writes nothing (``tests/test_docs.py`` runs the same comparison). It lives
in tests/ because its table does: the table is what ``tests/test_layers.py`` checks, and the
package never imports from tests/.

Owns: the section's Markdown: one row per folder (its path, layer, what it holds, and its
modules of another layer) and the known cycles between folders. Must not: hold a layer or a
folder of its own (a change is made in the table, then regenerated), or touch the page outside
its markers.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from tests.layers_table import (
    FOLDERS,
    KNOWN_FOLDER_CYCLES,
    LAYER_NAMES,
    MODULES,
    ROOT,
    folder_of,
)

REGENERATE = "python -m tests.layers_doc"
REPOSITORY_ROOT = Path(__file__).resolve().parent.parent
PAGE = "docs/architecture.md"
SECTION = "layers"
BEGIN = f"<!-- BEGIN GENERATED {SECTION}: edit tests/layers_table.py, then run `{REGENERATE}` -->"
END = f"<!-- END GENERATED {SECTION} -->"
# Folders that ship inside the package under another name (pyproject's package-dir).
SHIPPED_FROM = {"reviewbot.templates": "prompts", "reviewbot.migrations": "migrations"}
MODULE_FILE = re.compile(r"(?<![\w`/])((?:[a-z_0-9]+/)*[a-z_0-9]+\.py)\b")

EXIT_OK, EXIT_STALE, EXIT_BAD_INPUT = 0, 1, 2


class MarkersMissing(ValueError):
    """The page lacks the section's markers (or has them out of order)."""


def folder_path(folder: str) -> str:
    """``reviewbot.repo`` -> ``repo/``; the top level -> ``reviewbot/*.py``."""
    if folder == ROOT:
        return "reviewbot/*.py"
    if folder in SHIPPED_FROM:
        return f"{SHIPPED_FROM[folder]}/"
    return folder.removeprefix(f"{ROOT}.").replace(".", "/") + "/"


def module_path(module: str, root: Path = REPOSITORY_ROOT) -> str:
    """``reviewbot.repo.view`` -> ``repo/view.py`` (a package: its ``__init__.py``), relative
    to reviewbot/, as docs/architecture.md names modules."""
    path = module.removeprefix(f"{ROOT}.").replace(".", "/")
    return f"{path}.py" if (root / ROOT / f"{path}.py").exists() else f"{path}/__init__.py"


def _code(text: str) -> str:
    """Module files in prose as code."""
    return MODULE_FILE.sub(r"`\1`", text)


def render_layers() -> str:
    """The table of folders, by layer, then the known cycles between folders."""
    lines = [
        "| folder | layer | what it holds | its modules of another layer |",
        "|---|---|---|---|",
    ]
    ordered = sorted(FOLDERS, key=lambda name: FOLDERS[name].layer)
    for folder in ordered:
        own = FOLDERS[folder]
        others = []
        for level, name in LAYER_NAMES.items():
            listed = [
                module
                for module, layer in MODULES.items()
                if layer == level and folder_of(module) == folder
            ]
            if listed:
                others.append(f"{name}: " + ", ".join(f"`{module_path(m)}`" for m in listed))
        lines.append(
            f"| `{folder_path(folder)}` | {own.layer} {LAYER_NAMES[own.layer]} | {own.what} | "
            + "; ".join(others)
            + " |"
        )
    if not KNOWN_FOLDER_CYCLES:
        lines += ["", "Cycles between folders known today: none."]
    else:
        lines += ["", "Cycles between folders known today:", ""]
    for (level, folders), why in sorted(KNOWN_FOLDER_CYCLES.items()):
        named = ", ".join(f"`{folder_path(folder)}`" for folder in folders)
        lines.append(f"- {LAYER_NAMES[level]}: {named}. Why: {_code(why)}.")
    return "\n".join(lines)


def updated_text(text: str, body: str) -> str:
    """``text`` with the content between the section's markers replaced by ``body``."""
    start, stop = text.find(BEGIN), text.find(END)
    if start < 0 or stop < start:
        raise MarkersMissing(f"{PAGE} has no generated section {SECTION!r}: expected {BEGIN}")
    return text[: start + len(BEGIN)] + "\n" + body.strip("\n") + "\n" + text[stop:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=REGENERATE, description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    parser.add_argument("--root", type=Path, default=REPOSITORY_ROOT, help="the repository")
    args = parser.parse_args(argv)
    path = args.root / PAGE
    try:
        text = path.read_text(encoding="utf-8")
        wanted = updated_text(text, render_layers())
    except (OSError, MarkersMissing) as error:
        print(error, file=sys.stderr)
        return EXIT_BAD_INPUT
    if text == wanted:
        return EXIT_OK
    if args.check:
        print(f"{PAGE} is stale: run `{REGENERATE}`")
        return EXIT_STALE
    path.write_text(wanted, encoding="utf-8")
    print(f"{PAGE} is stale: rewritten")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
