"""docs/architecture.md names only what exists, and every module one review's steps use: a map
with a wrong or missing name sends a contributor nowhere."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "reviewbot"
MODULE_PATH = re.compile(r"(?<![\w./-])((?:[a-z_0-9]+/)*[a-z_0-9]+\.py)\b")
CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
FOLDER = re.compile(r"^[a-z_]+/$")
QUALIFIED = re.compile(r"^(?P<module>[a-z_]+(?:/[a-z_]+)*)\.(?P<name>[A-Za-z_]+)$")
REPOSITORY_FOLDERS = ("reviewbot/", "tests/", "migrations/", "prompts/", "docs/")


def page() -> str:
    return PAGE.read_text(encoding="utf-8")


def exists(path: str) -> bool:
    base = ROOT if path.startswith(REPOSITORY_FOLDERS) else PACKAGE
    return (base / path).exists()


def test_every_module_and_folder_it_names_exists() -> None:
    modules = MODULE_PATH.findall(page())
    folders = [span for span in CODE_SPAN.findall(page()) if FOLDER.match(span)]
    assert len(modules) > 20 and folders  # the patterns find what the page names
    assert [path for path in modules + folders if not exists(path)] == []


def test_every_qualified_name_it_writes_exists() -> None:
    spans = [span for span in CODE_SPAN.findall(page()) if not span.endswith(".py")]
    names = [m for span in spans if (m := QUALIFIED.match(span))]
    assert names  # the pattern finds the functions and records the page names
    missing = [
        match.group(0)
        for match in names
        if not hasattr(
            importlib.import_module("reviewbot." + match["module"].replace("/", ".")),
            match["name"],
        )
    ]
    assert missing == []


def test_the_map_names_every_module_the_steps_of_one_review_use() -> None:
    tree = ast.parse((PACKAGE / "mr.py").read_text(encoding="utf-8"))
    used = {
        node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("reviewbot.")
    }
    named = set(MODULE_PATH.findall(page()))
    paths = {module.removeprefix("reviewbot.").replace(".", "/") for module in used}
    missing = sorted(
        path for path in paths if f"{path}.py" not in named and not (PACKAGE / path).is_dir()
    )
    assert missing == []
