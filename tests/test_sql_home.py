"""Every SQL statement lives in ``reviewbot/store/`` (the README's Development section says so).

Outside the store a module may name a connection or an engine (to hold one) and catch the
database's errors, but it builds no statement: no ``select``, ``update``, ``text``, ``func``...
The queue and the model slots built theirs in ``queue.py`` and ``slots.py``; their statements
are now ``store/job_queries.py`` and ``store/slot_queries.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "reviewbot"
STORE = PACKAGE / "store"
# What a module outside the store may take from SQLAlchemy: types to hold and errors to catch.
ALLOWED = {
    "sqlalchemy": {"Connection", "Engine"},
    "sqlalchemy.exc": None,  # any error class
}


def sqlalchemy_imports(path: Path) -> set[str]:
    """``module:name`` of each SQLAlchemy name ``path`` imports, anywhere in the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {f"{a.name}:*" for a in node.names if a.name.split(".")[0] == "sqlalchemy"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlalchemy":
            found |= {f"{node.module}:{alias.name}" for alias in node.names}
    return found


def outside_the_store() -> list[Path]:
    return [path for path in sorted(PACKAGE.rglob("*.py")) if STORE not in path.parents]


@pytest.mark.parametrize("path", outside_the_store(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_statement_is_built_outside_the_store(path: Path) -> None:
    forbidden = set()
    for entry in sqlalchemy_imports(path):
        module, name = entry.split(":")
        allowed = ALLOWED.get(module, set())
        if allowed is not None and name not in allowed:
            forbidden.add(entry)
    assert not forbidden, f"{path.relative_to(PACKAGE)} builds SQL: {sorted(forbidden)}"
