"""Fixtures of the real-vLLM tier: one real CPU vLLM server serving the scripted model.

The tier runs when ``REVIEWBOT_TEST_VLLM_PYTHON`` names the python of a venv made by
``tests/realvllm/setup.sh`` (the tier starts the server itself) or ``REVIEWBOT_TEST_VLLM_URL``
points at a server already started the same way (``tests.realvllm.server.RealVLLM.argv``); the
tests skip with the reason otherwise, like the PostgreSQL tier. CI runs it in its own pytest
invocation (``-m realvllm -n 0``, see ``.ci/run``) so that the server's CPU use never slows the
default suite; under pytest-xdist every worker of one run shares one server
(``tests.realvllm.server.shared_server``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.gitlab_server import FakeGitLab
from tests.mr_world import BOT_TOKEN, PROJECT, World, make_repo
from tests.realvllm.server import SharedServer, shared_server
from tests.realvllm.tier import PYTHON_ENV, URL_ENV, model_dir
from tests.run_lock import run_dir as shared_run_dir


def run_dir(factory: pytest.TempPathFactory) -> Path:
    """The tier's directory that every xdist worker of this run shares."""
    return shared_run_dir(factory, "realvllm")


@pytest.fixture(scope="session")
def real_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    """The real vLLM server of this run (started once, stopped by its process id at the end)."""
    url = os.environ.get(URL_ENV)
    if url:
        yield SharedServer(url.rstrip("/").removesuffix("/v1"), None, None)
        return
    python = os.environ[PYTHON_ENV]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with shared_server(python, run_dir(tmp_path_factory), model_dir(), worker) as server:
        yield server


@pytest.fixture
def real_world(tmp_path: Path, real_vllm: SharedServer) -> Iterator[World]:
    """tests.mr_world's world (a git repository as MR !1 on the fake GitLab) with the real
    vLLM as its model server, on SQLite (the store's PostgreSQL tier is not what this tests)."""
    store_url = f"sqlite:///{tmp_path / 'reviewbot.db'}"
    repo = make_repo(tmp_path / "repo")
    with FakeGitLab() as gitlab:
        gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        gitlab.add_user("alice", token="glpat-alice")  # a human who talks in the bot's threads
        gitlab.add_project(PROJECT, project_id=7)
        gitlab.add_mr_from_git(PROJECT, repo, "main", "feature", iid=1, title="Add parsing")
        yield World(repo, gitlab, real_vllm, store_url, tmp_path / "repo-cache")  # type: ignore[arg-type]
