"""The one direction of imports: entry points -> pipeline -> adapters -> pure core, by the one
table of layers in ``tests/layers_table.py`` (a folder has one layer, a new module inherits it;
only the modules of another layer than their folder's are listed), both between modules and
between folders, with no cycle between modules and none between folders but the known ones;
only the entry points (``reviewbot/commands/``) import click or rich; the size budget; every
module's docstring says what it owns and what it must not do; and the core reads the process's
environment in one function only (``config.load_settings``).

For the layers of modules only imports that run when a module loads count (not those inside
functions, nor those under ``if TYPE_CHECKING``); between folders, and for cycles, imports
inside functions count too; for click and rich every import counts, wherever it is.
docs/architecture.md (Layers) shows the same table, written from it by
``python -m tests.layers_doc``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import TypeVar

import pytest

from tests.layers_table import (
    CORE,
    ENTRY_POINTS,
    FOLDERS,
    KNOWN_FOLDER_CYCLES,
    LAYER_NAMES,
    MODULES,
    ROOT,
    folder_of,
    layer_of,
)

PACKAGE = Path(__file__).resolve().parent.parent / "reviewbot"

COMMANDS = "reviewbot.commands"
MIGRATIONS = "reviewbot.migrations"


# Folders at the top of the repository that ship inside the package (pyproject's package-dir).
SHIPPED_AS = {"prompts": "reviewbot.templates", "migrations": "reviewbot.migrations"}
# Alembic loads each revision script itself: they belong to the migrations entry point.
REVISIONS = "reviewbot.migrations.versions."


def module_name(path: Path, root: Path, package: str) -> str:
    parts = (package, *path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    roots = {PACKAGE: "reviewbot"} | {
        PACKAGE.parent / top: name for top, name in SHIPPED_AS.items()
    }
    return {
        module_name(path, root, package): path
        for root, package in roots.items()
        for path in sorted(root.rglob("*.py"))
    }


def _imported(nodes: list[ast.AST]) -> set[str]:
    """reviewbot modules the import statements among ``nodes`` name."""
    found: set[str] = set()
    for child in nodes:
        if isinstance(child, ast.Import):
            found |= {alias.name for alias in child.names}
        elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
            found.add(child.module)
            found |= {f"{child.module}.{alias.name}" for alias in child.names}
    known = modules()
    return {name for name in found if name.startswith("reviewbot") and name in known}


def load_time_imports(path: Path) -> set[str]:
    """reviewbot modules imported when ``path`` loads (top level, not TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes: list[ast.AST] = []
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        nodes += ast.walk(node) if isinstance(node, ast.If | ast.Try) else [node]
    return _imported(nodes)


def all_imports(path: Path) -> set[str]:
    """reviewbot modules ``path`` imports anywhere, inside functions too (not TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [
        child
        for node in tree.body
        if not (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test))
        for child in ast.walk(node)
    ]
    return _imported(nodes)


def layer(name: str) -> int:
    return layer_of(name)


def folders() -> set[str]:
    """Each folder of a root (reviewbot/, prompts/, migrations/) holding a module, as a package
    name: the top level, each folder right below it, and the shipped folders themselves."""
    return {
        ".".join(name.split(".")[:2]) if path.parent != PACKAGE else ROOT
        for name, path in modules().items()
    }


def test_every_folder_has_a_layer() -> None:
    """A new module takes its folder's layer; a new folder needs its line in the table."""
    assert sorted(folders() - FOLDERS.keys()) == [], "give these folders a layer in FOLDERS"
    assert sorted(FOLDERS.keys() - folders()) == [], "these folders are gone: drop them"


def test_every_module_of_another_layer_than_its_folder_exists_and_differs() -> None:
    known = modules()
    assert sorted(set(MODULES) - set(known)) == [], "no such module: drop it from MODULES"
    same = sorted(name for name, own in MODULES.items() if own == FOLDERS[folder_of(name)].layer)
    assert same == [], "these have their folder's layer already: drop them from MODULES"


def test_only_the_commands_and_alembic_are_entry_points() -> None:
    """reviewbot.commands: every command; reviewbot.migrations: Alembic's environment and
    revisions, which Alembic loads itself. Nothing else is an entry point."""
    entry_points = {name for name, folder in FOLDERS.items() if folder.layer == ENTRY_POINTS}
    assert entry_points == {COMMANDS, MIGRATIONS}
    assert [name for name, own in MODULES.items() if own == ENTRY_POINTS] == []
    assert {name for name in modules() if layer(name) == ENTRY_POINTS} == {
        name for name in modules() if folder_of(name) in entry_points
    }


@pytest.mark.parametrize("name", sorted(modules()))
def test_a_module_imports_nothing_from_a_higher_layer(name: str) -> None:
    upward = {other for other in load_time_imports(modules()[name]) if layer(other) > layer(name)}
    assert not upward, f"{name} (layer {layer(name)}) imports {sorted(upward)}"


def _inside(package: str, names: tuple[str, ...]) -> bool:
    return all(name == package or name.startswith(f"{package}.") for name in names)


@pytest.mark.slow
def test_there_is_no_import_cycle() -> None:
    """Not even through an import inside a function (report/document.py imports report/html.py
    when it writes HTML, so report/html.py must not import report/document.py)."""
    graph = {name: all_imports(path) for name, path in modules().items()}
    done: set[str] = set()

    def visit(name: str, trail: tuple[str, ...]) -> None:
        if name in trail:
            cycle = (*trail[trail.index(name) :], name)
            # a package importing its own submodules (re-exports) is not a cycle; a module whose
            # name merely starts like another's (repo, repo_policy) is not its submodule
            if not any(_inside(root, cycle) for root in cycle):
                pytest.fail("import cycle: " + " -> ".join(cycle))
            return
        if name in done:
            return
        for other in sorted(graph.get(name, ())):
            visit(other, (*trail, name))
        done.add(name)

    for name in graph:
        visit(name, ())


# --- between folders --------------------------------------------------------------------------

# A node of the folders' graph is a folder's modules of one layer: a folder of one layer is one
# node, a folder that mixes layers (the top level, repo/, ops/ ...) one node per layer it holds.
# An arrow is an import, anywhere in a module (inside functions too, not TYPE_CHECKING).
FolderNode = tuple[str, int]
Node = TypeVar("Node", str, FolderNode)


def folder_node(name: str) -> FolderNode:
    return folder_of(name), layer(name)


def shown(node: FolderNode) -> str:
    folder, level = node
    return f"{folder} ({LAYER_NAMES[level]})"


def folder_arrows() -> dict[tuple[FolderNode, FolderNode], set[str]]:
    """Each arrow between two nodes, with the module imports that make it."""
    arrows: dict[tuple[FolderNode, FolderNode], set[str]] = {}
    for name, path in modules().items():
        for other in all_imports(path):
            if (ends := (folder_node(name), folder_node(other)))[0] != ends[1]:
                arrows.setdefault(ends, set()).add(f"{name} -> {other}")
    return arrows


def strongly_connected(arrows: set[tuple[Node, Node]]) -> list[list[Node]]:
    """The groups of two or more nodes each of which reaches every other (the cycles)."""
    graph: dict[Node, set[Node]] = {}
    for start, end in arrows:
        graph.setdefault(start, set()).add(end)
        graph.setdefault(end, set())

    def reached(node: Node) -> set[Node]:
        seen: set[Node] = set()
        todo = [node]
        while todo:
            for other in graph[todo.pop()] - seen:
                seen.add(other)
                todo.append(other)
        return seen

    reach = {node: reached(node) for node in graph}
    groups = {
        frozenset({node} | {other for other in reach[node] if node in reach[other]})
        for node in graph
    }
    return sorted((sorted(group) for group in groups if len(group) > 1), key=str)


@pytest.mark.slow
def test_no_folder_imports_a_folder_of_a_higher_layer() -> None:
    upward = {
        f"{shown(start)} -> {shown(end)}": sorted(through)
        for (start, end), through in folder_arrows().items()
        if end[1] > start[1]
    }
    assert upward == {}


@pytest.mark.slow
def test_the_cycles_between_folders_are_the_known_ones() -> None:
    """A cycle stays in one layer (no arrow goes up); each is named by its layer and folders."""
    arrows = folder_arrows()
    found = {
        (group[0][1], tuple(sorted(folder for folder, _ in group)))
        for group in strongly_connected(set(arrows))
    }
    new = {
        " <-> ".join(folders): sorted(
            import_
            for (start, end), through in arrows.items()
            if start[0] in folders and end[0] in folders and start[1] == end[1] == level
            for import_ in through
        )
        for level, folders in found - KNOWN_FOLDER_CYCLES.keys()
    }
    assert new == {}, "new cycles between folders: import the other way, or move a module"
    gone = sorted(KNOWN_FOLDER_CYCLES.keys() - found)
    assert gone == [], "these cycles are gone (or changed): update KNOWN_FOLDER_CYCLES"


def test_every_known_cycle_gives_a_reason() -> None:
    assert all(len(reason.split()) >= 8 for reason in KNOWN_FOLDER_CYCLES.values())


def test_the_cycle_finder_finds_cycles_and_only_them() -> None:
    arrows = {("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e"), ("e", "d"), ("f", "a")}
    assert strongly_connected(arrows) == [["a", "b", "c"], ["d", "e"]]
    assert strongly_connected({("a", "b"), ("b", "c")}) == []


# --- click and rich: only the commands -------------------------------------------------------

# Terminal libraries: parsing options and drawing tables and progress bars is the commands'
# job; the library takes callbacks for progress and returns data.
TERMINAL_LIBRARIES = ("click", "rich")


def every_import(path: Path) -> set[str]:
    """Every module ``path`` imports, at any level: top, inside functions, TYPE_CHECKING."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def is_command_module(name: str) -> bool:
    return name == COMMANDS or name.startswith(f"{COMMANDS}.")


@pytest.mark.slow
def test_only_the_commands_import_click_or_rich() -> None:
    offenders = {
        name: sorted(
            imported
            for imported in every_import(path)
            if imported.split(".")[0] in TERMINAL_LIBRARIES
        )
        for name, path in modules().items()
        if not is_command_module(name)
    }
    assert {name: found for name, found in offenders.items() if found} == {}


@pytest.mark.slow
def test_nothing_but_the_commands_imports_the_commands() -> None:
    importers = sorted(
        name
        for name, path in modules().items()
        if not is_command_module(name)
        and any(is_command_module(imported) for imported in every_import(path))
    )
    assert importers == []


TERMINAL_MODULE = "reviewbot.commands.terminal"


def test_every_command_prints_through_the_one_console() -> None:
    """A rich Console made anywhere else would read markup and emoji codes in data
    (tests/test_cli_terminal.py shows what the one in commands/terminal.py does not)."""
    making = sorted(
        name
        for name, path in modules().items()
        if is_command_module(name)
        and name != TERMINAL_MODULE
        and any(
            isinstance(node, ast.Call)
            and (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) == "Console"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        )
    )
    assert making == []


def test_the_checks_see_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "hidden.py"
    module.write_text("def show():\n    from rich.table import Table\n    return Table()\n")
    assert "rich.table" in every_import(module)


# --- size budget -----------------------------------------------------------------------------

MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80  # from the first decorator to the last line: a command's options count
TOO_LONG_MODULES: dict[str, str] = {}
TOO_LONG_FUNCTIONS = {
    "reviewbot.migrations.versions.0001_initial.upgrade": "an Alembic revision creates the "
    "whole first schema in one step, and a shipped revision is never edited",
}


def function_sizes(path: Path, module: str) -> dict[str, int]:
    """``module.function`` (``module.Class.method``) -> lines, decorators included."""
    sizes: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([d.lineno for d in child.decorator_list] + [child.lineno])
                assert child.end_lineno is not None
                sizes[f"{prefix}.{child.name}"] = child.end_lineno - first + 1
                visit(child, f"{prefix}.{child.name}")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}.{child.name}")

    visit(ast.parse(path.read_text(encoding="utf-8")), module)
    return sizes


def test_no_module_is_over_the_line_budget() -> None:
    over = {
        name: lines
        for name, path in modules().items()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert over.keys() == TOO_LONG_MODULES.keys(), (
        f"modules over {MAX_MODULE_LINES} lines: {over}; split them, or list one with its "
        "reason (and drop an entry once its module is short enough)"
    )


@pytest.mark.slow
def test_no_function_is_over_the_line_budget() -> None:
    over = {
        name: lines
        for module, path in modules().items()
        for name, lines in function_sizes(path, module).items()
        if lines > MAX_FUNCTION_LINES
    }
    assert over.keys() == TOO_LONG_FUNCTIONS.keys(), (
        f"functions over {MAX_FUNCTION_LINES} lines: {over}; split them, or list one with its "
        "reason (and drop an entry once its function is short enough)"
    )


def test_every_exception_to_the_budget_gives_a_reason() -> None:
    for reason in (*TOO_LONG_MODULES.values(), *TOO_LONG_FUNCTIONS.values()):
        assert len(reason.split()) >= 4


# --- what each module owns ------------------------------------------------------------------

# Every module's docstring ends with (or holds) an "Owns: ..." and a "Must not: ..." sentence
# (docs/development.md, The layers). A prose "owns" or "must not" does not count: the two
# sentences are the same shape everywhere, so a reader finds them at a glance.
OWNS = re.compile(r"(?:^|\s)Owns:\s+(?!Must not:)\S")
MUST_NOT = re.compile(r"(?:^|\s)Must not:\s+\S")
NOT_ASKED_TO_SAY = {
    REVISIONS: "an Alembic revision's docstring is its revision header (message, Revision ID, "
    "Revises), each owns exactly its one schema step, and a shipped revision is never edited",
}


def says_what_it_owns_and_must_not_do(docstring: str) -> bool:
    return bool(OWNS.search(docstring) and MUST_NOT.search(docstring))


def module_docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def asked_to_say(name: str) -> bool:
    return not any(name.startswith(prefix) for prefix in NOT_ASKED_TO_SAY)


@pytest.mark.parametrize("name", sorted(n for n in modules() if asked_to_say(n)))
def test_every_module_says_what_it_owns_and_must_not_do(name: str) -> None:
    assert says_what_it_owns_and_must_not_do(module_docstring(modules()[name])), (
        f"{name}: its docstring needs an 'Owns: ...' and a 'Must not: ...' sentence"
    )


def test_the_docstring_check_reads_every_root_and_skips_only_revisions() -> None:
    names = set(modules())
    skipped = {name for name in names if not asked_to_say(name)}
    assert {"reviewbot", "reviewbot.commands.__main__", "reviewbot.templates"} <= names
    assert "reviewbot.migrations.env" in names - skipped
    assert skipped and all(name.startswith(REVISIONS) for name in skipped)


def test_the_docstring_check_wants_both_sentences() -> None:
    assert says_what_it_owns_and_must_not_do("Does a thing.\n\nOwns: the thing. Must not: print.")
    assert says_what_it_owns_and_must_not_do("Owns: the thing.\nMust not:\nprint.")
    assert not says_what_it_owns_and_must_not_do("Owns: the thing.")
    assert not says_what_it_owns_and_must_not_do("Must not: print.")
    assert not says_what_it_owns_and_must_not_do("It owns the thing; it must not print.")
    assert not says_what_it_owns_and_must_not_do("Owns:\nMust not:")


# --- the process's environment ----------------------------------------------------------------

# The core is handed its settings; reading the process's environment (``os.environ``, and the
# user folders platformdirs finds through it) is done in these functions of the core only.
ENVIRONMENT_READERS = {
    "reviewbot.config": {"load_settings", "_default_database_url", "_default_repo_cache_dir"}
}
ENVIRONMENT_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def environment_reads(path: Path) -> set[str]:
    """The functions (``Class.method``; ``<module>`` for top-level code) of ``path`` that read
    the process's environment: ``os.environ``/``os.getenv`` and friends, or platformdirs."""
    found: set[str] = set()

    def reads(node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return (node.value.id == "os" and node.attr in ENVIRONMENT_NAMES) or (
                node.value.id == "platformdirs"
            )
        if isinstance(node, ast.ImportFrom):
            return (
                node.module == "os" and any(a.name in ENVIRONMENT_NAMES for a in node.names)
            ) or (node.module or "").startswith("platformdirs")
        return False

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = child.name if where == "<module>" else f"{where}.{child.name}"
                visit(child, inner)
                continue
            if reads(child):
                found.add(where)
            visit(child, where)

    visit(ast.parse(path.read_text(encoding="utf-8")), "<module>")
    return found


@pytest.mark.slow
def test_the_core_reads_the_environment_only_in_load_settings() -> None:
    readers = {
        name: found
        for name in sorted(modules())
        if layer(name) == CORE
        if (path := modules().get(name)) and (found := environment_reads(path))
    }
    assert readers == ENVIRONMENT_READERS


def test_the_environment_check_sees_every_way_in(tmp_path: Path) -> None:
    module = tmp_path / "sneaky.py"
    module.write_text(
        "import os\nfrom os import getenv\nimport platformdirs\n"
        "HOME = os.environ['HOME']\n"
        "def token():\n    return os.getenv('TOKEN')\n"
        "class Paths:\n    def data(self):\n        return platformdirs.user_data_dir('x')\n"
    )
    assert environment_reads(module) == {"<module>", "token", "Paths.data"}
