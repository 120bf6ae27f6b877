"""The one direction of imports: entry points -> pipeline -> adapters -> pure core; only the
entry points (``reviewbot/commands/``) import click or rich; the size budget; every module's
docstring says what it owns and what it must not do; and the core reads the process's
environment in one function only (``config.load_settings``).

For the layers only imports that run when a module loads count (not those inside functions,
which load an adapter on first use, nor those under ``if TYPE_CHECKING``); for click and rich
every import counts, wherever it is. A cycle is a cycle wherever its imports are: the cycle
check also follows imports inside functions. docs/development.md (The layers) describes the
same layers.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "reviewbot"

CORE = {
    "reviewbot",
    "reviewbot.chunking",
    "reviewbot.codequality",
    "reviewbot.comments",
    "reviewbot.config",
    "reviewbot.diff",
    "reviewbot.diffview",
    "reviewbot.errors",
    "reviewbot.exclusions",
    "reviewbot.findings",
    "reviewbot.incremental",
    "reviewbot.input_files",
    "reviewbot.interdiff",
    "reviewbot.learnings",
    "reviewbot.markdown",
    "reviewbot.pathglob",
    "reviewbot.positions",
    "reviewbot.prompts",
    "reviewbot.redaction",
    "reviewbot.roles",
    "reviewbot.reply_guidance",
    "reviewbot.repo",
    "reviewbot.repo.tree",
    "reviewbot.repo.view",
    "reviewbot.repo.confine",
    "reviewbot.repo.definitions",
    "reviewbot.repo.search",
    "reviewbot.repo.tools",
    "reviewbot.repo_policy",
    "reviewbot.report_learnings",
    "reviewbot.report_text",
    "reviewbot.retry",
    "reviewbot.rules",
    "reviewbot.rules_applied",
    "reviewbot.scope",
    "reviewbot.setting_fields",
    "reviewbot.stored_findings",
    "reviewbot.tokens",
    "reviewbot.toolcalls",
    "reviewbot.weburl",
    "reviewbot.window",
    "reviewbot.verify",
    "reviewbot.verification",
    "reviewbot.llm.answers",
    "reviewbot.llm.backend",
    "reviewbot.llm.rounds",
    "reviewbot.llm.tries",
    "reviewbot.ops",
    "reviewbot.ops.capacity",
    "reviewbot.ops.alternatives",
    "reviewbot.ops.gpus",
    "reviewbot.ops.model_shape",
    "reviewbot.ops.doctor",
    "reviewbot.ops.router",
    "reviewbot.ops.box_metrics",
    "reviewbot.ops.loadtest",
    "reviewbot.ops.vllm_command",
    "reviewbot.ops.weights",
    "reviewbot.templates",
    "reviewbot.thread_intent",
    "reviewbot.unreviewed",
    "reviewbot.webhook.openapi",
    "reviewbot.webhook.payloads",
}
ADAPTERS = {
    "reviewbot.gitlab",
    "reviewbot.localdiff",
    "reviewbot.gitlab.account",
    "reviewbot.gitlab.accuracy",
    "reviewbot.gitlab.connection",
    "reviewbot.gitlab.merge_requests",
    "reviewbot.gitlab.notes",
    "reviewbot.localgit",
    "reviewbot.repo_files",
    "reviewbot.repo.api_view",
    "reviewbot.repo.cache",
    "reviewbot.repo.git_view",
    "reviewbot.repo.source",
    "reviewbot.gitlab.repository",
    "reviewbot.rule_sources",
    "reviewbot.slots",
    "reviewbot.queue",
    "reviewbot.metrics",
    "reviewbot.llm",
    "reviewbot.llm.runner",
    "reviewbot.llm.prefill",
    "reviewbot.llm.factory",
    "reviewbot.llm.openai_compatible",
    "reviewbot.llm.vllm",
    "reviewbot.store",
    "reviewbot.store.store",
    "reviewbot.store.models",
    "reviewbot.store.engine",
    "reviewbot.store.migrate",
    "reviewbot.store.mr_lock",
    "reviewbot.store.records",
    "reviewbot.store.figures",
    "reviewbot.store.feedback_queries",
    "reviewbot.store.job_queries",
    "reviewbot.store.slot_queries",
    "reviewbot.store.report_queries",
    "reviewbot.store.trend_queries",
    "reviewbot.store.percentile_queries",
    "reviewbot.store.eval_queries",
    "reviewbot.ops.weights_files",
    "reviewbot.store.reply_queries",
    "reviewbot.store.learning_queries",
    "reviewbot.store.verify_queries",
}
PIPELINE = {
    "reviewbot.ops.weights_doctor",
    "reviewbot.app",
    "reviewbot.review",
    "reviewbot.mr",
    "reviewbot.publish",
    "reviewbot.feedback",
    "reviewbot.teaching",
    "reviewbot.proposal_notes",
    "reviewbot.permission",
    "reviewbot.report",
    "reviewbot.report_html",
    "reviewbot.report_days",
    "reviewbot.report_trend",
    "reviewbot.report_plot",
    "reviewbot.eval",
    "reviewbot.compare",
    "reviewbot.reply",
    "reviewbot.reply_learn",
    # the services the commands run: the CI job, the worker, the listener, the ops tools
    "reviewbot.ci",
    "reviewbot.worker",
    "reviewbot.webhook",
    "reviewbot.webhook.handlers",
    "reviewbot.webhook.server",
    "reviewbot.ops.doctor_probes",
    "reviewbot.ops.deadlines",
    "reviewbot.ops.model_probes",
    "reviewbot.ops.router_probes",
    "reviewbot.ops.loadtest_driver",
    "reviewbot.ops.loadtest_plan",
}
LAYER_OF = {
    **dict.fromkeys(CORE, 0),
    **dict.fromkeys(ADAPTERS, 1),
    **dict.fromkeys(PIPELINE, 2),
}
ENTRY_POINT_LAYER = 3  # reviewbot.commands: every command, and nothing else
COMMANDS = "reviewbot.commands"


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
    return LAYER_OF.get(name, ENTRY_POINT_LAYER)


def test_every_module_has_a_layer_or_is_an_entry_point() -> None:
    entry_points = {
        name
        for name in modules()
        if name not in LAYER_OF
        and not name.startswith(REVISIONS)
        and not (name == COMMANDS or name.startswith(f"{COMMANDS}."))
    }
    expected = {"reviewbot.migrations", "reviewbot.migrations.env", "reviewbot.migrations.versions"}
    assert entry_points <= expected, f"put these in a layer: {sorted(entry_points - expected)}"


@pytest.mark.parametrize("name", sorted(LAYER_OF))
def test_a_module_imports_nothing_from_a_higher_layer(name: str) -> None:
    path = modules().get(name)
    if path is None:
        pytest.skip(f"{name} is not a module of this tree")
    upward = {other for other in load_time_imports(path) if layer(other) > layer(name)}
    assert not upward, f"{name} (layer {layer(name)}) imports {sorted(upward)}"


def _inside(package: str, names: tuple[str, ...]) -> bool:
    return all(name == package or name.startswith(f"{package}.") for name in names)


@pytest.mark.slow
def test_there_is_no_import_cycle() -> None:
    """Not even through an import inside a function (report imports report_html when it writes
    HTML, so report_html must not import report)."""
    graph = {name: all_imports(path) for name, path in modules().items()}
    done: set[str] = set()

    def visit(name: str, trail: tuple[str, ...]) -> None:
        if name in trail:
            cycle = (*trail[trail.index(name) :], name)
            # a package importing its own submodules (re-exports) is not a cycle; a module whose
            # name merely starts like another's (report, report_html) is not its submodule
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
        for name in sorted(CORE)
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
