"""Fixtures of the installed tier (see ``tests/installed/tier.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.installed.artifacts import Installed, shared_installed
from tests.installed.containers import TIER_IMAGE, Podman, build_release_image
from tests.installed.tier import IMAGE_ENV, podman_missing_reason
from tests.run_lock import built_once
from tests.run_lock import run_dir as shared_run_dir


def run_dir(factory: pytest.TempPathFactory) -> Path:
    """The tier's directory that every xdist worker of this run shares."""
    return shared_run_dir(factory, "installed")


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


@pytest.fixture(scope="session")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Podman:
    """Podman as it works here (see tests/installed/containers.py); skipped without podman."""
    reason = podman_missing_reason()
    if reason:
        pytest.skip(reason)
    return Podman.configured(run_dir(tmp_path_factory) / "podman")


@pytest.fixture(scope="session")
def image(podman: Podman, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The reviewbot image, built once per run by the image template's jobs (or the one
    ``REVIEWBOT_TEST_IMAGE`` names, to try a test again without building again)."""
    if os.environ.get(IMAGE_ENV):
        return os.environ[IMAGE_ENV]
    folder = run_dir(tmp_path_factory)

    def build() -> dict[str, str]:
        return {"image": build_release_image(podman, folder / "image-build", TIER_IMAGE)}

    return built_once(folder, "image", build)["image"]
