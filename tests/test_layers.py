"""The one direction of imports: entry points -> pipeline -> adapters -> pure core.

Only imports that run when a module loads count (not those inside functions, which load an
adapter on first use, nor those under ``if TYPE_CHECKING``). The README's Development section
describes the same layers.
"""

from __future__ import annotations

import ast
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
    "reviewbot.input_files",
    "reviewbot.interdiff",
    "reviewbot.markdown",
    "reviewbot.positions",
    "reviewbot.prompts",
    "reviewbot.redaction",
    "reviewbot.retry",
    "reviewbot.scope",
    "reviewbot.tokens",
    "reviewbot.toolcalls",
    "reviewbot.window",
    "reviewbot.llm.answers",
    "reviewbot.llm.backend",
    "reviewbot.ops",
    "reviewbot.ops.capacity",
    "reviewbot.ops.gpus",
    "reviewbot.ops.model_shape",
    "reviewbot.ops.doctor",
    "reviewbot.ops.loadtest",
    "reviewbot.templates",
}
ADAPTERS = {
    "reviewbot.gitlab",
    "reviewbot.gitlab.account",
    "reviewbot.gitlab.accuracy",
    "reviewbot.gitlab.connection",
    "reviewbot.gitlab.merge_requests",
    "reviewbot.gitlab.notes",
    "reviewbot.localgit",
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
    "reviewbot.store.figures",
    "reviewbot.store.feedback_queries",
    "reviewbot.store.job_queries",
    "reviewbot.store.slot_queries",
    "reviewbot.store.report_queries",
}
PIPELINE = {
    "reviewbot.app",
    "reviewbot.review",
    "reviewbot.mr",
    "reviewbot.publish",
    "reviewbot.feedback",
    "reviewbot.report",
    "reviewbot.report_html",
    "reviewbot.eval",
}
LAYER_OF = {
    **dict.fromkeys(CORE, 0),
    **dict.fromkeys(ADAPTERS, 1),
    **dict.fromkeys(PIPELINE, 2),
}
ENTRY_POINT_LAYER = 3  # cli, ci, worker, options, webhook, ops CLIs and probes


# Folders at the top of the repository that ship inside the package (pyproject's package-dir).
SHIPPED_AS = {"prompts": "reviewbot.templates", "migrations": "reviewbot.migrations"}


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


def load_time_imports(path: Path) -> set[str]:
    """reviewbot modules imported when ``path`` loads (top level, not TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for child in ast.walk(node) if isinstance(node, ast.If | ast.Try) else [node]:
            if isinstance(child, ast.Import):
                found |= {alias.name for alias in child.names}
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.add(child.module)
                found |= {f"{child.module}.{alias.name}" for alias in child.names}
    known = modules()
    return {name for name in found if name.startswith("reviewbot") and name in known}


def layer(name: str) -> int:
    return LAYER_OF.get(name, ENTRY_POINT_LAYER)


def test_every_module_has_a_layer_or_is_an_entry_point() -> None:
    # Alembic loads each revision script itself: they belong to the migrations entry point.
    revisions = "reviewbot.migrations.versions."
    entry_points = {
        name for name in modules() if name not in LAYER_OF and not name.startswith(revisions)
    }
    expected = {
        "reviewbot.cli",
        "reviewbot.ci",
        "reviewbot.worker",
        "reviewbot.options",
        "reviewbot.accuracy_cli",
        "reviewbot.webhook",
        "reviewbot.webhook.handlers",
        "reviewbot.webhook.openapi",
        "reviewbot.webhook.payloads",
        "reviewbot.webhook.server",
        "reviewbot.ops.capacity_cli",
        "reviewbot.ops.doctor_cli",
        "reviewbot.ops.doctor_probes",
        "reviewbot.ops.loadtest_cli",
        "reviewbot.ops.loadtest_driver",
        "reviewbot.migrations",
        "reviewbot.migrations.env",
        "reviewbot.migrations.versions",
    }
    assert entry_points <= expected, f"put these in a layer: {sorted(entry_points - expected)}"


@pytest.mark.parametrize("name", sorted(LAYER_OF))
def test_a_module_imports_nothing_from_a_higher_layer(name: str) -> None:
    path = modules().get(name)
    if path is None:
        pytest.skip(f"{name} is not a module of this tree")
    upward = {other for other in load_time_imports(path) if layer(other) > layer(name)}
    assert not upward, f"{name} (layer {layer(name)}) imports {sorted(upward)}"


def test_there_is_no_import_cycle() -> None:
    graph = {name: load_time_imports(path) for name, path in modules().items()}
    done: set[str] = set()

    def visit(name: str, trail: tuple[str, ...]) -> None:
        if name in trail:
            cycle = (*trail[trail.index(name) :], name)
            # a package importing its own submodules (re-exports) is not a cycle
            if not all(part.startswith(cycle[0]) for part in cycle):
                pytest.fail("import cycle: " + " -> ".join(cycle))
            return
        if name in done:
            return
        for other in graph.get(name, ()):
            visit(other, (*trail, name))
        done.add(name)

    for name in graph:
        visit(name, ())
