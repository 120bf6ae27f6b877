"""Fixtures of the installed tier (see ``tests/installed/tier.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.installed.artifacts import Installed, shared_installed


def run_dir(factory: pytest.TempPathFactory) -> Path:
    """A directory every xdist worker of this run shares (the base temp's parent there)."""
    base = factory.getbasetemp()
    return (
        base.parent / "installed" if os.environ.get("PYTEST_XDIST_WORKER") else base / "installed"
    )


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel, the sdist and a fresh venv holding the wheel without extras (built once)."""
    return shared_installed(run_dir(tmp_path_factory))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working directory outside the checkout, so nothing is imported from the source tree."""
    path = tmp_path / "elsewhere"
    path.mkdir()
    return path
