"""Against a real vLLM of the test's own: started without the tool-call flags, then killed.

One server for the module (about 80-140 s to start): ``doctor --model-only`` must name the
missing flags; then a request the scripted model answers by raising kills the engine core (as a
device error does): vLLM answers that request 500 and shuts its API server down, and a review
through the job queue must report the model server failing, with the server named, post nothing
and stay queued for a later try. (Issue 19 killed the CPU engine with a per-request ``seed``;
with the scripted model's logits processor loaded a seed no longer does.)
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from reviewbot.app import App
from reviewbot.commands import main
from reviewbot.config import Settings
from reviewbot.queue import JobQueue
from reviewbot.worker import Worker
from tests.fakes.gitlab_server import FakeGitLab
from tests.mr_world import BOT_TOKEN, PROJECT, commit_on_feature, make_repo
from tests.realvllm.script import ENGINE_CRASH_MARKER
from tests.realvllm.server import RealVLLM, build_model
from tests.realvllm.tier import OWN_SERVER, PYTHON_ENV, REAL_VLLM, model_dir

pytestmark = [*REAL_VLLM, OWN_SERVER]

SHUTDOWN_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def bare_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealVLLM]:
    """A real vLLM started without --enable-auto-tool-choice and --tool-call-parser."""
    python = os.environ[PYTHON_ENV]
    directory = build_model(python, model_dir())
    log = tmp_path_factory.mktemp("bare-vllm") / "vllm.log"
    server = RealVLLM(python, directory, log, with_tools=False).start()
    try:
        yield server
    finally:
        server.stop()


def test_doctor_names_the_missing_tool_flags(bare_vllm: RealVLLM) -> None:
    result = CliRunner().invoke(
        main,
        ["doctor", "--model-only"],
        env={"REVIEWBOT_LLM_BASE_URL": bare_vllm.base_url, "REVIEWBOT_ENABLE_THINKING": "false"},
    )
    assert result.exit_code != 0, result.output
    assert "--enable-auto-tool-choice" in result.output
    assert "--tool-call-parser qwen3_coder" in result.output


def test_a_dead_engine_is_the_model_server_failing(bare_vllm: RealVLLM, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    # the MR's own diff kills the engine: the review's first request is the one that crashes it
    commit_on_feature(repo, {"crash.py": f"x = 1  # {ENGINE_CRASH_MARKER}\n"}, "crash")
    with FakeGitLab() as gitlab:
        gitlab.add_user("reviewbot", token=BOT_TOKEN, bot=True)
        gitlab.add_project(PROJECT, project_id=7)
        gitlab.add_mr_from_git(PROJECT, repo, "main", "feature", iid=1, title="Add parsing")
        settings = Settings(
            gitlab_url=gitlab.url,
            gitlab_token=BOT_TOKEN,
            llm_base_url=bare_vllm.base_url,
            database_url=f"sqlite:///{tmp_path / 'reviewbot.db'}",
            gitlab_notes_per_minute=60_000,
            analyzers=(),  # none: ruff's comments are not the model's (on by default since a35)
        )
        with App(settings) as app:
            queue = JobQueue(app.store, backoff_base_s=60, backoff_max_s=60)
            queue.enqueue(project=PROJECT, mr_iid=1, head_sha=None, trigger="webhook")
            Worker(app, queue, poll_s=0.05).run(burst=True, handle_signals=False)
            [job] = queue.list()
            [review] = app.store.reviews(project=PROJECT, mr_iid=1)
        notes = [d["notes"][0] for d in gitlab.discussions(PROJECT, 1)]
    # no finding, and the one summary says which part was not reviewed: nothing posted as clean
    assert [note["type"] for note in notes] == [None]
    assert "Not reviewed (1)" in notes[0]["body"]
    # vLLM 0.32 answers the request that killed the engine 500, then shuts its API server down
    assert bare_vllm.process is not None
    assert bare_vllm.process.wait(SHUTDOWN_TIMEOUT_S) is not None
    assert job.status == "queued" and job.attempts == 1, job  # tried again later
    assert review["status"] == "failed"
    assert f"the model server at {bare_vllm.base_url}" in review["error"]
