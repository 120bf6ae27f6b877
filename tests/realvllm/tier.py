"""The real-vLLM tier's switches: its environment variables and the marks of its tests.

``pytestmark = REAL_VLLM`` in a test module marks its tests ``realvllm`` and skips them, with the
reason, unless the tier is configured (see ``tests/realvllm/conftest.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
import pytest

PYTHON_ENV = "REVIEWBOT_TEST_VLLM_PYTHON"
URL_ENV = "REVIEWBOT_TEST_VLLM_URL"
MODEL_DIR_ENV = "REVIEWBOT_TEST_VLLM_MODEL_DIR"

CONFIGURED = bool(os.environ.get(PYTHON_ENV) or os.environ.get(URL_ENV))
OWN_SERVERS = bool(os.environ.get(PYTHON_ENV))

REAL_VLLM = [
    pytest.mark.realvllm,
    pytest.mark.skipif(
        not CONFIGURED,
        reason=f"set {PYTHON_ENV} (tests/realvllm/setup.sh prints it) or {URL_ENV} to test "
        "against a real vLLM",
    ),
]
# Tests that start a server of their own (other flags, or one they kill).
OWN_SERVER = pytest.mark.skipif(
    not OWN_SERVERS, reason=f"set {PYTHON_ENV}: the test starts (and stops) a server of its own"
)


def model_dir() -> Path:
    """Where the model directory is built (kept between runs; rebuilt when its recipe changes)."""
    configured = os.environ.get(MODEL_DIR_ENV)
    if configured:
        return Path(configured)
    return Path(platformdirs.user_cache_dir("reviewbot")) / "realvllm-model"
