"""The installed tier's switches: what users install, built and run from outside the checkout.

``pytestmark = INSTALLED`` in a test module marks its tests ``installed`` and skips them, with the
reason, unless ``REVIEWBOT_TEST_INSTALLED`` is set (``.ci/run`` sets it and runs the tier in its
own pytest invocation, ``-m installed``). The tier builds the wheel once per run, installs it into
a fresh venv without extras and runs the installed ``reviewbot`` from a directory outside the
checkout, so nothing can be imported from the source tree.

The container tests (podman) skip when podman is missing, unless
``REVIEWBOT_REQUIRE_CONTAINERS`` is set (``.ci/run`` sets it, and installs podman when missing).
"""

from __future__ import annotations

import os
import shutil

import pytest

INSTALLED_ENV = "REVIEWBOT_TEST_INSTALLED"
REQUIRE_CONTAINERS_ENV = "REVIEWBOT_REQUIRE_CONTAINERS"
# An image already built by the tier (podman images), used instead of building one.
IMAGE_ENV = "REVIEWBOT_TEST_IMAGE"

CONFIGURED = bool(os.environ.get(INSTALLED_ENV))

INSTALLED = [
    pytest.mark.installed,
    pytest.mark.skipif(
        not CONFIGURED,
        reason=f"set {INSTALLED_ENV}=1 to build the wheel and test the installed reviewbot "
        "(.ci/run does)",
    ),
]


def podman_missing_reason() -> str | None:
    """Why the container tests cannot run here, or None when they can (or must)."""
    if shutil.which("podman") or os.environ.get(REQUIRE_CONTAINERS_ENV):
        return None
    return f"podman is not installed (set {REQUIRE_CONTAINERS_ENV} to fail instead of skipping)"
